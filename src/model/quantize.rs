//! `model quantize`: a GGUF model rewritten with its weight matrices in another type, or
//! in a K-quant mix as llama.cpp's Q4_K_M / Q5_K_M make it.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use super::gguf::{GgmlType, GgufFile, MetaValue as Value};
use super::synth::SynthError;
use super::write::{TensorData, write_gguf};

/// What [`quantize_file`] writes: one type for every matrix, or a K-quant mix as
/// llama.cpp's Q4_K_M / Q5_K_M make it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QuantRecipe {
    /// Every matrix in this type.
    All(GgmlType),
    /// The base type (Q4_K or Q5_K) with Q6_K where more bits pay: `output.weight`, and
    /// `attn_v` / `ffn_down` in the first and last eighths of the blocks and every third
    /// block between; matrices whose rows are not whole 256-blocks fall back to Q5_0 /
    /// Q5_1 (Q8_0 for Q6_K), as llama.cpp's do.
    KMix(GgmlType),
    /// llama.cpp's MXFP4_MOE: the routed experts in MXFP4, every other matrix in Q8_0.
    Mxfp4Moe,
}

impl QuantRecipe {
    /// The type of tensor `name` (2-D, `cols` per row) in a model of `blocks` blocks.
    fn target(self, name: &str, cols: usize, blocks: usize) -> GgmlType {
        let base = match self {
            QuantRecipe::All(t) => return t,
            QuantRecipe::Mxfp4Moe if name.ends_with("_exps.weight") => return GgmlType::MXFP4,
            QuantRecipe::Mxfp4Moe => return GgmlType::Q8_0,
            QuantRecipe::KMix(t) => t,
        };
        let block: Option<usize> = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|i| i.parse().ok());
        let n = blocks;
        let more_bits = |i: usize| i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
        let matrix = name.ends_with("attn_v.weight")
            || name.ends_with("ffn_down.weight")
            || name.ends_with("ffn_down_exps.weight");
        let wants = if name == "output.weight" || (matrix && block.is_some_and(more_bits)) {
            GgmlType::Q6K
        } else {
            base
        };
        if cols.is_multiple_of(256) {
            return wants;
        }
        match wants {
            GgmlType::Q6K => GgmlType::Q8_0,
            GgmlType::Q5K => GgmlType::Q5_1,
            _ => GgmlType::Q5_0,
        }
    }

    /// GGUF's `general.file_type` for the result.
    fn file_type(self) -> u32 {
        match self {
            QuantRecipe::KMix(GgmlType::Q5K) => 17,
            QuantRecipe::KMix(_) => 15,
            QuantRecipe::Mxfp4Moe => 38,
            QuantRecipe::All(t) => match t {
                GgmlType::F32 => 0,
                GgmlType::F16 => 1,
                GgmlType::Q4_0 => 2,
                GgmlType::Q4_1 => 3,
                GgmlType::Q8_0 => 7,
                GgmlType::Q5_0 => 8,
                GgmlType::Q5_1 => 9,
                GgmlType::Q4K => 15,
                GgmlType::Q6K => 18,
                _ => 0,
            },
        }
    }
}

/// What [`quantize_file`] writes for a type name: one of [`parse_quant`]'s, or `q4_k_m` /
/// `q5_k_m` (the mixes).
pub fn parse_recipe(name: &str) -> Option<QuantRecipe> {
    match name {
        "q4_k_m" | "q4km" => Some(QuantRecipe::KMix(GgmlType::Q4K)),
        "q5_k_m" | "q5km" => Some(QuantRecipe::KMix(GgmlType::Q5K)),
        "mxfp4_moe" | "mxfp4" => Some(QuantRecipe::Mxfp4Moe),
        _ => parse_quant(name).map(QuantRecipe::All),
    }
}

