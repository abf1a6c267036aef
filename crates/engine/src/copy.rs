//! Copies of activation-sized buffers that never go through libc's `memcpy`.
//!
//! glibc (2.36, Debian 12) copies 4 KiB and more with `rep movsb` on a CPU with fast short
//! `rep movsb` (FSRM), and on AMD Zen 3 that instruction runs about 30 times slower when
//! source and destination differ in their offset modulo 32 bytes: 16 KiB in 5.8 us against
//! 0.19 us (measured on a Zen 3 EPYC). Two heap vectors of floats (16-byte aligned) differ
//! so half the time, which put 8-11 us into every 4096-column activation row a product
//! loaded there. These loops cost the same whatever the offsets.
#![allow(unsafe_code)] // the x86-64 copy loop's unaligned vector loads and stores

/// Bytes per step of the vector loop; shorter copies (and a longer one's tail) are
/// `copy_from_slice`'s, below the size where libc turns to `rep movsb`.
#[cfg(target_arch = "x86_64")]
const STEP: usize = 64;

/// `dst.copy_from_slice(src)` (the same length, or it panics) with vector loads and stores
/// on x86-64, whatever the two buffers' alignment.
#[inline]
pub fn copy_values<T: Copy>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "a copy between buffers of different lengths");
    let size = std::mem::size_of::<T>();
    #[cfg(target_arch = "x86_64")]
    if size > 0 && STEP.is_multiple_of(size) {
        let whole = std::mem::size_of_val(src) / STEP * STEP;
        // SAFETY: `src` and `dst` hold the same number of bytes (same length and element
        // type) and are distinct (one is borrowed mutably); `T: Copy` has no drop or
        // invariant a byte copy could break; the loop copies bytes `0..whole`, whole
        // elements (`size` divides STEP).
        unsafe { copy_steps(dst.as_mut_ptr().cast::<u8>(), src.as_ptr().cast::<u8>(), whole) };
        let done = whole / size;
        dst[done..].copy_from_slice(&src[done..]);
        return;
    }
    let _ = size;
    dst.copy_from_slice(src);
}

/// `v.clear(); v.extend_from_slice(src)` through [`copy_values`] (only the part of `v`
/// past its old length is zeroed first).
#[inline]
pub fn replace_values<T: Copy + Default>(v: &mut Vec<T>, src: &[T]) {
    v.truncate(src.len());
    v.resize(src.len(), T::default());
    copy_values(v, src);
}

/// `v.extend_from_slice(src)` through [`copy_values`].
#[inline]
pub fn extend_values<T: Copy + Default>(v: &mut Vec<T>, src: &[T]) {
    let at = v.len();
    v.resize(at + src.len(), T::default());
    copy_values(&mut v[at..], src);
}

/// Copies `bytes` (a multiple of [`STEP`]) from `src` to `dst`: with AVX's 32-byte loads
/// and stores where the CPU has it, else with SSE2's 16-byte ones (every x86-64 CPU has
/// SSE2).
///
/// # Safety
/// `src..src + bytes` must be readable, `dst..dst + bytes` writable, and the two must not
/// overlap.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn copy_steps(dst: *mut u8, src: *const u8, bytes: usize) {
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: this CPU has AVX (checked just above); the caller's guarantees pass on.
        unsafe { copy_steps_avx(dst, src, bytes) }
    } else {
        // SAFETY: the caller's guarantees pass on.
        unsafe { copy_steps_sse2(dst, src, bytes) }
    }
}

/// The copy loop of vectors of type `$v` (`$load` an unaligned load, `$store` an unaligned
/// store) a step. A compiler fence ends each step: otherwise the compiler turns the loop
/// back into a `memcpy` call.
#[cfg(target_arch = "x86_64")]
macro_rules! copy_loop {
    ($dst:ident, $src:ident, $bytes:ident, $v:ty, $load:ident, $store:ident) => {{
        const W: usize = std::mem::size_of::<$v>();
        let mut at = 0;
        while at < $bytes {
            // SAFETY: bytes `at..at + STEP` lie inside both ranges (`at + STEP <= bytes`,
            // as `bytes` is a multiple of STEP), which the caller guarantees readable /
            // writable and disjoint; the loads and stores are unaligned ones.
            unsafe {
                let (s, d) = ($src.add(at), $dst.add(at));
                let v: [$v; STEP / W] = std::array::from_fn(|k| $load(s.add(W * k).cast()));
                for (k, v) in v.into_iter().enumerate() {
                    $store(d.add(W * k).cast(), v);
                }
            }
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            at += STEP;
        }
    }};
}

/// [`copy_steps`] with two 32-byte vectors a step.
///
/// # Safety
/// As [`copy_steps`]'s, on a CPU with AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn copy_steps_avx(dst: *mut u8, src: *const u8, bytes: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    copy_loop!(dst, src, bytes, __m256i, _mm256_loadu_si256, _mm256_storeu_si256);
}

/// [`copy_steps`] with four 16-byte vectors a step.
///
/// # Safety
/// As [`copy_steps`]'s.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_steps_sse2(dst: *mut u8, src: *const u8, bytes: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
    copy_loop!(dst, src, bytes, __m128i, _mm_loadu_si128, _mm_storeu_si128);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_holds_the_same_values_at_every_length_and_offset() {
        let src: Vec<u32> = (0..700).map(|i| i * 2_654_435_761u32).collect();
        for offset in 0..5 {
            for len in [0, 1, 15, 16, 17, 64, 100, 511, 512, 695] {
                let mut dst = vec![0u32; len + 8];
                copy_values(&mut dst[offset..offset + len], &src[offset..offset + len]);
                assert_eq!(&dst[offset..offset + len], &src[offset..offset + len]);
                assert!(dst[..offset].iter().chain(&dst[offset + len..]).all(|&v| v == 0));
            }
        }
        let bytes: Vec<u8> = (0..=255).collect();
        let mut out = vec![0u8; 200];
        copy_values(&mut out, &bytes[3..203]);
        assert_eq!(out, &bytes[3..203]);
    }

    #[test]
    fn replacing_or_extending_a_vector_leaves_exactly_the_source() {
        let mut v = vec![9.0f32; 3];
        replace_values(&mut v, &[1.0, 2.0]);
        assert_eq!(v, [1.0, 2.0]);
        let long: Vec<f32> = (0..4099).map(|i| i as f32).collect();
        replace_values(&mut v, &long);
        assert_eq!(v, long);
        extend_values(&mut v, &[7.0; 70]);
        assert_eq!(v.len(), long.len() + 70);
        assert_eq!(&v[..long.len()], &long[..]);
        assert!(v[long.len()..].iter().all(|&x| x == 7.0));
    }

    #[test]
    #[should_panic(expected = "different lengths")]
    fn a_copy_between_different_lengths_panics() {
        copy_values(&mut [0u8; 3], &[1u8; 4]);
    }
}
