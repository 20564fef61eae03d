//! `memd import --from-roampal` against a real Roampal 0.6.0 store.
//!
//! The store in `tests/fixtures/roampal/store` was made by Roampal itself, driven through its
//! own HTTP API by `tests/fixtures/roampal/make_store.sh` (memory-bank adds, an update, an
//! archive, exchanges, outcomes that promoted one memory to history and one to patterns, a
//! book, a removed book); `expected.json` is what its SQLite file held, row by row. These tests
//! import it with the real `memd` and compare field by field. `MEMD_ROAMPAL_LIVE=1` also
//! rebuilds a fresh store with Roampal from PyPI first (slow: a venv and `pip install`).

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tests::project::{Bridge, make_repo, memd_in};
use tests::{Daemon, Spec};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/roampal")
}

/// A private copy of a Roampal data directory (the fixture, or a freshly made live one) and
/// what its SQLite held.
fn store_copy(into: &Path) -> (PathBuf, Value) {
    let source = match std::env::var("MEMD_ROAMPAL_LIVE").is_ok_and(|v| v == "1") {
        true => live_store(into),
        false => fixture_dir(),
    };
    let data = into.join("roampal/data");
    copy_dir(&source.join("store/data"), &data);
    let expected = std::fs::read_to_string(source.join("expected.json")).expect("expected.json");
    (
        data,
        serde_json::from_str(&expected).expect("expected.json is JSON"),
    )
}

/// Runs `make_store.sh` into `into/live` (Roampal from PyPI, driven through its API).
fn live_store(into: &Path) -> PathBuf {
    let out = into.join("live");
    let status = std::process::Command::new(fixture_dir().join("make_store.sh"))
        .arg(out.join("store"))
        .status()
        .expect("run make_store.sh");
    assert!(status.success(), "make_store.sh failed");
    // Given an output directory, the script writes the expectations inside it.
    std::fs::rename(out.join("store/expected.json"), out.join("expected.json"))
        .expect("expected.json of the live store");
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// `memd import --from-roampal <data> <args> --json` in `dir`; its exit status, report and
/// stderr. `TZ=UTC`: the fixture's naive timestamps were written in UTC.
fn import(d: &Daemon, dir: &Path, data: &Path, args: &[&str]) -> (bool, Value, String) {
    let out = memd_in(d, dir)
        .env("TZ", "UTC")
        .args(["import", "--from-roampal"])
        .arg(data)
        .args(args)
        .arg("--json")
        .output()
        .expect("memd import");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), report, stderr)
}

/// Every stored record (the lossless export), by the Roampal id it came from.
fn exported(d: &Daemon, dir: &Path) -> BTreeMap<String, Value> {
    let out = memd_in(d, dir).arg("export").output().expect("memd export");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            (
                r["metadata"]["roampal_id"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                r,
            )
        })
        .collect()
}

/// `2026-11-26T09:28:12.942175` (UTC) as Unix milliseconds.
fn utc_ms(text: &str) -> i64 {
    let (date, time) = text.split_once('T').expect("ISO time");
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let ms: i64 = format!("{frac:0<3}")[..3].parse().unwrap();
    // Days from the civil date (proleptic Gregorian), as in H. Hinnant's algorithm.
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    ((days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2]) * 1000) + ms
}

/// A metadata value of an expected row (`None` when the row has no such key).
fn meta<'a>(row: &'a Value, key: &str) -> Option<&'a Value> {
    row["metadata"].get(key).map(|m| &m["value"])
}

/// A JSON list that Roampal wrote as text, or as ChromaDB array rows.
fn list_of(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap(),
        Some(Value::Array(a)) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        _ => vec![],
    }
}

fn close(a: &Value, b: f64, what: &str) {
    let a = a
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {a} is not a number"));
    assert!(
        (a - b).abs() < 1e-6,
        "{what}: memd has {a}, Roampal had {b}"
    );
}

