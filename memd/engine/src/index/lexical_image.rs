//! The BM25 index as bytes, so a start loads it instead of tokenising every memory again.
//!
//! Owns the image layout (all integers little-endian): `u32` term count, then each term as
//! `u32` byte length + UTF-8; then per term id its posting list as `u32` length + `(u32 slot,
//! u32 tf)` pairs, in list order (so a loaded index scores in exactly the saved order); then
//! `u32` slot count and per slot `u8` present, and if present `u64 key`, `u32 len`. Each
//! document's distinct terms are rebuilt from the posting lists. Must never panic or build an
//! inconsistent index from bytes it did not write: every id, slot and count is bounds-checked,
//! and a failed check is an error (the caller rebuilds from the records). Framing, checksum
//! and generation are the caller's (`store::side_file`).

use super::{Doc, FastHash, Lexical, Posting};
use std::collections::HashMap;

impl Lexical {
    /// The index's image (see the module doc).
    pub fn to_image(&self) -> Vec<u8> {
        let postings: usize = self.postings.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(
            8 + self.heap_bytes / 2 + postings * 8 + self.postings.len() * 8 + self.docs.len() * 13,
        );
        let mut terms: Vec<(&str, u32)> = self.term_ids.iter().map(|(t, &i)| (&**t, i)).collect();
        terms.sort_unstable_by_key(|t| t.1);
        put_u32(&mut out, terms.len() as u32);
        for (term, _) in &terms {
            put_u32(&mut out, term.len() as u32);
            out.extend_from_slice(term.as_bytes());
        }
        for list in &self.postings {
            put_u32(&mut out, list.len() as u32);
            for p in list {
                put_u32(&mut out, p.slot);
                put_u32(&mut out, p.tf);
            }
        }
        put_u32(&mut out, self.docs.len() as u32);
        for doc in &self.docs {
            match doc {
                None => out.push(0),
                Some(d) => {
                    out.push(1);
                    out.extend_from_slice(&d.key.to_le_bytes());
                    put_u32(&mut out, d.len);
                }
            }
        }
        out
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
        ix.postings = Vec::with_capacity(n_terms);
        for _ in 0..n_terms {
            let n = r.u32()? as usize;
            r.fits(n, 8)?;
            let list: Vec<Posting> = (0..n)
                .map(|_| {
                    Ok(Posting {
                        slot: r.u32()?,
                        tf: r.u32()?,
                    })
                })
                .collect::<Result<_, String>>()?;
            ix.heap_bytes += list.capacity() * size_of::<Posting>();
            ix.postings.push(list);
        }
        ix.read_docs(&mut r)?;
        if r.at != bytes.len() {
            return Err(format!("{} bytes after the image", bytes.len() - r.at));
        }
        ix.attach_terms()?;
        Ok(ix)
    }

    /// The slot table: documents' keys and lengths, free slots, key → slot.
    fn read_docs(&mut self, r: &mut Reader) -> Result<(), String> {
        let n_slots = r.u32()? as usize;
        r.fits(n_slots, 1)?;
        self.docs = Vec::with_capacity(n_slots);
        for slot in 0..n_slots as u32 {
            if r.take(1)?[0] == 0 {
                self.docs.push(None);
                self.free_slots.push(slot);
                continue;
            }
            let key = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| "short key")?);
            let len = r.u32()?;
            if self.slot_of.insert(key, slot).is_some() {
                return Err(format!("key {key} indexed twice"));
            }
            self.total_len += u64::from(len);
            self.docs.push(Some(Doc {
                key,
                len,
                terms: Box::default(),
            }));
        }
        // `take_slot` pops from the end: hand out the lowest free slot first, as a fresh index would.
        self.free_slots.reverse();
        Ok(())
    }

    /// Gives every document its distinct term ids (ascending, as `insert` stores them), from
    /// the posting lists; checks that every posting names a live document once per term.
    fn attach_terms(&mut self) -> Result<(), String> {
        let mut counts = vec![0u32; self.docs.len()];
        for list in &self.postings {
            for p in list {
                match self.docs.get(p.slot as usize) {
                    Some(Some(_)) => counts[p.slot as usize] += 1,
                    _ => return Err(format!("posting for empty slot {}", p.slot)),
                }
            }
        }
        let mut terms: Vec<Vec<u32>> = counts
            .iter()
            .map(|&n| Vec::with_capacity(n as usize))
            .collect();
        for (term, list) in self.postings.iter().enumerate() {
            for p in list {
                let doc_terms = &mut terms[p.slot as usize];
                if doc_terms.last() == Some(&(term as u32)) {
                    return Err(format!("slot {} listed twice for term {term}", p.slot));
                }
                doc_terms.push(term as u32);
            }
        }
        for (doc, t) in self.docs.iter_mut().zip(terms) {
            if let Some(d) = doc {
                self.heap_bytes += t.len() * size_of::<u32>();
                d.terms = t.into_boxed_slice();
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
}
