//! A record as a snapshot writes it: one row, every field by position.
//!
//! Owns `Row`, the snapshot's encoding of a `Record`: a MessagePack array of every field in
//! `Record`'s declared order, none left out. Named maps (what `rmp_serde::to_vec_named` wrote
//! before) spell each field's name in every record: at 1M memories over a third of the
//! snapshot's bytes and about half of its decoding (bench/EVAL.md section 23). Reading needs
//! nothing here: `Record`'s derived `Deserialize` takes an array by position as it takes a map
//! by name, so snapshots of either form load with the same code. Must never leave a field out
//! nor change their order (a row is read by position: a skipped field would shift every field
//! after it), so the fields are taken apart without `..` and a new field fails to compile here.

use crate::record::Record;
use serde::ser::{Serialize, SerializeTuple, Serializer};

/// How many fields a row holds: all of `Record`'s.
const FIELDS: usize = 22;

/// `Record` written as a row (see the module's note).
pub(super) struct Row<'a>(pub &'a Record);

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // In `Record`'s declared order; without `..`, so a new field must be placed here.
        let Record {
            key,
            id,
            collection,
            content,
            created_at,
            updated_at,
            score,
            uses,
            success_count,
            outcome_history,
            last_outcome,
            last_used,
            tags,
            importance,
            confidence,
            archived,
            former_ids,
            metadata,
            project,
            team,
            origin,
            moves,
        } = self.0;
        let mut row = s.serialize_tuple(FIELDS)?;
        row.serialize_element(key)?;
        row.serialize_element(id)?;
        row.serialize_element(collection)?;
        row.serialize_element(content)?;
        row.serialize_element(created_at)?;
        row.serialize_element(updated_at)?;
        row.serialize_element(score)?;
        row.serialize_element(uses)?;
        row.serialize_element(success_count)?;
        row.serialize_element(outcome_history)?;
        row.serialize_element(last_outcome)?;
        row.serialize_element(last_used)?;
        row.serialize_element(tags)?;
        row.serialize_element(importance)?;
        row.serialize_element(confidence)?;
        row.serialize_element(archived)?;
        row.serialize_element(former_ids)?;
        row.serialize_element(metadata)?;
        row.serialize_element(project)?;
        row.serialize_element(team)?;
        row.serialize_element(origin)?;
        row.serialize_element(moves)?;
        row.end()
    }
}

/// `records` as one chunk of rows.
pub(super) fn encode_chunk(records: &[&Record]) -> Result<Vec<u8>, rmp_serde::encode::Error> {
    let rows: Vec<Row> = records.iter().map(|r| Row(r)).collect();
    rmp_serde::to_vec(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{MoveEntry, Origin, OutcomeEntry};
    use proto::{Collection, Outcome};

    /// A record with every field away from its default, so a field written in the wrong
    /// place or left out cannot decode to the same record.
    fn full() -> Record {
        let mut r = Record::new(Collection::MemoryBank, "the whole record".into(), 5);
        r.key = 42;
        r.updated_at = 6;
        r.score = 0.75;
        r.uses = 3;
        r.success_count = 2.5;
        r.outcome_history = vec![OutcomeEntry {
            outcome: Outcome::Worked,
            at: 7,
        }];
        r.last_outcome = Some(Outcome::Failed);
        r.last_used = Some(8);
        r.tags = vec!["a".into(), "b".into()];
        r.importance = Some(0.9);
        r.confidence = Some(0.8);
        r.archived = true;
        r.former_ids = vec!["working_000000000001".into()];
        r.metadata.insert("k".into(), "v".into());
        r.project = Some("p1".into());
        r.team = true;
        r.origin = Some(Box::new(Origin {
            uid: "store:1".into(),
            owner: "alice".into(),
        }));
        r.moves = vec![MoveEntry {
            from: Collection::Working,
            to: Collection::MemoryBank,
            at: 9,
        }];
        r
    }

    #[test]
    fn a_row_reads_back_as_the_record_in_every_field() {
        let plain = Record::new(Collection::Working, "defaults".into(), 1);
        let (full, plain) = (full(), plain);
        let bytes = encode_chunk(&[&full, &plain]).unwrap();
        let back: Vec<Record> = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, [full, plain]);
    }

    #[test]
    fn rows_and_named_maps_decode_alike_and_rows_are_smaller() {
        let r = full();
        let named = rmp_serde::to_vec_named(&[&r]).unwrap();
        let rows = encode_chunk(&[&r]).unwrap();
        let from_named: Vec<Record> = rmp_serde::from_slice(&named).unwrap();
        let from_rows: Vec<Record> = rmp_serde::from_slice(&rows).unwrap();
        assert_eq!(from_named, from_rows);
        assert!(
            rows.len() * 10 < named.len() * 7,
            "{} vs {}",
            rows.len(),
            named.len()
        );
    }
}
