//! The late-interaction token states held in memory, on disk, so a restart neither re-encodes
//! every memory (~7 ms each) nor re-codes the log (`late_disk`):
//! `<data dir>/store/token-states.bin`, written at shutdown and now and then while running,
//! replaced atomically.
//!
//! Owns the format, version 2: `memdtok2`, the values per token (u32), the codebook's
//! sub-vector count (u32; 0: no codebook yet) and its centroids (f32 each, `late_codes`); then
//! per memory its key (u64), the CRC-32 of the text its states came from (u32), its form (u8:
//! 0 i8, 1 codes), its token count (u32) and its states (i8: the scales, f32 each, then the
//! values, i8 each; codes: `SUBVECTORS` bytes a token); then the memory count (u64), the
//! CRC-32 of everything before it (u32) and `memdtok2` again. All little-endian. Version 1
//! (`memdtok1`: no codebook, no form byte, i8 only) is still read. Entries whose full states
//! the log does not hold are not used (`late_open`), and a codebook of another sub-vector
//! count (64, before the log) is refused: those states are encoded again. Must never fail a
//! start: the file is derived data, so a missing, truncated, corrupt or foreign file loads as
//! nothing (logged) and the states come from the log or are encoded again.

use super::embed::{DIMS, TokenStates};
use super::late_codes::{Codebook, Codes, SUBVECTORS, Stored};
use anyhow::{Context, Result, bail, ensure};
use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"memdtok2";
const MAGIC_V1: &[u8; 8] = b"memdtok1";
/// Memory count, checksum, magic.
const TRAILER_LEN: usize = 8 + 4 + 8;
pub const FILE_NAME: &str = "token-states.bin";

/// One memory's saved states: (key, text hash, states).
pub type Entry = (u64, u32, Stored);

