//! The i8 arithmetic MaxSim runs over stored token states (`colbert::TokenStates`): one dot
//! product, and MaxSim over two whole matrices.
//!
//! Owns choosing the kernel (AVX2 when the CPU has it, detected at each call by the standard
//! library's cached check; else a portable loop). Must never read past the shorter slice nor
//! change a result by the kernel chosen: every kernel computes the same exact integer dot
//! products and the same float operations on them, in the same order.

/// i8 dot product, with AVX2 when the CPU has it (detected once; the portable build targets
/// SSE2 only, where MaxSim over a prompt's 40 candidates took about twice as long).
pub(super) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { dot_i8_avx2(a, b) };
        }
    }
    dot_i8_portable(a, b)
}

#[inline(always)]
fn dot_i8_portable(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

/// The same loop compiled for AVX2 (the compiler vectorises it with 256-bit registers).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    dot_i8_portable(a, b)
}

/// One side of MaxSim: `values` holds rows of `width` i8, row `t` standing for
/// `values[t] * scales[t]`.
#[derive(Clone, Copy)]
pub(super) struct Rows<'a> {
    pub values: &'a [i8],
    pub scales: &'a [f32],
    pub width: usize,
}

/// MaxSim: for every row of `q`, the best of (its i8 dot product with a row of `d`) × that
/// row's scale, times its own scale, summed over `q`'s rows (a row of `q` with nothing to
/// match adds nothing). The AVX2 kernel widens each query row to i16 once and multiplies 16
/// values per instruction (`vpmaddwd`) against each memory row; `dot_i8`, called once per
/// pair, widened both rows every time and multiplied 8 values per instruction. The rescoring
/// of a prompt's 40 candidates took 1.10–1.17 ms of CPU instead of 1.83–1.88 ms (perf in the
/// daemon at 10k, bench/EVAL.md section 25).
pub(super) fn maxsim_i8(q: Rows, d: Rows) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if q.width <= avx2::MAX_WIDTH && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { avx2::maxsim(q, d) };
        }
    }
    maxsim_portable(q, d)
}

fn maxsim_portable(q: Rows, d: Rows) -> f32 {
    maxsim_with(q, d, dot_i8)
}

/// MaxSim with `dot` as the rows' dot product (the order of every float operation is here).
#[inline(always)]
fn maxsim_with(q: Rows, d: Rows, mut dot: impl FnMut(&[i8], &[i8]) -> i32) -> f32 {
    let w = q.width;
    if w == 0 || d.width != w {
        return 0.0;
    }
    let mut total = 0f32;
    for (q_row, q_scale) in q.values.chunks_exact(w).zip(q.scales) {
        let mut best = f32::NEG_INFINITY;
        for (d_row, d_scale) in d.values.chunks_exact(w).zip(d.scales) {
            best = best.max(dot(q_row, d_row) as f32 * d_scale);
        }
        if best.is_finite() {
            total += best * q_scale;
        }
    }
    total
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Rows, maxsim_with};
    use std::arch::x86_64::*;

    /// Blocks of 16 values a widened query row may hold: the model's 384 dims are 24.
    const BLOCKS: usize = crate::models::embed::DIMS.div_ceil(16);
    pub(super) const MAX_WIDTH: usize = BLOCKS * 16;

    /// `maxsim_i8` with the query row widened once per row instead of once per pair.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn maxsim(q: Rows, d: Rows) -> f32 {
        let blocks = q.width / 16;
        let mut widened = [_mm256_setzero_si256(); BLOCKS];
        let mut current: *const i8 = std::ptr::null();
        maxsim_with(q, d, |q_row, d_row| {
            if q_row.as_ptr() != current {
                current = q_row.as_ptr();
                for (b, w) in widened.iter_mut().enumerate().take(blocks) {
                    // SAFETY: block `b` < width / 16 lies within the row.
                    *w = unsafe { widen(q_row.as_ptr().add(b * 16)) };
                }
            }
            // SAFETY: AVX2 is enabled on this function; both rows hold `width` values.
            unsafe { dot_widened(&widened[..blocks], q_row, d_row) }
        })
    }

    /// 16 i8 at `p` as 16 i16.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn widen(p: *const i8) -> __m256i {
        // SAFETY: the caller hands 16 readable bytes.
        unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(p.cast())) }
    }

    /// The dot product of `q_row` (its whole blocks already widened) and `d_row`: exact, as
    /// every product and partial sum fits in i32 (384 × 127² < 2³¹).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn dot_widened(q: &[__m256i], q_row: &[i8], d_row: &[i8]) -> i32 {
        let mut acc = _mm256_setzero_si256();
        for (b, qb) in q.iter().enumerate() {
            // SAFETY: block `b` < width / 16 lies within `d_row`, as long as `q_row`.
            let db = unsafe { widen(d_row.as_ptr().add(b * 16)) };
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(*qb, db));
        }
        let half = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256(acc, 1),
        );
        let pairs = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0b01_00_11_10));
        let one = _mm_add_epi32(pairs, _mm_shuffle_epi32(pairs, 0b10_11_00_01));
        let tail = q.len() * 16;
        let rest: i32 = q_row[tail..]
            .iter()
            .zip(&d_row[tail..])
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
        _mm_cvtsi128_si32(one) + rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::embed::DIMS;

    #[test]
    fn the_fast_dot_product_agrees_with_the_portable_one() {
        let a: Vec<i8> = (0..DIMS)
            .map(|i| (i as i32 * 37 % 255 - 127) as i8)
            .collect();
        let b: Vec<i8> = (0..DIMS)
            .map(|i| (i as i32 * 91 % 255 - 127) as i8)
            .collect();
        assert_eq!(dot_i8(&a, &b), dot_i8_portable(&a, &b));
        let extreme = vec![-127i8; DIMS];
        assert_eq!(dot_i8(&extreme, &extreme), 127 * 127 * DIMS as i32);
    }

    /// Rows of pseudo-random values in -127..=127 with scales in (0, 0.02].
    fn rows(seed: u64, tokens: usize, width: usize) -> (Vec<i8>, Vec<f32>) {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u32
        };
        let values = (0..tokens * width)
            .map(|_| (next() % 255) as i32 - 127)
            .map(|v| v as i8)
            .collect();
        let scales = (0..tokens)
            .map(|_| (next() % 1000 + 1) as f32 * 2e-5)
            .collect();
        (values, scales)
    }

    /// Every kernel gives MaxSim to the bit, for the model's width and for widths with a tail
    /// after the last block of 16 (studies cut the dims), with empty sides too.
    #[test]
    fn maxsim_is_the_same_to_the_bit_whichever_kernel_runs() {
        for width in [DIMS, DIMS - 5, 96, 16, 24, 40, 7] {
            for (q_tokens, d_tokens) in [(1, 1), (15, 26), (32, 60), (0, 5), (5, 0), (9, 130)] {
                let (qv, qs) = rows(width as u64 * 31 + q_tokens as u64, q_tokens, width);
                let (dv, ds) = rows(width as u64 * 17 + d_tokens as u64 + 5, d_tokens, width);
                let q = Rows {
                    values: &qv,
                    scales: &qs,
                    width,
                };
                let d = Rows {
                    values: &dv,
                    scales: &ds,
                    width,
                };
                let (fast, portable) = (maxsim_i8(q, d), maxsim_portable(q, d));
                assert_eq!(
                    fast.to_bits(),
                    portable.to_bits(),
                    "width {width}, {q_tokens} × {d_tokens}: {fast} vs {portable}"
                );
            }
        }
    }
}
