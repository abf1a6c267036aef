//! The model families this build runs and how they differ: one [`Family`] per value of
//! `general.architecture`, and the per-file settings of a family ([`ArchFacts`]).
//!
//! What differs between the families is small and fixed: how rope pairs a head's
//! dimensions, biases on Q / K / V, RMSNorm on Q and K per head, norms after attention and
//! feed-forward, the feed-forward's gate activation, a scaled embedding, and sliding-window
//! layers with a rope base of their own. Everything else (the blocks' shape, the KV cache,
//! the stage split) is shared.

use serde::{Deserialize, Serialize};

use super::meta::{Meta, ModelError, inconsistent};

/// A model architecture this build runs (`general.architecture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// `llama`: Llama 2 and 3.x, Mistral, SmolLM and every file that writes `llama`.
    #[default]
    Llama,
    /// `qwen2`: Qwen 2 / 2.5 (biases on Q, K and V).
    Qwen2,
    /// `qwen3`: Qwen 3 dense (RMSNorm on Q and K per head).
    Qwen3,
    /// `gemma3`: Gemma 3 text (scaled embedding, four norms a block, Q / K norms, GeGLU,
    /// sliding-window layers).
    Gemma3,
    /// `qwen3moe`: Qwen 3 mixture-of-experts (Qwen 3's attention; every block's
    /// feed-forward is routed experts, their top-k weights renormalized).
    Qwen3Moe,
    /// `qwen2moe`: Qwen 2 / 1.5 mixture-of-experts (Qwen 2's attention; routed experts,
    /// weights not renormalized, and a shared expert behind a sigmoid gate).
    Qwen2Moe,
    /// `gpt-oss`: OpenAI's gpt-oss (biases on Q / K / V / O, attention sinks, sliding-window
    /// and global blocks alternating, YaRN rope scaling, routed experts with biases, the
    /// clamped SwiGLU, a softmax over the chosen experts' scores).
    GptOss,
}

/// How rope pairs the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pairs `(2i, 2i + 1)` (llama.cpp's "normal" rope; `llama` files are permuted for it).
    Interleaved,
    /// Pairs `(i, i + d/2)` (llama.cpp's "neox" rope).
    Halves,
}

/// The gate's activation in the gated feed-forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateActivation {
    /// SiLU (SwiGLU).
    Silu,
    /// GELU, tanh approximation (GeGLU).
    GeluTanh,
    /// gpt-oss's clamped SwiGLU: `min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1)`.
    SwigluOai,
}

/// Extra KV rows a sliding-window layer's cache holds beyond its window: one pass of
/// attention stores at most this many rows of a sequence before reading, so a ring of
/// `window + SLIDING_WINDOW_SLACK` positions never overwrites one a row still reads.
pub const SLIDING_WINDOW_SLACK: u32 = 64;

impl Family {
    /// Every family, in the order the docs list them.
    pub const ALL: [Family; 7] = [
        Family::Llama,
        Family::Qwen2,
        Family::Qwen3,
        Family::Gemma3,
        Family::Qwen3Moe,
        Family::Qwen2Moe,
        Family::GptOss,
    ];

