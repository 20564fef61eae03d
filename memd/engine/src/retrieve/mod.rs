//! The one retrieval pipeline: prompts (get-context), searches (`/api/search`, MCP `search`)
//! and the dashboard all find memories through it.
//!
//! Stages, in order: the query's encodings (its embedding and its late-interaction states,
//! computed in parallel: `encode`; a prompt waits for the late states only after the first
//! stage, and not when its head has fewer than two candidates) → the first stage (vectors + BM25, fused, filtered; when
//! reranking, the vector list's first `VECTOR_CANDIDATES` join the fused head) with the
//! candidates' views, taken under one short read of the store (`first_stage`) → late
//! interaction over all of them → the optional cross-encoder over the best of that
//! (`second_stage`) → the caller's cut. Everything after the first stage works on that
//! snapshot, outside the store lock, so reranking never holds up a commit or another reader.
//!
//! Owns the candidate snapshot and the stages' order; the callers own what may be a candidate
//! (filters, relevance floor) and where to cut. Must never write, never call a model while
//! holding the store lock, and never fail a read because a model is missing, failing or late:
//! the fused order is always an answer.

mod encode;
mod second;

pub use encode::{Encoded, LateWait, PromptEncoding, encode, encode_prompt, late_for_head};
pub use second::{
    COSINE_GAP_SCALE, COSINE_WEIGHT_MAX, LATE_SCORE, LateScore, Second, SecondReport,
    cosine_weight, second_stage,
};

use crate::search::{self, Hit, Query, Ranking};
use crate::state::MemState;
use proto::MemoryView;

/// One memory found by the first stage: how it ranked, and the normalized shape every read
/// returns (its text is what the second stage scores).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub hit: Hit,
    pub view: MemoryView,
    /// The text the indexes read (`indexed_text::of`) when it is not the view's content (an
    /// exchange's date and content): what late interaction's token states were made of.
    pub indexed: Option<String>,
}

impl Candidate {
    pub fn key(&self) -> u64 {
        self.hit.key
    }

    /// A candidate for `hit`, when its record still exists.
    pub fn of(s: &MemState, hit: Hit, now: i64) -> Option<Candidate> {
        let r = s.by_key(hit.key)?;
        let view = search::view(r, now, Some(&hit));
        let indexed = crate::indexed_text::differing(r);
        Some(Candidate { hit, view, indexed })
    }

    /// The text the indexes read for this memory (`indexed_text::of`); shown is `view.content`.
    pub fn indexed_text(&self) -> &str {
        self.indexed.as_deref().unwrap_or(&self.view.content)
    }
}

/// When late interaction reranks, the memories of the vector list's first this many join the
/// fused head as its candidates: BM25 pushes paraphrased answers out of the fused 40, and the
/// reranker can only reorder what it is given. `memd-eval fusion` (bench/EVAL.md section 11):
/// an answer among the candidates for 0.854 → 0.926 of LoCoMo's questions (holdout set 0.923
/// → 0.985); after late interaction LoCoMo R@5 0.722 → 0.737, R@10 0.784 → 0.807. 60 gave
/// 0.901 and R@10 0.803, 160 0.954 and 0.811. Costs MaxSim over ~70 more memories
/// (~0.8 ms), less on the prompt path where the relevance floor drops most of them.
pub const VECTOR_CANDIDATES: usize = 100;

/// What the first stage ranks: the validated query, its text and embedding, the signals.
pub struct FirstStage<'a> {
    pub query: &'a Query,
    pub text: &'a str,
    pub vector: Option<&'a [f32]>,
    pub ranking: &'a Ranking,
    /// Candidates of the vector list's first this many join the head (after it, in fused
    /// order): `VECTOR_CANDIDATES` when late interaction will rerank them, else 0.
    pub vector_extra: usize,
}

