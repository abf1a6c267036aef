//! Quantizing f32 values into a GGUF weight format: GGML's reference quantizers (the ones
//! llama.cpp's `quantize` and candle use without an importance matrix), operation for
//! operation, so a value quantizes to the same bytes as it does there. Used to write
//! synthesized models and to re-quantize a model (`swactor model quantize`), never on a
//! stage's path.

mod blocks;
mod fit;
mod kquants;

use crate::format::WeightFormat;

/// `xs` (a whole number of the format's blocks, else `None`) in `fmt`'s block layout.
pub fn quantize(fmt: WeightFormat, xs: &[f32]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(fmt.row_bytes(xs.len())?);
    match fmt {
        WeightFormat::F32 => out.extend(xs.iter().flat_map(|x| x.to_le_bytes())),
        WeightFormat::F16 => {
            out.extend(xs.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()));
        }
        WeightFormat::BF16 => {
            out.extend(xs.iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()));
        }
        WeightFormat::Q4_0 => blocks::q4_0(xs, &mut out),
        WeightFormat::Q4_1 => blocks::q4_1(xs, &mut out),
        WeightFormat::Q5_0 => blocks::q5_0(xs, &mut out),
        WeightFormat::Q5_1 => blocks::q5_1(xs, &mut out),
        WeightFormat::Q8_0 => blocks::q8_0(xs, &mut out),
        WeightFormat::Q2K => kquants::q2_k(xs, &mut out),
        WeightFormat::Q3K => kquants::q3_k(xs, &mut out),
        WeightFormat::Q4K => kquants::q4_k(xs, &mut out),
        WeightFormat::Q5K => kquants::q5_k(xs, &mut out),
        WeightFormat::Q6K => kquants::q6_k(xs, &mut out),
        WeightFormat::MXFP4 => blocks::mxfp4(xs, &mut out),
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dequantize_row;

    #[test]
    fn every_format_quantizes_to_values_its_decoder_reads_back_closely() {
        let cols = 512;
        let values: Vec<f32> =
            (0..cols).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 3.0).collect();
        // Largest error per value: about half a level of the format's step over a range of
        // 3 (a 2-bit level is a quarter of it).
        let tolerance = |f: WeightFormat| match f {
            WeightFormat::F32 => 0.0,
            WeightFormat::F16 | WeightFormat::BF16 => 0.01,
            WeightFormat::Q8_0 => 0.02,
            WeightFormat::Q6K => 0.05,
            WeightFormat::Q5_0 | WeightFormat::Q5_1 | WeightFormat::Q5K => 0.1,
            WeightFormat::Q4_0 | WeightFormat::Q4_1 | WeightFormat::Q4K => 0.2,
            // E2M1's widest step is 4 of 12 at the top of a block's range.
            WeightFormat::MXFP4 => 0.4,
            WeightFormat::Q3K => 0.4,
            WeightFormat::Q2K => 0.8,
        };
        for fmt in WeightFormat::ALL {
            let bytes = quantize(fmt, &values).expect("whole blocks");
            assert_eq!(Some(bytes.len()), fmt.row_bytes(cols), "{fmt:?}");
            let mut back = vec![0f32; cols];
            dequantize_row(fmt, &bytes, &mut back);
            let worst = values.iter().zip(&back).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(worst <= tolerance(fmt), "{fmt:?}: worst error {worst}");
        }
    }

    #[test]
    fn values_that_are_not_whole_blocks_are_refused() {
        assert_eq!(quantize(WeightFormat::Q8_0, &[0.5; 33]), None);
        assert_eq!(quantize(WeightFormat::Q4K, &[0.5; 32]), None);
        assert_eq!(quantize(WeightFormat::F16, &[0.5; 3]).map(|b| b.len()), Some(6));
    }
}
