//! Keeps an ONNX model's int8 lookup tables int8 in memory.
//!
//! The embedding model stores its token and position tables as int8 with one fp32 scale per
//! row, dequantised by `Cast` → `Mul` before the `Gather` that looks rows up. ONNX Runtime
//! folds that constant sub-graph at load, so the 30,522 × 384 token table sits in memory as
//! fp32 (47 MB instead of 12 MB). This rewrite moves the lookup first — `Gather` the int8 rows
//! and their scales, then `Cast` → `Mul` only the rows a run uses — which computes the same
//! products, so the outputs are bit-identical. Matrix weights are left to ONNX Runtime: no
//! int8 × fp32 product of its CPU kernels is both exact and as fast as its fp32 one.
//!
//! Owns the pattern match and a byte-level protobuf rewrite (untouched parts are copied as
//! they are). Must never change what a model computes, nor fail a model it does not
//! understand: anything unexpected returns `None` and the model loads as it is.

use std::collections::{HashMap, HashSet};

// ONNX protobuf field numbers (onnx.proto3) and enum values this rewrite reads or writes.
const MODEL_GRAPH: u32 = 7;
const GRAPH_NODE: u32 = 1;
const GRAPH_INITIALIZER: u32 = 5;
const GRAPH_OUTPUT: u32 = 12;
const NODE_INPUT: u32 = 1;
const NODE_OUTPUT: u32 = 2;
const NODE_NAME: u32 = 3;
const NODE_OP_TYPE: u32 = 4;
const NODE_ATTRIBUTE: u32 = 5;
const NODE_DOMAIN: u32 = 7;
const ATTR_NAME: u32 = 1;
const ATTR_I: u32 = 3;
const ATTR_TYPE: u32 = 20;
const ATTR_TYPE_INT: u64 = 2;
const TENSOR_DIMS: u32 = 1;
const TENSOR_DATA_TYPE: u32 = 2;
const TENSOR_NAME: u32 = 8;
const VALUE_INFO_NAME: u32 = 1;
const FLOAT: i64 = 1;
const INT8: i64 = 3;

const WIRE_VARINT: u8 = 0;
const WIRE_I64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_I32: u8 = 5;

/// `model` (an ONNX ModelProto) with every dequantised int8 lookup table gathered before it is
/// dequantised, and how many tables were rewritten; `None` when there is none or the model is
/// not understood.
pub fn rewrite(model: &[u8]) -> Option<(Vec<u8>, usize)> {
    let fields = parse(model)?;
    let graph = fields.iter().find(|f| f.number == MODEL_GRAPH)?;
    let (new_graph, tables) = rewrite_graph(graph.bytes(model)?)?;
    let mut out = Vec::with_capacity(model.len());
    for f in &fields {
        if f.number == MODEL_GRAPH {
            put_len_field(&mut out, MODEL_GRAPH, &new_graph);
        } else {
            out.extend_from_slice(&model[f.start..f.end]);
        }
    }
    Some((out, tables))
}

/// One top-level field of a message: its number, wire type and byte span (tag included);
/// `value` is where a length-delimited payload starts.
struct Field {
    number: u32,
    wire: u8,
    start: usize,
    value: usize,
    end: usize,
}

impl Field {
    fn bytes<'a>(&self, msg: &'a [u8]) -> Option<&'a [u8]> {
        (self.wire == WIRE_LEN).then(|| &msg[self.value..self.end])
    }
}

