//! A contradicting memory-bank fact supersedes the one it reads like, even when the first is
//! still waiting for its embedding (the daemon embeds in the background, so two facts added
//! back to back used to miss each other: seen in CI as a flaky end-to-end test). Real model,
//! no embedding worker: every fact stays queued for the whole test.

use memd_engine::config::Config;
use memd_engine::core::Core;
use memd_engine::models::embed::{Embed, OnnxEmbedder, RuntimePaths};
use proto::MemoryBankAdd;
use std::sync::Arc;

fn engine_with_model() -> Option<(tempfile::TempDir, Arc<Core>)> {
    if std::env::var("MEMD_SKIP_MODEL_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("skipped: MEMD_SKIP_MODEL_TESTS=1");
        return None;
    }
    let paths = RuntimePaths::resolve();
    paths.check().unwrap_or_else(|e| panic!("{e}"));
    let model: Arc<dyn Embed> = Arc::new(OnnxEmbedder::load(&paths, 2).expect("model"));
    let dir = tempfile::tempdir().unwrap();
    let (core, _) = Core::open(Config::for_dir(dir.path(), 0)).unwrap();
    core.set_embedder(Ok(model));
    Some((dir, Arc::new(core)))
}

async fn add(core: &Arc<Core>, content: &str) -> proto::MemoryBankResponse {
    let req = MemoryBankAdd {
        content: content.into(),
        ..Default::default()
    };
    core.memory_bank_add(&req, None).await.unwrap()
}

#[tokio::test]
async fn a_fact_still_waiting_for_its_embedding_is_superseded_and_restatements_merge() {
    let Some((_dir, core)) = engine_with_model() else {
        return;
    };
    let port = add(&core, "The lantern database listens on port 6543").await;
    let other = add(&core, "The lantern database listens on port 5432").await;
    assert!(
        core.db().read(|s| s.pending_len()) >= 2,
        "nothing embedded yet"
    );
    assert_eq!(other.superseded.as_deref(), Some(port.doc_id.as_str()));
    let old_archived = core
        .db()
        .read(|s| s.by_id(&port.doc_id).map(|r| r.archived));
    assert_eq!(old_archived, Some(true), "the old port is archived, kept");
    // A restatement of the queued fact is the same fact, not a second copy.
    let again = add(&core, "The lantern database is listening on port 5432").await;
    assert!(again.duplicate, "{again:?}");
    assert_eq!(again.doc_id, other.doc_id);
    // Unrelated facts stay apart.
    let unrelated = add(&core, "Deploys go out through the blue-green pipeline").await;
    assert!(!unrelated.duplicate && unrelated.superseded.is_none());
}

/// Issue 37: near duplicates that say the opposite came back as `duplicate: true`. Each now
/// supersedes the fact it contradicts; a true restatement still merges.
#[tokio::test]
async fn near_duplicates_that_say_the_opposite_supersede_the_old_fact() {
    let Some((_dir, core)) = engine_with_model() else {
        return;
    };
    let mut near = 0;
    for (old, new) in [
        (
            "Enable the lantern response cache in staging",
            "Disable the lantern response cache in staging",
        ),
        (
            "The lantern strict_mode flag is true in production",
            "The lantern strict_mode flag is false in production",
        ),
        (
            "Run the lantern migrations before the deploy",
            "Run the lantern migrations after the deploy",
        ),
        (
            "The lantern build works on the ARM runners",
            "The lantern build fails on the ARM runners",
        ),
        (
            "The lantern webhook endpoint is safe to retry",
            "The lantern webhook endpoint is unsafe to retry",
        ),
        (
            "For lantern reads Postgres is faster than MySQL",
            "For lantern reads MySQL is faster than Postgres",
        ),
    ] {
        let first = add(&core, old).await;
        let second = add(&core, new).await;
        assert!(!second.duplicate, "{new:?} merged into {old:?}");
        // Below the duplicate threshold the two simply stand side by side.
        let superseded = second.superseded.as_deref();
        assert!(superseded.is_none_or(|s| s == first.doc_id), "{new:?}");
        near += usize::from(superseded.is_some());
    }
    assert!(
        near >= 4,
        "only {near} pairs read alike: the test no longer tests anything"
    );
    let fact = add(&core, "Staging deploys of lantern need the VPN").await;
    let again = add(&core, "Lantern staging deploys need the VPN").await;
    assert!(again.duplicate && again.doc_id == fact.doc_id, "{again:?}");
}
