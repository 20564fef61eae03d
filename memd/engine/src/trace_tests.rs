//! The ledger: digests never content, rotation, torn lines, concurrent appends.

use super::*;

fn ledger(cap: u64) -> (tempfile::TempDir, Trace) {
    let dir = tempfile::tempdir().unwrap();
    let trace = Trace::with_cap(dir.path().join("logs").join(TRACE_FILE), cap);
    (dir, trace)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn entries_round_trip_in_order_and_filter_by_conversation() {
    let (_d, t) = ledger(DEFAULT_CAP_BYTES);
    let injected = strings(&["memory_bank_1", "patterns_2"]);
    t.try_append(&TraceEntry::get_context(
        "c1", "hello", &injected, "ctx", false,
    ))
    .unwrap();
    t.try_append(&TraceEntry::stop("c2", "working_9", "hello", true))
        .unwrap();
    t.try_append(&TraceEntry::record_outcome(
        "c1",
        "worked",
        &strings(&["working_3", "memory_bank_1"]),
        Some("agent"),
        false,
    ))
    .unwrap();
    t.try_append(&TraceEntry::sidecar("c1", false, 3)).unwrap();

    let all = t.read(None, 100);
    let events: Vec<_> = all.iter().map(|e| e.event).collect();
    assert_eq!(
        events,
        [
            TraceEvent::GetContext,
            TraceEvent::Stop,
            TraceEvent::RecordOutcome,
            TraceEvent::Sidecar
        ]
    );
    assert_eq!(all[0].injected, injected);
    assert_eq!(
        all[0].prompt_sha256.as_deref(),
        Some(sha256_tag("hello").as_str())
    );
    assert_eq!(all[1].note.as_deref(), Some("needs_sidecar"));
    assert_eq!(all[2].scored, strings(&["working_3", "memory_bank_1"]));
    assert_eq!(all[2].outcome.as_deref(), Some("worked"));
    assert_eq!(all[3].note.as_deref(), Some("unscored_after_3_attempts"));

    let c1 = t.read(Some("c1"), 100);
    assert_eq!(c1.len(), 3);
    assert!(c1.iter().all(|e| e.conversation_id == "c1"));
    assert!(t.read(Some("nope"), 100).is_empty());
}

#[test]
fn limit_keeps_the_newest_entries() {
    let (_d, t) = ledger(DEFAULT_CAP_BYTES);
    for i in 0..10 {
        t.try_append(&TraceEntry::stop("c", &format!("working_{i}"), "", false))
            .unwrap();
    }
    let last = t.read(Some("c"), 3);
    let docs: Vec<_> = last.iter().filter_map(|e| e.doc_id.clone()).collect();
    assert_eq!(docs, ["working_7", "working_8", "working_9"]);
    assert!(t.read(None, 0).is_empty());
}

#[test]
fn lines_hold_digests_never_text() {
    let (_d, t) = ledger(DEFAULT_CAP_BYTES);
    let prompt = "deploy with password hunter2-Zq9 and tell me the weather";
    let context = "KNOWN CONTEXT\n- [id:patterns_1] the staging db listens on 5433";
    t.try_append(&TraceEntry::get_context("c", prompt, &[], context, false))
        .unwrap();
    t.try_append(&TraceEntry::record_outcome(
        "c",
        "worked\nUser said: hunter2-Zq9 is my password",
        &[],
        Some("agent; drop table"),
        false,
    ))
    .unwrap();
    let raw = fs::read_to_string(t.path()).unwrap();
    for needle in [
        "hunter2",
        "weather",
        "5433",
        "staging",
        "drop table",
        "User said",
    ] {
        assert!(!raw.contains(needle), "{needle:?} leaked into {raw}");
    }
    assert!(raw.contains(&sha256_tag(context)));
    let entries = t.read(None, 10);
    assert_eq!(entries[1].outcome.as_deref(), Some("other"));
    assert_eq!(entries[1].note.as_deref(), Some("other"));
    let fine = TraceEntry::record_outcome("c", " Worked ", &[], Some("Sidecar"), false);
    assert_eq!(
        (fine.outcome.as_deref(), fine.note.as_deref()),
        (Some("worked"), Some("sidecar"))
    );
}

#[test]
fn rotation_moves_the_full_file_aside_and_reads_span_both() {
    let (_d, t) = ledger(600);
    for i in 0..12 {
        t.try_append(&TraceEntry::stop("c", &format!("working_{i}"), "u", false))
            .unwrap();
    }
    assert!(t.rotated_path().exists(), "rotated at the cap");
    let live = fs::metadata(t.path()).unwrap().len();
    assert!(live < 600 + 300, "live file stays near the cap: {live}");
    let docs: Vec<_> = t
        .read(None, 1000)
        .into_iter()
        .filter_map(|e| e.doc_id)
        .collect();
    let newest: Vec<String> = (12 - docs.len()..12)
        .map(|i| format!("working_{i}"))
        .collect();
    assert_eq!(
        docs, newest,
        "entries of both files, oldest first, none twice"
    );
    assert!(docs.len() >= 4, "the rotated file is read too: {docs:?}");
}

#[test]
fn torn_and_foreign_lines_are_skipped() {
    let (_d, t) = ledger(DEFAULT_CAP_BYTES);
    t.try_append(&TraceEntry::sidecar("c", true, 1)).unwrap();
    let mut f = open_append(t.path()).unwrap();
    f.write_all(b"not json\n{\"ts\":\"x\",\"event\":\"bogus\"}\n\xff\xfe\n{\"ts\":\"2026")
        .unwrap();
    drop(f);
    t.try_append(&TraceEntry::sidecar("c", false, 2)).unwrap();
    let notes: Vec<_> = t
        .read(None, 10)
        .into_iter()
        .filter_map(|e| e.note)
        .collect();
    // The torn fragment joins the next line, so that line is lost too; the ledger still
    // reads every other entry.
    assert_eq!(notes, ["scored_after_1_attempts"]);
    t.try_append(&TraceEntry::sidecar("c", false, 3)).unwrap();
    assert_eq!(t.read(None, 10).len(), 2);
}

#[test]
fn concurrent_appends_give_whole_lines_each_once() {
    let (_d, t) = ledger(DEFAULT_CAP_BYTES);
    append_from_threads(&t, 8, 50);
    let entries = t.read(None, usize::MAX);
    let ids: std::collections::BTreeSet<_> =
        entries.iter().map(|e| e.injected[0].clone()).collect();
    assert_eq!(entries.len(), 400);
    assert_eq!(ids.len(), 400, "every append present exactly once");
    let c3 = t.read(Some("c3"), usize::MAX);
    let order: Vec<_> = c3.iter().map(|e| e.injected[0].clone()).collect();
    let expected: Vec<_> = (0..50).map(|i| format!("working_3_{i}")).collect();
    assert_eq!(order, expected, "one writer's entries keep their order");
}

#[test]
fn concurrent_appends_across_rotations_stay_whole() {
    let (_d, t) = ledger(8 * 1024);
    append_from_threads(&t, 8, 50);
    for path in [t.rotated_path(), t.path().to_path_buf()] {
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.is_empty(), "{} written", path.display());
        for line in text.lines() {
            serde_json::from_str::<TraceEntry>(line).expect("every line is whole");
        }
    }
}

