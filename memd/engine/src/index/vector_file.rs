//! The vector index's file: usearch's own image followed by a memd trailer, replaced atomically.
//!
//! Owns the trailer format (magic, payload length, CRC-32 of the payload, dimensions) and the
//! temp-file/fsync/rename sequence. Must never interpret usearch's bytes: it only frames them,
//! because usearch's format has no checksum and a flipped bit in a neighbour list could crash
//! a search instead of failing the load.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail, ensure};

/// Version 2: i8 vectors. A version-1 (f32) file fails `verify`, so memd re-embeds from the
/// store instead of misreading it.
const MAGIC: &[u8; 8] = b"memdvec2";
const TRAILER_LEN: u64 = 24;

/// Writes a new image to `path`: `write_payload` fills a temp file in the same directory, the
/// trailer is appended, then fsync, rename over `path`, fsync of the directory. On error the
/// temp file is removed and `path` is untouched.
pub(crate) fn save_atomically(
    path: &Path,
    dims: usize,
    write_payload: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_payload(&tmp)
        .and_then(|()| append_trailer(&tmp, dims))
        .and_then(|()| {
            fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
            sync_parent_dir(path)
        });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn append_trailer(tmp: &Path, dims: usize) -> Result<()> {
    let (len, crc) = checksum(tmp, None)?;
    let mut file = OpenOptions::new()
        .append(true)
        .open(tmp)
        .with_context(|| format!("open {}", tmp.display()))?;
    file.write_all(&trailer(len, crc, dims))?;
    file.sync_all()
        .with_context(|| format!("fsync {}", tmp.display()))
}

pub(crate) fn utf8_path(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| anyhow!("path is not UTF-8: {}", path.display()))
}

pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

fn sync_parent_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    crate::store::sync_dir(dir).with_context(|| format!("fsync directory {}", dir.display()))
}

fn trailer(len: u64, crc: u32, dims: usize) -> [u8; TRAILER_LEN as usize] {
    let mut t = [0u8; TRAILER_LEN as usize];
    t[..8].copy_from_slice(MAGIC);
    t[8..16].copy_from_slice(&len.to_le_bytes());
    t[16..20].copy_from_slice(&crc.to_le_bytes());
    t[20..24].copy_from_slice(&(dims as u32).to_le_bytes());
    t
}

/// Checks the trailer and the payload checksum of a saved image.
pub(crate) fn verify(path: &Path, dims: usize) -> Result<()> {
    let mut file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let total = file.metadata()?.len();
    ensure!(
        total > TRAILER_LEN,
        "vector index {} is truncated ({total} bytes)",
        path.display()
    );
    file.seek(SeekFrom::Start(total - TRAILER_LEN))?;
    let mut t = [0u8; TRAILER_LEN as usize];
    file.read_exact(&mut t)?;
    if &t[..8] != MAGIC {
        bail!(
            "vector index {} is truncated or not a memd index",
            path.display()
        );
    }
    let field = |r: std::ops::Range<usize>| {
        t[r].iter()
            .rev()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b))
    };
    let (len, crc, stored_dims) = (field(8..16), field(16..20) as u32, field(20..24));
    ensure!(
        len == total - TRAILER_LEN,
        "vector index {} is truncated",
        path.display()
    );
    ensure!(
        stored_dims == dims as u64,
        "vector index {} has {stored_dims} dimensions, expected {dims}",
        path.display()
    );
    let (_, actual) = checksum(path, Some(len))?;
    ensure!(
        actual == crc,
        "vector index {} is corrupt (checksum)",
        path.display()
    );
    Ok(())
}

/// Length and CRC-32 of the first `limit` bytes of `path` (the whole file if `None`).
fn checksum(path: &Path, limit: Option<u64>) -> Result<(u64, u32)> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file.take(limit.unwrap_or(u64::MAX)));
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((len, hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("img");
        save_atomically(&path, 7, |tmp| Ok(fs::write(tmp, b"payload bytes")?)).expect("save");
        verify(&path, 7).expect("verify");
        assert!(verify(&path, 8).is_err(), "dims mismatch");
        let mut bytes = fs::read(&path).expect("read");
        assert_eq!(bytes.len() as u64, 13 + TRAILER_LEN);
        bytes[0] ^= 1;
        fs::write(&path, &bytes).expect("write");
        assert!(verify(&path, 7).is_err(), "payload bit flip");
    }

    #[test]
    fn failed_save_keeps_the_old_file_and_no_temp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("img");
        save_atomically(&path, 3, |tmp| Ok(fs::write(tmp, b"old")?)).expect("save");
        let before = fs::read(&path).expect("read");
        let err = save_atomically(&path, 3, |tmp| {
            fs::write(tmp, b"half written")?;
            Err(anyhow!("disk full"))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&path).expect("read"), before);
        assert!(!temp_path(&path).exists());
        let missing_dir = dir.path().join("no/such/dir/img");
        assert!(save_atomically(&missing_dir, 3, |tmp| Ok(fs::write(tmp, b"x")?)).is_err());
    }
}
