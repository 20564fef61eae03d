//! The i8 dot product MaxSim runs over stored token states (`colbert::TokenStates`).
//!
//! Owns choosing the kernel (AVX2 when the CPU has it, detected at each call by the standard
//! library's cached check; else a portable loop). Must never read past the shorter slice nor
//! change a result by the kernel chosen: both compute the same exact integer sum.

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
}