    /// The family a `general.architecture` value names.
    pub fn parse(architecture: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == architecture)
    }

    /// The `general.architecture` value.
    pub const fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Gemma3 => "gemma3",
            Family::Qwen3Moe => "qwen3moe",
            Family::Qwen2Moe => "qwen2moe",
            Family::GptOss => "gpt-oss",
        }
    }

    /// How rope pairs a head's dimensions.
    pub const fn rope_style(self) -> RopeStyle {
        match self {
            Family::Llama => RopeStyle::Interleaved,
            Family::Qwen2
            | Family::Qwen3
            | Family::Gemma3
            | Family::Qwen3Moe
            | Family::Qwen2Moe
            | Family::GptOss => RopeStyle::Halves,
        }
    }

    /// Whether Q, K and V have biases.
    pub const fn qkv_bias(self) -> bool {
        matches!(self, Family::Qwen2 | Family::Qwen2Moe | Family::GptOss)
    }

    /// Whether the attention output projection has a bias, and each head a sink (a
    /// learned logit that joins every softmax of its scores and takes no value).
    pub const fn o_bias_and_sinks(self) -> bool {
        matches!(self, Family::GptOss)
    }

    /// The norm in front of the feed-forward (gpt-oss names it after attention).
    pub const fn ffn_norm(self) -> &'static str {
        match self {
            Family::GptOss => "post_attention_norm.weight",
            _ => "ffn_norm.weight",
        }
    }

    /// Whether Q and K are RMS-normalized per head before rope.
    pub const fn qk_norm(self) -> bool {
        matches!(self, Family::Qwen3 | Family::Gemma3 | Family::Qwen3Moe)
    }

    /// Whether every file of the family has routed experts (`llama` files may: Mixtral).
    pub const fn always_moe(self) -> bool {
        matches!(self, Family::Qwen3Moe | Family::Qwen2Moe | Family::GptOss)
    }

    /// Whether the attention and feed-forward outputs are normalized again before they
    /// join the residual.
    pub const fn post_norms(self) -> bool {
        matches!(self, Family::Gemma3)
    }

    /// The feed-forward gate's activation.
    pub const fn gate_activation(self) -> GateActivation {
        match self {
            Family::Gemma3 => GateActivation::GeluTanh,
            Family::GptOss => GateActivation::SwigluOai,
            _ => GateActivation::Silu,
        }
    }

    /// Whether the token embedding is multiplied by `sqrt(hidden)`.
    pub const fn scales_embedding(self) -> bool {
        matches!(self, Family::Gemma3)
    }

    /// The tensors of one dense block (names after `blk.N.`), in the order a stage binds
    /// them ([`ArchFacts::block_tensors`] gives a file's, experts included).
    pub fn block_tensors(self) -> Vec<&'static str> {
        let mut names = vec!["attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight"];
        if self.qkv_bias() {
            names.extend(["attn_q.bias", "attn_k.bias", "attn_v.bias"]);
        }
        if self.qk_norm() {
            names.extend(["attn_q_norm.weight", "attn_k_norm.weight"]);
        }
        names.push("attn_output.weight");
        if self.post_norms() {
            names.push("post_attention_norm.weight");
        }
        if self.o_bias_and_sinks() {
            names.extend(["attn_output.bias", "attn_sinks.weight"]);
        }
        names.extend([self.ffn_norm(), "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]);
        if self.post_norms() {
            names.push("post_ffw_norm.weight");
        }
        names
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a file says about its family's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ArchFacts {
    /// The family.
    pub family: Family,
    /// Sliding-window layers' window in tokens (a query sees itself and the `window - 1`
    /// positions before it); `None` when every layer is global.
    #[serde(default)]
    pub sliding_window: Option<u32>,
    /// With a window: every `sliding_pattern`-th block (the 6th, 12th, ...) is global and
    /// the others slide; 0 when every layer slides.
    #[serde(default)]
    pub sliding_pattern: u32,
    /// Rope base of the sliding-window layers.
    #[serde(default = "default_local_rope_base")]
    pub local_rope_base: f32,
    /// Linear rope scaling of the global layers (positions are divided by it; 1: none).
    #[serde(default = "one")]
    pub rope_scale: f32,
    /// Whether the file has per-dimension rope frequency factors (`rope_freqs.weight`,
    /// Llama 3.1's "llama3" scaling): every stage with blocks binds it.
    #[serde(default)]
    pub rope_freq_factors: bool,
    /// The attention scores' scale where it is not `1 / sqrt(head size)` (Gemma 3 27B:
    /// `1 / sqrt(hidden / heads)`).
    #[serde(default)]
    pub attention_scale: Option<f32>,
    /// The routed experts that replace the feed-forward (`None`: a dense model).
    #[serde(default)]
    pub moe: Option<MoeFacts>,
    /// YaRN rope scaling (`rope.scaling.type = yarn`), on every block.
    #[serde(default)]
    pub yarn: Option<YarnFacts>,
}

/// YaRN rope scaling as a file gives it (llama.cpp's defaults for the rest: the ramp
/// between `beta_fast = 32` and `beta_slow = 1` rotations, extrapolation factor 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct YarnFacts {
    /// `rope.scaling.factor`: positions are interpolated by its inverse.
    pub factor: f32,
    /// `rope.scaling.original_context_length` (else the trained context).
    pub original_context: u32,
    /// `rope.scaling.attn_factor` (1 where absent).
    pub attn_factor: f32,
}

