//! The BM25 index as bytes, so a start loads it instead of tokenising every memory again.
//!
//! Owns the image layout (all integers little-endian), a few flat arrays in a row so a load is
//! bulk copies plus one pass of checks: `u32` term count, `u32` text length, the terms' text
//! (`lexical_terms`), each term's `u32` end in it; `u32` slot count, then per slot a `u8`
//! present flag, then every slot's `u64` key, `u32` length and `u64` terms check; each term's
//! `u32` posting count, then every posting's `u32` slot (per term, ascending), then every
//! posting's `u16` count in the same order. An earlier layout (a term list per document) took
//! 2.8–3.0 s to load at a million memories, most of it in a million allocations and hash inserts
//! of boxed terms (bench/EVAL.md section 24). Must never panic or build an inconsistent index
//! from bytes it did not write: every id, slot and count is bounds-checked, and a failed check
//! is an error (the caller rebuilds from the records). Framing, checksum and generation are
//! the caller's (`store::side_file`).

use super::{FastHash, Lexical, Postings, Terms};
use std::collections::HashMap;

impl Lexical {
    /// The index's image (see the module doc).
    pub fn to_image(&self) -> Vec<u8> {
        let (text, ends) = self.terms.parts();
        let n_slots = self.keys.len();
        let mut out = Vec::with_capacity(
            12 + text.len() + ends.len() * 8 + n_slots * 21 + self.postings.len() * 6,
        );
        put_u32(&mut out, ends.len() as u32);
        put_u32(&mut out, text.len() as u32);
        out.extend_from_slice(text.as_bytes());
        ends.iter().for_each(|&e| put_u32(&mut out, e));
        put_u32(&mut out, n_slots as u32);
        out.extend(self.present.iter().map(|&p| u8::from(p)));
        self.keys
            .iter()
            .for_each(|k| out.extend_from_slice(&k.to_le_bytes()));
        self.lens.iter().for_each(|&l| put_u32(&mut out, l));
        self.checks
            .iter()
            .for_each(|c| out.extend_from_slice(&c.to_le_bytes()));
        let mut lists = Vec::with_capacity(ends.len());
        let mut list = Vec::new();
        for term in 0..ends.len() as u32 {
            self.postings.sorted(term, &mut list);
            put_u32(&mut out, list.len() as u32);
            lists.extend_from_slice(&list);
        }
        lists.iter().for_each(|&(s, _)| put_u32(&mut out, s));
        lists
            .iter()
            .for_each(|&(_, tf)| out.extend_from_slice(&tf.to_le_bytes()));
        out
    }

    /// Rebuilds an index from `to_image`'s bytes; `Err` says what is inconsistent.
    pub fn from_image(bytes: &[u8]) -> Result<Lexical, String> {
        let mut r = Reader { bytes, at: 0 };
        let n_terms = r.u32()? as usize;
        let text_len = r.u32()? as usize;
        let text = String::from_utf8(r.take(text_len)?.to_vec()).map_err(|_| "terms not UTF-8")?;
        let terms = Terms::from_parts(text, r.u32s(n_terms)?)?;
        let mut ix = Lexical {
            terms,
            ..Lexical::default()
        };
        ix.read_slots(&mut r)?;
        let dfs = r.u32s(n_terms)?;
        let total: u64 = dfs.iter().map(|&n| u64::from(n)).sum();
        r.fits(usize::try_from(total).unwrap_or(usize::MAX), 6)?;
        let (slots, tfs) = (r.u32s(total as usize)?, r.u16s(total as usize)?);
        if r.at != bytes.len() {
            return Err(format!("{} bytes after the image", bytes.len() - r.at));
        }
        ix.check_lists(&dfs, &slots, &tfs)?;
        ix.postings = Postings::from_runs(&dfs, slots, tfs);
        Ok(ix)
    }

