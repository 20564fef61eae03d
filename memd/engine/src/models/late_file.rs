//! The late-interaction token states held in memory, on disk, so a restart neither re-encodes
//! every memory (~7 ms each) nor re-codes or re-scans the log (`late_disk`):
//! `<data dir>/store/token-states.bin`, written at shutdown and now and then while running,
//! replaced atomically.
//!
//! Owns the format, version 3: `memdtok3`, the values per token (u32), the SHA-256 of the
//! late-interaction model that made the states (32 bytes), the codebook's sub-vector count
//! (u32; 0: no codebook yet) and its centroids (f32 each, `late_codes`); then per memory its
//! key (u64), the CRC-32 of the text its states came from (u32), its form (u8: 0 i8, 1 codes),
//! its token count (u32) and its states (i8: the scales, f32 each, then the values, i8 each;
//! codes: `SUBVECTORS` bytes a token); then the log's index (`late_disk::SavedIndex`): the
//! log's generation (u64), the end it covers (u64), the record count (u64) and per record its
//! key (u64), text hash (u32), offset (u64), length (u32) and kept tokens (u32); then the
//! memory count (u64), the CRC-32 of everything before it (u32) and `memdtok3` again. All
//! little-endian. A file of another model is refused, and so are versions 1 and 2
//! (`memdtok1`, `memdtok2`), which named no model: their states are encoded again
//! (`late_open`). Entries whose full states the log does not hold are not used. Must never
//! fail a start: the file is derived data, so a missing, truncated, corrupt or foreign file
//! loads as nothing (logged) and the states come from the log (scanned) or are encoded again.

use super::embed::{DIMS, TokenStates};
use super::late_codes::{Codebook, Codes, SUBVECTORS, Stored};
use super::late_disk::{Digest, SavedIndex, Slot};
use anyhow::{Context, Result, bail, ensure};
use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"memdtok3";
/// Earlier versions: their states may be of any model.
const OLDER: [&[u8; 8]; 2] = [b"memdtok1", b"memdtok2"];
/// Memory count, checksum, magic.
const TRAILER_LEN: usize = 8 + 4 + 8;
pub const FILE_NAME: &str = "token-states.bin";

/// One memory's saved states: (key, text hash, states).
pub type Entry = (u64, u32, Stored);

/// What a file holds.
#[derive(Debug, PartialEq)]
pub struct Saved {
    /// The codebook, when one was trained.
    pub codebook: Option<Codebook>,
    pub entries: Vec<Entry>,
    /// The log's index when the file was written.
    pub index: SavedIndex,
}

/// What to write: the model's digest, the codebook, every memory's states, the log's index.
pub struct ToSave<'a> {
    pub digest: &'a Digest,
    pub codebook: Option<&'a Codebook>,
    pub entries: &'a [(u64, u32, &'a Stored)],
    pub index: &'a SavedIndex,
}

