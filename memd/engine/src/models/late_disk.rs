//! The full-precision (i8) token states of every memory on disk, so memory holds only their
//! 16-byte codes (`late_codes`) and a prompt reads back the best `late::RESCORE` of the code
//! order to rescore them (`late::reorder_within`): `<data dir>/store/token-states.log`.
//!
//! Owns that file: append-only, one record per encoded memory, a batch of records fsync'd once
//! before its memories count as covered; an index in memory (key → the text hash, where its
//! record lies, how many of its tokens are kept for the codes); the open, which takes the index
//! saved with the codes (`late_file`) when it belongs to this log's generation and scans only
//! the records appended after it, or else scans the whole log, keeping every whole record and
//! cutting a torn or damaged tail (what it held is encoded again); the checksum of every read
//! (a damaged record is dropped from the index, never scored); compaction once dropped records
//! outweigh live ones. Format: `memdtsl2`, the values per token (u32), the SHA-256 of the
//! late-interaction model that made the states (32 bytes; a log of another model, or of
//! `memdtsl1` which named none, is started afresh), the log's generation (u64, random, new at
//! every compaction and every cut, so an index saved before either is never applied); then per
//! record (its bytes: `late_record`) its payload's length (u32), the CRC-32 of the payload
//! (u32) and the payload: key (u64), text hash (u32), token count (u32), a bit per token (kept
//! for the codes: not a marker, not punctuation), the scales (f32 each), the values (i8 each).
//! All little-endian.
//! Must never trust a record whose checksum fails, never apply states of another model, and
//! never block a reader on an fsync (appends write outside the index lock).

use super::embed::DIMS;
use super::late_record::Form;
pub use super::late_record::Full;
use super::late_record::{
    MAX_TOKENS, PAYLOAD_HEAD, RECORD_HEAD, encode_record, max_payload, parse_record,
};
use crate::store::{read_exact_at, write_all_at};
use anyhow::{Context, Result, bail, ensure};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

const MAGIC: &[u8; 8] = b"memdtsl2";
/// The format before the model's digest: its states may be of any model.
const MAGIC_V1: &[u8; 8] = b"memdtsl1";
/// Magic, values per token, the model's digest, the generation.
const HEADER_LEN: u64 = 8 + 4 + 32 + 8;
/// Where the generation lies in the header.
const GENERATION_AT: u64 = 8 + 4 + 32;
/// Compaction once dropped records hold more than the live ones and at least this much.
const COMPACT_MIN_GARBAGE: u64 = 1024 * 1024;
pub const FILE_NAME: &str = "token-states.log";

/// SHA-256 of the late-interaction model file whose states a log or a codes file holds.
pub type Digest = [u8; 32];

/// Where one memory's record lies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    pub hash: u32,
    pub offset: u64,
    pub len: u32,
    /// Tokens the codes keep.
    pub kept: u32,
}

/// The index as saved beside the codes (`late_file`): it describes the log of `generation` up
/// to `end`; records appended after `end` are scanned at open.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SavedIndex {
    pub generation: u64,
    pub end: u64,
    pub slots: Vec<(u64, Slot)>,
}

impl SavedIndex {
    /// Whether it can stand for the first `end` bytes of a log of `generation`, `len` bytes
    /// long: same generation, and every slot inside what it covers.
    fn fits(&self, generation: u64, len: u64) -> bool {
        let min = (RECORD_HEAD + PAYLOAD_HEAD) as u32;
        self.generation == generation
            && (HEADER_LEN..=len).contains(&self.end)
            && self.slots.iter().all(|(_, s)| {
                s.offset >= HEADER_LEN
                    && s.len >= min
                    && s.offset
                        .checked_add(u64::from(s.len))
                        .is_some_and(|e| e <= self.end)
            })
    }
}

struct Inner {
    file: Arc<File>,
    index: HashMap<u64, Slot>,
    /// Where the next record goes (the end of the last whole record).
    end: u64,
    /// The header's generation.
    generation: u64,
}

/// The log and its index.
pub struct FullStore {
    path: PathBuf,
    /// The model whose states the log holds.
    digest: Digest,
    /// The coarser form reads give the states back in (studies; `None`: as stored).
    view: Option<Form>,
    inner: RwLock<Inner>,
    /// Held by an append and by compaction (never by a reader).
    writer: Mutex<()>,
}

/// Each copied record's slot in the old file and in the new one, by key.
type Moves = HashMap<u64, (Slot, Slot)>;

/// What the open found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Opened {
    /// Whole records the scan read (live or superseded): every record of the log, or with the
    /// saved index only those appended after it.
    pub scanned: usize,
    /// The index saved with the codes was used.
    pub saved_index: bool,
    /// Bytes cut from the end: a torn write or a damaged record, and everything after it.
    pub cut: u64,
    /// Why the whole file was started afresh (states of another model, an older format).
    pub discarded: Option<String>,
}

