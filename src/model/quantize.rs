//! `model quantize`: a GGUF model rewritten with its weight matrices in another type, or
//! in a K-quant mix as llama.cpp's Q4_K_M / Q5_K_M make it.

use candle_core::Device;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use super::synth::SynthError;

/// What [`quantize_file`] writes: one type for every matrix, or a K-quant mix as
/// llama.cpp's Q4_K_M / Q5_K_M make it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QuantRecipe {
    /// Every matrix in this type.
    All(GgmlDType),
    /// The base type (Q4_K or Q5_K) with Q6_K where more bits pay: `output.weight`, and
    /// `attn_v` / `ffn_down` in the first and last eighths of the blocks and every third
    /// block between; matrices whose rows are not whole 256-blocks fall back to Q5_0 /
    /// Q5_1 (Q8_0 for Q6_K), as llama.cpp's do.
    KMix(GgmlDType),
}

impl QuantRecipe {
    /// The type of tensor `name` (2-D, `cols` per row) in a model of `blocks` blocks.
    fn target(self, name: &str, cols: usize, blocks: usize) -> GgmlDType {
        let base = match self {
            QuantRecipe::All(t) => return t,
            QuantRecipe::KMix(t) => t,
        };
        let block: Option<usize> = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|i| i.parse().ok());
        let n = blocks;
        let more_bits = |i: usize| i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
        let matrix = name.ends_with("attn_v.weight") || name.ends_with("ffn_down.weight");
        let wants = if name == "output.weight" || (matrix && block.is_some_and(more_bits)) {
            GgmlDType::Q6K
        } else {
            base
        };
        if cols.is_multiple_of(256) {
            return wants;
        }
        match wants {
            GgmlDType::Q6K => GgmlDType::Q8_0,
            GgmlDType::Q5K => GgmlDType::Q5_1,
            _ => GgmlDType::Q5_0,
        }
    }

    /// GGUF's `general.file_type` for the result.
    fn file_type(self) -> u32 {
        match self {
            QuantRecipe::KMix(GgmlDType::Q5K) => 17,
            QuantRecipe::KMix(_) => 15,
            QuantRecipe::All(t) => match t {
                GgmlDType::F32 => 0,
                GgmlDType::F16 => 1,
                GgmlDType::Q4_0 => 2,
                GgmlDType::Q4_1 => 3,
                GgmlDType::Q8_0 => 7,
                GgmlDType::Q5_0 => 8,
                GgmlDType::Q5_1 => 9,
                GgmlDType::Q4K => 15,
                GgmlDType::Q6K => 18,
                _ => 0,
            },
        }
    }
}

/// What [`quantize_file`] writes for a type name: one of [`parse_quant`]'s, or `q4_k_m` /
/// `q5_k_m` (the mixes).
pub fn parse_recipe(name: &str) -> Option<QuantRecipe> {
    match name {
        "q4_k_m" | "q4km" => Some(QuantRecipe::KMix(GgmlDType::Q4K)),
        "q5_k_m" | "q5km" => Some(QuantRecipe::KMix(GgmlDType::Q5K)),
        _ => parse_quant(name).map(QuantRecipe::All),
    }
}

/// One type for every matrix, by its GGML name.
pub fn parse_quant(name: &str) -> Option<GgmlDType> {
    Some(match name {
        "f32" => GgmlDType::F32,
        "f16" => GgmlDType::F16,
        "q8_0" => GgmlDType::Q8_0,
        "q4_0" => GgmlDType::Q4_0,
        "q4_1" => GgmlDType::Q4_1,
        "q5_0" => GgmlDType::Q5_0,
        "q5_1" => GgmlDType::Q5_1,
        "q2k" | "q2_k" => GgmlDType::Q2K,
        "q3k" | "q3_k" => GgmlDType::Q3K,
        "q4k" | "q4_k" => GgmlDType::Q4K,
        "q5k" | "q5_k" => GgmlDType::Q5K,
        "q6k" | "q6_k" => GgmlDType::Q6K,
        _ => return None,
    })
}

