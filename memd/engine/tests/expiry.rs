//! Expiry by age through a recoverable state (issue 17: a clock jumped 25 h ahead emptied
//! working memory for good): an expired working memory is archived first, restored when a
//! later pass finds it is not expired after all, and deleted only a week after it expired.

use memd_engine::clock::{DAY_MS, now_ms};
use memd_engine::config::Config;
use memd_engine::core::Core;
use memd_engine::learn::lifecycle::{EXPIRED_AT_KEY, EXPIRED_KEEP_MS};
use memd_engine::state::ops::Op;
use proto::Collection;
use std::sync::Arc;

fn engine() -> (tempfile::TempDir, Arc<Core>) {
    let dir = tempfile::tempdir().unwrap();
    let (core, _) = Core::open(Config::for_dir(dir.path(), 0)).unwrap();
    (dir, Arc::new(core))
}

async fn working(core: &Core, text: &str, created_at: i64) -> String {
    let rec = Core::new_record(Collection::Working, text.into(), created_at);
    core.insert(rec).await.unwrap().0
}

/// (exists, archived, expired_at)
fn state(core: &Core, id: &str) -> (bool, bool, Option<f64>) {
    core.db().read(|s| match s.by_id(id) {
        Some(r) => (
            true,
            r.archived,
            r.metadata.get(EXPIRED_AT_KEY).and_then(|v| v.as_f64()),
        ),
        None => (false, false, None),
    })
}

#[tokio::test]
async fn an_expired_memory_is_archived_first_and_deleted_a_week_later() {
    let (_dir, core) = engine();
    let old = working(
        &core,
        "an exchange from two days ago",
        now_ms() - 2 * DAY_MS,
    )
    .await;
    let fresh = working(&core, "an exchange from just now", now_ms()).await;
    core.run_lifecycle().await.unwrap();
    let (exists, archived, at) = state(&core, &old);
    assert!(exists && archived && at.is_some(), "archived, not deleted");
    assert_eq!(state(&core, &fresh), (true, false, None));
    // Long expired: the next pass deletes it.
    let long_ago = (now_ms() - EXPIRED_KEEP_MS - DAY_MS) as f64;
    let older = working(&core, "an exchange from last month", now_ms() - 30 * DAY_MS).await;
    core.commit_one(Op::SetExpired {
        id: older.clone(),
        at: Some(long_ago as i64),
    })
    .await
    .unwrap();
    core.run_lifecycle().await.unwrap();
    assert!(!state(&core, &older).0, "deleted a week after it expired");
    assert!(state(&core, &old).0, "the two-day-old one is still kept");
}

/// What a clock that jumped ahead leaves behind: a young memory archived as expired. The next
/// pass, with the clock back, restores it.
#[tokio::test]
async fn a_memory_expired_by_a_clock_jump_is_restored() {
    let (_dir, core) = engine();
    let id = working(&core, "an exchange from a minute ago", now_ms() - 60_000).await;
    let jumped = now_ms() + 25 * 3_600_000;
    core.commit_one(Op::SetExpired {
        id: id.clone(),
        at: Some(jumped),
    })
    .await
    .unwrap();
    assert!(state(&core, &id).1, "archived by the jump");
    core.run_lifecycle().await.unwrap();
    assert_eq!(state(&core, &id), (true, false, None), "restored");
}

fn open(dir: &std::path::Path) -> Core {
    Core::open(Config::for_dir(dir, 0)).unwrap().0
}

/// Issue 37: two restarts with the clock ahead (+25 h, then +9 days) deleted all 20 working
/// memories: the guard trusted the wall clock at each start. The time cleanup last went by is
/// kept in the store, so each reopened store goes on from it.
#[tokio::test]
async fn a_clock_ahead_across_two_restarts_expires_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let core = open(dir.path());
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(working(&core, &format!("exchange number {i} of today"), now_ms()).await);
    }
    core.run_lifecycle().await.unwrap();
    let mark = core
        .db()
        .read(|s| s.cleanup_clock)
        .expect("the pass stored its clock");
    assert!(mark.wall <= now_ms());
    core.close().unwrap();
    for ahead in [25 * 3_600_000, 9 * DAY_MS] {
        let core = open(dir.path());
        core.run_lifecycle_with_wall_clock(now_ms() + ahead)
            .await
            .unwrap();
        let kept = core.db().read(|s| {
            ids.iter()
                .filter(|id| s.by_id(id).is_some_and(|r| !r.archived))
                .count()
        });
        assert_eq!(kept, 20, "{ahead} ms ahead");
        let mark = core.db().read(|s| s.cleanup_clock).unwrap();
        assert!(
            mark.wall < now_ms() + 60_000,
            "the stored clock did not jump"
        );
        core.close().unwrap();
    }
    // Real time catches up: the same memories two days on expire as usual.
    let core = open(dir.path());
    let old = working(
        &core,
        "an exchange from two days ago",
        now_ms() - 2 * DAY_MS,
    )
    .await;
    core.run_lifecycle().await.unwrap();
    assert!(state(&core, &old).1, "a truly old memory still expires");
}
