//! The bytes of an ONNX model, read and written without a protobuf library.
//!
//! Owns the few ONNX protobuf field numbers memd's load-time rewrites use (`int8_tables`,
//! `int8_matmul`), a reader that splits a message into its top-level fields, a view of a graph
//! (initializers, nodes, who consumes what) and writers for the nodes and fields the rewrites
//! add. Must never panic on malformed bytes (every read returns `None` instead), and never
//! re-encode what a rewrite does not change: untouched fields are copied byte for byte.

use std::collections::{HashMap, HashSet};

// ONNX protobuf field numbers (onnx.proto3) and enum values this rewrite reads or writes.
pub(super) const MODEL_GRAPH: u32 = 7;
pub(super) const MODEL_OPSET_IMPORT: u32 = 8;
pub(super) const OPSET_DOMAIN: u32 = 1;
pub(super) const OPSET_VERSION: u32 = 2;
pub(super) const GRAPH_NODE: u32 = 1;
pub(super) const GRAPH_INITIALIZER: u32 = 5;
pub(super) const GRAPH_OUTPUT: u32 = 12;
pub(super) const NODE_INPUT: u32 = 1;
pub(super) const NODE_OUTPUT: u32 = 2;
pub(super) const NODE_NAME: u32 = 3;
pub(super) const NODE_OP_TYPE: u32 = 4;
pub(super) const NODE_ATTRIBUTE: u32 = 5;
pub(super) const NODE_DOMAIN: u32 = 7;
pub(super) const ATTR_NAME: u32 = 1;
pub(super) const ATTR_I: u32 = 3;
pub(super) const ATTR_TYPE: u32 = 20;
pub(super) const ATTR_TYPE_INT: u64 = 2;
pub(super) const TENSOR_DIMS: u32 = 1;
pub(super) const TENSOR_DATA_TYPE: u32 = 2;
pub(super) const TENSOR_NAME: u32 = 8;
pub(super) const VALUE_INFO_NAME: u32 = 1;
pub(super) const FLOAT: i64 = 1;
pub(super) const INT8: i64 = 3;

pub(super) const WIRE_VARINT: u8 = 0;
pub(super) const WIRE_I64: u8 = 1;
pub(super) const WIRE_LEN: u8 = 2;
pub(super) const WIRE_I32: u8 = 5;

/// One top-level field of a message: its number, wire type and byte span (tag included);
/// `value` is where a length-delimited payload starts.
pub(super) struct Field {
    pub number: u32,
    pub wire: u8,
    pub start: usize,
    pub value: usize,
    pub end: usize,
}

impl Field {
    pub(super) fn bytes<'a>(&self, msg: &'a [u8]) -> Option<&'a [u8]> {
        (self.wire == WIRE_LEN).then(|| &msg[self.value..self.end])
    }
}

pub(super) fn parse(msg: &[u8]) -> Option<Vec<Field>> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < msg.len() {
        let start = at;
        let tag = varint(msg, &mut at)?;
        let (number, wire) = (u32::try_from(tag >> 3).ok()?, (tag & 7) as u8);
        let value = at;
        at = match wire {
            WIRE_VARINT => {
                varint(msg, &mut at)?;
                at
            }
            WIRE_I64 => at.checked_add(8)?,
            WIRE_LEN => {
                let len = usize::try_from(varint(msg, &mut at)?).ok()?;
                let payload = at;
                fields.push(Field {
                    number,
                    wire,
                    start,
                    value: payload,
                    end: payload.checked_add(len).filter(|&e| e <= msg.len())?,
                });
                at = payload + len;
                continue;
            }
            WIRE_I32 => at.checked_add(4)?,
            _ => return None,
        };
        if at > msg.len() {
            return None;
        }
        fields.push(Field {
            number,
            wire,
            start,
            value,
            end: at,
        });
    }
    Some(fields)
}

