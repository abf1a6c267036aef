//! GGUF model facts: read from real headers, typed errors for every bad file.

use crate::support::{GgufBuilder, Meta, scratch, synth_model};
use swactor::model::{ModelError, read_facts};

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
fn an_unknown_tensor_type_is_rejected_as_unsupported() {
    let path =
        GgufBuilder::llama(1).tensor("blk.0.attn_k.weight", &[64, 64], 99, 4096).write("iq.gguf");
    assert_eq!(err_code(&path), "unsupported_tensor_type");
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