fn parse(msg: &[u8]) -> Option<Vec<Field>> {
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

fn varint(msg: &[u8], at: &mut usize) -> Option<u64> {
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

fn strings(msg: &[u8], fields: &[Field], number: u32) -> Option<Vec<String>> {
    fields
        .iter()
        .filter(|f| f.number == number)
        .map(|f| String::from_utf8(f.bytes(msg)?.to_vec()).ok())
        .collect()
}

fn int_value(msg: &[u8], f: &Field) -> Option<i64> {
    (f.wire == WIRE_VARINT).then(|| varint(msg, &mut f.value.clone()).map(|v| v as i64))?
}

/// What the rewrite needs of a node.
struct Node {
    inputs: Vec<String>,
    outputs: Vec<String>,
    op: String,
    /// Integer attributes by name (`to` of Cast, `axis` of Gather); other kinds are absent.
    ints: HashMap<String, i64>,
    /// Standard ONNX operator (empty domain), no attribute of another kind.
    plain: bool,
}

fn parse_node(msg: &[u8]) -> Option<Node> {
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
struct Tensor {
    data_type: i64,
    dims: Vec<i64>,
}

fn parse_tensor(msg: &[u8]) -> Option<(String, Tensor)> {
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

/// One table to rewrite: `Cast(quantised) → Mul(scale)` feeding only `Gather`s on axis 0.
#[derive(Clone)]
struct Table {
    quantised: String,
    scale: String,
    /// Scale per row (`[rows, 1]`, gathered with the rows) rather than one for the table.
    per_row: bool,
    /// Indices of the Cast and Mul nodes, dropped.
    dequantise: [usize; 2],
}

fn rewrite_graph(graph: &[u8]) -> Option<(Vec<u8>, usize)> {
    let fields = parse(graph)?;
    let mut tensors = HashMap::new();
    for f in fields.iter().filter(|f| f.number == GRAPH_INITIALIZER) {
        let (name, t) = parse_tensor(f.bytes(graph)?)?;
        tensors.insert(name, t);
    }
    let node_fields: Vec<&Field> = fields.iter().filter(|f| f.number == GRAPH_NODE).collect();
    let nodes: Vec<Node> = node_fields
        .iter()
        .map(|f| parse_node(f.bytes(graph)?))
        .collect::<Option<_>>()?;
    let mut graph_outputs = HashSet::new();
    for f in fields.iter().filter(|f| f.number == GRAPH_OUTPUT) {
        let body = f.bytes(graph)?;
        graph_outputs.extend(strings(body, &parse(body)?, VALUE_INFO_NAME)?);
    }
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for input in &n.inputs {
            consumers.entry(input.as_str()).or_default().push(i);
        }
    }
    // Gather index → the table it reads.
    let mut gathers: HashMap<usize, Table> = HashMap::new();
    let mut dropped = HashSet::new();
    for (cast, n) in nodes.iter().enumerate() {
        let Some((mul, table)) = table_at(cast, n, &nodes, &tensors, &consumers, &graph_outputs)
        else {
            continue;
        };
        dropped.extend(table.dequantise);
        let uses = &consumers[nodes[mul].outputs[0].as_str()];
        let (last, rest) = uses.split_last()?;
        for &g in rest {
            gathers.insert(g, table.clone());
        }
        gathers.insert(*last, table);
    }
    if gathers.is_empty() {
        return None;
    }
    let tables = dropped.len() / 2;
    let mut out = Vec::with_capacity(graph.len());
    let mut node_index = 0;
    for f in &fields {
        if f.number != GRAPH_NODE {
            out.extend_from_slice(&graph[f.start..f.end]);
            continue;
        }
        let i = node_index;
        node_index += 1;
        if dropped.contains(&i) {
            continue;
        }
        match gathers.get(&i) {
            Some(table) => lookup_first(&mut out, table, &nodes[i], i),
            None => out.extend_from_slice(&graph[f.start..f.end]),
        }
    }
    Some((out, tables))
}

/// The table whose dequantising `Cast` is node `cast`, with its `Mul`'s index, if the pattern
/// matches exactly.
fn table_at(
    cast: usize,
    n: &Node,
    nodes: &[Node],
    tensors: &HashMap<String, Tensor>,
    consumers: &HashMap<&str, Vec<usize>>,
    graph_outputs: &HashSet<String>,
) -> Option<(usize, Table)> {
    let is_cast = n.op == "Cast" && n.plain && n.ints.get("to") == Some(&FLOAT);
    if !is_cast || n.inputs.len() != 1 || n.outputs.len() != 1 {
        return None;
    }
    let q = tensors.get(&n.inputs[0])?;
    if q.data_type != INT8 || q.dims.len() != 2 {
        return None;
    }
    let only_use = |name: &str| match consumers.get(name).map(Vec::as_slice) {
        Some([one]) if !graph_outputs.contains(name) => Some(*one),
        _ => None,
    };
    let mul = only_use(&n.outputs[0])?;
    let m = &nodes[mul];
    if m.op != "Mul" || !m.plain || m.inputs.len() != 2 || m.outputs.len() != 1 {
        return None;
    }
    let scale_name = m.inputs.iter().find(|i| **i != n.outputs[0])?;
    let scale = tensors.get(scale_name)?;
    let per_row = scale.dims == [q.dims[0], 1];
    let scalar = scale.dims.iter().all(|&d| d == 1);
    if scale.data_type != FLOAT || !(per_row || scalar) {
        return None;
    }
    let table = &m.outputs[0];
    let uses = consumers.get(table.as_str())?;
    let all_lookups = uses.iter().all(|&g| {
        let g = &nodes[g];
        g.op == "Gather"
            && g.plain
            && g.inputs.len() == 2
            && g.inputs[0] == *table
            && g.outputs.len() == 1
            && g.ints.get("axis").copied().unwrap_or(0) == 0
    });
    if !all_lookups || graph_outputs.contains(table) {
        return None;
    }
    Some((
        mul,
        Table {
            quantised: n.inputs[0].clone(),
            scale: scale_name.clone(),
            per_row,
            dequantise: [cast, mul],
        },
    ))
}

/// Writes the nodes replacing `gather` (index `i`): gather the int8 rows (and their scales),
/// then dequantise only those. New tensor names carry the node index, so they are unique.
fn lookup_first(out: &mut Vec<u8>, table: &Table, gather: &Node, i: usize) {
    let (indices, result) = (gather.inputs[1].as_str(), gather.outputs[0].as_str());
    let rows = format!("int8_rows_{i}/{result}");
    let rows_f = format!("int8_rows_fp32_{i}/{result}");
    let scales = format!("int8_row_scales_{i}/{result}");
    put_node(
        out,
        "Gather",
        &[&table.quantised, indices],
        &rows,
        Some(("axis", 0)),
    );
    put_node(out, "Cast", &[&rows], &rows_f, Some(("to", FLOAT)));
    if table.per_row {
        put_node(
            out,
            "Gather",
            &[&table.scale, indices],
            &scales,
            Some(("axis", 0)),
        );
        put_node(out, "Mul", &[&rows_f, &scales], result, None);
    } else {
        put_node(out, "Mul", &[&rows_f, &table.scale], result, None);
    }
}

fn put_node(out: &mut Vec<u8>, op: &str, inputs: &[&str], output: &str, attr: Option<(&str, i64)>) {
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

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_varint_field(out: &mut Vec<u8>, number: u32, v: u64) {
    put_varint(out, u64::from(number) << 3 | u64::from(WIRE_VARINT));
    put_varint(out, v);
}

fn put_len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_varint(out, u64::from(number) << 3 | u64::from(WIRE_LEN));
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
#[path = "int8_tables_tests.rs"]
mod tests;
