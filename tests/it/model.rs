//! GGUF model facts: read from real headers, typed errors for every bad file.

use proptest::prelude::*;

use crate::support::{GgufBuilder, Meta, scratch, synth_model};
use swactor::model::facts::facts_from_header;
use swactor::model::gguf::decode_header;
use swactor::model::{ModelError, ModelFacts, read_facts};

fn err_code(path: &std::path::Path) -> &'static str {
    match read_facts(path) {
        Ok(f) => panic!("expected an error, read {} blocks", f.block_count),
        Err(e) => e.code(),
    }
}

#[test]
fn facts_of_a_synthesized_model_match_its_shape() {
    let f = read_facts(&synth_model(12)).expect("facts");
    assert_eq!(f.architecture, "llama");
    assert_eq!(f.block_count, 12);
    assert_eq!(f.hidden_size, 256);
    assert_eq!((f.head_count, f.head_count_kv, f.head_dim), (8, 4, 32));
    assert_eq!(f.feed_forward_length, Some(512));
    assert_eq!(f.vocab_size, 512);
    assert_eq!(f.context_length, 2048);
    assert_eq!(f.rope.dimension_count, 32);
    assert_eq!(f.bos_token_id, Some(511));
    assert_eq!(f.eos_token_id, Some(511));
    assert_eq!(f.tokenizer_model.as_deref(), Some("gpt2"));
    assert!(!f.tied_embeddings);
    // q, k, v, o, gate, up, down (f32) + two norms per block.
    let kv = 4 * 32;
    let per_block = 4 * (256 * 256 * 2 + kv * 256 * 2 + 3 * 256 * 512) + 2 * 256 * 4;
    assert_eq!(f.bytes.per_block, vec![per_block as u64; 12]);
    assert_eq!(f.bytes.embedding, 512 * 256 * 4);
    assert_eq!(f.bytes.head, 512 * 256 * 4 + 256 * 4);
    assert!(f.bytes.file > f.bytes.tensors);
}

#[test]
fn a_file_that_is_not_gguf_is_rejected_as_such() {
    let path = scratch().join("not.gguf");
    std::fs::write(&path, b"PK\x03\x04 definitely a zip").expect("write");
    assert_eq!(err_code(&path), "not_gguf");
}

#[test]
fn truncated_files_are_rejected_as_truncated_at_any_cut() {
    let bytes = std::fs::read(synth_model(2)).expect("read");
    // Inside the magic, the header, the metadata, the tensor infos and the tensor data.
    for cut in [0, 3, 10, 100, 3000, 6000, bytes.len() / 2, bytes.len() - 1] {
        let path = scratch().join(format!("trunc-{cut}.gguf"));
        std::fs::write(&path, &bytes[..cut]).expect("write");
        assert_eq!(err_code(&path), "truncated", "cut at {cut}");
    }
}

