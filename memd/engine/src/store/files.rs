//! File naming and small durable-filesystem helpers of the store.
//!
//! Owns the on-disk names (`snapshot.<gen>`, `wal.<gen>`, their `.tmp` and quarantine forms),
//! directory scans, private (0600/0700) creation, directory fsync, and positioned reads and
//! writes (one implementation per platform, for the WAL and the token-state log). Must never
//! delete or rename anything by itself: callers decide what is garbage.
//!
//! Windows has no mode bits: files and directories created here inherit their parent's ACL,
//! which under `%LOCALAPPDATA%` grants only the user, SYSTEM and Administrators.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const SNAPSHOT_PREFIX: &str = "snapshot.";
const WAL_PREFIX: &str = "wal.";
const TEMP_SUFFIX: &str = ".tmp";

pub(crate) fn snapshot_name(generation: u64) -> String {
    // Zero-padded so a plain `ls` lists generations in order.
    format!("{SNAPSHOT_PREFIX}{generation:020}")
}

pub(crate) fn wal_name(generation: u64) -> String {
    format!("{WAL_PREFIX}{generation:020}")
}

pub(crate) fn temp_name(final_name: &str) -> String {
    format!("{final_name}{TEMP_SUFFIX}")
}

/// Where a damaged snapshot is moved so it is neither read again nor overwritten.
pub(crate) fn corrupt_snapshot_name(generation: u64) -> String {
    format!("{}.corrupt", snapshot_name(generation))
}

/// Where bytes cut from a WAL segment are kept for inspection.
pub(crate) fn discarded_wal_name(generation: u64, offset: u64) -> String {
    format!("{}.discarded-{offset}", wal_name(generation))
}

/// The store's files found in a directory, generations ascending.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub snapshots: Vec<u64>,
    pub segments: Vec<u64>,
    /// Half-written snapshot or segment files left by a crash.
    pub temps: Vec<PathBuf>,
}

pub(crate) fn scan(dir: &Path) -> io::Result<Listing> {
    let mut listing = Listing::default();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if let Some(generation) = parse_generation(&name, SNAPSHOT_PREFIX) {
            listing.snapshots.push(generation);
        } else if let Some(generation) = parse_generation(&name, WAL_PREFIX) {
            listing.segments.push(generation);
        } else if is_store_temp(&name) {
            listing.temps.push(entry.path());
        }
    }
    listing.snapshots.sort_unstable();
    listing.segments.sort_unstable();
    Ok(listing)
}

fn parse_generation(name: &str, prefix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn is_store_temp(name: &str) -> bool {
    name.strip_suffix(TEMP_SUFFIX).is_some_and(|stem| {
        parse_generation(stem, SNAPSHOT_PREFIX).is_some()
            || parse_generation(stem, WAL_PREFIX).is_some()
    })
}

/// Total size of the snapshot and WAL files (not temps, quarantine or side files).
pub(crate) fn data_bytes(dir: &Path) -> io::Result<u64> {
    let listing = scan(dir)?;
    let names = listing
        .snapshots
        .iter()
        .map(|g| snapshot_name(*g))
        .chain(listing.segments.iter().map(|g| wal_name(*g)));
    let mut total = 0;
    for name in names {
        match fs::metadata(dir.join(name)) {
            Ok(meta) => total += meta.len(),
            // A concurrent snapshot may have just pruned it.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// Creates `dir` (0700) if needed and makes its entry durable, so acknowledged data cannot
/// vanish with a directory entry lost in a crash. An existing directory keeps its mode.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    builder.create(dir)?;
    match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Creates (or empties) a private file for writing.
pub(crate) fn create_private_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    options.open(path)
}

pub(crate) fn open_read_write(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// Makes creations, renames and deletions inside `dir` durable.
#[cfg(not(windows))]
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Windows opens a directory only with `FILE_FLAG_BACKUP_SEMANTICS` and flushes it only
/// through a handle with write access. Where it refuses that flush (access denied, or a file
/// system without the operation), NTFS's own metadata journal is what makes the entry durable:
/// the refusal is not an error, any other failure is.
#[cfg(windows)]
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Foundation::ERROR_INVALID_FUNCTION;
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_BACKUP_SEMANTICS;
    let refused = |e: &io::Error| {
        e.kind() == io::ErrorKind::PermissionDenied
            || e.raw_os_error() == Some(ERROR_INVALID_FUNCTION as i32)
    };
    let flushed = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(dir)
        .and_then(|d| d.sync_all());
    match flushed {
        Err(e) if !refused(&e) => Err(e),
        _ => Ok(()),
    }
}

/// Writes `bytes` to a private file at `path` and makes it durable (used for quarantine copies).
pub(crate) fn write_private_durably(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = create_private_file(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    sync_dir(dir)
}

/// Writes all of `buf` at `offset`, leaving other offsets alone (`pwrite` on Unix).
#[cfg(unix)]
pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(buf, offset)
}

/// Windows' positioned write also moves the handle's cursor, which nothing here reads: every
/// write names its offset.
#[cfg(windows)]
pub(crate) fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_write(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `offset`, leaving the cursor alone (`pread` on Unix),
/// so concurrent readers of one handle never contend for it.
#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

/// Windows' positioned read also moves the handle's cursor, which nothing here reads: every
/// read and write names its offset.
#[cfg(windows)]
pub(crate) fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_recognises_only_store_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            snapshot_name(3),
            snapshot_name(12),
            wal_name(3),
            wal_name(4),
            temp_name(&snapshot_name(13)),
            corrupt_snapshot_name(11),
            discarded_wal_name(4, 99),
            "lock".to_owned(),
            "wal.".to_owned(),
            "snapshot.x1".to_owned(),
            "index.12.usearch".to_owned(),
        ] {
            fs::write(dir.path().join(name), b"x").unwrap();
        }
        let listing = scan(dir.path()).unwrap();
        assert_eq!(listing.snapshots, vec![3, 12]);
        assert_eq!(listing.segments, vec![3, 4]);
        assert_eq!(
            listing.temps,
            vec![dir.path().join(temp_name(&snapshot_name(13)))]
        );
        assert_eq!(data_bytes(dir.path()).unwrap(), 4);
    }
}
