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

    /// `Record` as it was before its compact form (origin inline, metadata a map of
    /// `String`s), written as `Row` wrote it (every field): rows must be the same bytes
    /// either way, read by either.
    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Before {
        key: u64,
        id: String,
        collection: Collection,
        content: String,
        created_at: i64,
        updated_at: i64,
        score: f64,
        uses: u32,
        success_count: f64,
        outcome_history: Vec<OutcomeEntry>,
        last_outcome: Option<Outcome>,
        last_used: Option<i64>,
        tags: Vec<String>,
        importance: Option<f64>,
        confidence: Option<f64>,
        archived: bool,
        former_ids: Vec<String>,
        metadata: std::collections::BTreeMap<String, proto::Value>,
        #[serde(default)]
        project: Option<String>,
        #[serde(default)]
        team: bool,
        #[serde(default)]
        origin: Option<Origin>,
        #[serde(default)]
        moves: Vec<MoveEntry>,
    }

    fn before(r: &Record) -> Before {
        let r = r.clone();
        Before {
            key: r.key,
            id: r.id,
            collection: r.collection,
            content: r.content,
            created_at: r.created_at,
            updated_at: r.updated_at,
            score: r.score,
            uses: r.uses,
            success_count: r.success_count,
            outcome_history: r.outcome_history,
            last_outcome: r.last_outcome,
            last_used: r.last_used,
            tags: r.tags,
            importance: r.importance,
            confidence: r.confidence,
            archived: r.archived,
            former_ids: r.former_ids,
            metadata: r.metadata.into_iter().collect(),
            project: r.project,
            team: r.team,
            origin: r.origin.map(|o| *o),
            moves: r.moves,
        }
    }

    #[test]
    fn rows_are_the_bytes_the_layout_before_wrote_and_read() {
        let mut full = full();
        full.metadata
            .insert("memory_type".into(), "key_takeaway".into());
        full.metadata.insert("conversation_id".into(), "c1".into());
        let plain = Record::new(Collection::Working, "defaults".into(), 1);
        let old = [before(&full), before(&plain)];
        let bytes = encode_chunk(&[&full, &plain]).unwrap();
        assert_eq!(bytes, rmp_serde::to_vec(&old).unwrap(), "same bytes");
        let by_before: Vec<Before> = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(by_before, old, "the code before reads them");
        let written_before = rmp_serde::to_vec(&old).unwrap();
        let now: Vec<Record> = rmp_serde::from_slice(&written_before).unwrap();
        assert_eq!(
            now,
            [full, plain],
            "and what it wrote reads as the same records"
        );
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
