//! The BM25 index's term dictionary: term text → dense `u32` id.
//!
//! Owns the terms' text, concatenated in one string in id order (`ends[i]` is where term `i`
//! ends), and an open-addressing table of ids keyed by the text's hash. At a million terms a
//! map of boxed strings cost ~60 MB and a million allocations to load; this costs ~2 bytes of
//! table per term beside the text and loads with two bulk copies and one pass of hashing.
//! Must never hand out an id twice or for two texts, and never panic on bytes it did not
//! write (`from_parts` checks every boundary and duplicate).

use std::hash::Hasher;

use super::FxHasher;

/// An empty table cell.
const EMPTY: u32 = u32::MAX;

#[derive(Default)]
pub(super) struct Terms {
    text: String,
    ends: Vec<u32>,
    /// Ids by hash, linear probing; its length is a power of two, at most half full.
    table: Vec<u32>,
}

impl Terms {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The id of `term`, if it has one.
    pub(super) fn get(&self, term: &str) -> Option<u32> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut at = hash(term) as usize & mask;
        loop {
            match self.table[at] {
                EMPTY => return None,
                id if self.text(id) == term => return Some(id),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// The id of `term`, given one if it has none. `None` only when the text would pass
    /// 4 GiB (ids and offsets are `u32`): that term is then not indexed.
    pub(super) fn intern(&mut self, term: &str) -> Option<u32> {
        if let Some(id) = self.get(term) {
            return Some(id);
        }
        let end = u32::try_from(self.text.len() + term.len()).ok()?;
        let id = u32::try_from(self.ends.len())
            .ok()
            .filter(|&i| i != EMPTY)?;
        self.text.push_str(term);
        self.ends.push(end);
        // `get` found no equal text, so neither placing nor rehashing can meet one.
        let placed = if (self.ends.len() * 2) > self.table.len() {
            self.rehash((self.ends.len() * 2).next_power_of_two().max(64))
        } else {
            self.place(id)
        };
        placed.ok().map(|()| id)
    }

    /// The text of term `id` (which must be below `len`).
    pub(super) fn text(&self, id: u32) -> &str {
        let id = id as usize;
        let start = if id == 0 {
            0
        } else {
            self.ends[id - 1] as usize
        };
        &self.text[start..self.ends[id] as usize]
    }

    /// Bytes held: the text, the ends and the table, by capacity.
    pub(super) fn memory_bytes(&self) -> usize {
        self.text.capacity() + (self.ends.capacity() + self.table.capacity()) * size_of::<u32>()
    }

    /// The concatenated text and the ends, for the image.
    pub(super) fn parts(&self) -> (&str, &[u32]) {
        (&self.text, &self.ends)
    }

    /// A dictionary from `parts`' two halves; `Err` when an end runs backwards or past the
    /// text, splits a character, or two ids share a text.
    pub(super) fn from_parts(text: String, ends: Vec<u32>) -> Result<Terms, String> {
        let mut start = 0usize;
        for (id, &end) in ends.iter().enumerate() {
            let end = end as usize;
            if end < start || end > text.len() || !text.is_char_boundary(end) {
                return Err(format!("term {id} ends at {end}, outside its text"));
            }
            start = end;
        }
        if start != text.len() {
            return Err(format!(
                "{} bytes of term text after the last term",
                text.len() - start
            ));
        }
        if ends.len() >= EMPTY as usize {
            return Err(format!("{} terms", ends.len()));
        }
        let mut terms = Terms {
            text,
            ends,
            table: Vec::new(),
        };
        if let Err(id) = terms.rehash((terms.ends.len() * 2).next_power_of_two().max(64)) {
            return Err(format!("term {:?} appears twice", terms.text(id)));
        }
        Ok(terms)
    }

    /// Rebuilds the table at `size` cells (a power of two) from the ids in order; `Err(id)`
    /// when term `id`'s text is an earlier id's (only bytes from an image can be).
    fn rehash(&mut self, size: usize) -> Result<(), u32> {
        self.table = vec![EMPTY; size];
        (0..self.ends.len() as u32).try_for_each(|id| self.place(id))
    }

    /// Puts `id` in the table, one hash and one probe sequence; `Err(id)` if its text is there.
    fn place(&mut self, id: u32) -> Result<(), u32> {
        let mask = self.table.len() - 1;
        let text = self.text(id);
        let mut at = hash(text) as usize & mask;
        loop {
            match self.table[at] {
                EMPTY => break,
                other if self.text(other) == text => return Err(id),
                _ => at = (at + 1) & mask,
            }
        }
        self.table[at] = id;
        Ok(())
    }
}

fn hash(term: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(term.as_bytes());
    // The multiply leaves the low bits weakest; fold the high half in before masking.
    let x = h.finish();
    x ^ (x >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_stable_and_found_again() {
        let mut t = Terms::default();
        let words: Vec<String> = (0..5000).map(|i| format!("term{i}")).collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.intern(w), Some(i as u32));
        }
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.intern(w), Some(i as u32));
            assert_eq!(t.get(w), Some(i as u32));
            assert_eq!(t.text(i as u32), w);
        }
        assert_eq!(t.get("absent"), None);
        assert_eq!(t.get(""), None);
        assert_eq!(t.len(), 5000);
        // Unicode terms keep their boundaries.
        let id = t.intern("café").unwrap();
        assert_eq!(t.text(id), "café");
    }

    #[test]
    fn parts_round_trip_and_bad_parts_are_errors() {
        let mut t = Terms::default();
        for w in ["alpha", "été", "", "beta"] {
            t.intern(w);
        }
        let (text, ends) = t.parts();
        let back = Terms::from_parts(text.to_owned(), ends.to_vec()).unwrap();
        for id in 0..4 {
            assert_eq!(back.get(t.text(id)), Some(id));
        }
        let bad = [
            ("alphabeta".to_owned(), vec![5, 3]),
            ("alphabeta".to_owned(), vec![5, 10]),
            ("alphabeta".to_owned(), vec![5]),
            ("été".to_owned(), vec![1, 5]),
            ("abab".to_owned(), vec![2, 4]),
        ];
        for (text, ends) in bad {
            assert!(
                Terms::from_parts(text.clone(), ends.clone()).is_err(),
                "{text} {ends:?}"
            );
        }
    }
}
