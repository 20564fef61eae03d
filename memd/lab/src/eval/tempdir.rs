//! A scratch directory for one evaluation run, removed when dropped.
//!
//! Owns only the directory's life. Must never be pointed at an existing directory: it always
//! creates a fresh one under the system temp dir.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A new empty directory `<tmp>/<prefix>-<pid>-<n>-<nanos>`.
    pub(crate) fn new(prefix: &str) -> Result<TempDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "{prefix}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir(&path)
            .with_context(|| format!("cannot create scratch dir {}", path.display()))?;
        Ok(TempDir { path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
