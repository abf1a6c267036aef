//! The engine bench: decode and prefill tokens/s, batched decode and stage load time of
//! the CPU engine on one model file at one thread count (`swactor bench engine`; the
//! llama.cpp side is `scripts/bench-llama-cpp.py`).

use std::time::Instant;

use serde::Serialize;

use super::{BenchError, err};

/// The engine's figures for one model file at one thread count.
#[derive(Debug, Clone, Serialize)]
pub struct EngineFigure {
    /// What the model is (`q4_1`, `q8_0`, ...).
    pub label: String,
    /// The file measured.
    pub model: String,
    /// Compute threads.
    pub threads: u32,
    /// Greedy decode tokens/s after the 12-token Lily prompt.
    pub decode_tokens_per_s: f64,
    /// Tokens/s of one prefill of `prompt_tokens` tokens (the first length asked for).
    pub prefill_tokens_per_s: f64,
    /// Prefill prompt length.
    pub prompt_tokens: usize,
    /// Tokens/s of one prefill at every prompt length asked for.
    pub prefill: Vec<(usize, f64)>,
    /// The kernel tier the engine used (`avx2`, `avx512`, `scalar`).
    pub isa: String,
    /// Aggregate decode tokens/s for each batch size (that many sequences decoding at once).
    pub batch_tokens_per_s: Vec<(usize, f64)>,
    /// Time to load the whole model as one stage on the engine (mapped weights), ms.
    pub load_ms: f64,
    /// Time to load it on candle (tensors read and copied, the previous path), ms; `None`
    /// for a family candle's path does not run, and in a build without the `candle`
    /// feature.
    pub candle_load_ms: Option<f64>,
}

/// What [`engine_figures`] measures.
#[derive(Debug, Clone)]
pub struct EngineBenchConfig {
    /// Tokens decoded per run.
    pub tokens: u32,
    /// Prefill prompt lengths (at least one).
    pub prompt_tokens: Vec<usize>,
    /// Batch sizes of the aggregate decode.
    pub batches: Vec<usize>,
    /// Runs of each measurement (the best is kept).
    pub repeat: u32,
}

/// The Lily prompt's token ids, and a `len`-token prompt made of it repeated.
pub fn bench_prompts(
    tokenizer: &crate::model::tokenizer::Tokenizer,
    len: usize,
) -> (Vec<u32>, Vec<u32>) {
    let lily =
        tokenizer.encode("Once upon a time there was a little girl named Lily.", true, false);
    let body =
        tokenizer.encode(" Once upon a time there was a little girl named Lily.", false, false);
    let mut long = lily.clone();
    while long.len() < len {
        long.extend_from_slice(&body);
    }
    long.truncate(len);
    (lily, long)
}

/// Measures the engine on `path` at `threads` compute threads.
pub fn engine_figures(
    label: &str,
    path: &std::path::Path,
    threads: u32,
    config: &EngineBenchConfig,
) -> Result<EngineFigure, BenchError> {
    use crate::model::sampling::argmax;
    use crate::model::stage::{ComputeDevice, ModelStage, StageInput, StageOutput, StageSpec};

    let file = crate::model::gguf::GgufFile::open(path).map_err(err)?;
    let facts = file.facts().map_err(err)?;
    let tokenizer = crate::model::tokenizer::tokenizer_from_gguf(file.header()).map_err(err)?;
    let lengths =
        if config.prompt_tokens.is_empty() { vec![128] } else { config.prompt_tokens.clone() };
    let (lily, _) = bench_prompts(&tokenizer, 0);
    let longest = lengths.iter().copied().max().unwrap_or(128);
    let max_seq = 512u32.max(longest as u32 + 1);
    let spec = |device| StageSpec {
        layers: crate::wire::LayerRange::new(0, facts.block_count),
        embedding: true,
        head: true,
        max_seq_len: max_seq,
        kv_cache: Default::default(),
        device,
        threads,
    };
    let best = |f: &mut dyn FnMut() -> Result<f64, BenchError>| best_of(config.repeat, f);
    // A timed load maps the file and decodes its header, as a stage's first load does.
    let open = |path: &std::path::Path| crate::model::gguf::GgufFile::open(path).map_err(err);
    let load_ms = best(&mut || {
        let t = Instant::now();
        drop(ModelStage::load(&open(path)?, spec(ComputeDevice::Cpu)).map_err(err)?);
        Ok(t.elapsed().as_secs_f64() * 1e3)
    })?;
    let candle_load_ms = match ModelStage::load(&file, spec(ComputeDevice::Candle)) {
        // A build without candle has no candle load to time.
        _ if !cfg!(feature = "candle") => None,
        Err(crate::model::stage::StageError::Weights {
            reason: crate::wire::reason::WeightsFailure::UnsupportedTensorType,
            ..
        }) => None,
        _ => Some(best(&mut || {
            let t = Instant::now();
            drop(ModelStage::load(&open(path)?, spec(ComputeDevice::Candle)).map_err(err)?);
            Ok(t.elapsed().as_secs_f64() * 1e3)
        })?),
    };
    let mut stage = ModelStage::load(&file, spec(ComputeDevice::Cpu)).map_err(err)?;
    let logits = |out: StageOutput| match out {
        StageOutput::Logits(l) => Ok(l),
        StageOutput::Hidden(_) => Err(err("the whole model produced hidden states")),
    };
    // Decode: the Lily prompt, then `tokens` greedy steps.
    let decode_s = best(&mut || {
        stage.reset();
        let mut next = argmax(&logits(stage.forward(StageInput::Tokens(&lily)).map_err(err)?)?);
        let t = Instant::now();
        for _ in 0..config.tokens {
            next = argmax(&logits(stage.forward(StageInput::Tokens(&[next])).map_err(err)?)?);
        }
        Ok(t.elapsed().as_secs_f64())
    })?;
    let mut prefill = Vec::new();
    for &n in &lengths {
        let (_, long) = bench_prompts(&tokenizer, n);
        let seconds = best(&mut || {
            stage.reset();
            let t = Instant::now();
            logits(stage.forward(StageInput::Tokens(&long)).map_err(err)?)?;
            Ok(t.elapsed().as_secs_f64())
        })?;
        prefill.push((long.len(), long.len() as f64 / seconds));
    }
    // Aggregate decode: `b` sequences (the Lily prompt each), one row each per step.
    let engine = stage.engine_mut().ok_or_else(|| err("not an engine stage"))?;
    let batch_tokens_per_s = batch_rates(engine, &lily, config)?;
    Ok(EngineFigure {
        label: label.to_string(),
        model: path.display().to_string(),
        threads,
        decode_tokens_per_s: f64::from(config.tokens) / decode_s,
        prefill_tokens_per_s: prefill[0].1,
        prompt_tokens: prefill[0].0,
        prefill,
        isa: crate::model::engine::isa().name().to_string(),
        batch_tokens_per_s,
        load_ms,
        candle_load_ms,
    })
}

