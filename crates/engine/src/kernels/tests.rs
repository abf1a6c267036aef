//! Every kernel against the scalar reference, on random blocks, odd sizes and edge values,
//! on every instruction set this CPU runs; every width against the 1-row kernel, bitwise.

use super::*;
use crate::quant::{QK_K, dequantize_row};

/// A small deterministic generator (xorshift64*).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// Where a format keeps its f16 scales inside one block.
fn f16_fields(fmt: WeightFormat) -> &'static [usize] {
    use WeightFormat::*;
    match fmt {
        Q4_0 | Q5_0 | Q8_0 => &[0],
        Q4_1 | Q5_1 | Q4K | Q5K => &[0, 2],
        Q2K => &[80, 82],
        Q3K => &[108],
        Q6K => &[208],
        F32 | F16 | BF16 | MXFP4 => &[],
    }
}

/// How a test row's scales are chosen.
#[derive(Clone, Copy, Debug)]
enum Scales {
    Random,
    Zero,
    Huge,
    Tiny,
}

/// A random `rows x cols` matrix in `fmt` with valid (finite) scales.
fn random_matrix(
    fmt: WeightFormat,
    rows: usize,
    cols: usize,
    scales: Scales,
    rng: &mut Rng,
) -> Vec<u8> {
    let row_bytes = fmt.row_bytes(cols).expect("whole blocks");
    let mut out = vec![0u8; rows * row_bytes];
    match fmt {
        WeightFormat::F32 => {
            for c in out.chunks_exact_mut(4) {
                c.copy_from_slice(&(rng.f32() * 2.0).to_le_bytes());
            }
        }
        WeightFormat::F16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&half::f16::from_f32(rng.f32()).to_le_bytes());
            }
        }
        WeightFormat::BF16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&half::bf16::from_f32(rng.f32()).to_le_bytes());
            }
        }
        _ => {
            for b in out.iter_mut() {
                *b = rng.next() as u8;
            }
            for blk in out.chunks_exact_mut(fmt.block_bytes()) {
                // MXFP4's E8M0 scale: the exponents real weights take (2^-20 .. 2^4), or
                // the extremes.
                if fmt == WeightFormat::MXFP4 {
                    blk[0] = match scales {
                        Scales::Random => 107 + (rng.next() % 25) as u8,
                        Scales::Zero => 0,
                        Scales::Huge => 140,
                        Scales::Tiny => 1,
                    };
                }
                for &at in f16_fields(fmt) {
                    let v = match scales {
                        Scales::Random => rng.f32() * 0.05,
                        Scales::Zero => 0.0,
                        Scales::Huge => 60000.0 * rng.f32().signum(),
                        Scales::Tiny => 6.1e-5 * rng.f32(),
                    };
                    blk[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
                }
            }
        }
    }
    out
}

fn acts(rows: usize, cols: usize, rng: &mut Rng) -> Acts {
    let mut x: Vec<f32> = (0..rows * cols).map(|_| rng.f32() * 3.0).collect();
    // Edge rows: all zero, one huge value, all tiny.
    if rows > 1 {
        x[cols..2 * cols].fill(0.0);
    }
    if rows > 2 {
        x[2 * cols + 5 % cols] = 1e6;
    }
    if rows > 3 {
        x[3 * cols..4 * cols].iter_mut().for_each(|v| *v *= 1e-30);
    }
    let mut a = Acts::default();
    a.load(&x, cols, &WeightFormat::ALL);
    a
}

/// The tolerance of one dot product: float accumulation error relative to the sum of
/// magnitudes of its terms (computed from the dequantized operands).
fn magnitude(fmt: WeightFormat, w: &[u8], a: &Acts, r: usize) -> f32 {
    let mut wf = vec![0f32; a.cols];
    dequantize_row(fmt, w, &mut wf);
    let x = a.f32_row(r);
    wf.iter().zip(x).map(|(p, q)| (p * q).abs()).sum::<f32>()
}

/// Every kernel `isa` may run for `fmt` on this CPU: [`select`]'s, and on a CPU with
/// AVX-512 BF16 also the 512-bit FMA kernel of BF16 that `vdpbf16ps` replaces there.
fn kernels_of(isa: Isa, fmt: WeightFormat) -> Vec<Kernels> {
    #[allow(unused_mut)]
    let mut all = vec![select(isa, fmt)];
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && fmt == WeightFormat::BF16 && super::avx512::has_bf16() {
        all.extend(super::avx512::select(fmt, false));
    }
    all
}

