//! A full disk under a real daemon: the store directory is a small tmpfs that the test fills.
//!
//! While the disk is full, writes must answer 507 (or 503) with a message that says so, reads
//! must keep working, and nothing half-written may survive; once space returns writes succeed
//! again, and after a restart (from the WAL alone, or after a shutdown whose snapshot failed)
//! every acknowledged write is present and nothing else is.
//!
//! Mounting a tmpfs needs root (CAP_SYS_ADMIN). Without it each test prints `SKIPPED` with the
//! reason and passes: the environment, not memd, is what is missing.

use serde_json::{Value, json};
use std::ffi::CString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tests::Daemon;

/// A tmpfs mounted on `<data dir>/store`; unmounted (and the daemon's dirs removed) on drop. Declare
/// it before the daemon so the daemon is killed first.
struct StoreMount {
    point: PathBuf,
    /// The daemon's root dir (data, config, home, log), removed on drop.
    root: PathBuf,
}

impl StoreMount {
    fn new(data_dir: &Path, bytes: usize) -> Result<StoreMount, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: mounting a tmpfs needs CAP_SYS_ADMIN".into());
        }
        let point = data_dir.join("store");
        std::fs::create_dir_all(&point).map_err(|e| e.to_string())?;
        let c = |s: &str| CString::new(s).map_err(|e| e.to_string());
        let (src, target, fstype) = (c("tmpfs")?, c(&point.display().to_string())?, c("tmpfs")?);
        let opts = c(&format!("size={bytes},mode=0700"))?;
        // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "mount tmpfs failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(StoreMount {
            point,
            root: data_dir.parent().unwrap_or(data_dir).to_path_buf(),
        })
    }

    /// Writes a filler file until the filesystem refuses (ENOSPC); returns its size.
    fn fill(&self) -> u64 {
        let path = self.point.join("filler");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("filler");
        let mut written = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        for chunk in [256 * 1024, 4096, 512, 1] {
            let buf = vec![0x5a; chunk];
            while f.write_all(&buf).is_ok() {
                written += chunk as u64;
            }
        }
        f.sync_all().ok();
        written
    }

    fn free(&self) {
        std::fs::remove_file(self.point.join("filler")).expect("remove filler");
    }
}

impl Drop for StoreMount {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.point.display().to_string()) {
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        std::fs::remove_dir_all(&self.root).ok();
    }
}

/// A daemon whose store lives on a fresh tmpfs of `bytes`, or the reason it cannot.
fn daemon_on_tmpfs(bytes: usize) -> Result<(StoreMount, Daemon), String> {
    let dir = tempfile::Builder::new()
        .prefix("memd-diskfull")
        .tempdir()
        .map_err(|e| e.to_string())?
        // StoreMount removes it after unmounting.
        .keep();
    let mount = StoreMount::new(&dir.join("data"), bytes)?;
    let spec = tests::Spec {
        root: Some(dir),
        ..tests::Spec::new()
    };
    let d = Daemon::start(spec).map_err(|e| e.to_string())?;
    Ok((mount, d))
}

/// What the test knows was stored: working-side memories (id → content when the test knows
/// the exact stored text), memory_bank ids and book chunks.
#[derive(Default)]
struct Acked {
    working: Vec<(String, Option<String>)>,
    bank: Vec<String>,
    book_chunks: usize,
}

/// One takeaway write: `Some(true)` stored, `Some(false)` refused for lack of space.
fn write_takeaway(d: &Daemon, acked: &mut Acked, n: usize, refusals: &mut Vec<String>) -> bool {
    let content = format!(
        "takeaway {n}: {}",
        "disk full tests keep every acknowledged write ".repeat(12)
    );
    let content: String = content
        .chars()
        .take(590)
        .collect::<String>()
        .trim()
        .to_string();
    let (status, body) = d.post_raw(
        "/api/record-response",
        json!({"key_takeaway": content}).to_string().as_bytes(),
        true,
    );
    match status {
        200 => {
            let v: Value = serde_json::from_str(&body).expect("answer");
            acked.working.push((
                v["doc_id"].as_str().expect("doc_id").to_string(),
                Some(content),
            ));
            true
        }
        507 | 503 => {
            refusals.push(body);
            false
        }
        other => panic!("write {n}: unexpected {other}: {body}"),
    }
}