    /// The slot arrays, the free slots and key → slot.
    fn read_slots(&mut self, r: &mut Reader) -> Result<(), String> {
        let n_slots = r.u32()? as usize;
        r.fits(n_slots, 21)?;
        let flags = r.take(n_slots)?;
        if let Some(at) = flags.iter().position(|&b| b > 1) {
            return Err(format!("slot {at}: present flag {}", flags[at]));
        }
        self.present = flags.iter().map(|&b| b == 1).collect();
        self.keys = r.u64s(n_slots)?;
        self.lens = r.u32s(n_slots)?;
        self.checks = r.u64s(n_slots)?;
        let live = self.present.iter().filter(|&&p| p).count();
        self.slot_of = HashMap::with_capacity_and_hasher(live, FastHash::default());
        for slot in 0..n_slots {
            if !self.present[slot] {
                self.free_slots.push(slot as u32);
                continue;
            }
            if self.slot_of.insert(self.keys[slot], slot as u32).is_some() {
                return Err(format!("key {} indexed twice", self.keys[slot]));
            }
            self.total_len += u64::from(self.lens[slot]);
        }
        // `take_slot` pops from the end: hand out the lowest free slot first, as a fresh index would.
        self.free_slots.reverse();
        Ok(())
    }

    /// Every list names present slots, each once (ascending), with a count of at least one.
    fn check_lists(&self, dfs: &[u32], slots: &[u32], tfs: &[u16]) -> Result<(), String> {
        if let Some(i) = tfs.iter().position(|&tf| tf == 0) {
            return Err(format!("posting {i} has a count of 0"));
        }
        let mut at = 0;
        for (term, &n) in dfs.iter().enumerate() {
            let list = &slots[at..at + n as usize];
            at += n as usize;
            let bad = list.windows(2).any(|w| w[0] >= w[1])
                || list
                    .iter()
                    .any(|&s| !self.present.get(s as usize).copied().unwrap_or(false));
            if bad {
                return Err(format!("term {term}: a slot out of range, order or use"));
            }
        }
        Ok(())
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("image ends early at byte {}", self.at))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `n` items of `W` bytes each, decoded by `f` (one bulk pass, no per-item bounds check).
    fn array<const W: usize, T>(
        &mut self,
        n: usize,
        f: fn([u8; W]) -> T,
    ) -> Result<Vec<T>, String> {
        self.fits(n, W)?;
        let bytes = self.take(n * W)?;
        Ok(bytes
            .chunks_exact(W)
            .map(|c| f(c.try_into().unwrap_or([0; W])))
            .collect())
    }

    fn u16s(&mut self, n: usize) -> Result<Vec<u16>, String> {
        self.array(n, u16::from_le_bytes)
    }

    fn u32s(&mut self, n: usize) -> Result<Vec<u32>, String> {
        self.array(n, u32::from_le_bytes)
    }

    fn u64s(&mut self, n: usize) -> Result<Vec<u64>, String> {
        self.array(n, u64::from_le_bytes)
    }