/// How the router's scores become the chosen experts' weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// A softmax over every expert, the `used` most probable kept.
    #[default]
    Softmax,
    /// The `used` highest scores kept, then a softmax over those (gpt-oss).
    SoftmaxOfChosen,
}

/// A mixture-of-experts feed-forward: a router (`ffn_gate_inp`) scores every expert per
/// token, the `used` best are run (`ffn_{gate,up,down}_exps`, stacked per expert) and
/// their outputs summed with the router's softmax weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoeFacts {
    /// Experts per block (`expert_count`).
    pub experts: u32,
    /// Experts each token runs (`expert_used_count`).
    pub used: u32,
    /// Each expert's inner size (`expert_feed_forward_length`, or the feed-forward length
    /// of a `llama` file).
    pub expert_ffn: u32,
    /// The shared expert's inner size (Qwen 2 MoE's `ffn_*_shexp`); 0: none.
    pub shared_ffn: u32,
    /// Whether the `used` weights are divided by their sum (Qwen 3 MoE, Mixtral) or kept
    /// as the softmax over every expert gave them (Qwen 2 MoE).
    pub normalize: bool,
    /// How scores become weights.
    #[serde(default)]
    pub routing: Routing,
    /// Whether the router and every expert's products have biases (gpt-oss).
    #[serde(default)]
    pub biases: bool,
}

/// Most experts a block may have (the largest models today have 384).
pub const MAX_EXPERTS: u32 = 1024;

impl MoeFacts {
    /// The fraction of a block's expert bytes one token reads: `used / experts`.
    pub fn active_fraction(&self) -> f64 {
        f64::from(self.used) / f64::from(self.experts.max(1))
    }

    /// Reads the experts of a file of `family` (`None` for a dense `llama` file).
    fn read(
        meta: &Meta<'_>,
        arch: &dyn Fn(&str) -> String,
        family: Family,
    ) -> Result<Option<MoeFacts>, ModelError> {
        let experts = meta.u32_opt(&arch("expert_count"))?.unwrap_or(0);
        if experts == 0 {
            if family.always_moe() {
                return Err(ModelError::MissingKey { key: arch("expert_count") });
            }
            return Ok(None);
        }
        let Some(used) = meta.u32_opt(&arch("expert_used_count"))? else {
            return Err(ModelError::MissingKey { key: arch("expert_used_count") });
        };
        if experts > MAX_EXPERTS || used == 0 || used > experts {
            return inconsistent(format!(
                "{used} experts used of {experts} (need 1 <= used <= experts <= {MAX_EXPERTS})"
            ));
        }
        let ffn = match family {
            Family::Llama => meta.u32_opt(&arch("feed_forward_length"))?,
            _ => meta.u32_opt(&arch("expert_feed_forward_length"))?,
        };
        let Some(expert_ffn) = ffn.filter(|&f| f > 0) else {
            return Err(ModelError::MissingKey { key: arch("expert_feed_forward_length") });
        };
        // Qwen 2 MoE's shared expert is as wide as the feed-forward where no width is given.
        let shared_ffn = match family {
            Family::Qwen2Moe => meta
                .u32_opt(&arch("expert_shared_feed_forward_length"))?
                .or(meta.u32_opt(&arch("feed_forward_length"))?)
                .filter(|&f| f > 0)
                .ok_or_else(|| ModelError::MissingKey {
                    key: arch("expert_shared_feed_forward_length"),
                })?,
            _ => 0,
        };
        // What llama.cpp reads besides and this build does not do: refused by name.
        if let Some(scale) = meta.f32_opt(&arch("expert_weights_scale"))?
            && scale != 0.0
            && scale != 1.0
        {
            return inconsistent(format!("expert weights scale {scale} is not supported"));
        }
        if let Some(gating) = meta.u32_opt(&arch("expert_gating_func"))?
            && gating != 1
            && family != Family::GptOss
        {
            return inconsistent(format!(
                "expert gating function {gating} is not supported (1: softmax)"
            ));
        }
        if meta.u32_opt(&arch("expert_group_count"))?.is_some_and(|g| g > 1) {
            return inconsistent("grouped expert selection is not supported".into());
        }
        Ok(Some(MoeFacts {
            experts,
            used,
            expert_ffn,
            shared_ffn,
            normalize: !matches!(family, Family::Qwen2Moe | Family::GptOss),
            routing: match family {
                Family::GptOss => Routing::SoftmaxOfChosen,
                _ => Routing::Softmax,
            },
            biases: family == Family::GptOss,
        }))
    }
}

