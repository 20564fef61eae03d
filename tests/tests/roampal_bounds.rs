//! Issue 36, item 8: `memd import --from-roampal` on a Roampal data directory someone tampered
//! with. Every file it reads is read within a bound and only when it is a regular file, and an
//! oversized document is one invalid memory (`--skip-invalid` skips it), not the end of every
//! run. Uses the real Roampal 0.6.0 store in `tests/fixtures/roampal`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tests::project::memd_in;

/// How long one import may take here (the fixture imports in a second or two).
const LIMIT: Duration = Duration::from_secs(60);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/roampal")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A private copy of the fixture's data directory under `into/<name>`.
fn store(into: &Path, name: &str) -> PathBuf {
    let data = into.join(name).join("data");
    copy_dir(&fixture().join("store/data"), &data);
    data
}

/// The import, killed if it outlives [`LIMIT`]: (finished in time, success, report, stderr).
fn import(
    d: &tests::Daemon,
    dir: &Path,
    data: &Path,
    args: &[&str],
) -> (bool, bool, Value, String) {
    let out_file = dir.join("report.json");
    let err_file = dir.join("stderr.txt");
    let mut child = memd_in(d, dir)
        .args(["import", "--from-roampal"])
        .arg(data)
        .args(args)
        .args(["--json", "--no-wait"])
        .stdout(std::fs::File::create(&out_file).unwrap())
        .stderr(std::fs::File::create(&err_file).unwrap())
        .spawn()
        .expect("memd import");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > LIMIT {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let report = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap_or(Value::Null);
    let stderr = std::fs::read_to_string(&err_file).unwrap_or_default();
    (
        status.is_some(),
        status.is_some_and(|s| s.success()),
        report,
        stderr,
    )
}

#[test]
fn a_ghost_list_that_is_a_device_or_a_fifo_is_refused_at_once() {
    let d = tests::start_daemon();
    let tmp = tempfile::tempdir().unwrap();
    let zero = store(tmp.path(), "zero");
    std::fs::remove_file(zero.join("ghost_ids.json")).ok();
    std::os::unix::fs::symlink("/dev/zero", zero.join("ghost_ids.json")).unwrap();
    let (in_time, ok, _, err) = import(&d, tmp.path(), &zero, &[]);
    assert!(in_time, "reading /dev/zero did not stop");
    assert!(!ok && err.contains("not a regular file"), "{err}");

    let fifo = store(tmp.path(), "fifo");
    std::fs::remove_file(fifo.join("ghost_ids.json")).ok();
    let made = std::process::Command::new("mkfifo")
        .arg(fifo.join("ghost_ids.json"))
        .status()
        .unwrap();
    assert!(made.success());
    // Nobody writes to the FIFO: a read would wait until the import is killed.
    let (in_time, ok, _, err) = import(&d, tmp.path(), &fifo, &[]);
    assert!(in_time, "the import hung on a FIFO");
    assert!(!ok && err.contains("not a regular file"), "{err}");

    let big = store(tmp.path(), "big");
    let list = format!("{{\"ghost_ids\": [\"{}\"]}}", "x".repeat(17 << 20));
    std::fs::write(big.join("ghost_ids.json"), list).unwrap();
    let (in_time, ok, _, err) = import(&d, tmp.path(), &big, &[]);
    assert!(in_time && !ok && err.contains("larger than"), "{err}");
}

#[test]
fn an_oversized_document_is_one_invalid_memory() {
    let d = tests::start_daemon();
    let tmp = tempfile::tempdir().unwrap();
    let data = store(tmp.path(), "oversized");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("expected.json")).unwrap())
            .unwrap();
    let identity = expected["driver_ids"]["identity"].as_str().unwrap();
    let db = rusqlite::Connection::open(data.join("chromadb/chroma.sqlite3")).unwrap();
    // 3 MB of text in one document (the attack used three of 419 MB).
    db.execute_batch(&format!(
        "UPDATE embedding_metadata SET string_value = printf('%.*c', 3145728, 'x')
         WHERE key = 'chroma:document'
           AND id = (SELECT id FROM embeddings WHERE embedding_id = '{identity}');"
    ))
    .unwrap();
    drop(db);
    let (in_time, ok, _, err) = import(&d, tmp.path(), &data, &[]);
    assert!(in_time && !ok, "{err}");
    assert!(
        err.contains(identity) && err.contains("document") && err.contains("1 MB"),
        "the refusal names the memory, the field and the limit: {err}"
    );
    let (in_time, ok, report, err) = import(&d, tmp.path(), &data, &["--skip-invalid"]);
    assert!(in_time && ok, "--skip-invalid imports the rest: {err}");
    let skipped = report["skipped"].to_string();
    assert!(skipped.contains(identity), "{report}");
    let imported: u64 = report["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["imported"].as_u64().unwrap_or(0))
        .sum();
    assert!(imported > 0, "{report}");
}