/// Writes `what` to `path` through a temporary file: fsync, rename, fsync of the directory.
/// On error `path` is untouched and the temporary file removed.
pub fn save(path: &Path, what: &ToSave) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_to(&tmp, what).and_then(|()| {
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

fn write_to(tmp: &Path, what: &ToSave) -> Result<()> {
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
    out.write_all(what.digest)?;
    match what.codebook {
        Some(c) => {
            out.write_all(&(SUBVECTORS as u32).to_le_bytes())?;
            let floats: Vec<u8> = c.as_floats().iter().flat_map(|f| f.to_le_bytes()).collect();
            out.write_all(&floats)?;
        }
        None => out.write_all(&0u32.to_le_bytes())?,
    }
    for (key, hash, states) in what.entries {
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
    write_index(&mut out, what.index)?;
    out.write_all(&(what.entries.len() as u64).to_le_bytes())?;
    let crc = out.crc.clone().finalize();
    let mut file = out.inner;
    file.write_all(&crc.to_le_bytes())?;
    file.write_all(MAGIC)?;
    let file = file.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(())
}

fn write_index(out: &mut impl Write, index: &SavedIndex) -> Result<()> {
    let mut bytes = Vec::with_capacity(24 + index.slots.len() * SLOT_LEN);
    bytes.extend(index.generation.to_le_bytes());
    bytes.extend(index.end.to_le_bytes());
    bytes.extend((index.slots.len() as u64).to_le_bytes());
    for (key, s) in &index.slots {
        bytes.extend(key.to_le_bytes());
        bytes.extend(s.hash.to_le_bytes());
        bytes.extend(s.offset.to_le_bytes());
        bytes.extend(s.len.to_le_bytes());
        bytes.extend(s.kept.to_le_bytes());
    }
    out.write_all(&bytes)?;
    Ok(())
}

/// Bytes of one record's place in the saved index.
const SLOT_LEN: usize = 8 + 4 + 8 + 4 + 4;

fn read_index(r: &mut Reader) -> Result<SavedIndex> {
    let generation = r.u64()?;
    let end = r.u64()?;
    let count = r.u64()?;
    let room = (r.bytes.len() - r.at) / SLOT_LEN;
    ensure!(
        count <= room as u64,
        "index of {count} records runs past the end"
    );
    let mut slots = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let key = r.u64()?;
        let slot = Slot {
            hash: r.u32()?,
            offset: r.u64()?,
            len: r.u32()?,
            kept: r.u32()?,
        };
        slots.push((key, slot));
    }
    Ok(SavedIndex {
        generation,
        end,
        slots,
    })
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

/// What `path` holds for the states of the model `digest`; an error says why it cannot be
/// used.
pub fn load(path: &Path, digest: &Digest) -> Result<Saved> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    match bytes.get(..MAGIC.len()) {
        Some(m) if m == MAGIC => {}
        Some(m) if OLDER.iter().any(|o| m == *o) => {
            bail!(
                "{} is of a previous format, which does not name its model",
                path.display()
            )
        }
        _ => bail!("{} is not a token-state file", path.display()),
    }
    ensure!(
        bytes.len() >= MAGIC.len() + 4 + 32 + TRAILER_LEN,
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
    let made_by = r.take(32)?;
    ensure!(
        made_by == digest,
        "{} holds the states of another late-interaction model (sha256 {})",
        path.display(),
        hex::encode(made_by)
    );
    let codebook = read_codebook(&mut r).with_context(|| format!("{}", path.display()))?;
    // An entry takes at least 16 bytes: a count the body cannot hold reserves nothing more.
    let mut entries = Vec::with_capacity(count.min((body_end / 16) as u64) as usize);
    for _ in 0..count {
        let key = r.u64()?;
        let hash = r.u32()?;
        let states = match r.take(1)?[0] {
            0 => read_full(&mut r).map(Stored::Full),
            1 if codebook.is_some() => read_codes(&mut r).map(Stored::Coded),
            _ => None,
        };
        let Some(states) = states else {
            bail!("{} has a malformed entry", path.display());
        };
        entries.push((key, hash, states));
    }
    let index = read_index(&mut r).with_context(|| format!("{}", path.display()))?;
    ensure!(r.at == body_end, "{} has trailing bytes", path.display());
    Ok(Saved {
        codebook,
        entries,
        index,
    })
}

/// The codebook (`None`: not trained yet).
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

    const MODEL: Digest = [7; 32];

    fn index() -> SavedIndex {
        let slot = |offset| Slot {
            hash: 11,
            offset,
            len: 400,
            kept: 3,
        };
        SavedIndex {
            generation: 42,
            end: 852,
            slots: vec![(1, slot(52)), (9, slot(452))],
        }
    }

    /// Two memories' i8 states and one memory's codes, saved in `dir` with a codebook and an
    /// index: (the file, what was saved).
    fn saved_sample(dir: &Path) -> (PathBuf, Saved) {
        let path = path_in(dir);
        let codebook = super::super::late_codes::tests::sample_codebook();
        let coded = codebook.encode(&TokenStates::for_tests(&[0.5, 1.0]).rows());
        let entries = vec![
            (1, 11, Stored::Full(TokenStates::for_tests(&[0.5, -0.25]))),
            (7, 77, Stored::Full(TokenStates::for_tests(&[1.0]))),
            (9, 99, Stored::Coded(coded)),
        ];
        let refs: Vec<(u64, u32, &Stored)> = entries.iter().map(|(k, h, s)| (*k, *h, s)).collect();
        let what = ToSave {
            digest: &MODEL,
            codebook: Some(&codebook),
            entries: &refs,
            index: &index(),
        };
        save(&path, &what).unwrap();
        let saved = Saved {
            codebook: Some(codebook),
            entries,
            index: index(),
        };
        (path, saved)
    }

    #[test]
    fn round_trip_keeps_the_codebook_every_entry_and_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let (path, saved) = saved_sample(dir.path());
        assert_eq!(load(&path, &MODEL).unwrap(), saved);
        assert!(!temp_path(&path).exists());
        // Empty, without a codebook, is a valid file too.
        let empty = ToSave {
            digest: &MODEL,
            codebook: None,
            entries: &[],
            index: &SavedIndex::default(),
        };
        save(&path, &empty).unwrap();
        let loaded = load(&path, &MODEL).unwrap();
        assert_eq!((loaded.codebook, loaded.entries.len()), (None, 0));
        assert_eq!(loaded.index, SavedIndex::default());
    }

    #[test]
    fn states_of_another_model_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = saved_sample(dir.path());
        let err = load(&path, &[8; 32]).unwrap_err().to_string();
        assert!(err.contains("another late-interaction model"), "{err}");
        assert!(err.contains(&hex::encode(MODEL)), "names the model: {err}");
    }

    #[test]
    fn codes_without_a_codebook_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        let codebook = super::super::late_codes::tests::sample_codebook();
        let coded = Stored::Coded(codebook.encode(&TokenStates::for_tests(&[0.5]).rows()));
        let what = ToSave {
            digest: &MODEL,
            codebook: None,
            entries: &[(3, 33, &coded)],
            index: &index(),
        };
        save(&path, &what).unwrap();
        let err = load(&path, &MODEL).unwrap_err().to_string();
        assert!(err.contains("malformed entry"), "{err}");
    }

    #[test]
    fn files_of_the_previous_formats_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        // Version 2 as the previous release wrote it: no model, no index (here: empty).
        let mut body = b"memdtok2".to_vec();
        body.extend((DIMS as u32).to_le_bytes());
        body.extend(0u32.to_le_bytes());
        body.extend(0u64.to_le_bytes());
        let crc = crc32fast::hash(&body);
        body.extend(crc.to_le_bytes());
        body.extend(b"memdtok2");
        for magic in [b"memdtok1", b"memdtok2"] {
            body[..8].copy_from_slice(magic);
            fs::write(&path, &body).unwrap();
            let err = load(&path, &MODEL).unwrap_err().to_string();
            assert!(err.contains("previous format"), "{err}");
        }
    }

    #[test]
    fn every_truncation_and_any_flipped_byte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = saved_sample(dir.path());
        let good = fs::read(&path).unwrap();
        // Every cut inside the entries, the index and the trailer, and a sample of cuts in
        // the codebook.
        let cuts = (0..64).chain((good.len() - 2_000)..good.len());
        for len in cuts {
            fs::write(&path, &good[..len]).unwrap();
            assert!(load(&path, &MODEL).is_err(), "truncated to {len} bytes");
        }
        for at in [0, 9, 13, 20, 50, 5_000, good.len() - 60, good.len() - 15] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            fs::write(&path, &bad).unwrap();
            assert!(load(&path, &MODEL).is_err(), "byte {at} flipped");
        }
        assert!(load(&dir.path().join("missing"), &MODEL).is_err());
    }
}
