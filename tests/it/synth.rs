//! Synthesized models: deterministic bytes, a valid BPE vocabulary, every dtype readable.

use std::collections::HashSet;

use crate::support::scratch;
use swactor::model::read_facts;
use swactor::model::synth::{SynthDType, SynthSpec, bpe_vocab, byte_to_unicode, write_model};

fn small(dtype: SynthDType, seed: u64) -> SynthSpec {
    SynthSpec {
        blocks: 2,
        hidden: 64,
        heads: 4,
        kv_heads: 2,
        ffn: 128,
        vocab: 300,
        dtype,
        seed,
        ..SynthSpec::default()
    }
}

#[test]
fn the_same_spec_and_seed_write_the_same_bytes_and_another_seed_does_not() {
    let a = scratch().join("det-a.gguf");
    let b = scratch().join("det-b.gguf");
    let c = scratch().join("det-c.gguf");
    write_model(&a, &small(SynthDType::F32, 7)).expect("write");
    write_model(&b, &small(SynthDType::F32, 7)).expect("write");
    write_model(&c, &small(SynthDType::F32, 8)).expect("write");
    let (a, b, c) =
        (std::fs::read(a).unwrap(), std::fs::read(b).unwrap(), std::fs::read(c).unwrap());
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn every_dtype_writes_a_model_whose_facts_read_back() {
    for (dtype, name) in [
        (SynthDType::F32, "f32"),
        (SynthDType::F16, "f16"),
        (SynthDType::Q8_0, "q8_0"),
        (SynthDType::Q4_0, "q4_0"),
    ] {
        let path = scratch().join(format!("dtype-{name}.gguf"));
        write_model(&path, &small(dtype, 1)).expect("write");
        let f = read_facts(&path).expect("facts");
        assert_eq!(f.block_count, 2);
        assert_eq!(f.vocab_size, 300);
        // 7 matrices per block + embedding + output in the chosen type; norms in f32.
        assert_eq!(
            f.tensor_types.get(name).copied().unwrap_or(0) as usize,
            7 * 2 + 2 + if name == "f32" { 5 } else { 0 },
            "{name}"
        );
    }
}

#[test]
fn tied_embeddings_omit_the_output_head() {
    let path = scratch().join("tied.gguf");
    write_model(&path, &SynthSpec { tied_embeddings: true, ..small(SynthDType::F32, 0) })
        .expect("write");
    assert!(read_facts(&path).expect("facts").tied_embeddings);
}

#[test]
fn the_vocabulary_has_exactly_the_requested_size_with_valid_merges() {
    for size in [257u32, 300, 512, 2000] {
        let v = bpe_vocab(size);
        assert_eq!(v.tokens.len(), size as usize);
        assert_eq!(v.token_types.len(), size as usize);
        assert_eq!(v.merges.len(), size as usize - 257);
        assert_eq!(v.eot_id, size - 1);
        assert_eq!(v.tokens[v.eot_id as usize], "<|endoftext|>");
        let set: HashSet<&String> = v.tokens.iter().collect();
        assert_eq!(set.len(), v.tokens.len(), "tokens are unique");
        for (i, m) in v.merges.iter().enumerate() {
            let (l, r) = m.split_once(' ').expect("merge has two parts");
            assert!(set.contains(&l.to_string()) && set.contains(&r.to_string()), "merge {m}");
            assert_eq!(
                v.tokens[256 + i],
                format!("{l}{r}"),
                "merge {i} produces token {}",
                256 + i
            );
        }
    }
}

#[test]
fn the_byte_alphabet_is_a_bijection_onto_printable_characters() {
    let map = byte_to_unicode();
    let set: HashSet<char> = map.iter().copied().collect();
    assert_eq!(set.len(), 256);
    assert!(map.iter().all(|c| !c.is_whitespace() && !c.is_control()));
    assert_eq!(map[b'a' as usize], 'a');
    assert_eq!(map[b' ' as usize], 'Ġ');
}

#[test]
fn invalid_shapes_are_rejected_before_writing() {
    let bad = [
        SynthSpec { hidden: 60, ..small(SynthDType::F32, 0) },
        SynthSpec { kv_heads: 3, ..small(SynthDType::F32, 0) },
        SynthSpec { vocab: 100, ..small(SynthDType::F32, 0) },
        SynthSpec { blocks: 0, ..small(SynthDType::F32, 0) },
        SynthSpec { hidden: 48, heads: 2, kv_heads: 1, ..small(SynthDType::Q4_0, 0) },
    ];
    for spec in bad {
        let path = scratch().join("bad-shape.gguf");
        assert!(write_model(&path, &spec).is_err(), "{spec:?}");
        assert!(!path.exists(), "nothing written for {spec:?}");
    }
}