fn append_from_threads(t: &Trace, writers: usize, each: usize) {
    std::thread::scope(|scope| {
        for n in 0..writers {
            scope.spawn(move || {
                for i in 0..each {
                    let ids = vec![format!("working_{n}_{i}")];
                    t.try_append(&TraceEntry::get_context(
                        &format!("c{n}"),
                        "p",
                        &ids,
                        "x",
                        false,
                    ))
                    .unwrap();
                }
            });
        }
    });
}

#[test]
fn an_unwritable_ledger_is_skipped_silently() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    fs::write(&blocker, "x").unwrap();
    // The "logs dir" is a regular file: every write fails.
    let t = Trace::open(&blocker);
    assert!(t.try_append(&TraceEntry::sidecar("c", true, 1)).is_err());
    t.append(&TraceEntry::sidecar("c", true, 1));
    assert!(t.read(None, 10).is_empty());
}

#[test]
fn display_line_is_one_line_of_ids_and_short_digests() {
    let e = TraceEntry::get_context("c9", "p", &strings(&["patterns_1"]), "ctx", false);
    let line = e.display_line();
    assert!(!line.contains('\n'));
    assert!(line.contains("get-context") && line.contains("c9"));
    assert!(line.contains("injected=patterns_1"));
    let short = &sha256_tag("p")[..23];
    assert!(line.contains(&format!("prompt={short} ")), "{line}");
}