/// What a log's header says.
enum Header {
    /// Of this format and of this model: its generation.
    Ours(u64),
    /// Not usable, and why.
    Other(String),
}

impl FullStore {
    /// Opens (or creates) the log at `path` for the states of the model `digest`. With `saved`
    /// (the index saved with the codes) of this log's generation, only the records after it
    /// are read; else every record is. A torn or damaged tail is cut off; a file of another
    /// model or format is started afresh.
    #[cfg(test)]
    pub fn open(
        path: &Path,
        digest: &Digest,
        saved: Option<SavedIndex>,
    ) -> Result<(FullStore, Opened)> {
        Self::open_with(path, digest, saved, None)
    }

    /// `open`, reading records back as a record of `view` would hold them (studies).
    pub fn open_with(
        path: &Path,
        digest: &Digest,
        saved: Option<SavedIndex>,
        view: Option<Form>,
    ) -> Result<(FullStore, Opened)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut opened = Opened::default();
        let len = file.metadata()?.len();
        let (mut index, from, mut generation) = match read_header(&file, digest) {
            Header::Ours(generation) => match saved.filter(|s| s.fits(generation, len)) {
                Some(s) => {
                    opened.saved_index = true;
                    (s.slots.into_iter().collect(), s.end, generation)
                }
                None => (HashMap::new(), HEADER_LEN, generation),
            },
            Header::Other(why) => {
                // The states are derived: start again (they are encoded again).
                if len > 0 {
                    opened.discarded = Some(why);
                }
                (HashMap::new(), HEADER_LEN, start_file(&file, path, digest)?)
            }
        };
        let (end, scanned) = scan(&file, from, &mut index)?;
        opened.scanned = scanned;
        let len = file.metadata()?.len();
        if len > end {
            opened.cut = len - end;
            file.set_len(end)?;
            // Records will be written where the cut ones were: no index saved before may
            // apply to the new ones.
            generation = new_generation(&file)?;
        }
        let store = FullStore {
            path: path.to_path_buf(),
            digest: *digest,
            view,
            inner: RwLock::new(Inner {
                file: Arc::new(file),
                index,
                end,
                generation,
            }),
            writer: Mutex::new(()),
        };
        Ok((store, opened))
    }

    fn inner(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn inner_mut(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `full` as the states of `key` (text hash `hash`), durably (`append_batch`).
    #[cfg(test)]
    pub fn append(&self, key: u64, hash: u32, full: &Full) -> Result<()> {
        self.append_batch(&[(key, hash, full)])
    }

    /// Appends each (key, text hash, states) with one write and one fsync: the memories are
    /// in the index once all their records are on disk. A failed write leaves the log as it
    /// was, and none of them in the index.
    pub fn append_batch(&self, batch: &[(u64, u32, &Full)]) -> Result<()> {
        for (key, _, full) in batch {
            ensure!(
                full.kept.len() == full.states.tokens() && full.states.tokens() <= MAX_TOKENS,
                "memory {key}: a kept flag per token, at most {MAX_TOKENS} tokens"
            );
        }
        if batch.is_empty() {
            return Ok(());
        }
        let records: Vec<Vec<u8>> = batch
            .iter()
            .map(|(key, hash, full)| encode_record(*key, *hash, full))
            .collect();
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let (file, end) = {
            let i = self.inner();
            (i.file.clone(), i.end)
        };
        // Record by record (no batch-sized buffer, which glibc would keep), one fsync.
        let mut at = end;
        let written = records
            .iter()
            .try_for_each(|r| {
                write_all_at(&file, r, at)?;
                at += r.len() as u64;
                Ok(())
            })
            .and_then(|()| file.sync_data());
        if let Err(e) = written {
            file.set_len(end).ok();
            return Err(e).with_context(|| format!("appending to {}", self.path.display()));
        }
        let mut i = self.inner_mut();
        at = end;
        for ((key, hash, full), record) in batch.iter().zip(&records) {
            let slot = Slot {
                hash: *hash,
                offset: at,
                len: record.len() as u32,
                kept: full.kept_count() as u32,
            };
            i.index.insert(*key, slot);
            at += record.len() as u64;
        }
        i.end = at;
        Ok(())
    }

    /// The index, to be saved with the codes (`late_file`) so the next open need not scan.
    pub fn saved_index(&self) -> SavedIndex {
        let i = self.inner();
        let mut slots: Vec<(u64, Slot)> = i.index.iter().map(|(k, s)| (*k, *s)).collect();
        slots.sort_by_key(|(_, s)| s.offset);
        SavedIndex {
            generation: i.generation,
            end: i.end,
            slots,
        }
    }

    /// Whether the log holds states of `key` for the text hashed `hash`.
    pub fn has(&self, key: u64, hash: u32) -> bool {
        self.inner().index.get(&key).is_some_and(|s| s.hash == hash)
    }

    /// The states of `key` for text `hash`: `Ok(None)` when the log has none, an error when
    /// the record cannot be read or its checksum fails (then it is dropped from the index, so
    /// the memory is encoded again).
    pub fn read(&self, key: u64, hash: u32) -> Result<Option<Full>> {
        let (file, slot) = {
            let i = self.inner();
            match i.index.get(&key) {
                Some(s) if s.hash == hash => (i.file.clone(), *s),
                _ => return Ok(None),
            }
        };
        let mut buf = vec![0u8; slot.len as usize];
        let parsed = read_exact_at(&file, &mut buf, slot.offset)
            .context("reading")
            .and_then(|()| parse_record(&buf).context("damaged record"))
            .and_then(|(k, h, full)| match (k, h) == (key, hash) {
                true => Ok(full),
                false => bail!("record of another memory"),
            });
        match parsed {
            Ok(full) => Ok(Some(match self.view {
                Some(form) => form.apply(&full),
                None => full,
            })),
            Err(e) => {
                self.drop_if(key, slot);
                Err(e).with_context(|| format!("token states of memory {key} in the log"))
            }
        }
    }

    fn drop_if(&self, key: u64, slot: Slot) {
        let mut i = self.inner_mut();
        if i.index.get(&key) == Some(&slot) {
            i.index.remove(&key);
        }
    }

    /// Keeps in the index only what `keep(key, hash)` wants; the rest becomes garbage.
    pub fn retain(&self, keep: impl Fn(u64, u32) -> bool) -> usize {
        let mut i = self.inner_mut();
        let before = i.index.len();
        i.index.retain(|k, s| keep(*k, s.hash));
        before - i.index.len()
    }

    /// (key, text hash, kept tokens) of every indexed record, in the order they were written.
    pub fn entries(&self) -> Vec<(u64, u32, usize)> {
        let i = self.inner();
        let mut v: Vec<(u64, &Slot)> = i.index.iter().map(|(k, s)| (*k, s)).collect();
        v.sort_by_key(|(_, s)| s.offset);
        v.into_iter()
            .map(|(k, s)| (k, s.hash, s.kept as usize))
            .collect()
    }

    /// (memories indexed, their kept tokens, bytes of the file).
    pub fn size(&self) -> (usize, usize, u64) {
        let i = self.inner();
        let kept = i.index.values().map(|s| s.kept as usize).sum();
        (i.index.len(), kept, i.end)
    }

    fn garbage(&self) -> u64 {
        let i = self.inner();
        let live: u64 = i.index.values().map(|s| u64::from(s.len)).sum();
        i.end - HEADER_LEN - live
    }

    /// Rewrites the log with the indexed records only, once dropped ones hold more than live
    /// ones (and at least `COMPACT_MIN_GARBAGE`); true when it did. Readers keep reading
    /// the old file until the index is swapped.
    pub fn compact_if_due(&self) -> Result<bool> {
        let garbage = self.garbage();
        let live = self.size().2 - HEADER_LEN - garbage;
        if garbage < COMPACT_MIN_GARBAGE || garbage <= live {
            return Ok(false);
        }
        self.compact()?;
        Ok(true)
    }

    /// Rewrites the log with the indexed records only (a damaged one is left out), under a
    /// new generation.
    pub fn compact(&self) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let (file, mut slots) = {
            let i = self.inner();
            let slots: Vec<(u64, Slot)> = i.index.iter().map(|(k, s)| (*k, *s)).collect();
            (i.file.clone(), slots)
        };
        slots.sort_by_key(|(_, s)| s.offset);
        let tmp = self.path.with_extension("log.tmp");
        let generation = rand::random::<u64>();
        let result = self.write_compacted(&file, &slots, &tmp, generation);
        let (index, end) = match result {
            Ok(r) => r,
            Err(e) => {
                fs::remove_file(&tmp).ok();
                return Err(e);
            }
        };
        fs::rename(&tmp, &self.path)
            .with_context(|| format!("renaming onto {}", self.path.display()))?;
        if let Some(dir) = self.path.parent() {
            crate::store::sync_dir(dir).ok();
        }
        let new_file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        let mut i = self.inner_mut();
        // Only what the index held when copying, and is still the same now (a record dropped
        // meanwhile stays dropped).
        let still: HashMap<u64, Slot> = index
            .into_iter()
            .filter(|(k, (old, _))| i.index.get(k) == Some(old))
            .map(|(k, (_, new))| (k, new))
            .collect();
        *i = Inner {
            file: Arc::new(new_file),
            index: still,
            end,
            generation,
        };
        Ok(())
    }

    /// Copies `slots` from `file` into a new log of `generation` at `tmp`: (old slot → new
    /// slot by key, end).
    fn write_compacted(
        &self,
        file: &File,
        slots: &[(u64, Slot)],
        tmp: &Path,
        generation: u64,
    ) -> Result<(Moves, u64)> {
        let out = File::create(tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut w = BufWriter::new(out);
        w.write_all(&header(&self.digest, generation))?;
        let mut at = HEADER_LEN;
        let mut index = HashMap::with_capacity(slots.len());
        let mut buf = Vec::new();
        for (key, slot) in slots {
            buf.resize(slot.len as usize, 0);
            let whole = read_exact_at(file, &mut buf, slot.offset).is_ok()
                && parse_record(&buf).is_some_and(|(k, h, _)| (k, h) == (*key, slot.hash));
            if !whole {
                continue; // damaged: encoded again, like any memory without states
            }
            w.write_all(&buf)?;
            let moved = Slot {
                offset: at,
                ..*slot
            };
            index.insert(*key, (*slot, moved));
            at += u64::from(slot.len);
        }
        let out = w.into_inner().map_err(|e| e.into_error())?;
        out.sync_all()?;
        Ok((index, at))
    }
}

fn header(digest: &Digest, generation: u64) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend((DIMS as u32).to_le_bytes());
    h.extend(digest);
    h.extend(generation.to_le_bytes());
    h
}