fn default_local_rope_base() -> f32 {
    10_000.0
}

fn one() -> f32 {
    1.0
}

impl Default for ArchFacts {
    fn default() -> Self {
        ArchFacts::of(Family::Llama)
    }
}

impl ArchFacts {
    /// The family's settings as a header gives them (`arch` prefixes a key with the
    /// architecture): the sliding window and its pattern (Gemma 3), rope scaling and
    /// Llama 3's frequency factors.
    pub(crate) fn read(
        meta: &Meta<'_>,
        arch: &dyn Fn(&str) -> String,
        family: Family,
    ) -> Result<ArchFacts, ModelError> {
        let mut a = ArchFacts::of(family);
        if family == Family::Gemma3 {
            // llama.cpp's constants for Gemma 3: five sliding layers to one global, the
            // sliding ones on rope base 10 000.
            a.sliding_window = meta.u32_opt(&arch("attention.sliding_window"))?.filter(|&w| w > 0);
            a.sliding_pattern =
                meta.u32_opt(&arch("attention.sliding_window_pattern"))?.unwrap_or(6);
            a.local_rope_base = meta.f32_opt(&arch("rope.freq_base_swa"))?.unwrap_or(10_000.0);
            if !(a.local_rope_base.is_finite() && a.local_rope_base > 0.0) {
                return inconsistent(format!("local rope base {} must be > 0", a.local_rope_base));
            }
            if meta.f32_opt(&arch("final_logit_softcapping"))?.is_some_and(|c| c != 0.0) {
                return inconsistent("final logit soft-capping is not supported".into());
            }
        }
        if family == Family::GptOss {
            // llama.cpp's gpt-oss: every other block slides (the even ones), on the global
            // rope base unless the file gives its own.
            a.sliding_window = meta.u32_opt(&arch("attention.sliding_window"))?.filter(|&w| w > 0);
            a.sliding_pattern = 2;
            let base = meta.f32_opt(&arch("rope.freq_base"))?.unwrap_or(10_000.0);
            a.local_rope_base = meta.f32_opt(&arch("rope.freq_base_swa"))?.unwrap_or(base);
        }
        match meta.string_opt(&arch("rope.scaling.type"))?.as_deref() {
            None | Some("none") => {}
            Some("yarn") => {
                let factor = meta.f32_opt(&arch("rope.scaling.factor"))?.unwrap_or(1.0);
                if !(factor.is_finite() && factor >= 1.0) {
                    return inconsistent(format!("rope scaling factor {factor} must be >= 1"));
                }
                if meta
                    .f32_opt(&arch("rope.scaling.yarn_log_multiplier"))?
                    .is_some_and(|m| m != 0.0)
                {
                    return inconsistent("YaRN's log multiplier is not supported".into());
                }
                let original = meta.u32_opt(&arch("rope.scaling.original_context_length"))?;
                let trained = meta.u32_opt(&arch("context_length"))?.unwrap_or(0);
                let attn_factor = meta.f32_opt(&arch("rope.scaling.attn_factor"))?.unwrap_or(1.0);
                if !(attn_factor.is_finite() && attn_factor > 0.0) {
                    return inconsistent(format!(
                        "YaRN attention factor {attn_factor} must be > 0"
                    ));
                }
                a.yarn = (factor > 1.0).then_some(YarnFacts {
                    factor,
                    original_context: original.filter(|&o| o > 0).unwrap_or(trained),
                    attn_factor,
                });
            }
            Some("linear") => {
                let factor = meta.f32_opt(&arch("rope.scaling.factor"))?.unwrap_or(1.0);
                if !(factor.is_finite() && factor >= 1.0) {
                    return inconsistent(format!("rope scaling factor {factor} must be >= 1"));
                }
                a.rope_scale = factor;
            }
            Some(other) => {
                return inconsistent(format!(
                    "rope scaling `{other}` is not supported (none, linear or yarn)"
                ));
            }
        }
        a.rope_freq_factors = meta.header.tensors.contains_key("rope_freqs.weight");
        a.moe = MoeFacts::read(meta, arch, family)?;
        Ok(a)
    }

