//! A tiny machine and file helpers for the store's tests.
//!
//! Owns `Log` (an append-only list of strings that records which side files it loaded) and
//! helpers that build crash images of a data directory. Must never be compiled outside tests.

use std::fs;
use std::path::{Path, PathBuf};

use super::{Machine, Recovery, Store, StoreError, files};

/// An op that makes `Log::apply` panic, to test a machine bug.
pub(crate) const PANIC_OP: &str = "!panic";

/// Appends each op; the output is the op's index in the log.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub entries: Vec<String>,
    /// (generation, entry count written in that generation's side file) seen at open.
    pub side_loaded: Option<(u64, Option<usize>)>,
}

impl Machine for Log {
    type Op = String;
    type Output = usize;

    fn apply(&mut self, op: &String) -> usize {
        assert_ne!(op, PANIC_OP, "test machine told to panic");
        self.entries.push(op.clone());
        self.entries.len() - 1
    }

    fn encode(&self) -> anyhow::Result<Vec<u8>> {
        Ok(rmp_serde::to_vec_named(&self.entries)?)
    }

    fn decode(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.entries = rmp_serde::from_slice(bytes)?;
        Ok(())
    }

    fn save_side_files(&self, dir: &Path, generation: u64) -> anyhow::Result<()> {
        fs::write(side_path(dir, generation), self.entries.len().to_string())?;
        Ok(())
    }

    fn load_side_files(&mut self, dir: &Path, generation: u64) -> anyhow::Result<()> {
        let count = fs::read_to_string(side_path(dir, generation))
            .ok()
            .and_then(|text| text.parse().ok());
        self.side_loaded = Some((generation, count));
        Ok(())
    }
}

fn side_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("side.{generation}"))
}

pub(crate) fn open(dir: &Path) -> (Store<Log>, Recovery) {
    // `tests_kill` spawns child processes from other test threads: between fork and exec a
    // child briefly shares every open descriptor of this process, including the lock file of
    // a store a test just closed, so the lock can look held by our own pid for a moment.
    let started = std::time::Instant::now();
    loop {
        match Store::open(dir, Log::default()) {
            Err(StoreError::Locked { pid, .. })
                if pid == Some(std::process::id())
                    && started.elapsed() < std::time::Duration::from_secs(5) =>
            {
                std::thread::yield_now();
            }
            other => return other.expect("store opens"),
        }
    }
}

pub(crate) fn entries(store: &Store<Log>) -> Vec<String> {
    store.read(|log| log.entries.clone())
}

pub(crate) fn ops(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

pub(crate) fn wal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(files::wal_name(generation))
}

pub(crate) fn snapshot_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(files::snapshot_name(generation))
}

pub(crate) fn file_len(path: &Path) -> u64 {
    fs::metadata(path).expect("file exists").len()
}

/// Copies the store's files (not the lock) into `to`: the image a crash would leave, since
/// everything acknowledged is already on disk.
pub(crate) fn copy_image(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "lock" && entry.file_type().unwrap().is_file() {
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