fn assert_refusal_is_clear(body: &str) {
    let v: Value = serde_json::from_str(body).expect("error body is JSON");
    let msg = v["error"].as_str().unwrap_or_default().to_lowercase();
    assert!(
        msg.contains("storage full") || msg.contains("no space") || msg.contains("read-only"),
        "{body}"
    );
}

/// Any other write while the disk is full: 200 (it fit in space the store already owned, and
/// is then durable) or a clear 507/503. Returns true once it was refused.
fn other_write(d: &Daemon, acked: &mut Acked, path: &str, body: &Value) -> bool {
    let (status, text) = d.post_raw(path, body.to_string().as_bytes(), true);
    let v: Value = serde_json::from_str(&text).unwrap_or_default();
    match status {
        200 if path == "/api/memory-bank/add" => acked
            .bank
            .push(v["doc_id"].as_str().unwrap_or_default().into()),
        200 if path == "/api/hooks/stop" => acked
            .working
            .push((v["doc_id"].as_str().unwrap_or_default().into(), None)),
        200 if path == "/api/ingest" => {
            acked.book_chunks += v["chunks"].as_u64().unwrap_or(0) as usize
        }
        507 | 503 => {
            assert_refusal_is_clear(&text);
            return true;
        }
        other => panic!("{path} while full → {other}: {text}"),
    }
    false
}

/// Every acknowledged write is present (with its exact content where known), and the store
/// holds nothing else: no half-written or refused record.
fn assert_exactly_acked(d: &Daemon, acked: &Acked) {
    for (id, content) in &acked.working {
        let r: proto::SearchResponse = d.post("/api/search", &json!({"id": id}));
        assert_eq!(r.count, 1, "{id} lost");
        if let Some(content) = content {
            assert_eq!(&r.results[0].content, content, "{id} changed");
        }
    }
    for id in &acked.bank {
        let r: proto::SearchResponse = d.post("/api/search", &json!({"id": id}));
        assert_eq!(r.count, 1, "{id} lost");
    }
    let health: proto::HealthResponse = d.get("/api/health");
    let count = |c: &str| health.counts.get(c).copied().unwrap_or(0);
    let learned = count("working") + count("history") + count("patterns");
    assert_eq!(
        learned,
        acked.working.len(),
        "exactly the acknowledged writes: {:?}",
        health.counts
    );
    assert_eq!(
        count("memory_bank"),
        acked.bank.len(),
        "{:?}",
        health.counts
    );
    assert_eq!(count("books"), acked.book_chunks, "{:?}", health.counts);
}