    /// A family's settings with no window, no scaling and no frequency factors.
    pub const fn of(family: Family) -> ArchFacts {
        ArchFacts {
            family,
            sliding_window: None,
            sliding_pattern: 0,
            local_rope_base: 10_000.0,
            rope_scale: 1.0,
            rope_freq_factors: false,
            attention_scale: None,
            moe: None,
            yarn: None,
        }
    }

    /// Whether block `block` is a sliding-window layer.
    pub fn is_sliding(&self, block: u32) -> bool {
        self.sliding_window.is_some()
            && (self.sliding_pattern == 0
                || block % self.sliding_pattern != self.sliding_pattern - 1)
    }

    /// Positions block `block`'s KV cache holds for a sequence of at most `seq_len`
    /// tokens: all of them on a global layer, the window and its slack on a sliding one.
    pub fn kv_positions(&self, block: u32, seq_len: u32) -> u32 {
        match self.window_positions(seq_len) {
            Some(ring) if self.is_sliding(block) => ring,
            _ => seq_len,
        }
    }

    /// Positions every sliding block's cache holds for sequences of at most `seq_len`
    /// tokens (the window and its slack); `None` without a window.
    pub fn window_positions(&self, seq_len: u32) -> Option<u32> {
        self.sliding_window.map(|w| seq_len.min(w.saturating_add(SLIDING_WINDOW_SLACK)))
    }

