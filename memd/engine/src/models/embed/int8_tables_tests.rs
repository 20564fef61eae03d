//! The rewrite on hand-built graphs: the pattern it must rewrite, the ones it must leave, and
//! input it must survive. That the rewritten embedding model computes the same vectors is
//! tests/embed_reference.rs's (it needs the real model).

use super::*;

/// A TensorProto header (no data: the rewrite never reads it).
pub(crate) fn tensor(name: &str, data_type: i64, dims: &[i64]) -> Vec<u8> {
    let mut t = Vec::new();
    for &d in dims {
        put_varint_field(&mut t, TENSOR_DIMS, d as u64);
    }
    put_varint_field(&mut t, TENSOR_DATA_TYPE, data_type as u64);
    put_len_field(&mut t, TENSOR_NAME, name.as_bytes());
    t
}

fn value_info(name: &str) -> Vec<u8> {
    let mut v = Vec::new();
    put_len_field(&mut v, VALUE_INFO_NAME, name.as_bytes());
    v
}

/// ModelProto { ir_version 10, graph { nodes…, initializers…, output "out" } }.
pub(crate) fn model(nodes: &[u8], initializers: &[Vec<u8>]) -> Vec<u8> {
    let mut graph = nodes.to_vec();
    put_len_field(&mut graph, 2, b"g");
    for t in initializers {
        put_len_field(&mut graph, GRAPH_INITIALIZER, t);
    }
    put_len_field(&mut graph, GRAPH_OUTPUT, &value_info("out"));
    let mut m = Vec::new();
    put_varint_field(&mut m, 1, 10);
    put_len_field(&mut m, MODEL_GRAPH, &graph);
    m
}

/// The embedding model's pattern: table_q (int8 [rows, 4]) → Cast → Mul(scale) → Gather(ids).
fn embedding_table(scale_dims: &[i64], consumer: &str) -> Vec<u8> {
    let mut nodes = Vec::new();
    put_node(
        &mut nodes,
        "Cast",
        &["table_q"],
        "table_f",
        Some(("to", FLOAT)),
    );
    put_node(
        &mut nodes,
        "Mul",
        &["table_f", "table_scale"],
        "table",
        None,
    );
    match consumer {
        "Gather" => put_node(&mut nodes, "Gather", &["table", "ids"], "rows", None),
        other => put_node(&mut nodes, other, &["ids", "table"], "rows", None),
    }
    put_node(&mut nodes, "Relu", &["rows"], "out", None);
    model(
        &nodes,
        &[
            tensor("table_q", INT8, &[10, 4]),
            tensor("table_scale", FLOAT, scale_dims),
        ],
    )
}

/// (op, inputs, outputs) of each node of a model's graph.
pub(crate) fn ops(m: &[u8]) -> Vec<(String, Vec<String>, Vec<String>)> {
    let fields = parse(m).expect("model parses");
    let graph = fields
        .iter()
        .find(|f| f.number == MODEL_GRAPH)
        .expect("graph");
    let g = graph.bytes(m).expect("graph bytes");
    parse(g)
        .expect("graph parses")
        .iter()
        .filter(|f| f.number == GRAPH_NODE)
        .map(|f| {
            let n = parse_node(f.bytes(g).expect("node")).expect("node parses");
            (n.op, n.inputs, n.outputs)
        })
        .collect()
}

#[test]
fn a_row_scaled_table_is_gathered_before_it_is_dequantised() {
    let (out, tables) = rewrite(&embedding_table(&[10, 1], "Gather")).expect("rewritten");
    assert_eq!(tables, 1);
    let got = ops(&out);
    let names: Vec<&str> = got.iter().map(|(op, _, _)| op.as_str()).collect();
    assert_eq!(names, ["Gather", "Cast", "Gather", "Mul", "Relu"]);
    assert_eq!(got[0].1, ["table_q", "ids"]);
    assert_eq!(got[1].1, got[0].2);
    assert_eq!(got[2].1, ["table_scale", "ids"]);
    assert_eq!(got[3].1, [got[1].2[0].clone(), got[2].2[0].clone()]);
    assert_eq!(got[3].2, ["rows"], "the lookup's output keeps its name");
    let cast = parse_node(&node_bytes(&out, 1)).expect("cast");
    assert_eq!(cast.ints.get("to"), Some(&FLOAT));
}

#[test]
fn a_table_with_one_scale_is_multiplied_by_it() {
    let (out, _) = rewrite(&embedding_table(&[1], "Gather")).expect("rewritten");
    let got = ops(&out);
    let names: Vec<&str> = got.iter().map(|(op, _, _)| op.as_str()).collect();
    assert_eq!(names, ["Gather", "Cast", "Mul", "Relu"]);
    assert_eq!(got[2].1[1], "table_scale");
}

#[test]
fn other_graphs_are_left_alone() {
    // A matrix weight (scale per column) and a table read by something else than Gather.
    assert!(rewrite(&embedding_table(&[1, 4], "Gather")).is_none());
    assert!(rewrite(&embedding_table(&[10, 1], "MatMul")).is_none());
    assert!(rewrite(&model(&[], &[])).is_none());
}

#[test]
fn the_rest_of_the_model_is_copied_unchanged() {
    let original = embedding_table(&[10, 1], "Gather");
    let (out, _) = rewrite(&original).expect("rewritten");
    let fields = parse(&out).expect("parses");
    assert_eq!(
        &out[..fields[0].end],
        &original[..fields[0].end],
        "ir_version"
    );
    let g = |m: &[u8]| {
        let f = parse(m).expect("parses");
        let graph = f.iter().find(|f| f.number == MODEL_GRAPH).expect("graph");
        let bytes = graph.bytes(m).expect("bytes").to_vec();
        parse(&bytes)
            .expect("graph")
            .iter()
            .filter(|f| f.number != GRAPH_NODE)
            .map(|f| bytes[f.start..f.end].to_vec())
            .collect::<Vec<_>>()
    };
    assert_eq!(g(&out), g(&original), "initializers, outputs and name");
}

#[test]
fn damaged_input_is_refused_without_panicking() {
    let m = embedding_table(&[10, 1], "Gather");
    for cut in [1, 7, m.len() / 2, m.len() - 1] {
        assert!(rewrite(&m[..cut]).is_none(), "cut at {cut}");
    }
    assert!(rewrite(&[0xff; 16]).is_none());
    assert!(rewrite(b"").is_none());
}

fn node_bytes(m: &[u8], index: usize) -> Vec<u8> {
    let fields = parse(m).expect("model");
    let graph = fields
        .iter()
        .find(|f| f.number == MODEL_GRAPH)
        .expect("graph");
    let g = graph.bytes(m).expect("bytes");
    let nodes: Vec<_> = parse(g)
        .expect("graph")
        .into_iter()
        .filter(|f| f.number == GRAPH_NODE)
        .collect();
    nodes[index].bytes(g).expect("node").to_vec()
}
