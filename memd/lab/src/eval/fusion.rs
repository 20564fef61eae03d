//! `memd-eval fusion`: the first stage's fusion, the candidates late interaction sees and the
//! final score's mix, compared on every set at once (issue 34, "Retrieval round 2").
//!
//! Owns the study's grid and its tab-separated table. Per question it takes, once, the
//! vector and BM25 lists (`POOL` deep; the fused order from their first `FIRST_DEPTH`, as the
//! daemon's first stage takes them), every listed memory's cosine, BM25 score and best match
//! per query token (token states computed for every memory as the daemon stores them); each
//! configuration, and each rule for which query tokens count (`fusion_tokens`, bench/EVAL.md
//! section 12), is then arithmetic over those numbers, so the grid costs little beside the
//! encoding. Uniform priors are assumed (true of every set here:
//! the study counts how often its RRF order agrees with `search::rank`). Its "per-query w" row
//! calls the daemon's own `retrieve::cosine_weight`. Must never decide a default by itself
//! (the shipped rows come from `memd-eval retrieval`), write anywhere but temporary stores and
//! the `--features` file, or let timing decide a figure.

use super::dataset::Question;
use super::fusion_stores::{Encoded, Loaded, Stores, count_every, encode_store, mixed_store};
use super::fusion_tokens::{
    Counts, Kind, QueryTokens, RULES, Rule, weigh_grid, weighted, weights_for,
};
use super::locomo::Indexed;
use super::metrics::{Recall, Scorer};
use super::pipeline::shipped_ranking;
use anyhow::{Context, Result};
use memd_engine::models::embed::{
    LateInteraction, OnnxEmbedder, QueryStates, RuntimePaths, late_interaction_dir,
};
use memd_engine::models::late;
use memd_engine::retrieve;
use memd_engine::search::{Query, RRF_K, rank};
use memd_engine::state::MemState;
use std::collections::HashMap;
use std::path::PathBuf;

/// Depth of each list the first stage fuses, as `search::rank` takes them for a head of 40
/// (`(40 * 4).max(40)`).
const FIRST_DEPTH: usize = 160;
/// Depth of each list the study reads: the vector list's first 200-400 as late interaction's
/// candidates (late interaction as a candidate generator).
const POOL: usize = 400;
/// Depth late interaction reorders today.
const HEAD: usize = 40;
/// The vector list's first N late interaction scores beside the fused `HEAD` (as shipped,
/// `retrieve::VECTOR_CANDIDATES`): the candidates `Source::Candidates` counts over.
const PLUS_VECTORS: usize = 100;

/// One listed memory of one question.
struct Cand {
    labels: Vec<String>,
    cos: f32,
    bm25: f32,
    vrank: Option<usize>,
    lrank: Option<usize>,
    maxsim: f32,
    /// Each query token's best match (MaxSim before the mean), for the token rules.
    per_token: Vec<f32>,
    /// Note or exchange, for `Source::Collection`.
    kind: Kind,
}

struct Case {
    category: u8,
    evidence: Vec<String>,
    cands: Vec<Cand>,
    /// `search::rank`'s order (shipped first stage), as indexes into `cands`, for the check.
    shipped_first: Vec<usize>,
    tokens: QueryTokens,
}

/// How the first stage orders candidates.
#[derive(Clone, Copy, Debug)]
enum First {
    /// Reciprocal rank fusion, k, lexical weight.
    Rrf(f32, f32),
    /// cosine (min-max over the vector list) + w × BM25 / the query's best BM25.
    Sum(f32),
    /// `search::rank`'s own head (the daemon's, with its priors: in a store mixing notes and
    /// exchanges the exchange weight counts), then the rest in RRF order.
    Daemon,
}

/// How the candidates late interaction scores are ordered.
#[derive(Clone, Copy, Debug)]
enum Final {
    /// MaxSim per query token + `wc` × cosine + `wb` × BM25 / the query's best BM25.
    Lin(f32, f32),
    /// The three signals z-scored among the candidates: MaxSim + `wc` × cosine + `wb` × BM25.
    Z(f32, f32),
    /// MaxSim and cosine min-max scaled among the candidates: MaxSim + `wc` × cosine.
    MinMax(f32),
    /// Reciprocal rank fusion (k) of MaxSim's order and the cosine's (weight `wc`).
    Rank(f32, f32),
    /// What the daemon runs: MaxSim + `retrieve::cosine_weight` × cosine.
    Shipped,
}