/// The first `depth` fused candidates that `keep` admits, in the query's `sort_by` order
/// (relevance: the fused order), then those among the vector list's first
/// `stage.vector_extra` that the head left out, with their views: the snapshot the rest of
/// the pipeline works on. Runs under the caller's read of the store (index lookups and a view
/// per candidate, no model).
pub fn first_stage(
    s: &MemState,
    stage: &FirstStage,
    depth: usize,
    keep: impl Fn(&Hit) -> bool,
    now: i64,
) -> Vec<Candidate> {
    // `rank` lists 4 × `want` of each signal.
    let want = depth.max(stage.vector_extra.div_ceil(4));
    let mut hits: Vec<Hit> = search::rank(
        s,
        stage.query,
        stage.text,
        stage.vector,
        stage.ranking,
        want,
    )
    .into_iter()
    .filter(|h| keep(h))
    .collect();
    search::sort_hits(s, &mut hits, stage.query.sort_by);
    let joins = |h: &Hit| h.vector_rank.is_some_and(|r| r < stage.vector_extra);
    let (head, rest) = hits.split_at(hits.len().min(depth));
    head.iter()
        .chain(rest.iter().filter(|h| joins(h)))
        .filter_map(|h| Candidate::of(s, h.clone(), now))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::state::ops::{Op, Output};
    use crate::store::Machine;

    const DIMS: usize = 384;

    /// A unit vector at cosine `cos` from the query (axis 0), off along its own axis.
    fn at(cos: f32, axis: usize) -> Vec<f32> {
        let mut v = vec![0.0; DIMS];
        v[0] = cos;
        v[axis] = (1.0 - cos * cos).sqrt();
        v
    }

    fn add(s: &mut MemState, text: &str, vector: &[f32]) -> u64 {
        let rec = Record::new(proto::Collection::MemoryBank, text.into(), 0);
        let Output::Inserted { key, .. } = s.apply(&Op::Insert(Box::new(rec))) else {
            panic!("insert")
        };
        s.apply(&Op::vector(key, vector));
        key
    }

    /// Two notes sharing the query's word fill a fused head of 2; the vector list's next
    /// notes join it only when asked for, and only as far as asked, after the head.
    #[test]
    fn the_vector_lists_first_join_the_fused_head_when_asked() {
        let mut s = MemState::new(DIMS).unwrap();
        let shared = [
            add(&mut s, "the staging cluster config", &at(0.9, 1)),
            add(&mut s, "the cluster runs nightly", &at(0.8, 2)),
        ];
        let answer = add(&mut s, "billing deploys to Kubernetes", &at(0.7, 3));
        let further = add(&mut s, "lint before commit", &at(0.6, 4));
        let query = Query {
            limit: 2,
            ..Query::default()
        };
        let mut qvec = vec![0.0; DIMS];
        qvec[0] = 1.0;
        let ranking = Ranking::default();
        let keys = |vector_extra| -> Vec<u64> {
            let stage = FirstStage {
                query: &query,
                text: "which cluster",
                vector: Some(&qvec),
                ranking: &ranking,
                vector_extra,
            };
            first_stage(&s, &stage, 2, |_| true, 0)
                .iter()
                .map(Candidate::key)
                .collect()
        };
        assert_eq!(keys(0), shared);
        assert_eq!(keys(3), [shared[0], shared[1], answer]);
        assert_eq!(keys(4), [shared[0], shared[1], answer, further]);
    }

    /// An exchange is shown as its text but scored by the text its token states were made of
    /// (the planner's), so late interaction finds its states.
    #[test]
    fn an_exchange_candidate_reads_the_text_its_states_were_made_of() {
        let mut s = MemState::new(DIMS).unwrap();
        // 2023-05-08 13:56 UTC.
        let mut rec = Record::new(
            proto::Collection::Working,
            "User: hi".into(),
            1_683_554_160_000,
        );
        rec.metadata
            .insert("memory_type".into(), proto::Value::from("exchange"));
        let Output::Inserted { key, .. } = s.apply(&Op::Insert(Box::new(rec))) else {
            panic!("insert")
        };
        let hit = Hit {
            key,
            similarity: None,
            vector_rank: None,
            lexical: None,
            rank_score: 1.0,
            weight: 1.0,
        };
        let c = Candidate::of(&s, hit, 0).unwrap();
        assert_eq!(c.view.content, "User: hi");
        assert_eq!(c.indexed_text(), "[8 May 2023] User: hi");
        let plan = crate::models::late_plan::plan(&Default::default(), &s, usize::MAX);
        assert_eq!(plan.todo, [(key, c.indexed_text().to_string())]);
    }
}
