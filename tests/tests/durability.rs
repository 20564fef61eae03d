//! Durability against a real daemon process: SIGKILL under load, SIGTERM, the data-dir lock.

use proto::*;
use rand::Rng;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tests::Daemon;

/// Writes from `clients` threads until the daemon dies; returns every acknowledged (id, text).
fn write_until_killed(d: &mut Daemon, clients: usize, kill_after: usize) -> Vec<(String, String)> {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (port, token) = (d.port, d.token.clone());
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (acked, stop, token) = (acked.clone(), stop.clone(), token.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(std::time::Duration::from_secs(10)))
                    .build()
                    .into();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let text = format!("client {c} write {i}: note {}", rand::random::<u64>());
                    let r = agent
                        .post(&format!("http://127.0.0.1:{port}/api/record-response"))
                        .header("authorization", &format!("Bearer {token}"))
                        .send_json(json!({"key_takeaway": text}));
                    match r {
                        Ok(mut resp) if resp.status().as_u16() == 200 => {
                            let body: RecordResponseResponse =
                                resp.body_mut().read_json().expect("json");
                            acked.lock().unwrap().push((body.doc_id, text));
                        }
                        _ => return, // the daemon is gone
                    }
                }
            })
        })
        .collect();
    loop {
        if acked.lock().unwrap().len() >= kill_after {
            break;
        }
        std::thread::yield_now();
    }
    d.kill9();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    Arc::try_unwrap(acked).unwrap().into_inner().unwrap()
}

fn assert_all_present(d: &Daemon, acked: &[(String, String)]) {
    for (id, text) in acked {
        let r: SearchResponse = d.post("/api/search", &json!({"id": id}));
        assert_eq!(r.count, 1, "acknowledged write {id} lost");
        assert_eq!(&r.results[0].content, text);
    }
}

