//! `memd-eval states`: how compact a memory's late-interaction token states can be before the
//! rerank loses quality. Same questions, same fused candidates and the shipped score
//! (MaxSim per query token + `late::COSINE_WEIGHT` × cosine over the head of 40) as
//! `memd-eval rerankers`; only the stored form of the memories' states changes, the query stays
//! full precision (asymmetric scoring).
//!
//! Owns the study's table: bytes a memory (mean over the memories of the set's candidates) and
//! R@1/R@5/R@10/MRR per (kept tokens, codec). Codecs that learn (product quantization, residual
//! centroids) are trained on the set's own token vectors (as PLAID trains on its corpus) and,
//! to see how a fixed codebook would travel, on the other set's. Must never write outside
//! temporary directories.

use super::late::{Case, reorder_head};
use super::metrics::{ConfigResult, Scorer};
use super::state_codecs::{Codec, Tokens, Trained, keep};
use anyhow::{Context, Result};
use memd_engine::models::embed::{
    LateInteraction, OnnxEmbedder, RuntimePaths, late_interaction_dir,
};
use std::collections::HashMap;

/// The head the daemon reorders.
const DEPTH: usize = 40;
/// Token vectors the learning codecs train on (as many as the daemon trains on).
const SAMPLE: usize = memd_engine::models::late::TRAIN_TOKENS;

/// One memory's token ids and f32 states.
struct Doc {
    ids: Vec<i64>,
    rows: Vec<Vec<f32>>,
}

/// One data set ready to score: its cases, every candidate's states, every query's states.
struct Set {
    name: String,
    cases: Vec<Case>,
    docs: HashMap<String, Doc>,
    queries: Vec<Vec<Vec<f32>>>,
}

/// One option compared.
#[derive(Debug, Clone, Copy)]
struct Opt {
    tokens: Tokens,
    codec: Codec,
    /// Codebooks trained on the other set's token vectors.
    cross: bool,
    /// The best this many of the compact order rescored with the full (f32) states.
    rescore: usize,
}

/// The options compared.
fn options() -> Vec<Opt> {
    use Codec::*;
    use Tokens::*;
    let o = |tokens, codec| Opt {
        tokens,
        codec,
        cross: false,
        rescore: 0,
    };
    let mut v = vec![
        o(All, F32),
        o(All, I8),
        o(NoSpecial, F32),
        o(NoPunct, F32),
        o(Pool(2), F32),
    ];
    v.push(o(Pool(3), F32));
    for codec in [Sign, TwoBit, Residual(1024), Pq(16), Pq(32), Pq(64)] {
        v.push(o(All, codec));
    }
    for codec in [Sign, TwoBit, Pq(16), Pq(32), Pq(64), Pq(96), Pq(128)] {
        v.push(o(NoPunct, codec));
    }
    for codec in [Pq(32), Pq(64)] {
        v.push(o(Pool(2), codec));
    }
    for codec in [Pq(64), Pq(128)] {
        v.push(Opt {
            cross: true,
            ..o(NoPunct, codec)
        });
    }
    for codec in [Sign, Pq(16), Pq(32)] {
        for rescore in [10, 20] {
            v.push(Opt {
                rescore,
                ..o(NoPunct, codec)
            });
        }
    }
    v
}