/// What `file`'s header says about its use for the states of `digest`.
fn read_header(file: &File, digest: &Digest) -> Header {
    let mut h = [0u8; HEADER_LEN as usize];
    let whole = read_exact_at(file, &mut h, 0).is_ok();
    if h[..8] == *MAGIC_V1 {
        return Header::Other("of the previous format, which does not name its model".into());
    }
    if !whole || h[..8] != *MAGIC || h[8..12] != (DIMS as u32).to_le_bytes() {
        return Header::Other("not a token-state log of this format".into());
    }
    if h[12..44] != *digest {
        return Header::Other(format!(
            "made by another late-interaction model (sha256 {}, this one is {})",
            hex::encode(&h[12..44]),
            hex::encode(digest)
        ));
    }
    Header::Ours(u64::from_le_bytes(h[44..].try_into().unwrap_or_default()))
}

/// Writes the header of an empty log (and nothing else) into `file`; returns its generation.
fn start_file(file: &File, path: &Path, digest: &Digest) -> Result<u64> {
    file.set_len(0)?;
    let generation = rand::random::<u64>();
    write_all_at(file, &header(digest, generation), 0)?;
    file.sync_all()?;
    if let Some(dir) = path.parent() {
        crate::store::sync_dir(dir).ok();
    }
    Ok(generation)
}