/// One configuration: the first stage, which candidates late interaction scores (the first
/// stage's top `head`, plus the vector list's top `plus_v` and the BM25 list's top `plus_l`;
/// none: the first stage's order), and how they are ordered.
#[derive(Clone, Copy, Debug)]
struct Config {
    first: First,
    head: usize,
    plus_v: usize,
    plus_l: usize,
    last: Final,
}

fn first_scores(case: &Case, first: First) -> Vec<f32> {
    let max_bm = case.cands.iter().map(|c| c.bm25).fold(0f32, f32::max);
    let listed = case
        .cands
        .iter()
        .filter(|c| c.vrank.is_some_and(|r| r < FIRST_DEPTH));
    let (lo, hi) = listed.fold((f32::MAX, f32::MIN), |(lo, hi), c| {
        (lo.min(c.cos), hi.max(c.cos))
    });
    let fused = |r: Option<usize>| r.filter(|&r| r < FIRST_DEPTH);
    let shipped: HashMap<usize, usize> = case
        .shipped_first
        .iter()
        .enumerate()
        .map(|(at, &i)| (i, at))
        .collect();
    case.cands
        .iter()
        .enumerate()
        .map(|(i, c)| match first {
            First::Rrf(k, wl) => {
                fused(c.vrank).map_or(0.0, |r| 1.0 / (k + r as f32 + 1.0))
                    + fused(c.lrank).map_or(0.0, |r| wl / (k + r as f32 + 1.0))
            }
            First::Daemon => {
                let rrf = fused(c.vrank).map_or(0.0, |r| 1.0 / (RRF_K + r as f32 + 1.0))
                    + fused(c.lrank).map_or(0.0, |r| 1.0 / (RRF_K + r as f32 + 1.0));
                match shipped.get(&i) {
                    Some(&at) => 10.0 - at as f32 * 0.01,
                    None => rrf,
                }
            }
            First::Sum(w) => {
                let cn = if hi > lo {
                    (c.cos - lo) / (hi - lo)
                } else {
                    1.0
                };
                let bn = if max_bm > 0.0 { c.bm25 / max_bm } else { 0.0 };
                cn.max(0.0) + w * bn
            }
        })
        .collect()
}