    /// The tensors of one block of this file (names after `blk.N.`), in the order a
    /// stage binds them: the family's, with the routed experts (and a shared expert)
    /// in place of the dense feed-forward's three matrices.
    pub fn block_tensors(&self) -> Vec<&'static str> {
        let mut names = self.family.block_tensors();
        if let Some(moe) = &self.moe {
            let dense = ["ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"];
            let at = names.iter().position(|n| *n == dense[0]).unwrap_or(names.len());
            names.retain(|n| !dense.contains(n));
            let mut experts = vec![
                "ffn_gate_inp.weight",
                "ffn_gate_exps.weight",
                "ffn_up_exps.weight",
                "ffn_down_exps.weight",
            ];
            if moe.biases {
                experts.extend([
                    "ffn_gate_inp.bias",
                    "ffn_gate_exps.bias",
                    "ffn_up_exps.bias",
                    "ffn_down_exps.bias",
                ]);
            }
            if moe.shared_ffn > 0 {
                experts.extend([
                    "ffn_gate_inp_shexp.weight",
                    "ffn_gate_shexp.weight",
                    "ffn_up_shexp.weight",
                    "ffn_down_shexp.weight",
                ]);
            }
            names.splice(at..at, experts);
        }
        names
    }

    /// The names of the global tensors a stage with blocks binds besides its blocks'.
    pub fn shared_block_tensors(&self) -> Vec<&'static str> {
        // (Every family's global tensors: the rope frequency factors only.)
        if self.rope_freq_factors { vec!["rope_freqs.weight"] } else { Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_found_by_its_name() {
        for f in Family::ALL {
            assert_eq!(Family::parse(f.name()), Some(f));
        }
        assert_eq!(Family::parse("mamba"), None);
    }

    #[test]
    fn gemma3_slides_five_blocks_of_six_and_holds_only_the_window_there() {
        let a = ArchFacts {
            sliding_window: Some(512),
            sliding_pattern: 6,
            ..ArchFacts::of(Family::Gemma3)
        };
        let sliding: Vec<bool> = (0..12).map(|b| a.is_sliding(b)).collect();
        assert_eq!(sliding.iter().filter(|s| **s).count(), 10);
        assert!(!a.is_sliding(5) && !a.is_sliding(11) && a.is_sliding(0) && a.is_sliding(6));
        assert_eq!(a.kv_positions(0, 4096), 512 + SLIDING_WINDOW_SLACK);
        assert_eq!(a.kv_positions(5, 4096), 4096);
        assert_eq!(a.kv_positions(0, 100), 100);
    }

    #[test]
    fn a_stage_of_sliding_blocks_asks_for_a_windows_kv_memory_not_the_contexts() {
        use crate::model::facts::{ModelBytes, ModelFacts, RopeFacts};
        use crate::wire::KvCacheDType;
        let mut f = ModelFacts {
            architecture: "gemma3".into(),
            arch: ArchFacts {
                sliding_window: Some(512),
                sliding_pattern: 6,
                ..ArchFacts::of(Family::Gemma3)
            },
            name: None,
            block_count: 12,
            hidden_size: 640,
            feed_forward_length: Some(2048),
            head_count: 4,
            head_count_kv: 1,
            head_dim: 256,
            context_length: 32768,
            vocab_size: 1000,
            bos_token_id: None,
            eos_token_id: None,
            eot_token_id: None,
            tokenizer_model: None,
            tokenizer_pre: None,
            rope: RopeFacts { freq_base: 1e6, dimension_count: 256 },
            rms_norm_eps: 1e-6,
            tied_embeddings: true,
            bytes: ModelBytes {
                per_block: vec![1; 12],
                active_per_block: Vec::new(),
                embedding: 1,
                head: 1,
                tensors: 14,
                file: 14,
                formats: Default::default(),
            },
            tensor_types: Default::default(),
            vocab_digest: None,
        };
        let per_position = 2 * 256 * 4;
        let kv = |f: &ModelFacts, b| f.kv_bytes_of_block(b, 8192, KvCacheDType::F32);
        assert_eq!(kv(&f, 0), (512 + u64::from(SLIDING_WINDOW_SLACK)) * per_position);
        assert_eq!(kv(&f, 5), 8192 * per_position, "block 5 is global");
        let all = f.kv_bytes_of_blocks(0..12, 8192, KvCacheDType::F32);
        assert_eq!(all, 10 * kv(&f, 0) + 2 * kv(&f, 5));
        f.arch = ArchFacts::of(Family::Llama);
        assert_eq!(f.kv_bytes_of_blocks(0..12, 8192, KvCacheDType::F32), 12 * 8192 * per_position);
    }

    #[test]
    fn block_tensors_follow_the_family() {
        assert_eq!(Family::Llama.block_tensors().len(), 9);
        assert!(Family::Qwen2.block_tensors().contains(&"attn_k.bias"));
        assert!(Family::Qwen3.block_tensors().contains(&"attn_k_norm.weight"));
        assert_eq!(Family::Gemma3.block_tensors().len(), 13);
    }
}