/// One imported record against the Roampal row it came from, field by field.
fn compare(rec: &Value, row: &Value, secret: bool) {
    let id = row["id"].as_str().unwrap();
    let collection = row["collection"]
        .as_str()
        .unwrap()
        .trim_start_matches("roampal_");
    assert_eq!(rec["collection"], collection, "{id}");
    let document = row["document"].as_str().unwrap();
    if secret {
        let content = rec["content"].as_str().unwrap();
        assert!(
            !content.contains("ghp_") && !content.contains("AKIA"),
            "{content}"
        );
        assert!(content.contains("[REDACTED"), "{content}");
    } else {
        assert_eq!(rec["content"], document, "{id}");
    }
    let default_score = if collection == "memory_bank" {
        1.0
    } else {
        0.5
    };
    let score = meta(row, "score")
        .and_then(Value::as_f64)
        .unwrap_or(default_score);
    close(&rec["score"], score, &format!("{id} score"));
    assert_eq!(
        rec["uses"],
        meta(row, "uses").cloned().unwrap_or(json!(0)),
        "{id} uses"
    );
    let successes = meta(row, "success_count")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    close(
        &rec["success_count"],
        successes,
        &format!("{id} success_count"),
    );
    let created = meta(row, "created_at").or(meta(row, "timestamp")).unwrap();
    assert_eq!(
        rec["created_at"],
        utc_ms(created.as_str().unwrap()),
        "{id} created_at"
    );
    match meta(row, "last_used") {
        Some(t) => assert_eq!(
            rec["last_used"],
            utc_ms(t.as_str().unwrap()),
            "{id} last_used"
        ),
        None => assert_eq!(rec["last_used"], Value::Null, "{id} last_used"),
    }
    let history: Vec<Value> = meta(row, "outcome_history")
        .map(|h| serde_json::from_str(h.as_str().unwrap()).unwrap())
        .unwrap_or_default();
    let got = rec["outcome_history"].as_array().unwrap();
    assert_eq!(got.len(), history.len(), "{id} outcome_history");
    for (g, h) in got.iter().zip(&history) {
        assert_eq!(g["outcome"], h["outcome"], "{id} outcome");
        assert_eq!(
            g["at"],
            utc_ms(h["timestamp"].as_str().unwrap()),
            "{id} outcome time"
        );
    }
    let last = meta(row, "last_outcome").cloned().unwrap_or(Value::Null);
    assert_eq!(rec["last_outcome"], last, "{id} last_outcome");
    for k in ["importance", "confidence"] {
        match meta(row, k).and_then(Value::as_f64) {
            Some(x) => close(&rec[k], x, &format!("{id} {k}")),
            None => assert_eq!(rec[k], Value::Null, "{id} {k}"),
        }
    }
    let mut tags = list_of(meta(row, "tags"));
    for t in list_of(meta(row, "noun_tags")) {
        if !tags.contains(&t) {
            tags.push(t);
        }
    }
    assert_eq!(rec["tags"], json!(tags), "{id} tags");
    let archived = meta(row, "status").and_then(Value::as_str) == Some("archived");
    assert_eq!(rec["archived"], archived, "{id} archived");
    let kind = meta(row, "memory_type").or(meta(row, "type")).cloned();
    assert_eq!(
        rec["metadata"].get("memory_type").cloned(),
        kind,
        "{id} memory_type"
    );
    let conv = meta(row, "conversation_id").cloned();
    assert_eq!(
        rec["metadata"].get("conversation_id").cloned(),
        conv,
        "{id} conversation"
    );
    for k in ["title", "chunk_index", "archived_at", "archive_reason"] {
        if let Some(v) = meta(row, k) {
            let want = v.as_i64().map_or(v.clone(), |n| json!(n as f64));
            assert_eq!(rec["metadata"][k], want, "{id} {k}");
        }
    }
    let former: Vec<&str> = rec["former_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        former.last(),
        Some(&id),
        "{id}: its Roampal id is its newest former id"
    );
}

