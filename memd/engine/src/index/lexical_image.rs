//! The BM25 index as bytes, so a start loads it instead of tokenising every memory again.
//!
//! Owns the image layout (all integers little-endian): `u32` term count, then each term as
//! `u32` byte length + UTF-8 (its position is its id); then `u32` slot count and per slot `u8`
//! present, and if present `u64 key`, `u32 len`, `u32` distinct-term count and that many
//! `(u32 term id, u32 tf)` pairs, term ids ascending. Each document's term list is what
//! `insert` keeps, so loading reads the documents in one sequential pass and then appends to
//! the posting lists in slot order; an earlier layout stored the posting lists and rebuilt
//! the term lists from them, which scattered every posting over the documents (8 s at 1M).
//! Posting-list order does not change results: each document's score sums its terms in query
//! order, and ties are broken by key. Must never panic or build an inconsistent index from
//! bytes it did not write: every id, slot and count is bounds-checked, and a failed check is an
//! error (the caller rebuilds from the records). Framing, checksum and generation are the
//! caller's (`store::side_file`).

use super::{Doc, FastHash, Lexical, Posting};
use std::collections::HashMap;

impl Lexical {
    /// The index's image (see the module doc).
    pub fn to_image(&self) -> Vec<u8> {
        let postings: usize = self.postings.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(
            8 + self.heap_bytes / 2 + postings * 8 + self.postings.len() * 8 + self.docs.len() * 17,
        );
        let mut terms: Vec<(&str, u32)> = self.term_ids.iter().map(|(t, &i)| (&**t, i)).collect();
        terms.sort_unstable_by_key(|t| t.1);
        put_u32(&mut out, terms.len() as u32);
        for (term, _) in &terms {
            put_u32(&mut out, term.len() as u32);
            out.extend_from_slice(term.as_bytes());
        }
        let (offsets, tfs) = self.tf_table();
        put_u32(&mut out, self.docs.len() as u32);
        for (slot, doc) in self.docs.iter().enumerate() {
            match doc {
                None => out.push(0),
                Some(d) => {
                    out.push(1);
                    out.extend_from_slice(&d.key.to_le_bytes());
                    put_u32(&mut out, d.len);
                    put_u32(&mut out, d.terms.len() as u32);
                    let at = offsets[slot];
                    for (&term, &tf) in d.terms.iter().zip(&tfs[at..at + d.terms.len()]) {
                        put_u32(&mut out, term);
                        put_u32(&mut out, tf);
                    }
                }
            }
        }
        out
    }

    /// Each document's term counts, in the order of its term list, one flat array (with each
    /// slot's start in it). Walking the terms in ascending id order meets each document's
    /// terms in the order its list holds them, so a per-slot cursor is the position.
    fn tf_table(&self) -> (Vec<usize>, Vec<u32>) {
        let mut offsets = Vec::with_capacity(self.docs.len() + 1);
        let mut total = 0;
        for doc in &self.docs {
            offsets.push(total);
            total += doc.as_ref().map_or(0, |d| d.terms.len());
        }
        offsets.push(total);
        let mut cursor = vec![0u32; self.docs.len()];
        let mut tfs = vec![0u32; total];
        for list in &self.postings {
            for p in list {
                let c = &mut cursor[p.slot as usize];
                tfs[offsets[p.slot as usize] + *c as usize] = p.tf;
                *c += 1;
            }
        }
        (offsets, tfs)
    }

    /// Rebuilds an index from `to_image`'s bytes; `Err` says what is inconsistent.
    pub fn from_image(bytes: &[u8]) -> Result<Lexical, String> {
        let mut r = Reader { bytes, at: 0 };
        let mut ix = Lexical::new();
        let n_terms = r.u32()? as usize;
        r.fits(n_terms, 4)?;
        ix.term_ids = HashMap::with_capacity_and_hasher(n_terms, FastHash::default());
        for id in 0..n_terms as u32 {
            let len = r.u32()? as usize;
            let text = std::str::from_utf8(r.take(len)?).map_err(|_| "term is not UTF-8")?;
            if ix.term_ids.insert(text.into(), id).is_some() {
                return Err(format!("term {text:?} appears twice"));
            }
            ix.heap_bytes += len;
        }
        let tfs = ix.read_docs(&mut r, n_terms)?;
        if r.at != bytes.len() {
            return Err(format!("{} bytes after the image", bytes.len() - r.at));
        }
        ix.build_postings(n_terms, &tfs);
        Ok(ix)
    }

