//! `--synthetic-bulk`: fills a stopped daemon's data directory offline with the memd library,
//! so large sizes can be measured without an hour of embedding.
//!
//! What it writes is exactly what the daemon would: `Op::Insert` of records made by
//! `Core::new_record` (working memories shaped like `/api/record-response` takeaways) and
//! `Op::vector` for each, committed through `memd_engine::store::Store` into the real state machine,
//! then closed (snapshot + vector index file). What is synthetic is only the vectors of the
//! bulk: a pool of texts is embedded for real with memd's own model, and every bulk record is a
//! variant of one pool text whose vector is that text's real embedding plus Gaussian noise
//! (cosine ≈ 0.86 to it), renormalised. Must never run while a daemon holds the directory (the
//! store lock refuses) and never add an API or hidden path to the product.
//! `Bench::offline_store` is the one way a phase gets such a store, started and embedded.

use super::corpus::Corpus;
use super::daemon::{Daemon, Instance};
use super::report::size_label;
use anyhow::{Context, Result, anyhow, bail};
use memd_engine::core::Core;
use memd_engine::models::embed::{DIMS, Embed, OnnxEmbedder, RuntimePaths};
use memd_engine::state::MemState;
use memd_engine::state::ops::{Op, Output};
use memd_engine::store::Store;
use proto::{Collection, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};

/// Records per store commit (one WAL frame of inserts, then one of vectors).
const BATCH: usize = 512;
/// Per-component noise added to a pool vector (384-d: cosine to the base ≈ 1/√(1+384σ²) ≈ 0.86).
const NOISE_SIGMA: f32 = 0.03;

/// What an offline fill did.
pub struct Bulk {
    pub added: usize,
    /// Records whose vector is the real embedding of their own text.
    pub real: usize,
    /// Records whose vector is a perturbed copy of a pool text's embedding.
    pub synthetic: usize,
    pub embed_time: Duration,
    pub total_time: Duration,
}