/// One type for every matrix, by its GGML name.
pub fn parse_quant(name: &str) -> Option<GgmlType> {
    Some(match name {
        "f32" => GgmlType::F32,
        "f16" => GgmlType::F16,
        "q8_0" => GgmlType::Q8_0,
        "q4_0" => GgmlType::Q4_0,
        "q4_1" => GgmlType::Q4_1,
        "q5_0" => GgmlType::Q5_0,
        "q5_1" => GgmlType::Q5_1,
        "q2k" | "q2_k" => GgmlType::Q2K,
        "q3k" | "q3_k" => GgmlType::Q3K,
        "q4k" | "q4_k" => GgmlType::Q4K,
        "q5k" | "q5_k" => GgmlType::Q5K,
        "q6k" | "q6_k" => GgmlType::Q6K,
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
    let file = GgufFile::open(input).map_err(|e| SynthError::InvalidShape(e.to_string()))?;
    let header = file.header();
    let bytes: &[u8] = (**file.mapping()).as_ref();
    let names: Vec<(&String, &super::gguf::TensorInfo)> = header.tensors_in_order();
    let blocks = names.iter().filter(|(n, _)| n.ends_with("attn_v.weight")).count();
    let mut tensors = Vec::with_capacity(names.len());
    let mut changed = 0;
    for (name, info) in names {
        // The header checked every extent inside the file.
        let (start, len) =
            header.extent(name, info).map_err(|e| SynthError::InvalidShape(e.to_string()))?;
        let data = &bytes[start as usize..start as usize + len as usize];
        let dims = &info.shape;
        let target = recipe.target(name, dims.last().copied().unwrap_or(0), blocks);
        // Matrices and stacks of them (experts); norms and routers (kept in f32 as
        // llama.cpp keeps them) are copied.
        let fits = matches!(dims.len(), 2 | 3)
            && dims.last().is_some_and(|c| c % target.block_size() == 0)
            && !name.ends_with("ffn_gate_inp.weight");
        let t = if fits && info.dtype != target && !name.ends_with("norm.weight") {
            changed += 1;
            requantize(name, info, data, target)?
        } else {
            TensorData { dtype: info.dtype, shape: info.shape.clone(), data: data.to_vec() }
        };
        tensors.push((name.clone(), t));
    }
    let file_type = recipe.file_type();
    let mut metadata: Vec<(String, Value)> = header
        .metadata
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "general.file_type" | "general.alignment"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.sort_by(|a, b| a.0.cmp(&b.0));
    metadata.push(("general.file_type".into(), Value::U32(file_type)));
    let out_io = |source| SynthError::Io { path: output.display().to_string(), source };
    let mut out = BufWriter::new(File::create(output).map_err(out_io)?);
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &TensorData)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    write_gguf(&mut out, &md, &ts).map_err(out_io)?;
    out.into_inner().map_err(|e| out_io(e.into_error()))?.sync_all().map_err(out_io)?;
    Ok(changed)
}

/// Tensor `name`'s `data` (as `info` describes it) dequantized and quantized as `target`.
fn requantize(
    name: &str,
    info: &super::gguf::TensorInfo,
    data: &[u8],
    target: GgmlType,
) -> Result<TensorData, SynthError> {
    let format = super::engine::weight_format(info.dtype).ok_or_else(|| {
        SynthError::Tensor(format!("tensor `{name}` is {}, not a weight type", info.dtype.name()))
    })?;
    let cols = info.shape.last().copied().unwrap_or(1);
    let row_bytes = format.row_bytes(cols).unwrap_or(0).max(1);
    let mut values = vec![0f32; info.shape.iter().product()];
    for (row, out) in data.chunks_exact(row_bytes).zip(values.chunks_exact_mut(cols.max(1))) {
        swactor_engine::quant::dequantize_row(format, row, out);
    }
    super::synth::tensor(&values, info.shape.clone(), target)
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
            .filter(|&i| r.target(&format!("blk.{i}.ffn_down.weight"), 5632, 22) == GgmlType::Q6K)
            .collect();
        assert_eq!(q6, [0, 1, 4, 7, 10, 13, 16, 19, 20, 21]);
        assert_eq!(r.target("blk.4.attn_v.weight", 2048, 22), GgmlType::Q6K);
        assert_eq!(r.target("blk.5.attn_v.weight", 2048, 22), GgmlType::Q4K);
        assert_eq!(r.target("blk.4.attn_q.weight", 2048, 22), GgmlType::Q4K);
        assert_eq!(r.target("output.weight", 2048, 22), GgmlType::Q6K);
        assert_eq!(r.target("token_embd.weight", 2048, 22), GgmlType::Q4K);
        // Rows that are not whole 256-blocks fall back as llama.cpp's do.
        assert_eq!(r.target("blk.0.ffn_down.weight", 640, 22), GgmlType::Q8_0);
        assert_eq!(r.target("blk.5.attn_q.weight", 640, 22), GgmlType::Q5_0);
        let r5 = parse_recipe("q5_k_m").expect("recipe");
        assert_eq!(r5.target("blk.5.attn_q.weight", 640, 22), GgmlType::Q5_1);
        assert_eq!(r5.target("blk.5.attn_q.weight", 2048, 22), GgmlType::Q5K);
        assert_eq!(parse_recipe("q8_0"), Some(QuantRecipe::All(GgmlType::Q8_0)));
        assert_eq!(parse_recipe("q4_k_s"), None);
    }
}