    /// The slot table: documents' keys, lengths and term lists, free slots, key → slot.
    /// Returns every document's term counts, flat in slot and term-list order.
    fn read_docs(&mut self, r: &mut Reader, n_terms: usize) -> Result<Vec<u32>, String> {
        let n_slots = r.u32()? as usize;
        r.fits(n_slots, 1)?;
        self.docs = Vec::with_capacity(n_slots);
        self.slot_of = HashMap::with_capacity_and_hasher(n_slots, FastHash::default());
        let mut tfs = Vec::new();
        for slot in 0..n_slots as u32 {
            if r.take(1)?[0] == 0 {
                self.docs.push(None);
                self.free_slots.push(slot);
                continue;
            }
            let key = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| "short key")?);
            let len = r.u32()?;
            let n = r.u32()? as usize;
            r.fits(n, 8)?;
            let mut terms = Vec::with_capacity(n);
            for _ in 0..n {
                let (term, tf) = (r.u32()?, r.u32()?);
                if term as usize >= n_terms || terms.last().is_some_and(|&t| t >= term) {
                    return Err(format!("slot {slot}: term {term} out of range or order"));
                }
                terms.push(term);
                tfs.push(tf);
            }
            if self.slot_of.insert(key, slot).is_some() {
                return Err(format!("key {key} indexed twice"));
            }
            self.total_len += u64::from(len);
            self.heap_bytes += n * size_of::<u32>();
            self.docs.push(Some(Doc {
                key,
                len,
                terms: terms.into_boxed_slice(),
            }));
        }
        // `take_slot` pops from the end: hand out the lowest free slot first, as a fresh index would.
        self.free_slots.reverse();
        Ok(tfs)
    }

    /// The posting lists from the documents' term lists (`tfs` as `read_docs` returns them),
    /// each allocated once at its final length and filled in slot order.
    fn build_postings(&mut self, n_terms: usize, tfs: &[u32]) {
        let mut df = vec![0usize; n_terms];
        for d in self.docs.iter().flatten() {
            for &t in d.terms.iter() {
                df[t as usize] += 1;
            }
        }
        self.postings = df.iter().map(|&n| Vec::with_capacity(n)).collect();
        let mut tfs = tfs.iter();
        for (slot, doc) in self.docs.iter().enumerate() {
            let Some(d) = doc else { continue };
            for (&t, &tf) in d.terms.iter().zip(&mut tfs) {
                self.postings[t as usize].push(Posting {
                    slot: slot as u32,
                    tf,
                });
            }
        }
        self.heap_bytes += df.iter().sum::<usize>() * size_of::<Posting>();
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

    fn churned() -> Lexical {
        let mut ix = Lexical::new();
        for key in 0..300u64 {
            let text = format!(
                "deploy step {} uses port {} and the {} cache",
                key % 17,
                5000 + key % 29,
                ["redis", "disk", "memory"][key as usize % 3]
            );
            ix.insert(key, &text);
        }
        for key in (0..300u64).step_by(7) {
            ix.remove(key);
        }
        ix.insert(1000, "a brand new note about the redis cache");
        ix
    }

    #[test]
    fn image_round_trip_searches_identically_and_stays_mutable() {
        let ix = churned();
        let mut back = Lexical::from_image(&ix.to_image()).expect("decode");
        assert_eq!(back.len(), ix.len());
        assert_eq!(back.total_len, ix.total_len);
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
        // Removal needs the rebuilt term lists; a freed slot is reused.
        back.remove(1000);
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
            if let Ok(ix) = Lexical::from_image(&bad) {
                let _ = ix.search("redis cache port", 10, &all);
            }
        }
        assert!(Lexical::from_image(&[0xff, 0xff, 0xff, 0x7f]).is_err());
    }

    /// A document naming a term twice, out of order or past the dictionary would give a
    /// posting list the scorer cannot trust.
    #[test]
    fn a_document_term_list_out_of_order_or_range_is_an_error() {
        let mut ix = Lexical::new();
        ix.insert(7, "alpha beta gamma");
        let good = ix.to_image();
        assert!(Lexical::from_image(&good).is_ok());
        // The first document's pairs start after the terms, the slot count and the slot's
        // present flag, key, length and term count.
        let terms_end = 4 + ["alpha", "beta", "gamma"]
            .iter()
            .map(|t| 4 + t.len())
            .sum::<usize>();
        let first_pair = terms_end + 4 + 1 + 8 + 4 + 4;
        let term_at = |i: usize| first_pair + 8 * i;
        for (i, value) in [(1, 0u32), (0, 3), (2, 1)] {
            let mut bad = good.clone();
            bad[term_at(i)..term_at(i) + 4].copy_from_slice(&value.to_le_bytes());
            let err = Lexical::from_image(&bad).err().expect("refused");
            assert!(err.contains("out of range or order"), "{err}");
        }
    }

    /// Saved term counts are the document's own, not another's of the same term.
    #[test]
    fn term_counts_survive_the_round_trip() {
        let mut ix = Lexical::new();
        ix.insert(1, "cache cache cache miss");
        ix.insert(2, "cache miss miss");
        ix.remove(1);
        ix.insert(3, "cache cache miss");
        let back = Lexical::from_image(&ix.to_image()).unwrap();
        for q in ["cache", "miss", "cache miss"] {
            assert_eq!(back.search(q, 5, &all), ix.search(q, 5, &all), "{q}");
        }
        assert_eq!(back.tf_table(), ix.tf_table());
    }
}