pub(super) fn varint(msg: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *msg.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

pub(super) fn strings(msg: &[u8], fields: &[Field], number: u32) -> Option<Vec<String>> {
    fields
        .iter()
        .filter(|f| f.number == number)
        .map(|f| String::from_utf8(f.bytes(msg)?.to_vec()).ok())
        .collect()
}

pub(super) fn int_value(msg: &[u8], f: &Field) -> Option<i64> {
    (f.wire == WIRE_VARINT).then(|| varint(msg, &mut f.value.clone()).map(|v| v as i64))?
}

/// What the rewrite needs of a node.
pub(super) struct Node {
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub op: String,
    /// Integer attributes by name (`to` of Cast, `axis` of Gather); other kinds are absent.
    pub ints: HashMap<String, i64>,
    /// Standard ONNX operator (empty domain), no attribute of another kind.
    pub plain: bool,
}

pub(super) fn parse_node(msg: &[u8]) -> Option<Node> {
    let fields = parse(msg)?;
    let mut ints = HashMap::new();
    let mut plain = strings(msg, &fields, NODE_DOMAIN)?
        .iter()
        .all(|d| d.is_empty() || d == "ai.onnx");
    for f in fields.iter().filter(|f| f.number == NODE_ATTRIBUTE) {
        let body = f.bytes(msg)?;
        let attr = parse(body)?;
        let name = strings(body, &attr, ATTR_NAME)?.pop()?;
        let is_int = attr
            .iter()
            .any(|a| a.number == ATTR_TYPE && int_value(body, a) == Some(ATTR_TYPE_INT as i64));
        match attr.iter().find(|a| a.number == ATTR_I) {
            Some(i) if is_int => {
                ints.insert(name, int_value(body, i)?);
            }
            _ => plain = false,
        }
    }
    Some(Node {
        inputs: strings(msg, &fields, NODE_INPUT)?,
        outputs: strings(msg, &fields, NODE_OUTPUT)?,
        op: strings(msg, &fields, NODE_OP_TYPE)?
            .pop()
            .unwrap_or_default(),
        ints,
        plain,
    })
}

/// An initializer's element type and shape.
pub(super) struct Tensor {
    pub data_type: i64,
    pub dims: Vec<i64>,
}

pub(super) fn parse_tensor(msg: &[u8]) -> Option<(String, Tensor)> {
    let fields = parse(msg)?;
    let name = strings(msg, &fields, TENSOR_NAME)?.pop()?;
    let data_type = fields
        .iter()
        .find(|f| f.number == TENSOR_DATA_TYPE)
        .and_then(|f| int_value(msg, f))?;
    let mut dims = Vec::new();
    for f in fields.iter().filter(|f| f.number == TENSOR_DIMS) {
        match f.wire {
            WIRE_LEN => {
                let (mut at, packed) = (f.value, &msg[..f.end]);
                while at < f.end {
                    dims.push(varint(packed, &mut at)? as i64);
                }
            }
            _ => dims.push(int_value(msg, f)?),
        }
    }
    Some((name, Tensor { data_type, dims }))
}

/// The parts of a graph the rewrites match on: its top-level fields, initializers by name,
/// nodes in order, and the names of its outputs.
pub(super) struct GraphView {
    pub fields: Vec<Field>,
    pub tensors: HashMap<String, Tensor>,
    pub nodes: Vec<Node>,
    pub outputs: HashSet<String>,
}

impl GraphView {
    pub(super) fn parse(graph: &[u8]) -> Option<GraphView> {
        let fields = parse(graph)?;
        let mut tensors = HashMap::new();
        for f in fields.iter().filter(|f| f.number == GRAPH_INITIALIZER) {
            let (name, t) = parse_tensor(f.bytes(graph)?)?;
            tensors.insert(name, t);
        }
        let nodes = fields
            .iter()
            .filter(|f| f.number == GRAPH_NODE)
            .map(|f| parse_node(f.bytes(graph)?))
            .collect::<Option<_>>()?;
        let mut outputs = HashSet::new();
        for f in fields.iter().filter(|f| f.number == GRAPH_OUTPUT) {
            let body = f.bytes(graph)?;
            outputs.extend(strings(body, &parse(body)?, VALUE_INFO_NAME)?);
        }
        Some(GraphView {
            fields,
            tensors,
            nodes,
            outputs,
        })
    }

    /// Value name → the indices of the nodes that read it.
    pub(super) fn consumers(&self) -> HashMap<&str, Vec<usize>> {
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for input in &n.inputs {
                consumers.entry(input.as_str()).or_default().push(i);
            }
        }
        consumers
    }
}

/// `model` (an ONNX ModelProto) with its graph replaced by what `rewrite_graph` makes of it,
/// and the count `rewrite_graph` returns; every other field is copied as it is.
pub(super) fn rewrite_model(
    model: &[u8],
    rewrite_graph: impl FnOnce(&[u8]) -> Option<(Vec<u8>, usize)>,
) -> Option<(Vec<u8>, usize)> {
    let fields = parse(model)?;
    let graph = fields.iter().find(|f| f.number == MODEL_GRAPH)?;
    let (new_graph, count) = rewrite_graph(graph.bytes(model)?)?;
    let mut out = Vec::with_capacity(model.len());
    for f in &fields {
        if f.number == MODEL_GRAPH {
            put_len_field(&mut out, MODEL_GRAPH, &new_graph);
        } else {
            out.extend_from_slice(&model[f.start..f.end]);
        }
    }
    Some((out, count))
}

