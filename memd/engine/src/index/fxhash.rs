//! A fast, non-keyed hasher for maps whose keys are memd's own: term texts, memory keys, the
//! store's numbers. Owns nothing else; must never key a map that strangers can fill to make
//! its lookups slow (nothing in a per-user daemon on loopback is filled that way).

use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style hasher: term and key lookups dominate index build time, and SipHash's DoS
/// resistance buys nothing for a local, single-user index. Also the store's maps keyed by
/// its own numbers (`state`).
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

pub(crate) type FastHash = BuildHasherDefault<FxHasher>;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
