//! One record of the token-state log (`late_disk`) as bytes: its payload's length (u32), the
//! CRC-32 of the payload (u32) and the payload: key (u64), text hash (u32), stored token count
//! (u32), the record's form (u8: bit 0 only the kept tokens are stored, bit 1 values in 4
//! bits), a bit per token (kept for the codes; absent when only the kept tokens are stored:
//! all of them are), the scales (f32 each), the values (i8 each, or two 4-bit values a byte,
//! the first in the low half, stored as value + 8); all little-endian.
//!
//! Owns `Full` (a memory's states as a record holds them), `Form` (what a record keeps of
//! them: `Form::SHIPPED` for the daemon, the others for `memd-eval retrieval --log-form`),
//! encoding and checking a record. Must never return states from a record whose length or
//! checksum is off; knows nothing of files, offsets or the index (`late_disk` owns those).

use super::embed::{DIMS, TokenStates};

/// Payload length and checksum before each payload.
pub(super) const RECORD_HEAD: usize = 8;
/// Key, text hash, token count, form.
pub(super) const PAYLOAD_HEAD: usize = 17;

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

/// What a record keeps of a memory's states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// Only the tokens the codes keep (the words'), not the markers and punctuation.
    pub kept_only: bool,
    /// Values in 4 bits (-7..7) with the token's scale, instead of 8.
    pub four_bit: bool,
}

impl Form {
    /// What the daemon writes (`memd-eval retrieval --log-form`, bench/EVAL.md section 13).
    pub const SHIPPED: Form = Form {
        kept_only: true,
        four_bit: true,
    };
    /// Every token in i8: the format before `memdtsl3`.
    pub const FULL: Form = Form {
        kept_only: false,
        four_bit: false,
    };

    fn byte(self) -> u8 {
        u8::from(self.kept_only) | u8::from(self.four_bit) << 1
    }

    fn from_byte(b: u8) -> Option<Form> {
        (b < 4).then_some(Form {
            kept_only: b & 1 == 1,
            four_bit: b & 2 == 2,
        })
    }

    /// The states a record of this form gives back for `full` (what reading it returns).
    pub fn apply(self, full: &Full) -> Full {
        let mut out = match self.kept_only {
            true => full.kept_only(),
            false => full.clone(),
        };
        if self.four_bit {
            out.states = to_four_bits(&out.states);
        }
        out
    }
}

impl Default for Form {
    fn default() -> Form {
        Form::SHIPPED
    }
}

/// Each token's i8 values rounded to -7..7 against its largest magnitude (the scale grows to
/// match): the i8 form of what 4 bits a value hold.
fn to_four_bits(states: &TokenStates) -> TokenStates {
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
        let step = f32::from(max) / 7.0;
        out_values.extend(
            row.iter()
                .map(|&v| (f32::from(v) / step).round().clamp(-7.0, 7.0) as i8),
        );
        out_scales.push(scale * step);
    }
    TokenStates::from_parts(out_values, out_scales).expect("same shape as the input")
}

/// Tokens a record may hold: well over the model's cut (`colbert::MAX_DOC_TOKENS`), so a
/// length read from a damaged head cannot ask for gigabytes.
pub(super) const MAX_TOKENS: usize = 1024;

/// The largest payload a record can take.
pub(super) fn max_payload() -> usize {
    PAYLOAD_HEAD + MAX_TOKENS.div_ceil(8) + MAX_TOKENS * (4 + DIMS)
}

/// The record of `full` in `form` (which drops what the form does not keep).
pub(super) fn encode_record(key: u64, hash: u32, full: &Full, form: Form) -> Vec<u8> {
    let stored = form.apply(full);
    let (values, scales) = stored.states.parts();
    let tokens = scales.len();
    let mut payload =
        Vec::with_capacity(PAYLOAD_HEAD + tokens.div_ceil(8) + values.len() + 4 * tokens);
    payload.extend(key.to_le_bytes());
    payload.extend(hash.to_le_bytes());
    payload.extend((tokens as u32).to_le_bytes());
    payload.push(form.byte());
    if !form.kept_only {
        let mut bits = vec![0u8; tokens.div_ceil(8)];
        for (t, k) in stored.kept.iter().enumerate() {
            bits[t / 8] |= u8::from(*k) << (t % 8);
        }
        payload.extend(bits);
    }
    scales.iter().for_each(|s| payload.extend(s.to_le_bytes()));
    match form.four_bit {
        true => payload.extend(values.chunks_exact(2).map(|p| nibble(p[0]) | nibble(p[1]) << 4)),
        false => payload.extend(values.iter().map(|&v| v as u8)),
    }
    let mut record = Vec::with_capacity(RECORD_HEAD + payload.len());
    record.extend((payload.len() as u32).to_le_bytes());
    record.extend(crc32fast::hash(&payload).to_le_bytes());
    record.extend(payload);
    record
}