/// The study on LoCoMo (`locomo_dir`) and the coding set (`coding_dir`); prints as it goes.
pub fn run(
    locomo_dir: &std::path::Path,
    coding_dir: &std::path::Path,
    runtime: &RuntimePaths,
) -> Result<()> {
    let embedder =
        OnnxEmbedder::load(runtime, 0).context("the study needs the embedding runtime")?;
    let late = LateInteraction::load(&runtime.ort_lib, &late_interaction_dir(), 0)
        .context("the study needs the late-interaction model (install/fetch-runtime.sh)")?;
    let ranking = super::locomo::shipped_ranking();
    let (locomo, coding) = super::late::study_cases(
        locomo_dir,
        coding_dir,
        &embedder,
        &ranking,
        DEPTH,
        super::late::TurnText::Speaker,
    )?;
    let sets = [
        encode("LoCoMo", locomo, &late)?,
        encode("coding set", coding, &late)?,
    ];
    let punct = |id: i64| {
        late.token_text(id)
            .is_some_and(|t| t.chars().all(|c| c.is_ascii_punctuation()))
    };
    let all_codecs: Vec<Codec> = options().iter().map(|o| o.codec).collect();
    let trained: Vec<Trained> = sets
        .iter()
        .map(|s| Trained::train(&sample(s, &punct), &all_codecs))
        .collect();
    for (i, set) in sets.iter().enumerate() {
        let (n, m) = (set.cases.len(), set.docs.len());
        println!("{}: {n} questions, {m} memories", set.name);
        println!(
            "| kept tokens | codec | trained on | rescored | tokens/memory | bytes/memory | R@1 | R@5 | R@10 | MRR@10 |"
        );
        println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
        println!("{}", engine_row(set));
        for opt in options() {
            let codebook = &trained[if opt.cross { 1 - i } else { i }];
            let (tok, bytes, r) = score_option(set, opt, codebook, &punct);
            let o = &r.overall;
            let (tokens, codec, rescore) = (opt.tokens, opt.codec, opt.rescore);
            let on = match (codec, opt.cross) {
                (Codec::F32 | Codec::I8, _) => "-",
                (_, true) => "other set",
                (_, false) => "this set",
            };
            println!(
                "| {tokens:?} | {codec:?} | {on} | {rescore} | {tok:.1} | {bytes:.0} | {:.3} | {:.3} | {:.3} | {:.3} |",
                o.r1, o.r5, o.r10, o.mrr
            );
        }
        println!();
    }
    Ok(())
}

fn encode(name: &str, cases: Vec<Case>, late: &LateInteraction) -> Result<Set> {
    let mut docs = HashMap::new();
    let mut queries = Vec::new();
    for case in &cases {
        for (_, text) in case.candidates.iter().take(DEPTH) {
            if !docs.contains_key(text) {
                let (ids, rows) = late.doc_rows(text)?;
                docs.insert(text.clone(), Doc { ids, rows });
            }
        }
        queries.push(late.query_rows(&case.query)?);
    }
    eprintln!("{name}: {} memories encoded", docs.len());
    Ok(Set {
        name: name.to_string(),
        cases,
        docs,
        queries,
    })
}

/// Up to `SAMPLE` kept (no punctuation) token vectors of `set`, in a fixed order.
fn sample(set: &Set, punct: &dyn Fn(i64) -> bool) -> Vec<Vec<f32>> {
    let mut texts: Vec<&String> = set.docs.keys().collect();
    texts.sort();
    let all: Vec<Vec<f32>> = texts
        .iter()
        .flat_map(|t| {
            let d = &set.docs[*t];
            keep(Tokens::NoPunct, &d.ids, &d.rows, punct)
        })
        .collect();
    let step = all.len().div_ceil(SAMPLE).max(1);
    all.into_iter().step_by(step).collect()
}