/// Rewrites a GGUF model with every 2-D weight matrix re-quantized as `recipe` says (norms
/// and tensors whose rows do not fit the target's block size are kept as they are).
/// Metadata is copied, with `general.file_type` updated.
pub fn quantize_file(
    input: &Path,
    output: &Path,
    recipe: QuantRecipe,
) -> Result<usize, SynthError> {
    let (content, _) =
        super::gguf::read_content(input).map_err(|e| SynthError::InvalidShape(e.to_string()))?;
    let io = |source| SynthError::Io { path: input.display().to_string(), source };
    let mut reader = std::io::BufReader::new(File::open(input).map_err(io)?);
    let mut names: Vec<(&String, u64)> =
        content.tensor_infos.iter().map(|(n, i)| (n, i.offset)).collect();
    names.sort_by_key(|(_, off)| *off);
    let blocks = names.iter().filter(|(n, _)| n.ends_with("attn_v.weight")).count();
    let mut tensors = Vec::with_capacity(names.len());
    let mut changed = 0;
    for (name, _) in names {
        let t = content.tensor(&mut reader, name, &Device::Cpu)?;
        let dims = t.shape().dims().to_vec();
        let target = recipe.target(name, dims.last().copied().unwrap_or(0), blocks);
        let fits = dims.len() == 2 && dims[1] % target.block_size() == 0;
        let t = if fits && t.dtype() != target && !name.ends_with("norm.weight") {
            changed += 1;
            QTensor::quantize(&t.dequantize(&Device::Cpu)?, target)?
        } else {
            t
        };
        tensors.push((name.clone(), t));
    }
    let file_type = recipe.file_type();
    let mut metadata: Vec<(String, Value)> = content
        .metadata
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "general.file_type" | "general.alignment"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.sort_by(|a, b| a.0.cmp(&b.0));
    metadata.push(("general.file_type".into(), Value::U32(file_type)));
    let out_io = |source| SynthError::Io { path: output.display().to_string(), source };
    let mut file = BufWriter::new(File::create(output).map_err(out_io)?);
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    gguf_file::write(&mut file, &md, &ts).map_err(|e| match e {
        candle_core::Error::Io(source) => out_io(source),
        other => SynthError::Tensor(other),
    })?;
    file.into_inner().map_err(|e| out_io(e.into_error()))?.sync_all().map_err(out_io)?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_q4_k_m_mix_puts_q6_k_where_llama_cpp_does() {
        let r = parse_recipe("q4_k_m").expect("recipe");
        // 22 blocks: the first and last eighths (0, 1 and 19..22) and every third block
        // between (4, 7, ... 16) take more bits.
        let q6: Vec<usize> = (0..22)
            .filter(|&i| r.target(&format!("blk.{i}.ffn_down.weight"), 5632, 22) == GgmlDType::Q6K)
            .collect();
        assert_eq!(q6, [0, 1, 4, 7, 10, 13, 16, 19, 20, 21]);
        assert_eq!(r.target("blk.4.attn_v.weight", 2048, 22), GgmlDType::Q6K);
        assert_eq!(r.target("blk.5.attn_v.weight", 2048, 22), GgmlDType::Q4K);
        assert_eq!(r.target("blk.4.attn_q.weight", 2048, 22), GgmlDType::Q4K);
        assert_eq!(r.target("output.weight", 2048, 22), GgmlDType::Q6K);
        assert_eq!(r.target("token_embd.weight", 2048, 22), GgmlDType::Q4K);
        // Rows that are not whole 256-blocks fall back as llama.cpp's do.
        assert_eq!(r.target("blk.0.ffn_down.weight", 640, 22), GgmlDType::Q8_0);
        assert_eq!(r.target("blk.5.attn_q.weight", 640, 22), GgmlDType::Q5_0);
        let r5 = parse_recipe("q5_k_m").expect("recipe");
        assert_eq!(r5.target("blk.5.attn_q.weight", 640, 22), GgmlDType::Q5_1);
        assert_eq!(r5.target("blk.5.attn_q.weight", 2048, 22), GgmlDType::Q5K);
        assert_eq!(parse_recipe("q8_0"), Some(QuantRecipe::All(GgmlDType::Q8_0)));
        assert_eq!(parse_recipe("q4_k_s"), None);
    }
}
