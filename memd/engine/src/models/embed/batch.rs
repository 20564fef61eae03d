//! Queries that arrive together are encoded together.
//!
//! Owns the queue of query texts waiting for a model (the embedder's vectors, the
//! late-interaction model's token states): the first caller to get its turn encodes every text
//! queued by then in one run and hands each caller its result (the others find theirs done
//! when their turn comes). With 16 sessions prompting at once this turns 16 runs into a few
//! batched ones, which embed ~1.7x more texts per second on 2 cores (`onnx::MAX_BATCH`).
//! Must never mix results up between callers or lose one on an error: every caller gets its
//! own result or the run's error.

use anyhow::{Result, anyhow};
use std::sync::{Arc, Mutex, PoisonError};

/// One caller's result, filled by whoever ran its batch.
type Slot<T> = Arc<Mutex<Option<Result<T, String>>>>;

/// The queue; one per model. `T` is one text's result (a vector, a query's token states).
pub struct QueryBatch<T = Vec<f32>> {
    pending: Mutex<Vec<(String, Slot<T>)>>,
    /// Held while a batch runs: the callers queued meanwhile form the next one.
    turn: Mutex<()>,
}

impl<T> Default for QueryBatch<T> {
    fn default() -> Self {
        QueryBatch {
            pending: Mutex::default(),
            turn: Mutex::default(),
        }
    }
}

impl<T> QueryBatch<T> {
    /// `text`'s result, computed by `run` (one result per text, in order) in a batch with the
    /// texts other callers queued at the same time, at most `max` per run.
    pub fn encode(
        &self,
        text: &str,
        max: usize,
        run: impl Fn(&[&str]) -> Result<Vec<T>>,
    ) -> Result<T> {
        let slot: Slot<T> = Arc::default();
        lock(&self.pending).push((text.to_string(), slot.clone()));
        let _turn = lock(&self.turn);
        loop {
            if let Some(done) = lock(&slot).take() {
                return done.map_err(|e| anyhow!(e));
            }
            // Our text is still queued: run a batch (it includes ours once the earlier
            // callers' texts, at most `max` each time, have gone).
            let batch: Vec<(String, Slot<T>)> = {
                let mut pending = lock(&self.pending);
                let n = pending.len().min(max.max(1));
                pending.drain(..n).collect()
            };
            let texts: Vec<&str> = batch.iter().map(|(t, _)| t.as_str()).collect();
            match run(&texts) {
                Ok(results) if results.len() == batch.len() => {
                    for ((_, s), r) in batch.iter().zip(results) {
                        *lock(s) = Some(Ok(r));
                    }
                }
                Ok(results) => {
                    let e = format!("{} results for {} texts", results.len(), batch.len());
                    batch
                        .iter()
                        .for_each(|(_, s)| *lock(s) = Some(Err(e.clone())));
                }
                Err(e) => {
                    let e = format!("{e:#}");
                    batch
                        .iter()
                        .for_each(|(_, s)| *lock(s) = Some(Err(e.clone())));
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A stand-in model: the vector of a text is [its length, the run's size].
    fn fake(runs: &AtomicUsize, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| vec![t.len() as f32, texts.len() as f32])
            .collect())
    }

    #[test]
    fn a_lone_query_runs_alone() {
        let (q, runs) = (QueryBatch::<Vec<f32>>::default(), AtomicUsize::new(0));
        let v = q.encode("abc", 8, |t| fake(&runs, t)).unwrap();
        assert_eq!(v, vec![3.0, 1.0]);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn queries_queued_during_a_run_share_the_next_one_and_get_their_own_vectors() {
        let q = Arc::new(QueryBatch::<Vec<f32>>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        // Hold the turn so the callers queue up behind it, as they do behind a running batch.
        let turn = lock(&q.turn);
        let callers: Vec<_> = (1..=5)
            .map(|n| {
                let (q, runs) = (q.clone(), runs.clone());
                std::thread::spawn(move || q.encode(&"x".repeat(n), 8, |t| fake(&runs, t)))
            })
            .collect();
        while lock(&q.pending).len() < 5 {
            std::thread::yield_now();
        }
        drop(turn);
        for (n, c) in (1..=5).zip(callers) {
            let v = c.join().unwrap().unwrap();
            assert_eq!(
                v,
                vec![n as f32, 5.0],
                "caller {n} got its own text's vector"
            );
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "one run for the five");
    }

    #[test]
    fn batches_are_capped_and_errors_reach_every_caller_of_the_run() {
        let q = QueryBatch::<Vec<f32>>::default();
        lock(&q.pending).push(("queued earlier".into(), Arc::default()));
        let runs = AtomicUsize::new(0);
        // Cap 1: the earlier text runs first, then ours.
        let v = q.encode("ours", 1, |t| fake(&runs, t)).unwrap();
        assert_eq!(v, vec![4.0, 1.0]);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        let err = q
            .encode("x", 8, |_| Err(anyhow!("model gone")))
            .unwrap_err();
        assert!(err.to_string().contains("model gone"), "{err}");
    }
}