/// (tokens a memory, bytes a memory, figures) of one option on `set`.
fn score_option(
    set: &Set,
    opt: Opt,
    trained: &Trained,
    punct: &dyn Fn(i64) -> bool,
) -> (f64, f64, ConfigResult) {
    let (tokens, codec) = (opt.tokens, opt.codec);
    let stored: HashMap<&str, Vec<Vec<f32>>> = set
        .docs
        .iter()
        .map(|(text, d)| {
            let kept = keep(tokens, &d.ids, &d.rows, punct);
            let decoded = kept.iter().map(|v| trained.decode(codec, v)).collect();
            (text.as_str(), decoded)
        })
        .collect();
    let n = stored.len().max(1) as f64;
    let tok = stored.values().map(Vec::len).sum::<usize>() as f64 / n;
    // A token count (u16) a memory beside its codes.
    let bytes = tok * codec.bytes_per_token() as f64 + 2.0;
    let mut scorer = Scorer::default();
    for (case, q) in set.cases.iter().zip(&set.queries) {
        let scores: Vec<f32> = case
            .candidates
            .iter()
            .zip(&case.similarities)
            .take(DEPTH)
            .map(|((_, text), cos)| {
                let d = &stored[text.as_str()];
                maxsim(q, d) / q.len().max(1) as f32
                    + memd_engine::models::late::COSINE_WEIGHT * cos
            })
            .collect();
        let fused: Vec<usize> = (0..case.candidates.len()).collect();
        let mut order = reorder_head(&fused, DEPTH, &scores);
        if opt.rescore > 0 {
            let full: Vec<f32> = order
                .iter()
                .take(opt.rescore)
                .map(|&i| {
                    let d = &set.docs[case.candidates[i].1.as_str()];
                    maxsim(q, &d.rows) / q.len().max(1) as f32
                        + memd_engine::models::late::COSINE_WEIGHT * case.similarities[i]
                })
                .collect();
            order = reorder_head(&order, opt.rescore, &full);
        }
        let ranked: Vec<&[String]> = order
            .iter()
            .take(super::late::TOP_K)
            .map(|&i| case.candidates[i].0.as_slice())
            .collect();
        scorer.add(case.category, &case.evidence, &ranked);
    }
    (tok, bytes, scorer.finish(&format!("{tokens:?} {codec:?}")))
}

/// The row of what the engine ships: every token, `late_codes` codes against a codebook
/// trained on `TRAIN_TOKENS` of the set's i8 states, scored through the query's table.
fn engine_row(set: &Set) -> String {
    use memd_engine::models::embed::TokenStates;
    use memd_engine::models::late_codes::{Codebook, SUBVECTORS};
    let mut texts: Vec<&String> = set.docs.keys().collect();
    texts.sort();
    let i8_rows = |d: &Doc| TokenStates::quantize_rows(&d.rows).rows();
    let all: Vec<Vec<f32>> = texts.iter().flat_map(|t| i8_rows(&set.docs[*t])).collect();
    let step = all.len().div_ceil(SAMPLE).max(1);
    let sample: Vec<Vec<f32>> = all.into_iter().step_by(step).collect();
    let Some(book) = Codebook::train(&sample) else {
        return "| engine | too few tokens |".into();
    };
    let codes: HashMap<&str, _> = set
        .docs
        .iter()
        .map(|(t, d)| (t.as_str(), book.encode(&i8_rows(d))))
        .collect();
    let mut scorer = Scorer::default();
    for (case, q) in set.cases.iter().zip(&set.queries) {
        let table = book.table(q);
        let scores: Vec<f32> = case
            .candidates
            .iter()
            .zip(&case.similarities)
            .take(DEPTH)
            .map(|((_, text), cos)| {
                table.maxsim(&codes[text.as_str()]) / q.len().max(1) as f32
                    + memd_engine::models::late::COSINE_WEIGHT * cos
            })
            .collect();
        let fused: Vec<usize> = (0..case.candidates.len()).collect();
        let order = reorder_head(&fused, DEPTH, &scores);
        let ranked: Vec<&[String]> = order
            .iter()
            .take(super::late::TOP_K)
            .map(|&i| case.candidates[i].0.as_slice())
            .collect();
        scorer.add(case.category, &case.evidence, &ranked);
    }
    let n = codes.len().max(1) as f64;
    let tok = codes.values().map(|c| c.tokens()).sum::<usize>() as f64 / n;
    let o = scorer.finish("engine").overall;
    format!(
        "| All (engine `late_codes`) | Pq({SUBVECTORS}) | this set | 0 | {tok:.1} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} |",
        tok * SUBVECTORS as f64,
        o.r1,
        o.r5,
        o.r10,
        o.mrr
    )
}

fn maxsim(q: &[Vec<f32>], d: &[Vec<f32>]) -> f32 {
    q.iter()
        .map(|qv| {
            d.iter()
                .map(|dv| qv.iter().zip(dv).map(|(a, b)| a * b).sum::<f32>())
                .fold(f32::NEG_INFINITY, f32::max)
        })
        .filter(|s| s.is_finite())
        .sum()
}