/// A value of -7..7 as 4 bits (value + 8).
fn nibble(v: i8) -> u8 {
    (v + 8) as u8 & 0x0f
}

fn from_nibble(b: u8) -> i8 {
    (b & 0x0f) as i8 - 8
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
    let form = Form::from_byte(payload[16])?;
    let bits_end = match form.kept_only {
        true => PAYLOAD_HEAD,
        false => PAYLOAD_HEAD + tokens.div_ceil(8),
    };
    let scales_end = bits_end + tokens.checked_mul(4)?;
    let value_bytes = match form.four_bit {
        true => tokens.checked_mul(DIMS / 2)?,
        false => tokens.checked_mul(DIMS)?,
    };
    if payload.len() != scales_end + value_bytes {
        return None;
    }
    let kept = match form.kept_only {
        true => vec![true; tokens],
        false => {
            let bits = &payload[PAYLOAD_HEAD..bits_end];
            (0..tokens).map(|t| bits[t / 8] >> (t % 8) & 1 == 1).collect()
        }
    };
    let scales = payload[bits_end..scales_end]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let raw = &payload[scales_end..];
    let values = match form.four_bit {
        true => raw
            .iter()
            .flat_map(|&b| [from_nibble(b), from_nibble(b >> 4)])
            .collect(),
        false => raw.iter().map(|&b| b as i8).collect(),
    };
    let states = TokenStates::from_parts(values, scales)?;
    Some((key, hash, Full { states, kept }))
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

    fn forms() -> Vec<Form> {
        (0..4).filter_map(Form::from_byte).collect()
    }

    #[test]
    fn every_form_reads_back_what_it_keeps() {
        let f = full(7, 1);
        for form in forms() {
            let back = parse_record(&encode_record(5, 9, &f, form)).expect("a whole record");
            assert_eq!(back, (5, 9, form.apply(&f)), "{form:?}");
            assert_eq!(back.2.kept_count(), f.kept_count(), "{form:?}");
        }
        assert_eq!(Form::FULL.apply(&f), f);
        let kept = Form::SHIPPED.apply(&f);
        assert_eq!((kept.states.tokens(), kept.kept_rows().len()), (4, 4));
    }

    #[test]
    fn four_bits_stay_close_and_a_kept_only_record_is_smaller() {
        let f = full(20, 2);
        let four = Form {
            kept_only: false,
            four_bit: true,
        };
        let (a, b) = (f.states.rows(), four.apply(&f).states.rows());
        for (x, y) in a.iter().zip(&b) {
            let cos: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
            // Unit vectors: 4-bit rounding keeps them nearly parallel.
            assert!(cos > 0.97, "{cos}");
            assert!(y.iter().zip(x).any(|(p, q)| p != q), "values were rounded");
        }
        let len = |form| encode_record(1, 1, &f, form).len();
        assert!(len(Form::SHIPPED) * 3 < len(Form::FULL), "{}", len(Form::SHIPPED));
        assert_eq!(len(four), len(Form::FULL) - 20 * DIMS / 2);
    }

    #[test]
    fn a_memory_without_kept_tokens_keeps_its_first() {
        let mut f = full(3, 3);
        f.kept = vec![false; 3];
        let stored = Form::SHIPPED.apply(&f);
        assert_eq!(stored.states.tokens(), 1);
        assert_eq!(stored.kept_rows().len(), f.kept_rows().len());
    }

    #[test]
    fn a_bad_form_or_a_short_payload_is_no_record() {
        let f = full(4, 4);
        let mut r = encode_record(1, 2, &f, Form::SHIPPED);
        assert!(parse_record(&r[..r.len() - 1]).is_none());
        r[RECORD_HEAD + 16] = 9;
        let crc = crc32fast::hash(&r[RECORD_HEAD..]);
        r[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(parse_record(&r).is_none(), "form 9 with a valid checksum");
    }
}