#[test]
fn a_real_roampal_store_moves_in_with_what_it_learned() {
    let d = Daemon::start(Spec {
        wait_model: true,
        ..Spec::new()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().unwrap();
    let (data, expected) = store_copy(tmp.path());
    let repo = make_repo(tmp.path(), "shop", Some("git@github.com:acme/shop.git"));
    let sqlite = data.join("chromadb/chroma.sqlite3");
    let pristine = std::fs::read(&sqlite).unwrap();
    let ghosts = list_of(Some(&expected["ghost_ids.json"]["ghost_ids"]));
    let rows: Vec<&Value> = expected["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !ghosts.iter().any(|g| m["id"] == g.as_str()))
        .collect();
    let mut per_collection: BTreeMap<String, u64> = BTreeMap::new();
    for m in &rows {
        let c = m["collection"]
            .as_str()
            .unwrap()
            .trim_start_matches("roampal_");
        *per_collection.entry(c.to_string()).or_default() += 1;
    }
    let counts = |report: &Value, field: &str| -> BTreeMap<String, u64> {
        report["collections"]
            .as_array()
            .unwrap_or_else(|| panic!("no report: {report}"))
            .iter()
            .map(|c| {
                (
                    c["collection"].as_str().unwrap().to_string(),
                    c[field].as_u64().unwrap(),
                )
            })
            .collect()
    };

    // A dry run counts per collection and stores nothing.
    let (ok, dry, err) = import(&d, &repo, &data, &["--dry-run"]);
    assert!(ok, "{err}");
    assert_eq!(counts(&dry, "found"), per_collection);
    assert_eq!(counts(&dry, "imported"), per_collection);
    assert!(exported(&d, &repo).is_empty(), "a dry run wrote nothing");

    let (ok, report, err) = import(&d, &repo, &data, &["--project", "--with-transcripts"]);
    assert!(ok, "{err}");
    assert_eq!(counts(&report, "imported"), per_collection);
    assert!(
        report["notes"]
            .to_string()
            .contains("_completion_state.json"),
        "{report}"
    );
    assert_eq!(
        std::fs::read(&sqlite).unwrap(),
        pristine,
        "the Roampal store is untouched"
    );

    let records = exported(&d, &repo);
    let labels = &expected["driver_ids"];
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        let rec = records
            .get(id)
            .unwrap_or_else(|| panic!("{id} was not imported"));
        compare(rec, row, labels["secret"] == id);
    }
    for g in &ghosts {
        assert!(!records.contains_key(g), "{g} was removed in Roampal");
    }
    // Promotions: the patterns memory answers to every id it had (working, history, patterns).
    let pattern = labels["promoted_history_then_patterns"].as_str().unwrap();
    let suffix = pattern.trim_start_matches("patterns_");
    let moves = records[pattern]["moves"].as_array().unwrap();
    assert_eq!(moves.len(), 2, "{moves:?}");
    for old in [
        format!("working_{suffix}"),
        format!("history_{suffix}"),
        pattern.to_string(),
    ] {
        let found = tests::lookup(&d, &old).unwrap_or_else(|| panic!("search by {old}"));
        assert_eq!(found.id, records[pattern]["id"].as_str().unwrap());
    }
    // Book chunks keep their order.
    let chunks: Vec<i64> = records
        .values()
        .filter(|r| r["metadata"]["title"] == "Rust Ownership Notes")
        .map(|r| {
            (
                r["key"].as_i64().unwrap(),
                r["metadata"]["chunk_index"].as_f64().unwrap() as i64,
            )
        })
        .collect::<BTreeMap<_, _>>()
        .into_values()
        .collect();
    assert_eq!(chunks, vec![0, 1, 2, 3]);
    // --project: what came from conversations and the project fact belong to the repository;
    // who the user is, their preferences and the book stay global.
    let project = |label: &str| records[labels[label].as_str().unwrap()]["project"].clone();
    assert_eq!(
        project("promoted_history_then_patterns"),
        "github.com/acme/shop"
    );
    assert_eq!(project("oc_exchange"), "github.com/acme/shop");
    assert_eq!(project("project"), "github.com/acme/shop");
    assert_eq!(project("identity"), Value::Null);
    assert_eq!(project("preference"), Value::Null);
    assert_eq!(
        records[labels["book_chunks"][0].as_str().unwrap()]["project"],
        Value::Null
    );
    // Transcripts: one book per conversation.
    let sessions = expected["mcp_sessions"].as_object().unwrap();
    assert_eq!(report["transcripts"]["files"], sessions.len());
    let exchanges: usize = sessions
        .values()
        .map(|s| s.as_array().unwrap().len() / 2)
        .sum();
    assert_eq!(report["transcripts"]["exchanges"], exchanges);
    let books: proto::BooksResponse = d.get("/api/books");
    let transcripts = books
        .books
        .iter()
        .filter(|b| b.title.starts_with("Roampal transcript "))
        .count();
    assert_eq!(transcripts, sessions.len());

    // The agent finds an imported memory by its Roampal id through the MCP tool, and by
    // meaning (memd's own embeddings, computed while the import waited).
    let mut mcp = Bridge::start_in(&d, &repo);
    let identity = labels["identity"].as_str().unwrap();
    let text = mcp.tool("search_memory", json!({"id": identity}));
    assert!(text.contains("Dana Whitfield"), "{text}");
    let found: proto::SearchResponse = d.post(
        "/api/search",
        &json!({"query": "which command line tools does Dana use to search code", "limit": 3}),
    );
    assert!(
        found.results.iter().any(|r| r.content.contains("ripgrep")),
        "{:?}",
        found.results.iter().map(|r| &r.content).collect::<Vec<_>>()
    );

    // memd ages the promoted memories from when Roampal promoted them, not from creation.
    for label in ["promoted_history", "promoted_history_then_patterns"] {
        let rec = &records[labels[label].as_str().unwrap()];
        let entered = rec["metadata"]["promoted_at"].as_f64().unwrap_or(0.0) as i64;
        assert!(
            entered >= rec["created_at"].as_i64().unwrap(),
            "{label}: {rec}"
        );
    }

    // Counted again, nothing is new: the dry run sees what the import stored.
    let (ok, dry, err) = import(&d, &repo, &data, &["--dry-run"]);
    assert!(ok, "{err}");
    assert!(counts(&dry, "imported").values().all(|n| *n == 0), "{dry}");
    assert_eq!(counts(&dry, "existing"), per_collection);

    // A second run finds everything already here.
    let (ok, again, err) = import(&d, &repo, &data, &["--with-transcripts"]);
    assert!(ok, "{err}");
    assert!(
        counts(&again, "imported").values().all(|n| *n == 0),
        "{again}"
    );
    assert_eq!(counts(&again, "existing"), per_collection);
    assert_eq!(again["transcripts"]["imported"], 0);
    assert_eq!(exported(&d, &repo).len(), records.len());
}

/// What memd cannot read stops the import before anything is stored, with a message naming
/// it; `--skip-invalid` imports the rest and lists what it left out. Roampal's default
/// location is found without naming it.
#[test]
fn a_store_memd_does_not_understand_is_refused_whole() {
    let d = tests::start_daemon();
    let tmp = tempfile::tempdir().unwrap();
    let (data, expected) = store_copy(tmp.path());
    let dir = tmp.path();
    let sql = |db: &Path, statement: &str| {
        let c = rusqlite::Connection::open(db).unwrap();
        c.execute_batch(statement).unwrap();
    };
    let variant = |name: &str, statement: &str| -> PathBuf {
        let v = tmp.path().join(name).join("data");
        copy_dir(&data, &v);
        sql(&v.join("chromadb/chroma.sqlite3"), statement);
        v
    };
    let newer_column = variant(
        "renamed",
        "ALTER TABLE embedding_metadata RENAME COLUMN string_value TO str_value;",
    );
    let (ok, _, err) = import(&d, dir, &newer_column, &["--no-wait"]);
    assert!(
        !ok && err.contains("string_value") && err.contains("Nothing was imported"),
        "{err}"
    );
    let newer_collection = variant(
        "collection",
        "INSERT INTO collections (id, name, dimension, database_id) \
         SELECT 'c-new', 'roampal_goals', dimension, database_id FROM collections LIMIT 1;",
    );
    let (ok, _, err) = import(&d, dir, &newer_collection, &["--no-wait"]);
    assert!(!ok && err.contains("roampal_goals"), "{err}");
    let identity = expected["driver_ids"]["identity"].as_str().unwrap();
    let bad_score = variant(
        "score",
        &format!(
            "UPDATE embedding_metadata SET string_value = 'very high', float_value = NULL \
             WHERE key = 'score' AND id = (SELECT id FROM embeddings WHERE embedding_id = '{identity}');"
        ),
    );
    let (ok, _, err) = import(&d, dir, &bad_score, &["--no-wait"]);
    assert!(
        !ok && err.contains(identity) && err.contains("score"),
        "{err}"
    );
    assert!(
        exported(&d, dir).is_empty(),
        "nothing was imported by the refused runs"
    );

    let (ok, report, err) = import(&d, dir, &bad_score, &["--no-wait", "--skip-invalid"]);
    assert!(ok, "{err}");
    let skipped = report["skipped"].to_string();
    assert!(
        skipped.contains(identity) && skipped.contains("very high"),
        "{report}"
    );
    let records = exported(&d, dir);
    assert!(!records.is_empty() && !records.contains_key(identity));

    // Roampal still running, its file in WAL mode (as Roampal sets it up unless told not to)
    // with a write not yet checkpointed: memd reads it, the write included, and changes nothing.
    let live = tmp.path().join("running").join("data");
    copy_dir(&data, &live);
    let writer = rusqlite::Connection::open(live.join("chromadb/chroma.sqlite3")).unwrap();
    writer
        .execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
             UPDATE embedding_metadata SET string_value = 'The user is Dana W.'
             WHERE key = 'chroma:document'
               AND id = (SELECT id FROM embeddings WHERE embedding_id = '{identity}');"
        ))
        .unwrap();
    assert!(live.join("chromadb/chroma.sqlite3-wal").is_file());
    let (ok, report, err) = import(&d, dir, &live, &["--no-wait", "--project"]);
    assert!(ok, "{err}");
    assert_eq!(
        report["collections"][0]["collection"], "memory_bank",
        "{report}"
    );
    let records = exported(&d, dir);
    assert_eq!(records[identity]["content"], "The user is Dana W.");
    drop(writer);

    // A store Roampal has restarted on gains `topic` columns: still read.
    let restarted = variant(
        "restarted",
        "ALTER TABLE collections ADD COLUMN topic TEXT; ALTER TABLE segments ADD COLUMN topic TEXT;",
    );
    let (ok, report, err) = import(&d, dir, &restarted, &["--dry-run"]);
    assert!(ok, "{err}");
    assert!(
        report["collections"]
            .as_array()
            .is_some_and(|c| c.len() == 5),
        "{report}"
    );

    // A named profile, registered with its own path in Roampal's profiles.json.
    let config = tmp.path().join("config/roampal");
    std::fs::create_dir_all(&config).unwrap();
    let registry = json!({"work": restarted, "bindings": {}});
    std::fs::write(config.join("profiles.json"), registry.to_string()).unwrap();
    let out = memd_in(&d, dir)
        .env("XDG_CONFIG_HOME", tmp.path().join("config"))
        .env_remove("ROAMPAL_DATA_PATH")
        .args([
            "import",
            "--from-roampal",
            "--profile",
            "work",
            "--dry-run",
            "--json",
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        report["store"].as_str(),
        Some(restarted.join("chromadb/chroma.sqlite3").to_str().unwrap()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = memd_in(&d, dir)
        .env("XDG_CONFIG_HOME", tmp.path().join("config"))
        .args(["import", "--from-roampal", "--profile", "home", "--dry-run"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no profile \"home\"") && err.contains("work"),
        "{err}"
    );

    // A Roampal option on a plain file import is refused, not ignored (no real import
    // behind a `--dry-run`).
    let out = memd_in(&d, dir)
        .args(["import", "--dry-run", "backup.jsonl"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--dry-run only applies"),
        "{err}"
    );

    // No directory named: Roampal's own default location ($XDG_DATA_HOME/roampal/data).
    let out = memd_in(&d, dir)
        .env("XDG_DATA_HOME", tmp.path())
        .env("XDG_CONFIG_HOME", tmp.path().join("config"))
        .env_remove("ROAMPAL_DATA_PATH")
        .env_remove("ROAMPAL_DEV")
        .args(["import", "--from-roampal", "--dry-run", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        report["store"].as_str(),
        Some(data.join("chromadb/chroma.sqlite3").to_str().unwrap()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
