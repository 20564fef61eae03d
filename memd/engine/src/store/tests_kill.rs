//! Process-death test: a child process commits from 8 threads and is killed with SIGKILL.
//!
//! Owns the one test that crosses a real process boundary: the test binary re-runs itself as
//! the child (an ignored test that only acts when told to through an environment variable),
//! prints each acknowledged op, and the parent checks every acknowledged op survives. Must never
//! run the child's endless commit loop in an ordinary test run.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread;

use super::test_machine::{entries, open};

const CHILD_DIR_ENV: &str = "MEMD_STORE_TEST_CHILD_DIR";
const THREADS: usize = 8;
const ACKS_BEFORE_KILL: usize = 300;

/// The child side: commits `<thread>:<n>` forever, printing `ack <thread>:<n>` once durable.
#[test]
#[ignore]
fn child_commits_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let (store, _) = open(std::path::Path::new(&dir));
    let store = Arc::new(store);
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for n in 0.. {
                    let op = format!("{t}:{n}");
                    store.commit(vec![op.clone()]).unwrap();
                    println!("ack {op}");
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.join();
    }
}

#[test]
fn acknowledged_commits_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let test_name = module_path!()
        .split_once("::")
        .map_or("", |(_, rest)| rest)
        .to_owned()
        + "::child_commits_until_killed";
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([&test_name, "--exact", "--ignored", "--nocapture"])
        .env(CHILD_DIR_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(op) = line.strip_prefix("ack ") {
            acked.push(op.to_owned());
            if acked.len() == ACKS_BEFORE_KILL {
                break;
            }
        }
    }
    assert_eq!(acked.len(), ACKS_BEFORE_KILL, "child stopped early");
    child.kill().unwrap();
    child.wait().unwrap();

    let (store, _) = open(dir.path());
    let log = entries(&store);
    let position: BTreeMap<&str, usize> = log
        .iter()
        .enumerate()
        .map(|(i, op)| (op.as_str(), i))
        .collect();
    assert_eq!(position.len(), log.len(), "no op applied twice");
    for op in &acked {
        assert!(position.contains_key(op.as_str()), "acknowledged {op} lost");
    }
    let mut next_per_thread = BTreeMap::new();
    for op in &log {
        let (t, n) = op.split_once(':').unwrap();
        let n: u64 = n.parse().unwrap();
        let expected = next_per_thread.entry(t.to_owned()).or_insert(0);
        assert_eq!(n, *expected, "thread {t}'s ops are contiguous");
        *expected += 1;
    }
}