fn order_by(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

/// `values` scaled by `f` of their (mean, deviation) or (min, max).
fn scaled(values: &[f32], z: bool) -> Vec<f32> {
    let n = values.len().max(1) as f32;
    let (a, b) = match z {
        true => {
            let mean = values.iter().sum::<f32>() / n;
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / n;
            (mean, var.sqrt())
        }
        false => {
            let lo = values.iter().copied().fold(f32::MAX, f32::min);
            let hi = values.iter().copied().fold(f32::MIN, f32::max);
            (lo, hi - lo)
        }
    };
    let b = if b > 0.0 { b } else { 1.0 };
    values.iter().map(|v| (v - a) / b).collect()
}

/// The final scores of the candidates `pool` (indexes into `case.cands`).
fn final_scores(case: &Case, pool: &[usize], last: Final) -> Vec<f32> {
    let max_bm = case.cands.iter().map(|c| c.bm25).fold(0f32, f32::max);
    let pick =
        |f: fn(&Cand) -> f32| -> Vec<f32> { pool.iter().map(|&i| f(&case.cands[i])).collect() };
    let (ms, cos) = (pick(|c| c.maxsim), pick(|c| c.cos));
    let bm: Vec<f32> = pool
        .iter()
        .map(|&i| case.cands[i].bm25 / max_bm.max(f32::MIN_POSITIVE))
        .collect();
    // x + wy × y + wz × z, per candidate.
    let mix = |x: &[f32], y: &[f32], z: &[f32], wy: f32, wz: f32| -> Vec<f32> {
        (0..x.len()).map(|j| x[j] + wy * y[j] + wz * z[j]).collect()
    };
    match last {
        Final::Lin(wc, wb) => mix(&ms, &cos, &bm, wc, wb),
        Final::Z(wc, wb) => mix(
            &scaled(&ms, true),
            &scaled(&cos, true),
            &scaled(&bm, true),
            wc,
            wb,
        ),
        Final::MinMax(wc) => mix(&scaled(&ms, false), &scaled(&cos, false), &bm, wc, 0.0),
        Final::Rank(k, wc) => {
            let mut s = vec![0f32; pool.len()];
            for (weight, values) in [(1.0, &ms), (wc, &cos)] {
                for (r, j) in order_by(values).into_iter().enumerate() {
                    s[j] += weight / (k + r as f32 + 1.0);
                }
            }
            s
        }
        Final::Shipped => {
            let pairs: Vec<(f32, f32)> = ms.iter().copied().zip(cos.iter().copied()).collect();
            let w = retrieve::cosine_weight(&pairs);
            mix(&ms, &cos, &bm, w, 0.0)
        }
    }
}

/// The first stage's order of `case` under `cfg` and the candidates late interaction scores
/// (indexes into `case.cands`).
fn pool_of(case: &Case, cfg: &Config) -> (Vec<usize>, Vec<usize>) {
    let first = order_by(&first_scores(case, cfg.first));
    let mut pool: Vec<usize> = first.iter().copied().take(cfg.head).collect();
    for (i, c) in case.cands.iter().enumerate() {
        let extra =
            c.vrank.is_some_and(|r| r < cfg.plus_v) || c.lrank.is_some_and(|r| r < cfg.plus_l);
        if extra && !pool.contains(&i) {
            pool.push(i);
        }
    }
    (first, pool)
}

/// The final order of `case` under `cfg`, and whether an evidence memory was among the
/// candidates late interaction scored.
fn ranked(case: &Case, cfg: &Config) -> (Vec<usize>, bool) {
    let (first, pool) = pool_of(case, cfg);
    let relevant = |i: &usize| {
        case.cands[*i]
            .labels
            .iter()
            .any(|l| case.evidence.contains(l))
    };
    let found = pool.iter().any(relevant);
    if pool.is_empty() {
        return (first, found);
    }
    let scores = final_scores(case, &pool, cfg.last);
    let reordered = order_by(&scores).into_iter().map(|j| pool[j]);
    let in_pool: std::collections::HashSet<usize> = pool.iter().copied().collect();
    let rest = first.into_iter().filter(|i| !in_pool.contains(i));
    (reordered.chain(rest).collect(), found)
}

fn evaluate(cases: &[Case], cfg: &Config) -> (Recall, f64) {
    let mut scorer = Scorer::default();
    let mut found = 0;
    for case in cases {
        let (order, f) = ranked(case, cfg);
        found += usize::from(f);
        let labels: Vec<&[String]> = order
            .iter()
            .take(10)
            .map(|&i| case.cands[i].labels.as_slice())
            .collect();
        scorer.add(case.category, &case.evidence, &labels);
    }
    let pool_recall = found as f64 / cases.len().max(1) as f64;
    (scorer.finish("").overall, pool_recall)
}

/// The configurations measured (bench/EVAL.md section 11): the first stage alone, then what
/// late interaction scores and how it orders them.
fn grid() -> Vec<Config> {
    let rrf = First::Rrf(RRF_K, 1.0);
    let alone = |first| Config {
        first,
        head: 0,
        plus_v: 0,
        plus_l: 0,
        last: Final::Shipped,
    };
    let mut v: Vec<Config> = [
        (RRF_K, 1.0),
        (RRF_K, 0.5),
        (RRF_K, 0.25),
        (2.0, 1.0),
        (10.0, 1.0),
    ]
    .map(|(k, w)| alone(First::Rrf(k, w)))
    .into_iter()
    .chain([0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0].map(|w| alone(First::Sum(w))))
    .collect();
    let finals = [
        Final::Lin(0.05, 0.0),
        Final::Lin(0.1, 0.0),
        Final::Lin(0.2, 0.0),
        Final::Lin(0.1, 0.02),
        Final::Z(0.3, 0.0),
        Final::Z(0.5, 0.0),
        Final::Z(1.0, 0.0),
        Final::Z(0.5, 0.2),
        Final::MinMax(0.5),
        Final::MinMax(1.0),
        Final::Rank(5.0, 0.5),
        Final::Rank(5.0, 1.0),
        Final::Shipped,
    ];
    for (head, plus_v, plus_l) in [
        (40, 0, 0),
        (60, 0, 0),
        (40, 60, 0),
        (40, 100, 0),
        (40, 160, 0),
        (40, 100, 20),
    ] {
        for last in finals {
            v.push(Config {
                first: rrf,
                head,
                plus_v,
                plus_l,
                last,
            });
        }
    }
    v
}

/// One question as the study reads it: its text and evidence, its embedding, its
/// late-interaction states.
struct Asked<'a> {
    q: &'a Question,
    qvec: &'a [f32],
    qs: &'a QueryStates,
}