#[test]
fn a_missing_required_key_is_named_in_the_error() {
    let mut b = GgufBuilder::default().meta("general.architecture", Meta::Str("llama".into()));
    b = b.meta("llama.embedding_length", Meta::U32(64)).tensor(
        "token_embd.weight",
        &[64, 4],
        0,
        1024,
    );
    let path = b.write("no-blocks.gguf");
    match read_facts(&path) {
        Err(ModelError::MissingKey { key }) => assert_eq!(key, "llama.block_count"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
    let path = GgufBuilder::default().write("no-arch.gguf");
    match read_facts(&path) {
        Err(ModelError::MissingKey { key }) => assert_eq!(key, "general.architecture"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
}

#[test]
fn a_key_of_the_wrong_type_is_named_in_the_error() {
    let path = GgufBuilder::llama(2)
        .meta("llama.context_length", Meta::Str("long".into()))
        .write("wrong-type.gguf");
    // The later duplicate key wins in the parsed map.
    match read_facts(&path) {
        Err(ModelError::WrongKeyType { key, .. }) => assert_eq!(key, "llama.context_length"),
        other => panic!("expected WrongKeyType, got {other:?}"),
    }
}

#[test]
fn a_ggml_type_this_build_cannot_compute_is_unsupported_and_a_type_ggml_lacks_is_malformed() {
    // 16 is GGML's iq2_xxs: a real type, so re-quantizing is the right advice.
    let path =
        GgufBuilder::llama(1).tensor("blk.0.attn_k.weight", &[256, 32], 16, 2112).write("iq.gguf");
    match read_facts(&path) {
        Err(e @ ModelError::UnsupportedTensorType { .. }) => {
            assert!(e.to_string().contains("iq2_xxs"), "{e}")
        }
        other => panic!("expected UnsupportedTensorType, got {other:?}"),
    }
    // No GGML version has type 99: the header is corrupt, not from another quantizer.
    let path =
        GgufBuilder::llama(1).tensor("blk.0.attn_k.weight", &[64, 64], 99, 4096).write("t99.gguf");
    assert_eq!(err_code(&path), "malformed");
}

#[test]
fn tensors_naming_blocks_outside_the_block_count_are_inconsistent() {
    let path = GgufBuilder::llama(2)
        .tensor("blk.5.attn_q.weight", &[64, 64], 0, 64 * 64 * 4)
        .write("extra-block.gguf");
    assert_eq!(err_code(&path), "inconsistent");
    let path =
        GgufBuilder::llama(2).meta("llama.block_count", Meta::U32(3)).write("missing-block.gguf");
    assert_eq!(err_code(&path), "inconsistent");
}

#[test]
fn the_vocab_size_falls_back_to_the_token_list() {
    let f = read_facts(&GgufBuilder::llama(2).write("vocab-from-tokens.gguf")).expect("facts");
    assert_eq!(f.vocab_size, 300);
    assert!(f.tied_embeddings, "no output.weight means a tied head");
    assert_eq!(f.bytes.head, f.bytes.embedding);
}

#[test]
fn a_missing_file_is_an_io_error() {
    assert_eq!(err_code(&scratch().join("does-not-exist.gguf")), "io");
}

/// Decodes a header from bytes and, if it decodes, builds its facts.
fn facts_of(bytes: &[u8]) -> Result<ModelFacts, ModelError> {
    let header = decode_header(bytes, bytes.len() as u64)?;
    facts_from_header(&header)
}

fn code_of(bytes: &[u8]) -> &'static str {
    match facts_of(bytes) {
        Ok(f) => panic!("expected an error, read {} blocks", f.block_count),
        Err(e) => e.code(),
    }
}

#[test]
fn a_dimension_with_its_high_bit_set_is_malformed_not_allocated() {
    // 2^63 + 64 times 64 wraps to 64 * 64 in 64 bits: the old size check passed it.
    let b = GgufBuilder::llama(2).patch_tensor(1, Some(vec![64, (1 << 63) + 64]), None);
    match facts_of(&b.build()) {
        Err(e @ ModelError::Malformed { .. }) => {
            assert!(e.to_string().contains("blk.0.attn_q.weight"), "{e}")
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    // Dimensions each below 2^63 whose product overflows.
    let b = GgufBuilder::llama(2).patch_tensor(1, Some(vec![1 << 32, 1 << 32]), None);
    assert_eq!(code_of(&b.build()), "malformed");
    // A product that fits but whose bytes lie far past the end of the file.
    let b = GgufBuilder::llama(2).patch_tensor(1, Some(vec![64, 1 << 30]), None);
    assert_eq!(code_of(&b.build()), "truncated");
}

#[test]
fn an_absurd_tensor_dimension_is_malformed_not_a_truncated_file() {
    // 64 * 2^40 elements fit in 63 bits, but no model has a dimension of 2^40.
    let b = GgufBuilder::llama(2).patch_tensor(1, Some(vec![64, 1 << 40]), None);
    match facts_of(&b.build()) {
        Err(e @ ModelError::Malformed { .. }) => {
            let text = e.to_string();
            assert!(text.contains("blk.0.attn_q.weight"), "{text}");
            assert!(text.contains(&format!("dimension {}", 1u64 << 40)), "{text}");
            assert!(!text.contains("truncated"), "{text}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn an_architecture_this_build_does_not_run_is_refused_by_name_with_the_ones_it_does() {
    let mut b = GgufBuilder::llama(2).meta("general.architecture", Meta::Str("gemma".into()));
    for (key, value) in [("block_count", 2), ("embedding_length", 64), ("context_length", 256)] {
        b = b.meta(&format!("gemma.{key}"), Meta::U32(value));
    }
    let b = b.meta("gemma.attention.head_count", Meta::U32(4));
    match facts_of(&b.build()) {
        Err(e @ ModelError::UnsupportedArchitecture { .. }) => {
            assert_eq!(e.code(), "unsupported_architecture");
            let text = e.to_string();
            for name in ["`gemma`", "llama", "qwen2", "qwen3", "gemma3"] {
                assert!(text.contains(name), "{name}: {text}");
            }
        }
        other => panic!("expected UnsupportedArchitecture, got {other:?}"),
    }
}

/// [`GgufBuilder::llama`]'s two-block model (300 tokens) with `rows` embedding rows.
fn llama_with_embedding_rows(rows: u64) -> GgufBuilder {
    let mut b = GgufBuilder::default();
    for (k, v) in [("block_count", 2), ("embedding_length", 64), ("context_length", 256)] {
        b = b.meta(&format!("llama.{k}"), Meta::U32(v));
    }
    b.meta("general.architecture", Meta::Str("llama".into()))
        .meta("llama.attention.head_count", Meta::U32(4))
        .meta("llama.attention.head_count_kv", Meta::U32(2))
        .meta("tokenizer.ggml.tokens", Meta::StrArray((0..300).map(|i| format!("t{i}")).collect()))
        .tensor("token_embd.weight", &[64, rows], 0, 64 * rows * 4)
        .tensor("blk.0.attn_q.weight", &[64, 64], 0, 64 * 64 * 4)
        .tensor("blk.1.attn_q.weight", &[64, 64], 0, 64 * 64 * 4)
}

#[test]
fn a_token_embedding_without_one_row_per_token_is_inconsistent() {
    assert!(facts_of(&llama_with_embedding_rows(300).build()).is_ok());
    let b = llama_with_embedding_rows(310);
    match facts_of(&b.build()) {
        Err(e @ ModelError::Inconsistent { .. }) => {
            let text = e.to_string();
            assert!(text.contains("300 tokens") && text.contains("310 rows"), "{text}");
        }
        other => panic!("expected Inconsistent, got {other:?}"),
    }
}

#[test]
fn a_vocab_size_that_is_not_the_token_count_is_inconsistent() {
    // The key and the embedding agree on 310 rows, but only 300 tokens exist.
    let b = llama_with_embedding_rows(310).meta("llama.vocab_size", Meta::U32(310));
    match facts_of(&b.build()) {
        Err(e @ ModelError::Inconsistent { .. }) => {
            let text = e.to_string();
            assert!(text.contains("llama.vocab_size is 310") && text.contains("300"), "{text}");
        }
        other => panic!("expected Inconsistent, got {other:?}"),
    }
}

#[test]
fn counts_and_lengths_beyond_the_file_say_the_file_is_corrupt_or_truncated() {
    let check = |b: GgufBuilder, what: &str| {
        let err = facts_of(&b.build()).expect_err(what);
        assert_eq!(err.code(), "truncated", "{what}: {err}");
        assert!(err.to_string().contains("corrupt or truncated"), "{what}: {err}");
    };
    check(GgufBuilder::llama(2).claim_counts(None, Some(1 << 40)), "metadata count");
    check(GgufBuilder::llama(2).claim_counts(Some(u64::MAX), None), "tensor count");
    check(
        GgufBuilder::llama(2)
            .meta("tokenizer.ggml.scores", Meta::ArrayClaim { elem: 6, len: 1 << 50 }),
        "array length",
    );
}

#[test]
fn a_tensor_offset_past_the_end_or_off_the_alignment_is_rejected() {
    let b = GgufBuilder::llama(2).patch_tensor(2, None, Some(1 << 40));
    assert_eq!(code_of(&b.build()), "truncated");
    let b = GgufBuilder::llama(2).patch_tensor(2, None, Some(u64::MAX - 31));
    assert_eq!(code_of(&b.build()), "truncated");
    // token_embd ends at 76800; 76804 lies inside the file but off the 32-byte alignment.
    let b = GgufBuilder::llama(2).patch_tensor(1, None, Some(76_804));
    match facts_of(&b.build()) {
        Err(e @ ModelError::Malformed { .. }) => {
            assert!(e.to_string().contains("alignment"), "{e}")
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn tensors_that_overlap_or_leave_gaps_are_malformed() {
    // Tensor 2 (blk.1.attn_q) written over tensor 1's data, then after a gap.
    for offset in [76_800, 76_800 + 16_384 + 32] {
        let b = GgufBuilder::llama(2).patch_tensor(2, None, Some(offset));
        let mut bytes = b.build();
        bytes.resize(bytes.len() + 64, 0);
        match facts_of(&bytes) {
            Err(e @ ModelError::Malformed { .. }) => {
                assert!(e.to_string().contains("blk.1.attn_q.weight"), "{e}")
            }
            other => panic!("offset {offset}: expected Malformed, got {other:?}"),
        }
    }
}

#[test]
fn an_alignment_that_is_zero_or_not_a_power_of_two_is_malformed() {
    for a in [0, 48, 3] {
        let b = GgufBuilder::llama(2).meta("general.alignment", Meta::U32(a));
        assert_eq!(code_of(&b.build()), "malformed", "alignment {a}");
    }
    // A valid alignment other than the default moves the data section with it.
    let b = GgufBuilder::llama(2).meta("general.alignment", Meta::U64(64));
    let bytes = b.build();
    let header = decode_header(&bytes[..], bytes.len() as u64 + 64).expect("decodes");
    assert_eq!(header.tensor_data_offset % 64, 0);
}

#[test]
fn a_truncated_file_names_the_first_tensor_past_the_end_every_time() {
    let bytes = std::fs::read(synth_model(12)).expect("read");
    let header = decode_header(&bytes[..], bytes.len() as u64).expect("whole file decodes");
    let cut = bytes.len() / 2;
    let mut infos: Vec<_> = header.tensors.iter().collect();
    infos.sort_by_key(|(_, i)| i.offset);
    let first = infos
        .iter()
        .find(|(_, i)| {
            let elems = i.shape.iter().product::<usize>();
            let bytes = elems / i.dtype.block_size() * i.dtype.type_size();
            header.tensor_data_offset + i.offset + bytes as u64 > cut as u64
        })
        .map(|(n, _)| n.to_string())
        .expect("a tensor past the cut");
    let path = scratch().join("trunc-half-12.gguf");
    std::fs::write(&path, &bytes[..cut]).expect("write");
    for _ in 0..8 {
        match read_facts(&path) {
            Err(e @ ModelError::Truncated { .. }) => {
                assert!(e.to_string().contains(&format!("tensor `{first}`")), "{e}")
            }
            other => panic!("expected Truncated, got {other:?}"),
        }
    }
}

#[test]
fn absurd_model_constants_are_inconsistent() {
    let cases: Vec<(&str, Meta)> = vec![
        ("llama.attention.layer_norm_rms_epsilon", Meta::F32(f32::NAN)),
        ("llama.attention.layer_norm_rms_epsilon", Meta::F32(f32::INFINITY)),
        ("llama.attention.layer_norm_rms_epsilon", Meta::F32(0.0)),
        ("llama.attention.layer_norm_rms_epsilon", Meta::F32(-1e-5)),
        ("llama.attention.layer_norm_rms_epsilon", Meta::F32(1e6)),
        ("llama.rope.freq_base", Meta::F32(f32::NAN)),
        ("llama.rope.freq_base", Meta::F32(f32::NEG_INFINITY)),
        ("llama.rope.freq_base", Meta::F32(0.0)),
        ("llama.rope.freq_base", Meta::F32(-10000.0)),
        ("llama.rope.dimension_count", Meta::U32(0)),
        ("llama.rope.dimension_count", Meta::U32(17)),
        ("tokenizer.ggml.bos_token_id", Meta::U32(300)),
        ("tokenizer.ggml.eos_token_id", Meta::U32(u32::MAX)),
        ("llama.attention.head_count", Meta::U32(0)),
        ("llama.attention.head_count", Meta::U32(5)),
        ("llama.attention.head_count", Meta::U32(64)),
        ("llama.attention.head_count_kv", Meta::U32(0)),
        ("llama.attention.head_count_kv", Meta::U32(3)),
        ("llama.embedding_length", Meta::U32(0)),
        ("llama.embedding_length", Meta::U32(1 << 24)),
        ("llama.context_length", Meta::U32(0)),
        ("llama.vocab_size", Meta::U32(0)),
        ("llama.vocab_size", Meta::U32(301)),
        ("llama.feed_forward_length", Meta::U32(0)),
        // Four billion blocks: rejected before anything is sized by the count.
        ("llama.block_count", Meta::U32(u32::MAX)),
    ];
    for (key, value) in cases {
        let b = GgufBuilder::llama(2).meta(key, value.clone());
        assert_eq!(code_of(&b.build()), "inconsistent", "{key} = {value:?}");
    }
    // A tensor whose shape does not follow the constants.
    let b = GgufBuilder::llama(2).tensor("blk.0.attn_k.weight", &[64, 64], 0, 64 * 64 * 4);
    assert_eq!(code_of(&b.build()), "inconsistent");
    // The valid ends of those ranges still read.
    let b = GgufBuilder::llama(2)
        .meta("tokenizer.ggml.bos_token_id", Meta::U32(299))
        .meta("llama.attention.layer_norm_rms_epsilon", Meta::F32(1e-6))
        .meta("llama.rope.dimension_count", Meta::U32(16));
    facts_of(&b.build()).expect("valid constants");
}

/// One way of crafting a header.
#[derive(Debug, Clone)]
enum Craft {
    /// Tensor `tensor`'s dimension `dim` gets `value` with bit `bit` set.
    HighBitDim { tensor: usize, dim: usize, value: u64, bit: u32 },
    /// The header claims this many tensors / metadata entries.
    Counts { tensors: Option<u64>, kv: Option<u64> },
    /// A metadata array claims `len` elements of type `elem`.
    ArrayLen { elem: u32, len: u64 },
    /// Tensor `tensor`'s offset moves to `offset`.
    Offset { tensor: usize, offset: u64 },
    /// Tensor `tensor`'s offset moves off the alignment by `by` bytes.
    Misaligned { tensor: usize, by: u64 },
    /// Arbitrary bytes of the header are overwritten.
    Bytes(Vec<(usize, u8)>),
}

fn craft() -> impl Strategy<Value = Craft> {
    prop_oneof![
        (0usize..3, 0usize..2, any::<u64>(), 32u32..64)
            .prop_map(|(tensor, dim, value, bit)| Craft::HighBitDim { tensor, dim, value, bit }),
        (proptest::option::of((1u64 << 32)..), proptest::option::of((1u64 << 32)..))
            .prop_filter("a count changes", |(t, k)| t.is_some() || k.is_some())
            .prop_map(|(tensors, kv)| Craft::Counts { tensors, kv }),
        (0u32..13, (1u64 << 20)..).prop_map(|(elem, len)| Craft::ArrayLen { elem, len }),
        (0usize..3, (1u64 << 17)..).prop_map(|(tensor, offset)| Craft::Offset { tensor, offset }),
        (0usize..3, 1u64..32).prop_map(|(tensor, by)| Craft::Misaligned { tensor, by }),
        proptest::collection::vec((0usize..5000, any::<u8>()), 1..8).prop_map(Craft::Bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Crafted headers give a typed error of the class their damage calls for, never a
    /// panic or a huge allocation.
    #[test]
    fn crafted_headers_are_typed_errors_never_panics(c in craft()) {
        let base = GgufBuilder::llama(2);
        let bytes = match &c {
            Craft::HighBitDim { tensor, dim, value, bit } => {
                let mut dims = vec![vec![64u64, 300], vec![64, 64], vec![64, 64]][*tensor].clone();
                dims[*dim] = value | (1 << bit);
                base.patch_tensor(*tensor, Some(dims), None).build()
            }
            Craft::Counts { tensors, kv } => base.claim_counts(*tensors, *kv).build(),
            Craft::ArrayLen { elem, len } => {
                base.meta("tokenizer.ggml.scores", Meta::ArrayClaim { elem: *elem, len: *len }).build()
            }
            Craft::Offset { tensor, offset } => base.patch_tensor(*tensor, None, Some(*offset)).build(),
            Craft::Misaligned { tensor, by } => {
                let offset = [0u64, 76_800, 76_800 + 16_384][*tensor] + by;
                base.patch_tensor(*tensor, None, Some(offset)).build()
            }
            Craft::Bytes(edits) => {
                let mut bytes = base.build();
                for &(at, v) in edits {
                    bytes[at] = v;
                }
                bytes
            }
        };
        let result = facts_of(&bytes);
        let code = result.as_ref().err().map(ModelError::code);
        match &c {
            Craft::HighBitDim { .. } | Craft::Counts { .. } | Craft::ArrayLen { .. } | Craft::Offset { .. } => {
                prop_assert!(matches!(code, Some("malformed" | "truncated")), "{c:?}: {result:?}");
            }
            Craft::Misaligned { .. } => prop_assert_eq!(code, Some("malformed"), "{:?}", c),
            Craft::Bytes(_) => {
                // Anything: a typed error or facts, but the call returned.
                if let Err(e) = &result {
                    prop_assert!(!e.code().is_empty());
                }
            }
        }
    }
}