#[test]
fn acknowledged_writes_survive_sigkill_at_random_moments() {
    let rounds: usize = std::env::var("MEMD_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let mut d = tests::start_daemon();
    let mut all = Vec::new();
    let mut rng = rand::rng();
    for round in 0..rounds {
        let kill_after = rng.random_range(5..120);
        let acked = write_until_killed(&mut d, 4, kill_after);
        assert!(acked.len() >= kill_after);
        all.extend(acked);
        d.spawn(&[]);
        assert_all_present(&d, &all);
        // Writes in flight at the kill may have landed without their answer: at most one per
        // client per round beyond the acknowledged ones, never fewer.
        let h: HealthResponse = d.get("/api/health");
        let stored = h.counts["working"];
        assert!(
            stored >= all.len() && stored <= all.len() + 4 * (round + 1),
            "round {round}: {stored} stored, {} acknowledged",
            all.len()
        );
    }
    eprintln!(
        "survived {rounds} SIGKILL rounds with {} acknowledged writes",
        all.len()
    );
}

#[test]
fn sigterm_finishes_cleanly_and_restart_keeps_everything() {
    let mut d = tests::start_daemon();
    let acked: Vec<RecordResponseResponse> = (0..20)
        .map(|i| {
            d.post(
                "/api/record-response",
                &json!({"key_takeaway": format!("takeaway {i}")}),
            )
        })
        .collect();
    assert!(d.terminate(), "clean exit on SIGTERM");
    assert!(d.log_text().contains("stopped"), "{}", d.log_text());
    d.spawn(&[]);
    for a in &acked {
        let r: SearchResponse = d.post("/api/search", &json!({"id": a.doc_id}));
        assert_eq!(r.count, 1);
    }
}

/// A SIGTERM that arrives while the model is still loading (the loader holds the core) must
/// still end in a final snapshot, not skip it.
#[test]
fn sigterm_during_model_load_still_takes_the_final_snapshot() {
    let mut d = tests::start_daemon();
    let _: RecordResponseResponse = d.post(
        "/api/record-response",
        &json!({"key_takeaway": "stored while the model loads"}),
    );
    let health: serde_json::Value = d.get("/api/health");
    if health["model_loaded"] == true {
        eprintln!("note: the model had already loaded; this run checks a plain shutdown");
    }
    assert!(d.terminate(), "clean exit; log: {}", d.log_text());
    let log = d.log_text();
    assert!(!log.contains("skipping the final snapshot"), "{log}");
    let snapshots = std::fs::read_dir(d.data_dir().join("store"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("snapshot."))
        .count();
    assert!(snapshots > 0, "no snapshot written; log: {log}");
}

#[test]
fn a_second_daemon_on_the_same_data_dir_refuses_to_start() {
    let d = tests::start_daemon();
    let out = std::process::Command::new(tests::bin("memd"))
        .arg("serve")
        .env("MEMD_PORT", "0")
        .envs(d.env())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already"), "{err}");
    // the first one is unaffected
    assert_eq!(d.get_raw("/api/health", false).0, 200);
}

fn newest_wal(dir: &std::path::Path) -> std::path::PathBuf {
    let mut wals: Vec<_> = std::fs::read_dir(dir.join("store"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("wal.") && !n.contains("discarded"))
        })
        .collect();
    wals.sort();
    wals.pop().expect("a WAL segment")
}

#[test]
fn torn_and_corrupt_wal_tails_recover_after_a_crash() {
    let mut d = tests::start_daemon();
    let acked: Vec<RecordResponseResponse> = (0..30)
        .map(|i| {
            d.post(
                "/api/record-response",
                &json!({"key_takeaway": format!("durable note {i}")}),
            )
        })
        .collect();
    d.kill9();
    // A torn tail: half a frame header, as a crash in the middle of an append leaves it.
    let wal = newest_wal(&d.data_dir());
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[0x40, 0x00]);
    std::fs::write(&wal, &bytes).unwrap();
    d.spawn(&[]);
    for a in &acked {
        let r: SearchResponse = d.post("/api/search", &json!({"id": a.doc_id}));
        assert_eq!(r.count, 1, "{} lost after a torn tail", a.doc_id);
    }
    assert!(
        d.log_text().contains("torn"),
        "recovery says what it did: {}",
        d.log_text()
    );
    // A corrupt tail: a complete frame whose checksum is wrong.
    let more: RecordResponseResponse = d.post(
        "/api/record-response",
        &json!({"key_takeaway": "after the first crash"}),
    );
    d.kill9();
    let wal = newest_wal(&d.data_dir());
    let mut bytes = std::fs::read(&wal).unwrap();
    let garbage = [16u8, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef];
    bytes.extend_from_slice(&garbage);
    bytes.extend_from_slice(&[7u8; 16]);
    std::fs::write(&wal, &bytes).unwrap();
    d.spawn(&[]);
    for id in acked.iter().map(|a| &a.doc_id).chain([&more.doc_id]) {
        let r: SearchResponse = d.post("/api/search", &json!({"id": id}));
        assert_eq!(r.count, 1, "{id} lost after a corrupt tail");
    }
    assert!(d.log_text().contains("corrupt"), "{}", d.log_text());
    // and the store takes writes again
    let _: RecordResponseResponse = d.post(
        "/api/record-response",
        &json!({"key_takeaway": "still writable"}),
    );
}

/// Issue 17: deleting the data dir under a running daemon lost every later write while the
/// API answered success. Writes are refused with 503 instead; the hooks stay fail-open.
#[test]
fn a_deleted_data_dir_refuses_writes_instead_of_losing_them() {
    let d = tests::start_daemon();
    let (s, _) = d.post_raw(
        "/api/memory-bank/add",
        json!({"content": "written before the data dir went away"})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(s, 200);
    std::fs::remove_dir_all(d.data_dir()).unwrap();
    let (s, body) = d.post_raw(
        "/api/memory-bank/add",
        json!({"content": "written after the data dir went away"})
            .to_string()
            .as_bytes(),
        true,
    );
    assert_eq!(s, 503, "{body}");
    assert!(body.contains("deleted"), "{body}");
    let stdin = json!({"session_id": "gone", "transcript_path": "/nonexistent", "cwd": "/p",
        "hook_event_name": "Stop", "stop_hook_active": false});
    let (code, out, _, _) =
        tests::run_hook("hook-stop", &[], stdin.to_string().as_bytes(), &d.env());
    assert_eq!((code, out.as_str()), (0, ""), "the hook fails open");
}
