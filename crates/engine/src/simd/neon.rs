//! The ARM64 NEON primitives the NEON kernels share: 8-bit integer dot products of 16 and
//! 32 values, with the `dotprod` extension's `sdot` (one instruction per 16 pairs) or, on a
//! core without it, baseline NEON's widening multiplies and pairwise adds; f32 dot
//! products; and the f16 / bf16 widenings.
//!
//! `sdot` is emitted with inline assembly: its intrinsic is not stable in Rust yet. Every
//! function that issues it carries `#[target_feature(enable = "dotprod")]` and is reached
//! only where `Isa::NeonDot.is_available()` said the CPU has it. The `i8mm` extension's
//! `smmla` (a 2 x 8 by 8 x 2 matrix product) is inline assembly too, in an `unsafe fn`
//! that kernels call only when `Isa::NeonI8mm.is_available()` said the CPU has it.
#![allow(unsafe_code)]

use std::arch::aarch64::*;

/// `acc + sum of a[4i..4i+4] * b[4i..4i+4]` per 32-bit lane, with `sdot`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(crate) fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `sdot` reads and writes only these registers; this function is compiled
    // (and called) only for a CPU with the dotprod extension.
    unsafe {
        std::arch::asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// `acc + a · bᵀ` with `smmla`: `a` and `b` each hold two rows of 8 signed bytes, and the
/// 2 x 2 result's lanes are `[a0 · b0, a0 · b1, a1 · b0, a1 · b1]` (exact 32-bit sums).
///
/// # Safety
/// The CPU must have the `i8mm` extension (`Isa::NeonI8mm.is_available()`).
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `smmla` reads and writes only these registers; the caller guarantees a CPU
    // with i8mm (the directive lets the assembler take the instruction in a function
    // compiled without the feature, so that it inlines into the dotprod kernels).
    unsafe {
        std::arch::asm!(
            ".arch_extension i8mm",
            "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// `acc + pairwise sums of a * b` per 32-bit lane, in baseline NEON (the same total as
/// [`sdot`] gives, in other lanes).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn mdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    let hi = vmull_high_s8(a, b);
    vpadalq_s16(vpadalq_s16(acc, lo), hi)
}

/// The sum of `a[i] * b[i]` over 16 values (`DOT`: with `sdot`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn dot16<const DOT: bool>(a: int8x16_t, b: int8x16_t) -> i32 {
    let z = vdupq_n_s32(0);
    // SAFETY: `DOT` is true only in kernels selected for a CPU with dotprod.
    let v = if DOT { unsafe { sdot(z, a, b) } } else { mdot(z, a, b) };
    vaddvq_s32(v)
}

/// The sum of `a[i] * b[i]` over two pairs of 16 values (`DOT`: with `sdot`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn dot32<const DOT: bool>(a: [int8x16_t; 2], b: [int8x16_t; 2]) -> i32 {
    let z = vdupq_n_s32(0);
    let v = if DOT {
        // SAFETY: as in `dot16`.
        unsafe { sdot(sdot(z, a[0], b[0]), a[1], b[1]) }
    } else {
        mdot(mdot(z, a[0], b[0]), a[1], b[1])
    };
    vaddvq_s32(v)
}

/// 16 signed bytes at `p[at..at + 16]`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load16(p: &[i8], at: usize) -> int8x16_t {
    let s = &p[at..at + 16];
    // SAFETY: `s` holds 16 bytes (the slice above is bounds-checked).
    unsafe { vld1q_s8(s.as_ptr()) }
}

/// 16 unsigned bytes at `p[at..at + 16]`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load16u(p: &[u8], at: usize) -> uint8x16_t {
    let s = &p[at..at + 16];
    // SAFETY: `s` holds 16 bytes (bounds-checked above).
    unsafe { vld1q_u8(s.as_ptr()) }
}

/// Four f32 at `p[at..at + 4]`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load4f(p: &[f32], at: usize) -> float32x4_t {
    let s = &p[at..at + 4];
    // SAFETY: `s` holds 4 values (bounds-checked above).
    unsafe { vld1q_f32(s.as_ptr()) }
}

/// Four f16 (little-endian bits at `w[at..at + 8]`) widened to f32 with `fcvtl`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f16x4(w: &[u8], at: usize) -> float32x4_t {
    let s = &w[at..at + 8];
    // SAFETY: `s` holds 8 bytes (bounds-checked above).
    let h = unsafe { vld1_u16(s.as_ptr().cast()) };
    let out: float32x4_t;
    // SAFETY: `fcvtl` (half to single precision) is baseline ARMv8 floating point; it reads
    // and writes only these registers.
    unsafe {
        std::arch::asm!(
            "fcvtl {o:v}.4s, {h:v}.4h",
            o = out(vreg) out,
            h = in(vreg) h,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// Four bf16 (little-endian bits at `w[at..at + 8]`) widened to f32 (the bits shifted up).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn bf16x4(w: &[u8], at: usize) -> float32x4_t {
    let s = &w[at..at + 8];
    // SAFETY: `s` holds 8 bytes (bounds-checked above).
    let h = unsafe { vld1_u16(s.as_ptr().cast()) };
    vreinterpretq_f32_u32(vshll_n_u16::<16>(h))
}

/// Four f32 (little-endian bytes at `w[at..at + 16]`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f32x4(w: &[u8], at: usize) -> float32x4_t {
    let s = &w[at..at + 16];
    // SAFETY: `s` holds 16 bytes (bounds-checked above); an unaligned f32 load.
    unsafe { vld1q_f32(s.as_ptr().cast()) }
}