/// One question's case in store `s` (every memory the vector and BM25 lists give, `POOL`
/// deep), and the key of each candidate.
fn case_of(
    s: &MemState,
    ix: &Indexed,
    enc: &Encoded,
    asked: &Asked,
    tokens: QueryTokens,
) -> (Case, Vec<u64>) {
    let Asked { q, qvec, qs } = *asked;
    let all = |_k: u64| true;
    let vec_hits = s.vectors().search(qvec, POOL, &all).unwrap_or_default();
    let lex_hits = s.lexical().search(&q.text, POOL, &all);
    let mut keys: Vec<u64> = vec_hits.iter().map(|h| h.0).collect();
    for h in &lex_hits {
        if !keys.contains(&h.0) {
            keys.push(h.0);
        }
    }
    let cands: Vec<Cand> = keys
        .iter()
        .map(|&k| {
            let vrank = vec_hits.iter().position(|h| h.0 == k);
            let lrank = lex_hits.iter().position(|h| h.0 == k);
            let cos = match vrank {
                Some(r) => vec_hits[r].1,
                None => s
                    .vectors()
                    .get(k)
                    .map_or(0.0, |v| v.iter().zip(qvec).map(|(a, b)| a * b).sum()),
            };
            let st = enc.states.get(&k);
            Cand {
                labels: ix.labels.get(&k).cloned().unwrap_or_default(),
                cos,
                bm25: lrank.map_or(0.0, |r| lex_hits[r].1),
                vrank,
                lrank,
                maxsim: st.map_or(0.0, |st| late::score(qs, st, 0.0)),
                per_token: st.map_or_else(|| vec![0.0; qs.tokens()], |st| qs.maxsim_per_token(st)),
                kind: enc.kinds.get(&k).copied().unwrap_or(Kind::Note),
            }
        })
        .collect();
    let query = Query {
        limit: HEAD,
        ..Query::default()
    };
    // The daemon's own ranking, priors included (the exchange weight counts where notes and
    // exchanges share a store).
    let ranking = shipped_ranking();
    let shipped_first = rank(s, &query, &q.text, Some(qvec), &ranking, HEAD)
        .iter()
        .filter_map(|h| keys.iter().position(|&k| k == h.key))
        .collect();
    let case = Case {
        category: q.category,
        evidence: q.evidence.clone(),
        cands,
        shipped_first,
        tokens,
    };
    (case, keys)
}

/// Every question of one store as the study's cases. `counts`: the document frequencies over
/// one store mixing every set's memories, whole and by kind, as a user's daemon would count
/// them.
fn cases_of(ix: &Indexed, model: &LateInteraction, counts: &Counts) -> Result<Vec<Case>> {
    let enc = encode_store(ix, model)?;
    let mut out = Vec::new();
    for (q, qvec) in ix.questions.iter().zip(&ix.question_vecs) {
        let qs = model.encode_query(&q.text)?;
        let word_idf: Vec<Option<f32>> = ix.store.read(|s| {
            let words = model.query_words(&q.text)?;
            Ok::<_, anyhow::Error>(
                words
                    .iter()
                    .map(|w| w.as_deref().and_then(|w| s.lexical().word_idf(w)))
                    .collect(),
            )
        })?;
        let ids = model.query_ids(&q.text)?;
        let tokens = QueryTokens::of(model, &ids, &enc.vocab, counts, word_idf);
        let question = Asked { q, qvec, qs: &qs };
        let (mut case, keys) = ix.store.read(|s| case_of(s, ix, &enc, &question, tokens));
        // What ships scores the fused 40 and the vector list's first 100: count over those.
        let (_, pool) = pool_of(&case, &token_grid()[0]);
        let docs: Vec<&[i64]> = pool
            .iter()
            .filter_map(|&i| enc.ids.get(&keys[i]).map(Vec::as_slice))
            .collect();
        case.tokens.set_candidate_df(&ids, &docs);
        out.push(case);
    }
    Ok(out)
}

/// The study: LoCoMo (when given), the coding set, the holdout set and the paraphrase probe;
/// prints one tab-separated line per configuration and set.
pub fn run(
    locomo: Option<PathBuf>,
    features: Option<PathBuf>,
    stores: Stores,
    runtime: &RuntimePaths,
) -> Result<()> {
    let embedder = OnnxEmbedder::load(runtime, 0).context("the study needs the embedder")?;
    let model = LateInteraction::load(&runtime.ort_lib, &late_interaction_dir(), 0)
        .context("the study needs the late-interaction model")?;
    let loaded = Loaded::load(locomo, &embedder)?;
    let parts = loaded.parts();
    let counts = count_every(&parts, &model)?;
    let mut sets = sets_of(stores, &parts, &model, &counts, &embedder)?;
    for (name, cases) in &sets {
        let agree = cases
            .iter()
            .filter(|c| {
                let mine = order_by(&first_scores(c, First::Rrf(RRF_K, 1.0)));
                mine.iter().take(10).eq(c.shipped_first.iter().take(10))
            })
            .count();
        eprintln!(
            "{name}: RRF row agrees with search::rank on the top 10 for {agree}/{}",
            cases.len()
        );
    }
    if let Some(path) = features {
        write_features(&path, &sets)?;
    }
    print_grids(&mut sets);
    Ok(())
}