/// Adds `add` records to the store in `data_dir/store` (creating it if needed). The first
/// `min(pool, add)` records get real embeddings; the rest are synthetic variants.
pub fn append(
    data_dir: &Path,
    runtime_dir: &Path,
    add: usize,
    pool: usize,
    corpus: &mut Corpus,
    seed: u64,
) -> Result<Bulk> {
    let started = Instant::now();
    let pool = pool.clamp(1, add.max(1));
    let pool_texts: Vec<String> = (0..pool).map(|_| corpus.takeaway()).collect();
    let embed_started = Instant::now();
    let pool_vecs = embed_all(runtime_dir, &pool_texts)?;
    let embed_time = embed_started.elapsed();
    eprintln!(
        "  embedded {} pool texts in {:.1} s",
        pool,
        embed_time.as_secs_f64()
    );
    let store_dir = data_dir.join("store");
    let (store, _) = Store::open(&store_dir, MemState::new(DIMS)?)
        .map_err(|e| anyhow!("opening {}: {e}", store_dir.display()))?;
    let mut rng = StdRng::seed_from_u64(seed);
    let now = memd_engine::clock::now_ms();
    let mut done = 0usize;
    while done < add {
        let n = BATCH.min(add - done);
        let mut vectors = Vec::with_capacity(n);
        let mut inserts = Vec::with_capacity(n);
        for i in done..done + n {
            let (text, v) = if i < pool {
                (pool_texts[i].clone(), pool_vecs[i].clone())
            } else {
                let j = rng.random_range(0..pool);
                let text = format!(
                    "{} Seen again in run {i} of the {} job.",
                    pool_texts[j],
                    ["nightly", "release", "canary", "backfill"][i % 4]
                );
                (text, perturb(&pool_vecs[j], &mut rng))
            };
            inserts.push(Op::Insert(Box::new(takeaway_record(text, now, i))));
            vectors.push(v);
        }
        let outputs = store
            .commit(inserts)
            .map_err(|e| anyhow!("committing inserts: {e}"))?;
        let ops = outputs
            .into_iter()
            .zip(vectors)
            .map(|(out, vector)| match out {
                Output::Inserted { key, .. } => Ok(Op::vector(key, &vector)),
                other => Err(anyhow!("insert not stored: {other:?}")),
            })
            .collect::<Result<Vec<Op>>>()?;
        store
            .commit(ops)
            .map_err(|e| anyhow!("committing vectors: {e}"))?;
        done += n;
        if done % 10_000 < BATCH || done == add {
            eprintln!(
                "  offline fill: {done}/{add} records ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
    }
    store
        .close()
        .map_err(|e| anyhow!("closing the store (snapshot): {e}"))?;
    Ok(Bulk {
        added: add,
        real: pool.min(add),
        synthetic: add.saturating_sub(pool),
        embed_time,
        total_time: started.elapsed(),
    })
}

/// A working-memory takeaway as `/api/record-response` stores it.
fn takeaway_record(text: String, now: i64, i: usize) -> memd_engine::record::Record {
    let mut rec = Core::new_record(Collection::Working, text, now);
    rec.metadata
        .insert("memory_type".into(), Value::from("key_takeaway"));
    rec.metadata.insert(
        "conversation_id".into(),
        Value::from(format!("bench-bulk-{}", i % 97)),
    );
    rec
}

/// Real embeddings with memd's own model and runtime, one text per call as the daemon does.
fn embed_all(runtime_dir: &Path, texts: &[String]) -> Result<Vec<Vec<f32>>> {
    let paths = RuntimePaths::in_runtime_dir(runtime_dir);
    paths
        .check()
        .map_err(|e| anyhow!("embedding runtime missing: {e}"))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let model = OnnxEmbedder::load(&paths, threads).context("loading the embedding model")?;
    let mut out = Vec::with_capacity(texts.len());
    for t in texts {
        let v = model
            .embed(&[t.as_str()])?
            .pop()
            .ok_or_else(|| anyhow!("model returned no vector"))?;
        if v.len() != DIMS {
            bail!("model returned {} dimensions, expected {DIMS}", v.len());
        }
        out.push(v);
    }
    Ok(out)
}

/// `base` plus N(0, σ²) per component, renormalised to unit length.
fn perturb(base: &[f32], rng: &mut StdRng) -> Vec<f32> {
    let mut v: Vec<f32> = base
        .iter()
        .map(|x| x + NOISE_SIGMA * gaussian(rng))
        .collect();
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// Standard normal sample (Box–Muller).
fn gaussian(rng: &mut StdRng) -> f32 {
    let u1: f32 = rng.random_range(f32::MIN_POSITIVE..1.0);
    let u2: f32 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
}

impl super::Bench {
    /// A fresh instance `<phase>-<size>` holding `size` memories built offline from `corpus`,
    /// started and fully embedded, with the label its figures carry (`10k-syn` when synthetic
    /// vectors are in it: such sizes are named apart from fully real ones) and what was built.
    pub(crate) fn offline_store(
        &self,
        phase: &str,
        size: usize,
        corpus: &mut Corpus,
        seed: u64,
        settle: std::time::Duration,
    ) -> Result<(Instance, Daemon, String, Bulk)> {
        let size_name = size_label(size);
        let inst = self.instance(&format!("{phase}-{size_name}"))?;
        let bulk = append(
            &inst.data_dir(),
            &self.runtime_dir,
            size,
            self.opts.real_pool,
            corpus,
            seed,
        )?;
        let label = if bulk.synthetic > 0 {
            format!("{size_name}-syn")
        } else {
            size_name
        };
        let d = inst.start(true)?;
        d.wait_embedded(settle)?;
        Ok((inst, d, label, bulk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perturbed_vectors_are_unit_and_near_their_base() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut base: Vec<f32> = (0..DIMS).map(|_| gaussian(&mut rng)).collect();
        let n = base.iter().map(|x| x * x).sum::<f32>().sqrt();
        base.iter_mut().for_each(|x| *x /= n);
        let v = perturb(&base, &mut rng);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
        let cos: f32 = v.iter().zip(&base).map(|(a, b)| a * b).sum();
        assert!((0.8..0.92).contains(&cos), "cos {cos}");
    }
}
