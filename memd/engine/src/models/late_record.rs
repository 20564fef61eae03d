//! One record of the token-state log (`late_disk`) as bytes: its payload's length (u32), the
//! CRC-32 of the payload (u32) and the payload: key (u64), text hash (u32), token count (u32),
//! a bit per token (kept for the codes), the scales (f32 each), the values (i8 each); all
//! little-endian.
//!
//! Owns `Full` (a memory's states as a record holds them), encoding and checking a record.
//! Must never return states from a record whose length or checksum is off; knows nothing of
//! files, offsets or the index (`late_disk` owns those).

use super::embed::{DIMS, TokenStates};

/// Payload length and checksum before each payload.
pub(super) const RECORD_HEAD: usize = 8;
/// Key, text hash, token count.
pub(super) const PAYLOAD_HEAD: usize = 16;

/// A memory's full states as stored: every token in i8, and which tokens its codes keep.
#[derive(Debug, Clone, PartialEq)]
pub struct Full {
    pub states: TokenStates,
    pub kept: Vec<bool>,
}

impl Full {
    /// The kept tokens' vectors (what the codes stand for); the first token when none is kept.
    pub fn kept_rows(&self) -> Vec<Vec<f32>> {
        let rows = self.states.rows();
        let kept: Vec<Vec<f32>> = rows
            .iter()
            .zip(&self.kept)
            .filter(|(_, k)| **k)
            .map(|(r, _)| r.clone())
            .collect();
        match kept.is_empty() {
            true => rows.into_iter().take(1).collect(),
            false => kept,
        }
    }

    pub fn kept_count(&self) -> usize {
        self.kept.iter().filter(|k| **k).count().max(1)
    }
}

/// Tokens a record may hold: well over the model's cut (`colbert::MAX_DOC_TOKENS`), so a
/// length read from a damaged head cannot ask for gigabytes.
pub(super) const MAX_TOKENS: usize = 1024;

/// The largest payload a record can take.
pub(super) fn max_payload() -> usize {
    PAYLOAD_HEAD + MAX_TOKENS.div_ceil(8) + MAX_TOKENS * (4 + DIMS)
}

pub(super) fn encode_record(key: u64, hash: u32, full: &Full) -> Vec<u8> {
    let (values, scales) = full.states.parts();
    let tokens = scales.len();
    let mut payload =
        Vec::with_capacity(PAYLOAD_HEAD + tokens.div_ceil(8) + values.len() + 4 * tokens);
    payload.extend(key.to_le_bytes());
    payload.extend(hash.to_le_bytes());
    payload.extend((tokens as u32).to_le_bytes());
    let mut bits = vec![0u8; tokens.div_ceil(8)];
    for (t, k) in full.kept.iter().enumerate() {
        bits[t / 8] |= u8::from(*k) << (t % 8);
    }
    payload.extend(bits);
    scales.iter().for_each(|s| payload.extend(s.to_le_bytes()));
    payload.extend(values.iter().map(|&v| v as u8));
    let mut record = Vec::with_capacity(RECORD_HEAD + payload.len());
    record.extend((payload.len() as u32).to_le_bytes());
    record.extend(crc32fast::hash(&payload).to_le_bytes());
    record.extend(payload);
    record
}

/// A whole record (head and payload) back: (key, text hash, states); `None` when its length
/// or checksum is off or its states are malformed.
pub(super) fn parse_record(record: &[u8]) -> Option<(u64, u32, Full)> {
    let len = u32::from_le_bytes(record.get(..4)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(record.get(4..8)?.try_into().ok()?);
    let payload = record.get(RECORD_HEAD..)?;
    if payload.len() != len || len < PAYLOAD_HEAD || crc32fast::hash(payload) != crc {
        return None;
    }
    let key = u64::from_le_bytes(payload[..8].try_into().ok()?);
    let hash = u32::from_le_bytes(payload[8..12].try_into().ok()?);
    let tokens = u32::from_le_bytes(payload[12..16].try_into().ok()?) as usize;
    let bits_end = PAYLOAD_HEAD + tokens.div_ceil(8);
    let scales_end = bits_end + tokens.checked_mul(4)?;
    if payload.len() != scales_end + tokens.checked_mul(DIMS)? {
        return None;
    }
    let bits = &payload[PAYLOAD_HEAD..bits_end];
    let kept = (0..tokens)
        .map(|t| bits[t / 8] >> (t % 8) & 1 == 1)
        .collect();
    let scales = payload[bits_end..scales_end]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let values = payload[scales_end..].iter().map(|&b| b as i8).collect();
    let states = TokenStates::from_parts(values, scales)?;
    Some((key, hash, Full { states, kept }))
}
