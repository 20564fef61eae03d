//! Where a record's memory goes once a snapshot is opened, part by part (bench/EVAL.md section
//! 28). Not a pass/fail test: run with `--ignored --nocapture`, `MEMD_FOOTPRINT_N` records
//! shaped like memd-bench's bulk ones (a 150-byte takeaway, two metadata fields).

use super::MemState;
use super::ops::Op;
use crate::record::Record;
use crate::store::Machine;
use proto::{Collection, Value};

/// What glibc's malloc takes for a request of `n` bytes: 8 bytes of header, 16-byte steps,
/// 32 at least; nothing for an empty request (an empty `String` or `Vec` allocates nothing).
fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n + 8).div_ceil(16).max(2) * 16
    }
}

/// Bytes in use by the allocator (every arena, and what it mapped on its own).
fn heap_in_use() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    m.uordblks + m.hblkhd
}

/// A hash table of `capacity` (as `HashMap::capacity` reports it) with `slot`-byte entries:
/// hashbrown keeps 8 buckets for each 7 of capacity, and one control byte each.
fn table(capacity: usize, slot: usize) -> usize {
    let buckets = (capacity * 8).div_ceil(7).next_power_of_two();
    buckets * (slot + 1)
}

/// A record shaped like memd-bench's bulk ones: a 150-byte takeaway and two metadata fields
/// (also what `persist::tests::decode_timing` decodes).
pub(super) fn bench_record(i: usize) -> Record {
    let text = format!(
        "takeaway {i}: the deploy of service {} failed because port {} was taken by \
         the old worker; restarting the unit after freeing it fixed the rollout",
        i % 500,
        5000 + i % 97
    );
    let mut r = Record::new(Collection::Working, text, 1);
    r.metadata
        .insert("memory_type".into(), "key_takeaway".into());
    let conv = format!("bench-bulk-{}", i % 97);
    r.metadata.insert("conversation_id".into(), conv.into());
    r
}

/// Every part's bytes per record, printed as a table.
fn print_parts(s: &MemState, n: usize) {
    let mut parts: Vec<(&str, usize)> = Vec::new();
    let mut add = |name, bytes| parts.push((name, bytes));
    let each = |f: &dyn Fn(&Record) -> usize| s.records().map(f).sum::<usize>();
    add("key map (slot per record)", table(s.records.capacity(), 16));
    add("the boxed Record", each(&|_| chunk(size_of::<Record>())));
    add("id", each(&|r| chunk(r.id.capacity())));
    add("content", each(&|r| chunk(r.content.capacity())));
    add("metadata table", each(&|r| chunk(r.metadata.table_bytes())));
    add("metadata keys", each(&|r| chunk(r.metadata.key_bytes())));
    add(
        "metadata text values",
        each(&|r| {
            r.metadata
                .values()
                .map(|v| match v {
                    Value::String(t) => chunk(t.capacity()),
                    _ => 0,
                })
                .sum()
        }),
    );
    add(
        "other fields' heap",
        each(&|r| {
            chunk(r.tags.capacity() * 24)
                + chunk(r.former_ids.capacity() * 24)
                + chunk(r.outcome_history.capacity() * 16)
                + r.project.as_ref().map_or(0, |p| chunk(p.capacity()))
                + r.origin
                    .as_ref()
                    .map_or(0, |_| chunk(size_of::<crate::record::Origin>()))
        }),
    );
    add("id map", s.ids.heap_bytes());
    add("duplicate map", table(s.hashes.capacity(), 24));
    let total: usize = parts.iter().map(|p| p.1).sum();
    eprintln!(
        "size_of: Record {}, Metadata {}, Value {}, a metadata entry {}",
        size_of::<Record>(),
        size_of::<proto::Metadata>(),
        size_of::<Value>(),
        size_of::<(proto::metadata::Key, Value)>()
    );
    for (name, bytes) in &parts {
        eprintln!("| {name} | {:.1} |", *bytes as f64 / n as f64);
    }
    eprintln!("| all, computed | {:.1} |", total as f64 / n as f64);
    let accounted: usize = s.records().map(Record::memory_bytes).sum();
    eprintln!(
        "| Record::memory_bytes (memd stats) | {:.1} |",
        accounted as f64 / n as f64
    );
}

#[test]
#[ignore]
fn record_footprint() {
    let n: usize = std::env::var("MEMD_FOOTPRINT_N").map_or(100_000, |v| v.parse().unwrap());
    let mut s = MemState::new(4).unwrap();
    for i in 0..n {
        s.apply(&Op::Insert(Box::new(bench_record(i))));
    }
    let bytes = s.encode_snapshot().unwrap();
    drop(s);
    let before = heap_in_use();
    let mut back = MemState::new(4).unwrap();
    let t = std::time::Instant::now();
    back.decode_snapshot(&bytes).unwrap();
    let took = t.elapsed();
    let held = heap_in_use() - before;
    assert_eq!(back.len(), n);
    eprintln!("{n} records decoded in {took:?}: {}", back.open_note);
    print_parts(&back, n);
    eprintln!(
        "| all, the allocator's count | {:.1} |",
        held as f64 / n as f64
    );
}
