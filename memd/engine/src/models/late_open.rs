//! The token states' life across runs and the switch to codes: opening the log of full states
//! (`late_disk`) and the saved codes (`late_file`) at start, both of the model loaded (its
//! digest), the log from the index saved with the codes when it still applies; training the
//! codebook on the store's first states, coding what the log holds, saving the codes with the
//! log's index, compacting the log.
//!
//! Owns `States::open`, `save`, `train_codebook`, `due_for_codebook` and `compact`. Must never
//! fail a start (every file here is derived data: what cannot be used is encoded again), never
//! use states of another model, never trust codes whose full states are not in the log, and
//! never hold i8 states of a large store in memory (a log past `TRAIN_TOKENS` is coded before
//! anything else is loaded).

use super::late::{Known, States, TRAIN_TOKENS};
use super::late_codes::{CENTROIDS, Codebook, Stored};
use super::late_disk::{self, Digest, FullStore, Opened};
use super::late_file::{self, Saved, ToSave};
use std::path::Path;
use std::sync::Arc;

impl States {
    /// Opens the log of full states of the model `digest` and loads the codes saved in
    /// `store_dir`, with the log's index saved beside them (so only what the log got after
    /// them is read); what the log holds beyond the saved codes is coded (or, before the
    /// codebook, held in i8) from it. Without a usable log the states live in memory only
    /// (i8 within the cap). True when the saved file should be written again now: the log
    /// was scanned, cut or started afresh, so the next open would repeat that.
    pub fn open(&self, store_dir: &Path, digest: &Digest) -> bool {
        *self.digest.write().unwrap_or_else(|p| p.into_inner()) = Some(*digest);
        let saved_path = late_file::path_in(store_dir);
        let mut saved = match late_file::load(&saved_path, digest) {
            Ok(saved) => Some(saved),
            Err(e) if saved_path.exists() => {
                tracing::warn!("saved token states not loaded, they come from the log: {e:#}");
                None
            }
            Err(_) => None,
        };
        let index = saved.as_mut().map(|s| std::mem::take(&mut s.index));
        let mut resave = false;
        let view = *self.log_form.read().unwrap_or_else(|p| p.into_inner());
        match FullStore::open_with(&late_disk::path_in(store_dir), digest, index, view) {
            Ok((disk, opened)) => {
                resave = log_opened(&opened);
                *self.disk.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(disk));
            }
            Err(e) => tracing::warn!("token-state log unusable, states held in memory only: {e:#}"),
        }
        if let Some(saved) = saved {
            self.load(saved);
        }
        if self.due_for_codebook(false) {
            self.train_codebook();
        }
        self.fill_from_disk();
        let (n, bytes) = self.size();
        let (on_disk, _) = self.disk_size();
        tracing::info!(
            "token states of {n} memories loaded ({bytes} bytes in memory, {on_disk} on disk)"
        );
        resave
    }

    /// Takes the codes a previous run saved, keeping only those whose full states the log
    /// holds.
    fn load(&self, saved: Saved) {
        let disk = self.disk();
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        for (key, hash, states) in saved.entries {
            if disk.as_ref().is_none_or(|d| d.has(key, hash)) {
                map.insert(key, (hash, Arc::new(states)));
            }
        }
        drop(map);
        if let Some(codebook) = saved.codebook {
            *self.codebook.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(codebook));
        }
    }

    /// Writes every memory's states held in memory, and the log's index, to `path`
    /// (atomically); returns the change count saved. Nothing before `open`.
    pub fn save(&self, path: &Path) -> anyhow::Result<u64> {
        let changes = self.changes();
        let Some(digest) = *self.digest.read().unwrap_or_else(|p| p.into_inner()) else {
            return Ok(changes);
        };
        let entries: Vec<(u64, u32, Arc<Stored>)> = {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            map.iter().map(|(k, (h, s))| (*k, *h, s.clone())).collect()
        };
        let refs: Vec<(u64, u32, &Stored)> = entries
            .iter()
            .map(|(k, h, s)| (*k, *h, s.as_ref()))
            .collect();
        let index = self.disk().map(|d| d.saved_index()).unwrap_or_default();
        let codebook = self.codebook();
        let what = ToSave {
            digest: &digest,
            codebook: codebook.as_deref(),
            entries: &refs,
            index: &index,
        };
        late_file::save(path, &what)?;
        Ok(changes)
    }

    /// Whether it is time to train the codebook: none yet, the log is open, and it holds
    /// `TRAIN_TOKENS` kept token vectors or the i8 states held no longer fit the cap
    /// (`over_cap`).
    pub fn due_for_codebook(&self, over_cap: bool) -> bool {
        let Some(disk) = self.disk() else {
            return false;
        };
        self.codebook().is_none() && (over_cap || disk.size().1 >= TRAIN_TOKENS)
    }

    /// Trains the codebook on the first `TRAIN_TOKENS` kept token vectors of the log and codes
    /// every memory it holds; true when it did (false: trained already, no log, or fewer
    /// token vectors than centroids). CPU-heavy (k-means): a worker's job.
    pub fn train_codebook(&self) -> bool {
        let Some(disk) = self.disk() else {
            return false;
        };
        if self.codebook().is_some() {
            return false;
        }
        let mut sample = Vec::with_capacity(TRAIN_TOKENS);
        for (key, hash, _) in disk.entries() {
            if sample.len() >= TRAIN_TOKENS {
                break;
            }
            if let Ok(Some(full)) = disk.read(key, hash) {
                let room = TRAIN_TOKENS - sample.len();
                sample.extend(full.kept_rows().into_iter().take(room));
            }
        }
        if sample.len() < CENTROIDS {
            return false;
        }
        let Some(codebook) = Codebook::train(&sample) else {
            return false;
        };
        *self.codebook.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(codebook));
        self.forget_sizes();
        self.fill_from_disk();
        true
    }

    /// Brings every memory of the log into memory: coded when the codebook exists (replacing
    /// i8 states held), else in i8; i8 states left without a log record are dropped (encoded
    /// again, coded).
    fn fill_from_disk(&self) {
        let Some(disk) = self.disk() else {
            return;
        };
        let codebook = self.codebook();
        let mut filled = 0usize;
        for (key, hash, _) in disk.entries() {
            let held = {
                let map = self.map.read().unwrap_or_else(|p| p.into_inner());
                map.get(&key).cloned()
            };
            let current = held.as_ref().is_some_and(|(h, s)| {
                *h == hash && (codebook.is_none() || matches!(s.as_ref(), Stored::Coded(_)))
            });
            if current {
                continue;
            }
            let full = match disk.read(key, hash) {
                Ok(Some(full)) => full,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!("{e:#}; encoded again");
                    continue;
                }
            };
            let stored = match &codebook {
                Some(c) => Stored::Coded(c.encode(&full.kept_rows())),
                None => Stored::Full(full.states),
            };
            self.remember(key, hash, Known::Bytes(stored.bytes()));
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            // Replaced meanwhile by a fresh encoding: that one is newer.
            let same = match (map.get(&key), &held) {
                (Some((h, s)), Some((held_h, held_s))) => h == held_h && Arc::ptr_eq(s, held_s),
                (None, None) => true,
                _ => false,
            };
            if same {
                map.insert(key, (hash, Arc::new(stored)));
                filled += 1;
            }
        }
        if codebook.is_some() {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            map.retain(|_, (_, s)| matches!(s.as_ref(), Stored::Coded(_)));
        }
        if filled > 0 {
            self.changed();
        }
    }

    /// Rewrites the log without the records of deleted, edited or evicted memories once they
    /// outweigh the live ones; true when it did (the saved index is then behind: a change).
    pub fn compact(&self) -> anyhow::Result<bool> {
        let compacted = match self.disk() {
            Some(d) => d.compact_if_due()?,
            None => false,
        };
        if compacted {
            self.changed();
        }
        Ok(compacted)
    }
}

/// Says what the open of the log found; true when the saved index should be written again.
fn log_opened(opened: &Opened) -> bool {
    if let Some(why) = &opened.discarded {
        tracing::warn!(
            "token-state log {why}: discarded, every memory's token states are encoded again \
             in the background"
        );
    }
    if opened.cut > 0 && opened.discarded.is_none() {
        tracing::warn!(
            "token-state log: {} damaged or torn bytes cut at the end; those memories are \
             encoded again",
            opened.cut
        );
    }
    let how = match opened.saved_index {
        true => "its saved index and",
        false => "a scan of",
    };
    tracing::info!(
        "token-state log opened from {how} {} records",
        opened.scanned
    );
    opened.scanned > 0 || opened.cut > 0 || opened.discarded.is_some()
}