fn sizes(fmt: WeightFormat) -> Vec<usize> {
    match fmt.block_elems() {
        // The last (which the width tests use) leaves a whole 16 and a tail of 8 after the
        // 512-bit tiles' steps of 32, and a whole 8 after the 256-bit steps of 16.
        1 => vec![1, 7, 8, 31, 32, 33, 100, 576, 1000, 1016],
        32 => vec![32, 64, 96, 576, 608, 1536],
        _ => vec![QK_K, 2 * QK_K, 3 * QK_K, 6 * QK_K],
    }
}

#[test]
fn every_kernel_matches_the_scalar_reference_on_every_instruction_set() {
    let mut rng = Rng::new(1);
    for fmt in WeightFormat::ALL {
        let reference = scalar::select(fmt);
        for (isa, k) in Isa::available()
            .into_iter()
            .flat_map(|i| kernels_of(i, fmt).into_iter().map(move |k| (i, k)))
        {
            for cols in sizes(fmt) {
                for scales in [Scales::Random, Scales::Zero, Scales::Huge, Scales::Tiny] {
                    let rows = 3;
                    let w = random_matrix(fmt, rows, cols, scales, &mut rng);
                    let a = acts(5, cols, &mut rng);
                    let rb = fmt.row_bytes(cols).unwrap();
                    for o in 0..rows {
                        let wr = &w[o * rb..(o + 1) * rb];
                        for r in 0..a.rows {
                            let want = (reference.r1)(wr, &a, [r])[0];
                            let got = (k.r1)(wr, &a, [r])[0];
                            let tol = 2e-4 * magnitude(fmt, wr, &a, r) + 1e-30;
                            assert!(
                                (want - got).abs() <= tol && got.is_finite() == want.is_finite(),
                                "{fmt:?} {isa:?} cols {cols} {scales:?} row {o} act {r}: \
                                 {got} vs reference {want} (tolerance {tol})"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn every_kernel_width_gives_the_one_row_bits() {
    let mut rng = Rng::new(2);
    for fmt in WeightFormat::ALL {
        for (isa, k) in Isa::available()
            .into_iter()
            .flat_map(|i| kernels_of(i, fmt).into_iter().map(move |k| (i, k)))
        {
            let cols = *sizes(fmt).last().unwrap();
            let w = random_matrix(fmt, 1, cols, Scales::Random, &mut rng);
            let a = acts(7, cols, &mut rng);
            let one: Vec<u32> = (0..7).map(|r| (k.r1)(&w, &a, [r])[0].to_bits()).collect();
            for start in 0..3 {
                let two = (k.r2)(&w, &a, [start, start + 1]);
                let three = (k.r3)(&w, &a, [start, start + 1, start + 2]);
                let four = (k.r4)(&w, &a, [start, start + 1, start + 2, start + 3]);
                for j in 0..4 {
                    assert_eq!(four[j].to_bits(), one[start + j], "{fmt:?} {isa:?} r4");
                }
                for j in 0..3 {
                    assert_eq!(three[j].to_bits(), one[start + j], "{fmt:?} {isa:?} r3");
                }
                for j in 0..2 {
                    assert_eq!(two[j].to_bits(), one[start + j], "{fmt:?} {isa:?} r2");
                }
            }
            let mut many = vec![0f32; 7];
            dot_many(&k, &w, &a, 0..7, &mut many);
            assert_eq!(many.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), one);
            // Many weight rows at once (the loop the products use) give each row's bits,
            // whatever the number of activation rows (so every width, and the float
            // kernels' tiles of four and two weight rows with a remainder).
            let rows = 7;
            let wm = random_matrix(fmt, rows, cols, Scales::Random, &mut rng);
            let rb = fmt.row_bytes(cols).unwrap();
            for count in 1..=7 {
                let mut out = vec![0f32; rows * count];
                dot_rows(&k, &wm, rows, rb, &a, 0..count, &mut out, count);
                for o in 0..rows {
                    for r in 0..count {
                        let want = (k.r1)(&wm[o * rb..(o + 1) * rb], &a, [r])[0];
                        let got = out[o * count + r];
                        assert_eq!(got.to_bits(), want.to_bits(), "{fmt:?} {isa:?} rows {count}");
                    }
                }
            }
        }
    }
}

#[test]
fn the_scalar_reference_is_the_dot_product_of_the_dequantized_operands() {
    // The reference's integer arithmetic against plain floats: the weight row dequantized
    // and the activation row as its 8-bit blocks dequantized.
    let mut rng = Rng::new(3);
    for fmt in WeightFormat::ALL {
        let cols = sizes(fmt)[1];
        let w = random_matrix(fmt, 1, cols, Scales::Random, &mut rng);
        let a = acts(4, cols, &mut rng);
        let mut wf = vec![0f32; cols];
        dequantize_row(fmt, &w, &mut wf);
        for r in 0..4 {
            let x: Vec<f32> = match fmt.act_kind() {
                crate::quant::ActKind::F32 => a.f32_row(r).to_vec(),
                crate::quant::ActKind::Bf16 => a.bf16.f32_row(r).to_vec(),
                crate::quant::ActKind::Q8 => {
                    let q = a.q8.row(r);
                    (0..cols).map(|i| q.d[i / 32] * f32::from(q.qs[i])).collect()
                }
                crate::quant::ActKind::Q8K => {
                    let q = a.q8k.row(r);
                    (0..cols).map(|i| q.d[i / QK_K] * f32::from(q.qs[i])).collect()
                }
            };
            let want: f64 = wf.iter().zip(&x).map(|(p, q)| f64::from(*p) * f64::from(*q)).sum();
            let got = (scalar::select(fmt).r1)(&w, &a, [r])[0];
            // Q4_1 / Q5_1 take the activation sum at f16 precision (as GGML's Q8_1 does):
            // its min term is exact to 2^-11 only.
            let rel =
                if matches!(fmt, WeightFormat::Q4_1 | WeightFormat::Q5_1) { 1e-3 } else { 1e-4 };
            let tol = rel * magnitude(fmt, &w, &a, r) + 1e-6;
            assert!(
                (f64::from(got) - want).abs() <= f64::from(tol),
                "{fmt:?} act {r}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn an_unavailable_instruction_set_falls_back_to_a_kernel_this_cpu_runs() {
    for fmt in WeightFormat::ALL {
        for isa in Isa::ALL {
            assert!(effective_isa(isa, fmt).is_available(), "{fmt:?} {isa:?}");
        }
    }
}

/// Every output of `m` (all its rows against all of `a`'s rows) through the products'
/// row-range entry, `acts` activation rows at a time.
fn products(m: &crate::Matrix, a: &Acts, acts: usize) -> Vec<f32> {
    let (rows, n) = (m.rows(), a.rows);
    let mut out = vec![0f32; rows * n];
    let mut k = 0;
    while k < n {
        let take = acts.min(n - k);
        let mut part = vec![0f32; rows * take];
        m.dot_rows(0..rows, a, k..k + take, &mut part, take);
        for o in 0..rows {
            for j in 0..take {
                out[o * n + k + j] = part[o * take + j];
            }
        }
        k += take;
    }
    out
}

#[test]
fn repacked_matrices_match_the_scalar_reference_and_give_the_same_bits_at_every_width() {
    let mut rng = Rng::new(4);
    // Every repacking tier this CPU runs (AVX2, AVX-512 VNNI, NEON with dotprod, and with
    // i8mm): each has its own repacked kernels, and a CPU with the tier always repacks.
    const REPACKING: [Isa; 4] = [Isa::Avx2, Isa::Avx512, Isa::NeonDot, Isa::NeonI8mm];
    let tiers: Vec<Isa> = Isa::available().into_iter().filter(|i| REPACKING.contains(i)).collect();
    #[cfg(target_arch = "aarch64")]
    assert!(
        !tiers.is_empty() || std::env::var_os("CI").is_none(),
        "CI's ARM64 CPU has no dotprod: the NEON repacked kernels would go untested"
    );
    for missing in REPACKING.iter().filter(|i| !tiers.contains(i)) {
        eprintln!(
            "{}: not on this CPU; its repacked kernels are tested where it is",
            missing.name()
        );
    }
    let formats = [
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::Q8_0,
        WeightFormat::Q4K,
        WeightFormat::Q5K,
        WeightFormat::Q6K,
        WeightFormat::MXFP4,
    ];
    for (isa, fmt) in tiers.iter().flat_map(|&i| formats.map(|f| (i, f))) {
        for cols in sizes(fmt) {
            for scales in [Scales::Random, Scales::Zero, Scales::Huge, Scales::Tiny] {
                let rows = 48;
                let w = random_matrix(fmt, rows, cols, scales, &mut rng);
                let bytes = crate::Bytes::from_vec(w.clone());
                let m = crate::Matrix::new(fmt, rows, cols, bytes, isa).expect("matrix").repacked();
                assert!(m.repacked_bytes() > 0, "{fmt:?} is repacked for {isa:?}");
                let a = acts(9, cols, &mut rng);
                let one = products(&m, &a, 1);
                let reference = scalar::select(fmt);
                let rb = fmt.row_bytes(cols).unwrap();
                for o in 0..rows {
                    let wr = &w[o * rb..(o + 1) * rb];
                    for r in 0..a.rows {
                        let want = (reference.r1)(wr, &a, [r])[0];
                        let got = one[o * a.rows + r];
                        let tol = 2e-4 * magnitude(fmt, wr, &a, r) + 1e-30;
                        assert!(
                            (want - got).abs() <= tol && got.is_finite() == want.is_finite(),
                            "{isa:?} {fmt:?} cols {cols} {scales:?} row {o} act {r}: {got} vs {want}"
                        );
                    }
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                for width in 2..=5 {
                    let got = bits(&products(&m, &a, width));
                    assert_eq!(got, bits(&one), "{isa:?} {fmt:?} width {width}");
                }
                // Any row range (a part of a group) gives the same bits as the whole.
                for range in [3..4, 5..21, 16..48, 0..47] {
                    let mut part = vec![0f32; range.len() * a.rows];
                    m.dot_rows(range.clone(), &a, 0..a.rows, &mut part, a.rows);
                    let whole = &one[range.start * a.rows..range.end * a.rows];
                    assert_eq!(bits(&part), bits(whole), "{isa:?} {fmt:?} rows {range:?}");
                }
            }
        }
    }
}

#[test]
fn matrices_that_cannot_be_repacked_stay_as_they_are() {
    let mut rng = Rng::new(5);
    // 20 rows are not whole groups of 16; Q3_K has no repacked kernel; the scalar
    // reference never repacks, nor does NEON without dotprod.
    let mut cases = vec![
        (WeightFormat::Q8_0, 20, Isa::detect(), 64),
        (WeightFormat::Q3K, 32, Isa::detect(), 256),
        (WeightFormat::Q4_0, 32, Isa::Scalar, 64),
    ];
    if Isa::Neon.is_available() {
        cases.push((WeightFormat::Q4_0, 32, Isa::Neon, 64));
    }
    for (fmt, rows, isa, cols) in cases {
        let w = random_matrix(fmt, rows, cols, Scales::Random, &mut rng);
        let m = crate::Matrix::new(fmt, rows, cols, crate::Bytes::from_vec(w), isa)
            .expect("matrix")
            .repacked();
        assert_eq!(m.repacked_bytes(), 0, "{fmt:?} x {rows} {isa:?}");
    }
}

#[test]
fn repacking_on_the_pool_gives_the_matrices_repacked_one_by_one() {
    let mut rng = Rng::new(6);
    let pool = crate::ThreadPool::new(3);
    let formats = [WeightFormat::Q4_0, WeightFormat::Q8_0, WeightFormat::Q4_1, WeightFormat::Q5_0];
    let built: Vec<crate::Matrix> = formats
        .iter()
        .map(|&fmt| {
            let w = random_matrix(fmt, 32, 96, Scales::Random, &mut rng);
            crate::Matrix::new(fmt, 32, 96, crate::Bytes::from_vec(w), Isa::detect())
                .expect("matrix")
        })
        .collect();
    let mut on_pool = built.clone();
    let mut refs: Vec<&mut crate::Matrix> = on_pool.iter_mut().collect();
    crate::matmul::repack_all(&pool, &mut refs);
    let a = acts(5, 96, &mut rng);
    for (one, pooled) in built.into_iter().map(crate::Matrix::repacked).zip(&on_pool) {
        assert_eq!(one.repacked_bytes(), pooled.repacked_bytes(), "{:?}", one.format());
        let bits =
            |m: &crate::Matrix| products(m, &a, 4).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&one), bits(pooled), "{:?}", one.format());
    }
}

#[test]
fn a_matrix_reads_only_what_its_own_act_need_quantizes_with_the_bits_of_every_form() {
    let mut rng = Rng::new(6);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (isa, fmt) in Isa::available().into_iter().flat_map(|i| WeightFormat::ALL.map(|f| (i, f))) {
        let cols = sizes(fmt)[2];
        // 48 rows are repacked where the tier repacks the format; 17 never are.
        for rows in [48, 17] {
            let w = random_matrix(fmt, rows, cols, Scales::Random, &mut rng);
            let bytes = crate::Bytes::from_vec(w);
            let m = crate::Matrix::new(fmt, rows, cols, bytes, isa).expect("matrix").repacked();
            let full = acts(5, cols, &mut rng);
            let mut lean = Acts { cols, rows: full.rows, f32: full.f32.clone(), ..Acts::default() };
            lean.quantize_for(&[m.act_need()]);
            for width in [1, 4] {
                let (want, got) = (products(&m, &full, width), products(&m, &lean, width));
                assert_eq!(bits(&got), bits(&want), "{isa:?} {fmt:?} {rows} rows width {width}");
            }
        }
    }
}