/// Writes `entries` to `path` through a temporary file: fsync, rename, fsync of the directory.
/// On error `path` is untouched and the temporary file removed.
pub fn save(
    path: &Path,
    codebook: Option<&Codebook>,
    entries: &[(u64, u32, &Stored)],
) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_to(&tmp, codebook, entries).and_then(|()| {
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

fn write_to(
    tmp: &Path,
    codebook: Option<&Codebook>,
    entries: &[(u64, u32, &Stored)],
) -> Result<()> {
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
    match codebook {
        Some(c) => {
            out.write_all(&(SUBVECTORS as u32).to_le_bytes())?;
            let floats: Vec<u8> = c.as_floats().iter().flat_map(|f| f.to_le_bytes()).collect();
            out.write_all(&floats)?;
        }
        None => out.write_all(&0u32.to_le_bytes())?,
    }
    for (key, hash, states) in entries {
        out.write_all(&key.to_le_bytes())?;
        out.write_all(&hash.to_le_bytes())?;
        match states {
            Stored::Full(states) => {
                out.write_all(&[0])?;
                write_full(&mut out, states)?;
            }
            Stored::Coded(codes) => {
                out.write_all(&[1])?;
                out.write_all(&(codes.tokens() as u32).to_le_bytes())?;
                out.write_all(codes.as_bytes())?;
            }
        }
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

fn write_full(out: &mut impl Write, states: &TokenStates) -> Result<()> {
    let (values, scales) = states.parts();
    out.write_all(&(scales.len() as u32).to_le_bytes())?;
    for s in scales {
        out.write_all(&s.to_le_bytes())?;
    }
    let bytes: Vec<u8> = values.iter().map(|&v| v as u8).collect();
    out.write_all(&bytes)?;
    Ok(())
}

/// What `path` holds (the codebook, when one was trained, and every memory's states); an
/// error says why it cannot be used.
pub fn load(path: &Path) -> Result<(Option<Codebook>, Vec<Entry>)> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let magic = match bytes.get(..MAGIC.len()) {
        Some(m) if m == MAGIC => MAGIC,
        Some(m) if m == MAGIC_V1 => MAGIC_V1,
        _ => bail!("{} is not a token-state file", path.display()),
    };
    ensure!(
        bytes.len() >= MAGIC.len() + 4 + TRAILER_LEN,
        "{} is not a token-state file",
        path.display()
    );
    let body_end = bytes.len() - TRAILER_LEN;
    let trailer = &bytes[body_end..];
    ensure!(&trailer[12..] == magic, "{} is truncated", path.display());
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
    let v2 = magic == MAGIC;
    let codebook = match v2 {
        true => read_codebook(&mut r).with_context(|| format!("{}", path.display()))?,
        false => None,
    };
    // An entry takes at least 16 bytes: a count the body cannot hold reserves nothing more.
    let mut entries = Vec::with_capacity(count.min((body_end / 16) as u64) as usize);
    for _ in 0..count {
        let key = r.u64()?;
        let hash = r.u32()?;
        let form = if v2 { r.take(1)?[0] } else { 0 };
        let states = match form {
            0 => read_full(&mut r).map(Stored::Full),
            1 if codebook.is_some() => read_codes(&mut r).map(Stored::Coded),
            _ => None,
        };
        let Some(states) = states else {
            bail!("{} has a malformed entry", path.display());
        };
        entries.push((key, hash, states));
    }
    ensure!(r.at == body_end, "{} has trailing bytes", path.display());
    Ok((codebook, entries))
}

/// The codebook of a version-2 file (`None`: not trained yet).
fn read_codebook(r: &mut Reader) -> Result<Option<Codebook>> {
    let subvectors = r.u32()? as usize;
    if subvectors == 0 {
        return Ok(None);
    }
    ensure!(
        subvectors == SUBVECTORS,
        "codebook of {subvectors} sub-vectors, expected {SUBVECTORS}"
    );
    let n = super::late_codes::CENTROIDS * DIMS;
    let floats: Vec<f32> = r
        .take(n * 4)?
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Codebook::from_centroids(floats)
        .map(Some)
        .context("malformed codebook")
}

/// One memory's i8 states; `None` when malformed or past the end.
fn read_full(r: &mut Reader) -> Option<TokenStates> {
    let tokens = r.u32().ok()? as usize;
    let scales = (0..tokens)
        .map(|_| r.f32())
        .collect::<Result<Vec<f32>>>()
        .ok()?;
    let values: Vec<i8> = r
        .take(tokens.checked_mul(DIMS)?)
        .ok()?
        .iter()
        .map(|&b| b as i8)
        .collect();
    TokenStates::from_parts(values, scales)
}

/// One memory's codes; `None` when past the end.
fn read_codes(r: &mut Reader) -> Option<Codes> {
    let tokens = r.u32().ok()? as usize;
    Codes::from_bytes(r.take(tokens.checked_mul(SUBVECTORS)?).ok()?)
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

    /// Two memories' i8 states and one memory's codes, saved in `dir` with a codebook: (the
    /// file, the codebook, what was saved).
    fn saved_sample(dir: &Path) -> (PathBuf, Codebook, Vec<Entry>) {
        let path = path_in(dir);
        let codebook = super::super::late_codes::tests::sample_codebook();
        let coded = codebook.encode(&TokenStates::for_tests(&[0.5, 1.0]).rows());
        let entries = vec![
            (1, 11, Stored::Full(TokenStates::for_tests(&[0.5, -0.25]))),
            (7, 77, Stored::Full(TokenStates::for_tests(&[1.0]))),
            (9, 99, Stored::Coded(coded)),
        ];
        let refs: Vec<(u64, u32, &Stored)> = entries.iter().map(|(k, h, s)| (*k, *h, s)).collect();
        save(&path, Some(&codebook), &refs).unwrap();
        (path, codebook, entries)
    }

    #[test]
    fn round_trip_keeps_the_codebook_and_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let (path, codebook, entries) = saved_sample(dir.path());
        assert_eq!(load(&path).unwrap(), (Some(codebook), entries));
        assert!(!temp_path(&path).exists());
        // Empty, without a codebook, is a valid file too.
        save(&path, None, &[]).unwrap();
        assert_eq!(load(&path).unwrap(), (None, vec![]));
    }

    #[test]
    fn codes_without_a_codebook_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        let codebook = super::super::late_codes::tests::sample_codebook();
        let coded = Stored::Coded(codebook.encode(&TokenStates::for_tests(&[0.5]).rows()));
        save(&path, None, &[(3, 33, &coded)]).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("malformed entry"), "{err}");
    }

    /// The first format, as version 1 wrote it: i8 states only.
    fn v1_file(entries: &[(u64, u32, &TokenStates)]) -> Vec<u8> {
        let mut body = MAGIC_V1.to_vec();
        body.extend((DIMS as u32).to_le_bytes());
        for (key, hash, states) in entries {
            body.extend(key.to_le_bytes());
            body.extend(hash.to_le_bytes());
            write_full(&mut body, states).unwrap();
        }
        body.extend((entries.len() as u64).to_le_bytes());
        let crc = crc32fast::hash(&body);
        body.extend(crc.to_le_bytes());
        body.extend(MAGIC_V1);
        body
    }

    #[test]
    fn a_file_of_the_first_format_loads_as_i8_states() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        let a = TokenStates::for_tests(&[0.5, -0.25]);
        fs::write(&path, v1_file(&[(1, 11, &a)])).unwrap();
        assert_eq!(load(&path).unwrap(), (None, vec![(1, 11, Stored::Full(a))]));
        // Damaged like any other file: refused.
        let mut bad = fs::read(&path).unwrap();
        bad[20] ^= 0x40;
        fs::write(&path, &bad).unwrap();
        assert!(load(&path).is_err());
    }

    #[test]
    fn every_truncation_and_any_flipped_byte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _, _) = saved_sample(dir.path());
        let good = fs::read(&path).unwrap();
        // Every cut inside the entries and the trailer, and a sample of cuts in the codebook.
        let cuts = (0..64).chain((good.len() - 2_000)..good.len());
        for len in cuts {
            fs::write(&path, &good[..len]).unwrap();
            assert!(load(&path).is_err(), "truncated to {len} bytes");
        }
        for at in [0, 9, 13, 20, 5_000, good.len() - 200, good.len() - 15] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            fs::write(&path, &bad).unwrap();
            assert!(load(&path).is_err(), "byte {at} flipped");
        }
        assert!(load(&dir.path().join("missing")).is_err());
    }
}
