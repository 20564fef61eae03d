//! The late-interaction token states on disk, so a restart does not re-encode every memory
//! (~7 ms each): `<data dir>/store/token-states.bin`, written at shutdown and now and then while
//! running, replaced atomically.
//!
//! Owns the format: `memdtok1`, the values per token (u32), then per memory its key (u64), the
//! CRC-32 of the text its states came from (u32), its token count (u32), the scales (f32 each)
//! and the values (i8 each); then the memory count (u64), the CRC-32 of everything before it
//! (u32) and `memdtok1` again. All little-endian. Must never fail a start: the file is derived
//! data, so a missing, truncated, corrupt or foreign file loads as nothing (logged) and the
//! states are encoded again.

use super::embed::{DIMS, TokenStates};
use anyhow::{Context, Result, bail, ensure};
use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"memdtok1";
/// Memory count, checksum, magic.
const TRAILER_LEN: usize = 8 + 4 + 8;
pub const FILE_NAME: &str = "token-states.bin";

/// One memory's saved states: (key, text hash, states).
pub type Entry = (u64, u32, TokenStates);

/// Writes `entries` to `path` through a temporary file: fsync, rename, fsync of the directory.
/// On error `path` is untouched and the temporary file removed.
pub fn save(path: &Path, entries: &[(u64, u32, &TokenStates)]) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_to(&tmp, entries).and_then(|()| {
        fs::rename(&tmp, path).with_context(|| format!("renaming onto {}", path.display()))?;
        if let Some(dir) = path.parent() {
            crate::store::sync_dir(dir).ok();
        }
        Ok(())
    });
    if result.is_err() {
        fs::remove_file(&tmp).ok();
    }
    result
}

fn write_to(tmp: &Path, entries: &[(u64, u32, &TokenStates)]) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    let mut out = Checksummed {
        inner: BufWriter::new(file),
        crc: crc32fast::Hasher::new(),
    };
    out.write_all(MAGIC)?;
    out.write_all(&(DIMS as u32).to_le_bytes())?;
    for (key, hash, states) in entries {
        let (values, scales) = states.parts();
        out.write_all(&key.to_le_bytes())?;
        out.write_all(&hash.to_le_bytes())?;
        out.write_all(&(scales.len() as u32).to_le_bytes())?;
        for s in scales {
            out.write_all(&s.to_le_bytes())?;
        }
        let bytes: Vec<u8> = values.iter().map(|&v| v as u8).collect();
        out.write_all(&bytes)?;
    }
    out.write_all(&(entries.len() as u64).to_le_bytes())?;
    let crc = out.crc.clone().finalize();
    let mut file = out.inner;
    file.write_all(&crc.to_le_bytes())?;
    file.write_all(MAGIC)?;
    let file = file.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(())
}

/// What `path` holds; an error says why it cannot be used.
pub fn load(path: &Path) -> Result<Vec<Entry>> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(
        bytes.len() >= MAGIC.len() + 4 + TRAILER_LEN && bytes.starts_with(MAGIC),
        "{} is not a token-state file",
        path.display()
    );
    let body_end = bytes.len() - TRAILER_LEN;
    let trailer = &bytes[body_end..];
    ensure!(&trailer[12..] == MAGIC, "{} is truncated", path.display());
    let count = u64::from_le_bytes(trailer[..8].try_into()?);
    let crc = u32::from_le_bytes(trailer[8..12].try_into()?);
    // The count is covered by the checksum too.
    ensure!(
        crc32fast::hash(&bytes[..body_end + 8]) == crc,
        "{} is corrupt (checksum)",
        path.display()
    );
    let mut r = Reader {
        bytes: &bytes[..body_end],
        at: MAGIC.len(),
    };
    let dims = r.u32()? as usize;
    ensure!(
        dims == DIMS,
        "{} holds {dims}-d states, expected {DIMS}",
        path.display()
    );
    // An entry takes at least 16 bytes: a count the body cannot hold reserves nothing more.
    let mut entries = Vec::with_capacity(count.min((body_end / 16) as u64) as usize);
    for _ in 0..count {
        let key = r.u64()?;
        let hash = r.u32()?;
        let tokens = r.u32()? as usize;
        let scales = (0..tokens).map(|_| r.f32()).collect::<Result<Vec<f32>>>()?;
        let Some(len) = tokens.checked_mul(DIMS) else {
            bail!("{} has a malformed entry", path.display());
        };
        let values: Vec<i8> = r.take(len)?.iter().map(|&b| b as i8).collect();
        let Some(states) = TokenStates::from_parts(values, scales) else {
            bail!("{} has a malformed entry", path.display());
        };
        entries.push((key, hash, states));
    }
    ensure!(r.at == body_end, "{} has trailing bytes", path.display());
    Ok(entries)
}

pub fn path_in(store_dir: &Path) -> PathBuf {
    store_dir.join(FILE_NAME)
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// A writer that checksums what passes through it.
struct Checksummed<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            bail!("entry runs past the end of the file");
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }

    fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take(4)?.try_into()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two memories' states saved in `dir`: (the file, what was saved).
    fn saved_sample(dir: &Path) -> (PathBuf, Vec<Entry>) {
        let path = path_in(dir);
        let entries = vec![
            (1, 11, TokenStates::for_tests(&[0.5, -0.25])),
            (7, 77, TokenStates::for_tests(&[1.0])),
        ];
        let refs: Vec<(u64, u32, &TokenStates)> =
            entries.iter().map(|(k, h, s)| (*k, *h, s)).collect();
        save(&path, &refs).unwrap();
        (path, entries)
    }

    #[test]
    fn round_trip_keeps_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let (path, entries) = saved_sample(dir.path());
        assert_eq!(load(&path).unwrap(), entries);
        assert!(!temp_path(&path).exists());
        // Empty is a valid file too.
        save(&path, &[]).unwrap();
        assert!(load(&path).unwrap().is_empty());
    }

    #[test]
    fn every_truncation_and_any_flipped_byte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = saved_sample(dir.path());
        let good = fs::read(&path).unwrap();
        for len in 0..good.len() {
            fs::write(&path, &good[..len]).unwrap();
            assert!(load(&path).is_err(), "truncated to {len} bytes");
        }
        for at in [0, 9, 20, good.len() / 2, good.len() - 15] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            fs::write(&path, &bad).unwrap();
            assert!(load(&path).is_err(), "byte {at} flipped");
        }
        assert!(load(&dir.path().join("missing")).is_err());
    }
}