/// The version of the standard operator set (empty or `ai.onnx` domain) `model` imports.
pub(super) fn standard_opset(model: &[u8]) -> Option<i64> {
    let fields = parse(model)?;
    for f in fields.iter().filter(|f| f.number == MODEL_OPSET_IMPORT) {
        let body = f.bytes(model)?;
        let opset = parse(body)?;
        let domain = strings(body, &opset, OPSET_DOMAIN)?
            .pop()
            .unwrap_or_default();
        if domain.is_empty() || domain == "ai.onnx" {
            let version = opset.iter().find(|o| o.number == OPSET_VERSION)?;
            return int_value(body, version);
        }
    }
    None
}

/// A TensorProto's bytes with its shape replaced by `dims` (same data, same element count).
pub(super) fn with_dims(tensor: &[u8], dims: &[i64]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(tensor.len() + 8);
    for f in parse(tensor)?.iter().filter(|f| f.number != TENSOR_DIMS) {
        out.extend_from_slice(&tensor[f.start..f.end]);
    }
    for &d in dims {
        put_varint_field(&mut out, TENSOR_DIMS, u64::try_from(d).ok()?);
    }
    Some(out)
}

pub(super) fn put_node(
    out: &mut Vec<u8>,
    op: &str,
    inputs: &[&str],
    output: &str,
    attr: Option<(&str, i64)>,
) {
    let mut node = Vec::new();
    for input in inputs {
        put_len_field(&mut node, NODE_INPUT, input.as_bytes());
    }
    put_len_field(&mut node, NODE_OUTPUT, output.as_bytes());
    put_len_field(&mut node, NODE_NAME, format!("{output}/{op}").as_bytes());
    put_len_field(&mut node, NODE_OP_TYPE, op.as_bytes());
    if let Some((name, value)) = attr {
        let mut a = Vec::new();
        put_len_field(&mut a, ATTR_NAME, name.as_bytes());
        put_varint_field(&mut a, ATTR_I, value as u64);
        put_varint_field(&mut a, ATTR_TYPE, ATTR_TYPE_INT);
        put_len_field(&mut node, NODE_ATTRIBUTE, &a);
    }
    put_len_field(out, GRAPH_NODE, &node);
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn put_varint_field(out: &mut Vec<u8>, number: u32, v: u64) {
    put_varint(out, u64::from(number) << 3 | u64::from(WIRE_VARINT));
    put_varint(out, v);
}

pub(super) fn put_len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_varint(out, u64::from(number) << 3 | u64::from(WIRE_LEN));
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// An int8 initializer dequantised by `Cast` (to float) → `Mul` (by a float initializer): the
/// pattern both load-time rewrites start from.
pub(super) struct Dequantised<'a> {
    /// Index of the `Mul` node.
    pub mul: usize,
    /// The int8 initializer, 2-D.
    pub quantised: &'a str,
    pub quantised_dims: &'a [i64],
    /// The scale initializer (float) and its shape.
    pub scale: &'a str,
    pub scale_dims: &'a [i64],
    /// The `Mul`'s output: the matrix in fp32.
    pub output: &'a str,
}

impl GraphView {
    /// The node reading `name`, when it is the only one and `name` is no graph output.
    pub(super) fn only_use(
        &self,
        consumers: &HashMap<&str, Vec<usize>>,
        name: &str,
    ) -> Option<usize> {
        match consumers.get(name).map(Vec::as_slice) {
            Some([one]) if !self.outputs.contains(name) => Some(*one),
            _ => None,
        }
    }

    /// The dequantisation whose `Cast` is node `cast`, if the pattern matches exactly: a plain
    /// `Cast` to float of a 2-D int8 initializer, read only by a plain two-input `Mul` whose
    /// other input is a float initializer.
    pub(super) fn dequantised_at<'a>(
        &'a self,
        cast: usize,
        consumers: &HashMap<&str, Vec<usize>>,
    ) -> Option<Dequantised<'a>> {
        let n = &self.nodes[cast];
        let is_cast = n.op == "Cast" && n.plain && n.ints.get("to") == Some(&FLOAT);
        if !is_cast || n.inputs.len() != 1 || n.outputs.len() != 1 {
            return None;
        }
        let q = self.tensors.get(&n.inputs[0])?;
        if q.data_type != INT8 || q.dims.len() != 2 {
            return None;
        }
        let mul = self.only_use(consumers, &n.outputs[0])?;
        let m = &self.nodes[mul];
        if m.op != "Mul" || !m.plain || m.inputs.len() != 2 || m.outputs.len() != 1 {
            return None;
        }
        let scale_name = m.inputs.iter().find(|i| **i != n.outputs[0])?;
        let scale = self.tensors.get(scale_name)?;
        if scale.data_type != FLOAT {
            return None;
        }
        Some(Dequantised {
            mul,
            quantised: &n.inputs[0],
            quantised_dims: &q.dims,
            scale: scale_name,
            scale_dims: &scale.dims,
            output: &m.outputs[0],
        })
    }
}
