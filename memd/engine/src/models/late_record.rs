//! One record of the token-state log (`late_disk`) as bytes: its payload's length (u32), the
//! CRC-32 of the payload (u32) and the payload: key (u64), text hash (u32), token count (u32),
//! a bit per token (kept for the codes), the scales (f32 each), the values (i8 each); all
//! little-endian.
//!
//! Owns `Full` (a memory's states as a record holds them), encoding and checking a record,
//! and `Form`: what coarser records (only the kept tokens, 4-bit values) would give back, for
//! the study that measured them (`memd-eval retrieval --log-form`).
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

/// A coarser form of the log's records, for studies: what a record keeping less would give
/// back (`memd-eval retrieval --log-form`, bench/EVAL.md section 14). Of those measured only
/// 6 bits a value kept R@5 and MRR within 0.005 on all three sets; the log still stores i8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// Only the tokens the codes keep (the words'), not the markers and punctuation.
    pub kept_only: bool,
    /// Bits a value (4-8): values rounded to ±(2^(bits-1) - 1) against the token's largest,
    /// the scale grown to match; 8 is i8 as stored.
    pub bits: u8,
}

impl Form {
    /// `full` as a record of this form would hold it.
    pub fn apply(self, full: &Full) -> Full {
        let mut out = match self.kept_only {
            true => full.kept_only(),
            false => full.clone(),
        };
        if self.bits < 8 {
            out.states = to_bits(&out.states, self.bits.max(2));
        }
        out
    }
}

impl Full {
    /// Only the kept tokens (the first one when none is), each kept.
    fn kept_only(&self) -> Full {
        let (values, scales) = self.states.parts();
        let mut picked: Vec<usize> = (0..scales.len()).filter(|&t| self.kept[t]).collect();
        if picked.is_empty() && !scales.is_empty() {
            picked.push(0);
        }
        let values = picked
            .iter()
            .flat_map(|&t| values[t * DIMS..(t + 1) * DIMS].iter().copied())
            .collect();
        let scales = picked.iter().map(|&t| scales[t]).collect();
        Full {
            states: TokenStates::from_parts(values, scales).expect("rows of a valid TokenStates"),
            kept: vec![true; picked.len()],
        }
    }
}

/// Each token's i8 values rounded to ±(2^(bits-1) - 1) against its largest magnitude (the
/// scale grows to match): the i8 form of what `bits` a value hold.
fn to_bits(states: &TokenStates, bits: u8) -> TokenStates {
    let top = f32::from((1u8 << (bits - 1)) - 1);
    let (values, scales) = states.parts();
    let mut out_values = Vec::with_capacity(values.len());
    let mut out_scales = Vec::with_capacity(scales.len());
    for (row, &scale) in values.chunks_exact(DIMS).zip(scales) {
        let max = row.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
        if max == 0 {
            out_values.extend(row.iter().copied());
            out_scales.push(scale);
            continue;
        }
        let step = f32::from(max) / top;
        out_values.extend(
            row.iter()
                .map(|&v| (f32::from(v) / step).round().clamp(-top, top) as i8),
        );
        out_scales.push(scale * step);
    }
    TokenStates::from_parts(out_values, out_scales).expect("same shape as the input")
}

/// Bytes a record of `form` would take for `full` (head, kept bits unless only kept tokens
/// are stored, scales, values packed at `bits` each).
pub fn record_bytes(full: &Full, form: Form) -> usize {
    let tokens = form.apply(full).states.tokens();
    let bits = match form.kept_only {
        true => 0,
        false => tokens.div_ceil(8),
    };
    let values = (tokens * DIMS * usize::from(form.bits.clamp(2, 8))).div_ceil(8);
    RECORD_HEAD + PAYLOAD_HEAD + bits + 4 * tokens + values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::late_codes::tests::unit_vectors;

    fn full(tokens: usize, seed: u64) -> Full {
        Full {
            states: TokenStates::quantize(&unit_vectors(tokens, seed)),
            kept: (0..tokens).map(|t| t % 3 != 0).collect(),
        }
    }

    const EVERY_I8: Form = Form {
        kept_only: false,
        bits: 8,
    };

    #[test]
    fn every_token_in_i8_is_the_record_itself() {
        let f = full(7, 1);
        assert_eq!(EVERY_I8.apply(&f), f);
        assert_eq!(record_bytes(&f, EVERY_I8), encode_record(3, 4, &f).len());
    }

    #[test]
    fn kept_only_keeps_the_kept_rows_and_four_bits_stay_close() {
        let f = full(20, 2);
        let kept = Form {
            kept_only: true,
            bits: 8,
        };
        let k = kept.apply(&f);
        assert_eq!(k.kept_rows(), f.kept_rows());
        assert_eq!((k.states.tokens(), k.kept_count()), (13, f.kept_count()));
        let four = Form {
            kept_only: false,
            bits: 4,
        };
        let (a, b) = (f.states.rows(), four.apply(&f).states.rows());
        for (x, y) in a.iter().zip(&b) {
            let cos: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
            assert!(cos > 0.97, "{cos}");
            assert!(y.iter().zip(x).any(|(p, q)| p != q), "values were rounded");
        }
        assert_eq!(four.apply(&four.apply(&f)), four.apply(&f), "idempotent");
        assert_eq!(
            record_bytes(&f, four),
            record_bytes(&f, EVERY_I8) - 20 * DIMS / 2
        );
        let mut none = full(3, 3);
        none.kept = vec![false; 3];
        assert_eq!(kept.apply(&none).states.tokens(), 1, "the first token");
    }
}
