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
    let consumers = view.consumers();
    // Gather index → the table it reads.
    let mut gathers: HashMap<usize, Table> = HashMap::new();
    let mut dropped = HashSet::new();
    for cast in 0..view.nodes.len() {
        let Some((output, table)) = table_at(cast, &view, &consumers) else {
            continue;
        };
        dropped.extend(table.dequantise);
        let (last, rest) = consumers[output].split_last()?;
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
    for f in &view.fields {
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
            Some(table) => lookup_first(&mut out, table, &view.nodes[i], i),
            None => out.extend_from_slice(&graph[f.start..f.end]),
        }
    }
    Some((out, tables))
}

/// The table whose dequantising `Cast` is node `cast`, with the name of the fp32 table, if the
/// pattern matches exactly: a scale per row or one for the table, the table read only by
/// `Gather`s on axis 0.
fn table_at<'a>(
    cast: usize,
    view: &'a GraphView,
    consumers: &HashMap<&str, Vec<usize>>,
) -> Option<(&'a str, Table)> {
    let d = view.dequantised_at(cast, consumers)?;
    let per_row = d.scale_dims == [d.quantised_dims[0], 1];
    let scalar = d.scale_dims.iter().all(|&dim| dim == 1);
    if !(per_row || scalar) {
        return None;
    }
    let table = d.output;
    let uses = consumers.get(table)?;
    let all_lookups = uses.iter().all(|&g| {
        let g = &view.nodes[g];
        g.op == "Gather"
            && g.plain
            && g.inputs.len() == 2
            && g.inputs[0] == table
            && g.outputs.len() == 1
            && g.ints.get("axis").copied().unwrap_or(0) == 0
    });
    if !all_lookups || view.outputs.contains(table) {
        return None;
    }
    Some((
        table,
        Table {
            quantised: d.quantised.to_owned(),
            scale: d.scale.to_owned(),
            per_row,
            dequantise: [cast, d.mul],
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
