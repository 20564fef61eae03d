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

use super::onnx_wire::*;

/// `model` (an ONNX ModelProto) with every dequantised int8 lookup table gathered before it is
/// dequantised, and how many tables were rewritten; `None` when there is none or the model is
/// not understood.
pub fn rewrite(model: &[u8]) -> Option<(Vec<u8>, usize)> {
    rewrite_model(model, rewrite_graph)
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
    let view = GraphView::parse(graph)?;
    let GraphView {
        fields,
        tensors,
        nodes,
        outputs: graph_outputs,
    } = &view;
    let consumers = view.consumers();
    // Gather index → the table it reads.
    let mut gathers: HashMap<usize, Table> = HashMap::new();
    let mut dropped = HashSet::new();
    for (cast, n) in nodes.iter().enumerate() {
        let Some((mul, table)) = table_at(cast, n, nodes, tensors, &consumers, graph_outputs)
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
    for f in fields {
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

#[cfg(test)]
#[path = "int8_tables_tests.rs"]
pub(super) mod tests;