/// Gives `file` a new generation (durably); returns it.
fn new_generation(file: &File) -> Result<u64> {
    let generation = rand::random::<u64>();
    write_all_at(file, &generation.to_le_bytes(), GENERATION_AT)?;
    file.sync_all()?;
    Ok(generation)
}

/// Reads every whole record of `file` from `from` into `index` (a later record of a key
/// supersedes an earlier one): (end of the last whole record, records read).
fn scan(file: &File, from: u64, index: &mut HashMap<u64, Slot>) -> Result<(u64, usize)> {
    let mut r = std::io::BufReader::with_capacity(1 << 20, file);
    r.seek(SeekFrom::Start(from))?;
    let (mut at, mut records) = (from, 0);
    let mut buf = Vec::new();
    loop {
        let mut head = [0u8; RECORD_HEAD];
        if r.read_exact(&mut head).is_err() {
            break;
        }
        let len = u32::from_le_bytes(head[..4].try_into()?) as usize;
        if len < PAYLOAD_HEAD || len > max_payload() {
            break;
        }
        buf.clear();
        buf.extend_from_slice(&head);
        buf.resize(RECORD_HEAD + len, 0);
        if r.read_exact(&mut buf[RECORD_HEAD..]).is_err() {
            break;
        }
        let Some((key, hash, full)) = parse_record(&buf) else {
            break;
        };
        let slot = Slot {
            hash,
            offset: at,
            len: buf.len() as u32,
            kept: full.kept_count() as u32,
        };
        index.insert(key, slot);
        at += buf.len() as u64;
        records += 1;
    }
    Ok((at, records))
}

pub fn path_in(store_dir: &Path) -> PathBuf {
    store_dir.join(FILE_NAME)
}

#[cfg(test)]
#[path = "late_disk_tests.rs"]
mod tests;
