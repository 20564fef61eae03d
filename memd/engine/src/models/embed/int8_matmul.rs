//! Keeps the embedding model's int8 matrix weights int8 at run time.
//!
//! The model stores each matrix weight as int8 `[K, N]` with one fp32 scale per column,
//! dequantised by `Cast` → `Mul` before its `MatMul`. ONNX Runtime folds that constant
//! sub-graph at load, so the six layers' weights sit in memory as fp32 (42 MB instead of 11).
//! This rewrite states the same dequantisation as one standard `DequantizeLinear` (per column,
//! `axis` 1). ONNX Runtime then fuses `DequantizeLinear` → `MatMul` into its int8 kernel
//! (`MatMulNBits`, 8 bits; blocks of 16 along K, set in `onnx::build_session`): the weights
//! stay int8 (the session holds 23 MB less) and each block of 16 activations is quantised to
//! int8 on the fly. The weights are exactly the file's; the activations' rounding moves the
//! vectors slightly (cosine to the fp32 product ≥ 0.999; retrieval on memd's three sets within
//! 0.005 of the fp32 figures, bench/EVAL.md section 15). Where ONNX Runtime does not fuse, it
//! folds the `DequantizeLinear` as it folded `Cast` → `Mul`: the same fp32 weights as before.
//!
//! Owns the pattern match and its byte-level rewrite (untouched parts are copied as they are).
//! Must never rewrite a weight it does not fully understand (a scale shared with another node,
//! a weight read by anything but `MatMul`'s right-hand side) nor fail a model: anything
//! unexpected returns `None` and the model loads as it is.

use std::collections::{HashMap, HashSet};

use super::onnx_wire::*;

/// Whether this CPU has the int8 dot-product instructions ONNX Runtime's 8-bit `MatMulNBits`
/// kernels are written for (x86-64: AVX-512 VNNI or AVX-VNNI; ARM64: the dot-product
/// extension). Without them ONNX Runtime computes the fused weight in fp32 from its int8
/// blocks, 5× slower than the fp32 `MatMul` (measured here with that kernel forced to fp32:
/// 63 vs 12 ms a sentence), so the caller keeps the weights as they were.
pub fn cpu_has_int8_dot() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vnni")
            || std::arch::is_x86_feature_detected!("avxvnni")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("dotprod")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// The first standard opset whose `DequantizeLinear` takes a scale per column (`axis`).
const PER_AXIS_OPSET: i64 = 13;

/// `model` (an ONNX ModelProto) with every `Cast` → `Mul` dequantised int8 matrix weight of a
/// `MatMul` turned into a `DequantizeLinear`, and how many were; `None` when there is none or
/// the model is not understood.
pub fn rewrite(model: &[u8]) -> Option<(Vec<u8>, usize)> {
    if standard_opset(model)? < PER_AXIS_OPSET {
        return None;
    }
    rewrite_model(model, rewrite_graph)
}

/// One weight to rewrite: `Cast(quantised) → Mul(scale)` read only as `MatMul`'s right-hand side.
struct Weight {
    cast: usize,
    mul: usize,
    quantised: String,
    scale: String,
    /// N: the scale becomes a vector of this length, as `DequantizeLinear` wants.
    columns: i64,
}

fn rewrite_graph(graph: &[u8]) -> Option<(Vec<u8>, usize)> {
    let view = GraphView::parse(graph)?;
    let consumers = view.consumers();
    let weights: Vec<Weight> = (0..view.nodes.len())
        .filter_map(|i| weight_at(i, &view, &consumers))
        .collect();
    if weights.is_empty() {
        return None;
    }
    let casts: HashSet<usize> = weights.iter().map(|w| w.cast).collect();
    let muls: HashMap<usize, &Weight> = weights.iter().map(|w| (w.mul, w)).collect();
    let scales: HashMap<&str, i64> = weights
        .iter()
        .map(|w| (w.scale.as_str(), w.columns))
        .collect();
    let mut out = Vec::with_capacity(graph.len());
    let mut node_index = 0;
    for f in &view.fields {
        let bytes = &graph[f.start..f.end];
        match f.number {
            GRAPH_NODE => {
                let i = node_index;
                node_index += 1;
                if casts.contains(&i) {
                    continue;
                }
                match muls.get(&i) {
                    Some(w) => dequantize_linear(&mut out, w, &view.nodes[i].outputs[0]),
                    None => out.extend_from_slice(bytes),
                }
            }
            GRAPH_INITIALIZER => {
                let body = f.bytes(graph)?;
                let (name, _) = parse_tensor(body)?;
                match scales.get(name.as_str()) {
                    Some(&n) => put_len_field(&mut out, GRAPH_INITIALIZER, &with_dims(body, &[n])?),
                    None => out.extend_from_slice(bytes),
                }
            }
            _ => out.extend_from_slice(bytes),
        }
    }
    Some((out, weights.len()))
}

/// The weight whose dequantising `Cast` is node `cast`, if the pattern matches exactly: a
/// scale per column used by this `Mul` alone, the weight read only as `MatMul`'s right-hand side.
fn weight_at(
    cast: usize,
    view: &GraphView,
    consumers: &HashMap<&str, Vec<usize>>,
) -> Option<Weight> {
    let d = view.dequantised_at(cast, consumers)?;
    let columns = d.quantised_dims[1];
    let per_column = d.scale_dims == [1, columns] || d.scale_dims == [columns];
    if !per_column || view.only_use(consumers, d.scale) != Some(d.mul) {
        return None;
    }
    let uses = consumers.get(d.output)?;
    let all_matmuls = uses.iter().all(|&u| {
        let u = &view.nodes[u];
        u.op == "MatMul" && u.plain && u.inputs.len() == 2 && u.inputs[1] == d.output
    });
    if !all_matmuls || view.outputs.contains(d.output) {
        return None;
    }
    Some(Weight {
        cast,
        mul: d.mul,
        quantised: d.quantised.to_owned(),
        scale: d.scale.to_owned(),
        columns,
    })
}

/// Writes `DequantizeLinear(quantised, scale, axis 1)` with the `Mul`'s output name, so the
/// `MatMul`s reading it are untouched.
fn dequantize_linear(out: &mut Vec<u8>, w: &Weight, output: &str) {
    put_node(
        out,
        "DequantizeLinear",
        &[&w.quantised, &w.scale],
        output,
        Some(("axis", 1)),
    );
}

#[cfg(test)]
#[path = "int8_matmul_tests.rs"]
mod tests;