/// Each set's questions as cases, ranked in the stores `stores` asks for.
fn sets_of(
    stores: Stores,
    parts: &[(String, &Indexed)],
    model: &LateInteraction,
    counts: &Counts,
    embedder: &OnnxEmbedder,
) -> Result<Vec<(String, Vec<Case>)>> {
    let mut sets: Vec<(String, Vec<Case>)> = Vec::new();
    match stores {
        Stores::Own => {
            for (name, ix) in parts {
                let cases = cases_of(ix, model, counts)?;
                match sets.iter_mut().find(|(n, _)| n == name) {
                    Some((_, all)) => all.extend(cases),
                    None => sets.push((name.clone(), cases)),
                }
            }
        }
        Stores::Mixed => {
            let mixed = mixed_store(parts, embedder)?;
            let mut cases = cases_of(&mixed.ix, model, counts)?.into_iter();
            for (name, n) in mixed.sets {
                sets.push((name, cases.by_ref().take(n).collect()));
            }
        }
    }
    Ok(sets)
}

/// Every configuration, then every query-token rule, on every set.
fn print_grids(sets: &mut [(String, Vec<Case>)]) {
    println!("config\tset\tr1\tr5\tr10\tmrr\tpool");
    for cfg in grid() {
        print_rows("", &cfg, sets);
    }
    for rule in RULES {
        for (_, cases) in sets.iter_mut() {
            apply_rule(cases, rule);
        }
        for cfg in token_grid() {
            print_rows(&format!("tokens {rule:?} | "), &cfg, sets);
        }
    }
    // The weighing grid with what ships only (the fused 40 + the vector list's first 100).
    for rule in weigh_grid() {
        for (_, cases) in sets.iter_mut() {
            apply_rule(cases, rule);
        }
        print_rows(&format!("tokens {rule:?} | "), &token_grid()[0], sets);
    }
}

fn print_rows(prefix: &str, cfg: &Config, sets: &[(String, Vec<Case>)]) {
    for (name, cases) in sets {
        let (r, pool) = evaluate(cases, cfg);
        println!(
            "{prefix}{:?} | head {} + vectors {} + BM25 {} | {:?}\t{name}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{:.3}",
            cfg.first, cfg.head, cfg.plus_v, cfg.plus_l, cfg.last, r.r1, r.r5, r.r10, r.mrr, pool
        );
    }
}

/// Every candidate's MaxSim recomputed from its per-token matches under `rule`.
fn apply_rule(cases: &mut [Case], rule: Rule) {
    for case in cases {
        let w = [Kind::Exchange, Kind::Note].map(|k| weights_for(rule, &case.tokens, k));
        for c in &mut case.cands {
            c.maxsim = weighted(&c.per_token, &w[c.kind as usize]);
        }
    }
}

/// The configurations each query-token rule is measured with: what ships (the fused 40 and
/// the vector list's first 100), section 7's fixed weight, and the vector list's first
/// 200-400 as candidates.
fn token_grid() -> Vec<Config> {
    let at = |plus_v, last| Config {
        first: First::Daemon,
        head: 40,
        plus_v,
        plus_l: 0,
        last,
    };
    vec![
        at(PLUS_VECTORS, Final::Shipped),
        at(100, Final::Lin(0.05, 0.0)),
        at(160, Final::Shipped),
        at(200, Final::Shipped),
        at(300, Final::Shipped),
        at(400, Final::Shipped),
    ]
}

/// Every candidate's numbers, one tab-separated line each (set, question, category, relevant,
/// cosine, BM25, vector rank, BM25 rank, MaxSim per query token; ranks -1 when unlisted).
fn write_features(path: &std::path::Path, sets: &[(String, Vec<Case>)]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for (name, cases) in sets {
        for (q, case) in cases.iter().enumerate() {
            for c in &case.cands {
                let relevant = c.labels.iter().any(|l| case.evidence.contains(l));
                let r = |x: Option<usize>| x.map_or(-1, |x| x as i64);
                writeln!(
                    out,
                    "{name}\t{q}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    case.category,
                    u8::from(relevant),
                    c.cos,
                    c.bm25,
                    r(c.vrank),
                    r(c.lrank),
                    c.maxsim
                )?;
            }
        }
    }
    Ok(())
}