#[test]
fn full_disk_refuses_writes_cleanly_and_keeps_every_acknowledged_one() {
    let (mount, mut d) = match daemon_on_tmpfs(16 << 20) {
        Ok(x) => x,
        Err(why) => return eprintln!("SKIPPED full_disk test: {why}"),
    };
    let mut acked = Acked::default();
    let mut refusals = Vec::new();
    for n in 0..20 {
        assert!(
            write_takeaway(&d, &mut acked, n, &mut refusals),
            "disk not full yet"
        );
    }
    let filled = mount.fill();
    // A few small frames can still fit in pages the WAL already owns; then the disk is full.
    let mut n = 20;
    while refusals.len() < 5 {
        write_takeaway(&d, &mut acked, n, &mut refusals);
        n += 1;
        assert!(n < 200, "no write was refused after filling {filled} bytes");
    }
    for body in &refusals {
        assert_refusal_is_clear(body);
    }
    let other_writes = [
        (
            "/api/memory-bank/add",
            json!({"content": "a fact written while the disk is full"}),
        ),
        (
            "/api/hooks/stop",
            json!({"conversation_id": "full", "user_message": "u", "assistant_response": "a"}),
        ),
        (
            "/api/ingest",
            json!({"title": "full", "content": "a book written while the disk is full"}),
        ),
    ];
    for (path, body) in &other_writes {
        // Each attempt differs: an identical write could be answered as a duplicate.
        let refused = (0..50).any(|k| {
            let mut body = body.clone();
            for field in ["content", "assistant_response"] {
                if let Some(Value::String(s)) = body.get_mut(field) {
                    s.push_str(&format!(" (attempt {k})"));
                }
            }
            other_write(&d, &mut acked, path, &body)
        });
        assert!(refused, "{path} was never refused while the disk was full");
    }
    let (status, _) = d.post_raw("/api/search", br#"{"days_back": 1}"#, true);
    assert_eq!(status, 200, "reads work while the disk is full");
    assert_eq!(d.get_raw("/api/health", false).0, 200);
    let (status, text) = d.post_raw(
        "/api/hooks/get-context",
        br#"{"query": "takeaway", "conversation_id": "full"}"#,
        true,
    );
    eprintln!("get-context while the disk is full → {status}: {text:.120}");
    assert!(status == 200 || status == 507 || status == 503, "{status}");

    mount.free();
    for k in 0..10 {
        assert!(
            write_takeaway(&d, &mut acked, 1000 + k, &mut refusals),
            "writes succeed once space returns"
        );
    }
    assert_exactly_acked(&d, &acked);
    // SIGKILL: recovery from the WAL alone must find every acknowledged write and nothing torn
    // into a record.
    d.kill9();
    d.spawn(&[]);
    assert_exactly_acked(&d, &acked);
    eprintln!(
        "disk full: filled {filled} B, {} writes acknowledged, {} refused with 507/503, recovered exactly",
        acked.working.len(),
        refusals.len()
    );
}

#[test]
fn shutdown_snapshot_on_a_full_disk_loses_nothing() {
    let (mount, mut d) = match daemon_on_tmpfs(16 << 20) {
        Ok(x) => x,
        Err(why) => return eprintln!("SKIPPED shutdown-on-full-disk test: {why}"),
    };
    let mut acked = Acked::default();
    let mut refusals = Vec::new();
    for n in 0..30 {
        assert!(write_takeaway(&d, &mut acked, n, &mut refusals));
    }
    d.wait_embedded(Duration::from_secs(120));
    mount.fill();
    // The final snapshot (and vector index) cannot be written; the exit status may say so,
    // but the WAL must still hold everything.
    let clean = d.terminate();
    let log = d.log_text();
    eprintln!(
        "SIGTERM with a full disk: clean exit = {clean}; log tail: {}",
        tail(&log, 400)
    );
    mount.free();
    d.spawn(&[]);
    assert_exactly_acked(&d, &acked);
    assert!(
        write_takeaway(&d, &mut acked, 999, &mut refusals),
        "writable after restart"
    );
    let clean = d.terminate();
    assert!(
        clean,
        "a normal shutdown after space returned; log tail: {}",
        tail(&d.log_text(), 600)
    );
    d.spawn(&[]);
    assert_exactly_acked(&d, &acked);
    let leftovers: Vec<String> = std::fs::read_dir(&mount.point)
        .expect("store dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temp files of the failed snapshot remain: {leftovers:?}"
    );
}

#[test]
fn starting_on_a_full_disk_serves_reads_or_says_why_not() {
    let (mount, mut d) = match daemon_on_tmpfs(16 << 20) {
        Ok(x) => x,
        Err(why) => return eprintln!("SKIPPED start-on-full-disk test: {why}"),
    };
    let mut acked = Acked::default();
    let mut refusals = Vec::new();
    for n in 0..10 {
        assert!(write_takeaway(&d, &mut acked, n, &mut refusals));
    }
    d.kill9();
    mount.fill();
    std::fs::remove_file(d.data_dir().join("daemon.json")).ok();
    let mut cmd = std::process::Command::new(tests::bin("memd"));
    cmd.arg("serve")
        .env("MEMD_PORT", "0")
        .stdin(std::process::Stdio::null());
    for (k, v) in d.env() {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = wait_for_file_or_exit(
        &mut child,
        &d.data_dir().join("daemon.json"),
        Duration::from_secs(60),
    );
    if started {
        // Gone with every process it forked before the restart below takes its data dir.
        memd_testkit::proc::kill_tree(&mut child).unwrap_or_else(|e| panic!("{e}"));
        let out = child.wait_with_output().expect("wait");
        eprintln!(
            "memd started on a full disk; stderr: {}",
            tail(&String::from_utf8_lossy(&out.stderr), 400)
        );
        mount.free();
        d.spawn(&[]);
        assert_exactly_acked(&d, &acked);
    } else {
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert!(
            err.contains("space") || err.contains("full"),
            "refusing to start must say why: {err}"
        );
        mount.free();
        d.spawn(&[]);
        assert_exactly_acked(&d, &acked);
    }
}

/// True once `file` exists, false if the process exited first (bounded by `limit`).
fn wait_for_file_or_exit(child: &mut std::process::Child, file: &Path, limit: Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        if file.exists() {
            return true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        assert!(start.elapsed() < limit, "memd neither started nor exited");
        // Polling for a file the daemon writes once it listens; the condition decides.
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}