/// Aggregate decode tokens/s of `engine` at each of `config.batches` sequences (the Lily
/// prompt each), one row each per step, the best of `config.repeat` runs.
fn batch_rates(
    engine: &mut swactor_engine::transformer::Stage,
    lily: &[u32],
    config: &EngineBenchConfig,
) -> Result<Vec<(usize, f64)>, BenchError> {
    use crate::model::sampling::argmax;
    use std::sync::atomic::AtomicBool;
    use swactor_engine::transformer::{Input, Output};
    let best = |f: &mut dyn FnMut() -> Result<f64, BenchError>| best_of(config.repeat, f);
    let most = config.batches.iter().copied().max().unwrap_or(1);
    engine.set_slots(most);
    let no = AtomicBool::new(false);
    let mut batch_tokens_per_s = Vec::new();
    for &b in &config.batches {
        let b = b.max(1);
        let seconds = best(&mut || {
            let mut next = Vec::with_capacity(b);
            for slot in 0..b {
                engine.reset(slot);
                let slots = vec![slot; lily.len()];
                match engine.forward(&slots, Input::Tokens(lily), &no).map_err(err_fwd)? {
                    Output::Logits(l) => next.push(argmax(&l)),
                    Output::Hidden(_) => return Err(err("hidden states")),
                }
            }
            let slots: Vec<usize> = (0..b).collect();
            let t = Instant::now();
            for _ in 0..config.tokens {
                match engine.forward(&slots, Input::Tokens(&next), &no).map_err(err_fwd)? {
                    Output::Logits(l) => {
                        let vocab = l.len() / b;
                        for (i, n) in next.iter_mut().enumerate() {
                            *n = argmax(&l[i * vocab..(i + 1) * vocab]);
                        }
                    }
                    Output::Hidden(_) => return Err(err("hidden states")),
                }
            }
            Ok(t.elapsed().as_secs_f64())
        })?;
        batch_tokens_per_s.push((b, (b as f64 * f64::from(config.tokens)) / seconds));
    }
    Ok(batch_tokens_per_s)
}

/// One process batching `sequences` sequences (the Lily prompt each) on `threads` compute
/// threads: aggregate decode tokens/s over `tokens` steps, the baseline a session serving
/// as many requests is compared with (`bench serve`).
pub fn batch_rate(
    path: &std::path::Path,
    threads: u32,
    sequences: usize,
    tokens: u32,
) -> Result<f64, BenchError> {
    use crate::model::stage::{ComputeDevice, ModelStage, StageSpec};
    let file = crate::model::gguf::GgufFile::open(path).map_err(err)?;
    let facts = file.facts().map_err(err)?;
    let tokenizer = crate::model::tokenizer::tokenizer_from_gguf(file.header()).map_err(err)?;
    let (lily, _) = bench_prompts(&tokenizer, 0);
    let spec = StageSpec {
        layers: crate::wire::LayerRange::new(0, facts.block_count),
        embedding: true,
        head: true,
        max_seq_len: 512,
        kv_cache: Default::default(),
        device: ComputeDevice::Cpu,
        threads,
    };
    let mut stage = ModelStage::load(&file, spec).map_err(err)?;
    let engine = stage.engine_mut().ok_or_else(|| err("not an engine stage"))?;
    let config = EngineBenchConfig {
        tokens,
        prompt_tokens: Vec::new(),
        batches: vec![sequences],
        repeat: 1,
    };
    let rates = batch_rates(engine, &lily, &config)?;
    rates.first().map(|&(_, r)| r).ok_or_else(|| err("no batch rate"))
}

/// The least of `repeat` (at least one) measurements by `f`.
fn best_of(repeat: u32, f: &mut dyn FnMut() -> Result<f64, BenchError>) -> Result<f64, BenchError> {
    let mut b = f64::MAX;
    for _ in 0..repeat.max(1) {
        b = b.min(f()?);
    }
    Ok(b)
}

fn err_fwd(e: swactor_engine::transformer::ForwardError) -> BenchError {
    BenchError(format!("{e:?}"))
}
