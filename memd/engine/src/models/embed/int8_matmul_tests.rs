//! The rewrite on hand-built graphs: the pattern it must rewrite, the ones it must leave, and
//! input it must survive. What the rewritten embedding model computes is
//! tests/embed_reference.rs's (it needs the real model).

use super::super::int8_tables::tests::{model, ops, tensor};
use super::*;

/// `m` importing the standard opset `version` (appending a field is valid protobuf).
fn with_opset(mut m: Vec<u8>, version: u64) -> Vec<u8> {
    let mut opset = Vec::new();
    put_varint_field(&mut opset, OPSET_VERSION, version);
    put_len_field(&mut m, MODEL_OPSET_IMPORT, &opset);
    m
}

/// The embedding model's pattern: w_q (int8 [8, 4]) → Cast → Mul(scale) → MatMul(x, ·) → out.
fn matrix_weight(scale_dims: &[i64], weight_on_left: bool, opset: u64) -> Vec<u8> {
    let mut nodes = Vec::new();
    put_node(&mut nodes, "Cast", &["w_q"], "w_f", Some(("to", FLOAT)));
    put_node(&mut nodes, "Mul", &["w_f", "w_scale"], "w", None);
    let inputs: [&str; 2] = if weight_on_left {
        ["w", "x"]
    } else {
        ["x", "w"]
    };
    put_node(&mut nodes, "MatMul", &inputs, "out", None);
    let m = model(
        &nodes,
        &[
            tensor("w_q", INT8, &[8, 4]),
            tensor("w_scale", FLOAT, scale_dims),
        ],
    );
    with_opset(m, opset)
}

/// The dims of initializer `name` in a model.
fn dims_of(m: &[u8], name: &str) -> Vec<i64> {
    let fields = parse(m).expect("model");
    let graph = fields
        .iter()
        .find(|f| f.number == MODEL_GRAPH)
        .expect("graph");
    let view = GraphView::parse(graph.bytes(m).expect("bytes")).expect("graph parses");
    view.tensors[name].dims.clone()
}

#[test]
fn a_column_scaled_weight_becomes_one_dequantize_linear() {
    for scale_dims in [&[1, 4][..], &[4][..]] {
        let (out, weights) = rewrite(&matrix_weight(scale_dims, false, 17)).expect("rewritten");
        assert_eq!(weights, 1);
        let got = ops(&out);
        let names: Vec<&str> = got.iter().map(|(op, _, _)| op.as_str()).collect();
        assert_eq!(names, ["DequantizeLinear", "MatMul"]);
        assert_eq!(got[0].1, ["w_q", "w_scale"]);
        assert_eq!(got[0].2, ["w"], "the MatMul still reads `w`");
        assert_eq!(
            dims_of(&out, "w_scale"),
            [4],
            "a scale per column, as a vector"
        );
        assert_eq!(dims_of(&out, "w_q"), [8, 4]);
        let fields = parse(&out).expect("model");
        let graph = fields
            .iter()
            .find(|f| f.number == MODEL_GRAPH)
            .expect("graph");
        let g = graph.bytes(&out).expect("bytes");
        let first = parse(g)
            .expect("graph")
            .into_iter()
            .find(|f| f.number == GRAPH_NODE);
        let node = parse_node(first.expect("node").bytes(g).expect("node")).expect("parses");
        assert_eq!(node.ints.get("axis"), Some(&1));
    }
}

#[test]
fn other_graphs_are_left_alone() {
    // A scale per row or one for the whole matrix, the weight on the left, an old opset.
    assert!(rewrite(&matrix_weight(&[8, 1], false, 17)).is_none());
    assert!(rewrite(&matrix_weight(&[1], false, 17)).is_none());
    assert!(rewrite(&matrix_weight(&[1, 4], true, 17)).is_none());
    assert!(rewrite(&matrix_weight(&[1, 4], false, 11)).is_none());
    assert!(rewrite(&model(&[], &[])).is_none(), "no opset, no graph");
    // A scale another node also reads.
    let mut nodes = Vec::new();
    put_node(&mut nodes, "Cast", &["w_q"], "w_f", Some(("to", FLOAT)));
    put_node(&mut nodes, "Mul", &["w_f", "w_scale"], "w", None);
    put_node(&mut nodes, "MatMul", &["x", "w"], "y", None);
    put_node(&mut nodes, "Add", &["y", "w_scale"], "out", None);
    let shared = model(
        &nodes,
        &[
            tensor("w_q", INT8, &[8, 4]),
            tensor("w_scale", FLOAT, &[1, 4]),
        ],
    );
    assert!(rewrite(&with_opset(shared, 17)).is_none());
}

#[test]
fn damaged_input_is_refused_without_panicking() {
    let m = matrix_weight(&[1, 4], false, 17);
    for cut in [1, 7, m.len() / 2, m.len() - 1] {
        assert!(rewrite(&m[..cut]).is_none(), "cut at {cut}");
    }
    assert!(rewrite(&[0xff; 16]).is_none());
    assert!(rewrite(b"").is_none());
}