    /// Refuses a count whose items cannot fit in what is left (before allocating for them).
    fn fits(&self, count: usize, min_item: usize) -> Result<(), String> {
        match count.checked_mul(min_item) {
            Some(n) if n <= self.bytes.len() - self.at => Ok(()),
            _ => Err(format!(
                "count {count} at byte {} exceeds the image",
                self.at
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(_: u64) -> bool {
        true
    }

    fn note(key: u64) -> String {
        format!(
            "deploy step {} uses port {} and the {} cache",
            key % 17,
            5000 + key % 29,
            ["redis", "disk", "memory"][key as usize % 3]
        )
    }

    const BRAND_NEW: &str = "a brand new note about the redis cache";

    fn churned() -> Lexical {
        let mut ix = Lexical::new();
        for key in 0..300u64 {
            ix.insert(key, &note(key));
        }
        for key in (0..300u64).step_by(7) {
            ix.remove(key, &note(key));
        }
        ix.insert(1000, BRAND_NEW);
        ix
    }

    fn lists(ix: &Lexical) -> Vec<Vec<(u32, u16)>> {
        let mut out = Vec::new();
        for term in 0..ix.terms.len() as u32 {
            let mut list = Vec::new();
            ix.postings.sorted(term, &mut list);
            out.push(list);
        }
        out
    }

    #[test]
    fn image_round_trip_searches_identically_and_stays_mutable() {
        let ix = churned();
        let mut back = Lexical::from_image(&ix.to_image()).expect("decode");
        assert_eq!(back.len(), ix.len());
        assert_eq!(back.total_len, ix.total_len);
        assert_eq!(lists(&back), lists(&ix));
        assert!(back.memory_bytes() > 0);
        for q in [
            "redis cache",
            "port 5003",
            "deploy step 4",
            "brand new",
            "nothing",
        ] {
            assert_eq!(back.search(q, 20, &all), ix.search(q, 20, &all), "{q}");
        }
        // Removal finds the loaded postings again; a freed slot is reused.
        back.remove(1000, BRAND_NEW);
        assert!(back.search("brand", 5, &all).is_empty());
        back.insert(2000, "brand new again");
        assert_eq!(back.search("brand", 5, &all)[0].0, 2000);
        assert_eq!(
            Lexical::from_image(&Lexical::new().to_image())
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn inconsistent_images_are_errors_not_panics() {
        let good = churned().to_image();
        for cut in (0..good.len()).step_by(37) {
            assert!(Lexical::from_image(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = good.clone();
        extra.push(0);
        assert!(Lexical::from_image(&extra).is_err());
        // Any single corrupted byte must give an error or a structurally valid index.
        for at in (0..good.len()).step_by(11) {
            let mut bad = good.clone();
            bad[at] = bad[at].wrapping_add(0x5b);
            if let Ok(mut ix) = Lexical::from_image(&bad) {
                let _ = ix.search("redis cache port", 10, &all);
                ix.remove(1000, BRAND_NEW);
                ix.insert(1000, BRAND_NEW);
            }
        }
        assert!(Lexical::from_image(&[0xff, 0xff, 0xff, 0x7f]).is_err());
    }

    /// A posting list naming a slot twice, out of order, past the slots or on a free slot would
    /// give scores the index cannot trust.
    #[test]
    fn a_posting_list_out_of_order_range_or_use_is_an_error() {
        let mut ix = Lexical::new();
        ix.insert(7, "alpha beta");
        ix.insert(8, "alpha gamma");
        ix.insert(9, "delta");
        ix.remove(9, "delta");
        let good = ix.to_image();
        assert!(Lexical::from_image(&good).is_ok());
        // Terms alpha, beta, gamma, delta; slots 0, 1 and (free) 2; alpha's list is 0, 1.
        let text = "alphabetagammadelta".len();
        let dfs = 4 + 4 + text + 4 * 4 + 4 + 3 * (1 + 8 + 4 + 8);
        let first_slot = dfs + 4 * 4;
        let slot_at = |i: usize| first_slot + 4 * i;
        for (i, value) in [(1, 0u32), (0, 1), (1, 3), (1, 2)] {
            let mut bad = good.clone();
            bad[slot_at(i)..slot_at(i) + 4].copy_from_slice(&value.to_le_bytes());
            let err = Lexical::from_image(&bad).err().expect("refused");
            assert!(err.contains("out of range, order or use"), "{err}");
        }
    }

    /// Saved term counts are the document's own, not another's of the same term.
    #[test]
    fn term_counts_survive_the_round_trip() {
        let mut ix = Lexical::new();
        ix.insert(1, "cache cache cache miss");
        ix.insert(2, "cache miss miss");
        ix.remove(1, "cache cache cache miss");
        ix.insert(3, "cache cache miss");
        let back = Lexical::from_image(&ix.to_image()).unwrap();
        for q in ["cache", "miss", "cache miss"] {
            assert_eq!(back.search(q, 5, &all), ix.search(q, 5, &all), "{q}");
        }
        assert_eq!(lists(&back), lists(&ix));
    }
}
