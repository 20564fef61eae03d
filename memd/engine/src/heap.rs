//! Gives freed heap memory back to the operating system.
//!
//! Owns the allocator's settings for the daemon (`tune_for_daemon`), reading the process's
//! resident set, and the calls to `malloc_trim`, made after bursts of allocation (model load,
//! snapshots, embeddings) and never on a request's path: trimming walks every heap. glibc keeps freed pages
//! for reuse; loading the ONNX model alone leaves ~50 MB of them behind (measured: RSS after
//! the model loaded 185 MB without a trim, 137 MB with one), and every embedding frees a few
//! hundred KB of tokenizer and tensor buffers.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set when something freed memory worth returning since the last trim.
static DIRTY: AtomicBool = AtomicBool::new(false);

/// Notes that memory was allocated and freed (an embedding ran); the next
/// `release_if_dirty` trims.
pub fn mark_dirty() {
    DIRTY.store(true, Ordering::Relaxed);
}

/// Trims when `mark_dirty` was called since the last trim. Cheap otherwise: for idle timers.
pub fn release_if_dirty() {
    if DIRTY.swap(false, Ordering::Relaxed) {
        release_freed_memory();
    }
}

/// Allocations of at least this many bytes get their own mapping, returned to the system when
/// freed. glibc starts at the same 128 KiB but raises the threshold to the size of every mapped
/// block freed (up to 32 MiB), so after the models load, ONNX Runtime's per-run buffers come
/// from the heaps and stay resident there. Fixing it turns that adjustment off.
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Sets the allocator up for a long-lived daemon; call first thing in `memd serve`, before
/// any thread starts. Measured with ONNX Runtime's arenas shrinking after each run
/// (`models::embed`): idle RSS at 10,000 memories 243–249 → 205–207 MB, peak 244–251 →
/// 220–230 MB.
pub fn tune_for_daemon() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; no other thread exists yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
    }
}

/// How many malloc heaps the daemon's threads share. glibc gives threads their own heap as
/// they contend, up to 8 per core (16 here for 13 threads: ONNX Runtime's pools, the WAL,
/// tokio's), and each keeps its own free blocks and partly used pages: two heaps measured
/// 2 MB less at 10k memories (bench/EVAL.md sections 19, 20). memd's threads allocate little
/// at a time and rarely at once, so two should cost little waiting; that latency pair on an
/// idle machine is still to be run.
const ARENA_MAX: i32 = 2;

/// Returns free pages of every malloc heap to the OS. A no-op where the C library has no such
/// call.
pub fn release_freed_memory() {
    DIRTY.store(false, Ordering::Relaxed);
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only takes the allocator's own locks; it is safe to call from any
    // thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The process's resident set in bytes (`/proc/self/statm`); `None` where the system has no
/// such file.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

/// The resident set split by what backs it (`/proc/self/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Resident {
    /// Anonymous pages: every heap (malloc's and ONNX Runtime's arenas), stacks.
    pub anon: u64,
    /// Pages of mapped files: the memd binary and the shared libraries, ONNX Runtime's among
    /// them. memd maps no data files.
    pub file: u64,
}

/// `Resident` now; `None` where the system has no `/proc/self/status`.
pub fn resident() -> Option<Resident> {
    parse_status(&std::fs::read_to_string("/proc/self/status").ok()?)
}

fn parse_status(status: &str) -> Option<Resident> {
    let kib = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse().ok()
    };
    Some(Resident {
        anon: kib("RssAnon:")? * 1024,
        file: (kib("RssFile:")? + kib("RssShmem:").unwrap_or(0)) * 1024,
    })
}

fn page_size() -> u64 {
    #[cfg(unix)]
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    #[cfg(not(unix))]
    let size = 4096;
    u64::try_from(size).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_splits_anonymous_from_file_backed_pages() {
        let status =
            "VmRSS:\t  300 kB\nRssAnon:\t  200 kB\nRssFile:\t   90 kB\nRssShmem:\t   10 kB\n";
        let r = parse_status(status).expect("parsed");
        assert_eq!(r.anon, 200 * 1024);
        assert_eq!(r.file, 100 * 1024);
        assert_eq!(parse_status("VmRSS: 1 kB\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_both_kinds_and_they_fit_its_resident_set() {
        let r = resident().expect("linux has /proc/self/status");
        assert!(r.anon > 0 && r.file > 0, "{r:?}");
        // Read apart, so allow for pages touched in between.
        let rss = rss_bytes().expect("statm");
        assert!(r.anon + r.file <= rss + (8 << 20), "{r:?} vs {rss}");
    }
}
