//! CLI commands against a real daemon: export/import round trip, books (ingest, list,
//! remove, re-ingest dedupe), search display, status/stats, and starting the daemon on demand.

mod cli_support;

use cli_support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn without_key(mut v: Value) -> Value {
    v.as_object_mut().expect("record object").remove("key");
    v
}

fn by_id(records: &[Value]) -> std::collections::BTreeMap<String, Value> {
    records
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                without_key(r.clone()),
            )
        })
        .collect()
}

#[test]
fn export_import_round_trip_is_lossless_and_idempotent() {
    let a = User::new();
    let da = Daemon::start(&a);
    let sample_path = Path::new(FIXTURES).join("cli/export-sample.jsonl");
    let sample = jsonl(&std::fs::read_to_string(&sample_path).unwrap());

    let out = a.ok(&["import", sample_path.to_str().unwrap(), "--json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            r["imported"].as_u64(),
            r["existing"].as_u64(),
            r["rejected"].as_u64()
        ),
        (Some(3), Some(0), Some(0)),
        "{r}"
    );
    let added = da.post(
        "/api/memory-bank/add",
        json!({"content": "Deploys go out on Tuesdays only.", "tags": ["ops"], "importance": 0.8}),
    );
    let added_id = added["doc_id"].as_str().unwrap().to_string();

    // Every field of the imported records comes back exactly (only the internal key differs).
    let export_a = a.ok(&["export"]);
    let records_a = jsonl(&export_a);
    assert_eq!(records_a.len(), 4);
    let exported = by_id(&records_a);
    for s in &sample {
        let id = s["id"].as_str().unwrap();
        assert_eq!(
            exported[id],
            without_key(s.clone()),
            "{id} changed in the round trip"
        );
    }
    assert_eq!(exported[&added_id]["tags"], json!(["ops"]));
    // A former id is still a known id after import.
    let found = da.post("/api/search", json!({"id": "working_00000000abcd"}));
    assert_eq!(
        found["results"][0]["id"], "patterns_00000000abcd",
        "{found}"
    );

    // --output writes the same lines; --collection filters.
    let file = a.root.path().join("a.jsonl");
    a.ok(&["export", "--output", file.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), export_a);
    let patterns = jsonl(&a.ok(&["export", "--collection", "patterns"]));
    assert_eq!(patterns.len(), 1);
    assert_eq!(patterns[0]["id"], "patterns_00000000abcd");

    // Into a fresh daemon: identical records; again: nothing new.
    let b = User::new();
    let _db = Daemon::start(&b);
    let r: Value =
        serde_json::from_str(&b.ok(&["import", file.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(r["imported"], 4, "{r}");
    let records_b = jsonl(&b.ok(&["export"]));
    assert_eq!(by_id(&records_b), by_id(&records_a));
    let out = b.ok(&["import", file.to_str().unwrap()]);
    assert!(
        out.contains("imported 0 memories (4 already present by id"),
        "{out}"
    );
    assert_eq!(jsonl(&b.ok(&["export"])).len(), 4);
}

#[test]
fn export_output_file_is_private() {
    let user = User::new();
    let _d = Daemon::start(&user);
    let file = user.root.path().join("memories.jsonl");
    // A temporary file left by an interrupted export, created with the umask's mode.
    let leftover = file.with_extension("memd-export-tmp");
    std::fs::write(&leftover, "stale\n").unwrap();
    set_mode(&leftover, 0o644);
    user.ok(&["export", "--output", file.to_str().unwrap()]);
    assert_eq!(mode(&file), 0o600, "an export holds every memory");
    assert!(!leftover.exists());
    assert!(!std::fs::read_to_string(&file).unwrap().contains("stale"));
}

#[test]
fn import_reports_bad_lines_by_number_and_keeps_the_good_ones() {
    let user = User::new();
    let _d = Daemon::start(&user);
    let sample =
        std::fs::read_to_string(Path::new(FIXTURES).join("cli/export-sample.jsonl")).unwrap();
    let first = sample.lines().next().unwrap();
    let broken = format!("{first}\n\n{{\"id\": \"x\"}}\nnot json\n");
    let file = user.root.path().join("broken.jsonl");
    std::fs::write(&file, broken).unwrap();
    let out = user.memd(&["import", file.to_str().unwrap(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "rejected lines make the import fail"
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["imported"], 1);
    assert_eq!(r["rejected"], 2);
    let lines: Vec<u64> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [3, 4]);
    let out = user.memd(&["export", "--collection", "nope"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("unknown collection"));
}

fn book_text(words: &str, paragraphs: usize) -> String {
    (0..paragraphs)
        .map(|i| format!("Paragraph {i} about {words}. It explains step {i} in enough detail to fill a chunk of text, with examples and caveats that matter when {words} goes wrong.\n\n"))
        .collect()
}

#[test]
fn books_ingest_list_search_remove_and_reingest() {
    let user = User::new();
    let _d = Daemon::start(&user);
    let txt = user.root.path().join("release-notes.txt");
    std::fs::write(&txt, book_text("zeppelin maintenance", 40)).unwrap();
    let md = user.root.path().join("guide.md");
    std::fs::write(
        &md,
        format!("# Guide\n\n{}", book_text("quasar calibration", 10)),
    )
    .unwrap();

    let out = user.ok(&["ingest", txt.to_str().unwrap()]);
    assert!(out.contains("stored \"release-notes\""), "{out}");
    let out = user.ok(&[
        "ingest",
        md.to_str().unwrap(),
        "--title",
        "Calibration guide",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["title"], "Calibration guide");
    assert!(v["chunks"].as_u64().unwrap() >= 2, "{v}");

    let books: Value = serde_json::from_str(&user.ok(&["books", "--json"])).unwrap();
    let titles: Vec<&str> = books["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Calibration guide", "release-notes"]);
    let notes = &books["books"][1];
    assert!(notes["chunks"].as_u64().unwrap() >= 5, "{notes}");
    assert!(
        notes["source"]
            .as_str()
            .unwrap()
            .ends_with("release-notes.txt")
    );
    assert!(user.ok(&["books"]).contains("release-notes"));

    // Re-ingesting the same file stores nothing new.
    let out = user.ok(&["ingest", txt.to_str().unwrap()]);
    assert!(
        out.starts_with("already present: \"release-notes\""),
        "{out}"
    );
    let again: Value = serde_json::from_str(&user.ok(&["books", "--json"])).unwrap();
    assert_eq!(again["books"][1]["chunks"], notes["chunks"]);

    let hits = user.ok(&[
        "search",
        "zeppelin",
        "maintenance",
        "--collection",
        "books",
        "--limit",
        "3",
    ]);
    let first = hits.lines().next().unwrap_or("");
    assert!(first.starts_with("1. [books] ("), "{hits}");
    assert!(
        first.contains("[id:books_") && first.contains("zeppelin"),
        "{hits}"
    );
    let json_hits: Value =
        serde_json::from_str(&user.ok(&["search", "zeppelin", "--json"])).unwrap();
    assert!(json_hits["count"].as_u64().unwrap() >= 1);

    let out = user.ok(&["remove", "release-notes"]);
    assert!(out.contains("removed \"release-notes\""), "{out}");
    let after: Value = serde_json::from_str(&user.ok(&["books", "--json"])).unwrap();
    assert_eq!(after["books"].as_array().unwrap().len(), 1);
    let out = user.memd(&["remove", "release-notes"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no book titled"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn ingest_refuses_unsupported_and_oversized_files() {
    let user = User::new();
    let big = user.root.path().join("big.txt");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(10 * 1024 * 1024 + 1).unwrap();
    let out = user.memd(&["ingest", big.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("limited to 10 MB"),
        "{}",
        text(&out.stderr)
    );
    let doc = user.root.path().join("report.docx");
    std::fs::write(&doc, b"PK\x03\x04 not really a document").unwrap();
    let out = user.memd(&["ingest", doc.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("report.docx"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !user.data_dir().join("daemon.json").exists(),
        "refused before starting anything"
    );
}

#[test]
fn status_and_stats_describe_the_running_daemon() {
    let user = User::new();
    let d = Daemon::start(&user);
    let out = user.ok(&["status"]);
    assert!(out.contains(&format!("127.0.0.1:{}", d.port)), "{out}");
    assert!(out.contains("model:"), "{out}");
    let v: Value = serde_json::from_str(&user.ok(&["status", "--json"])).unwrap();
    assert_eq!(v["running"], true);
    assert_eq!(v["health"]["port"], d.port);
    let stats: Value = serde_json::from_str(&user.ok(&["stats", "--json"])).unwrap();
    assert!(
        stats["collections"].is_object() && stats["index"].is_object(),
        "{stats}"
    );
    assert!(user.ok(&["stats"]).contains("index:"));
    // Doctor reaches the daemon and does a search round trip even where other checks fail.
    let out = user.memd(&["doctor"]);
    let s = text(&out.stdout);
    assert!(
        s.contains("[ok]   daemon") && s.contains("[ok]   search"),
        "{s}"
    );
    // The reranker's line: loaded, or why not and the fix.
    assert!(s.contains("reranker"), "{s}");
}

#[test]
fn ingest_starts_the_daemon_when_none_runs() {
    let user = User::new();
    let _stop = Detached(user.data_dir());
    let txt = user.root.path().join("notes.txt");
    std::fs::write(&txt, book_text("heliograph signals", 5)).unwrap();
    let out = user.memd_env(
        &["ingest", txt.to_str().unwrap(), "--json"],
        &[("MEMD_PORT", "0")],
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("starting it"),
        "{}",
        text(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["chunks"].as_u64().unwrap() >= 1);
    let (port, _) = wait_for_daemon(&user.data_dir(), Duration::from_secs(5), || true);
    assert!(
        health(port).is_some(),
        "the daemon it started keeps running"
    );
}
