//! The synthesized models' vocabulary: byte-level BPE merges learned from a short built-in
//! English corpus, to exactly the token count asked for.

use std::collections::{BTreeMap, HashSet};

use super::{MIN_VOCAB, byte_to_unicode};

/// A byte-level BPE vocabulary: tokens (in GPT-2's byte-to-unicode alphabet), their types
/// and the ordered merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BpeVocab {
    /// Token strings, indexed by token id.
    pub tokens: Vec<String>,
    /// llama.cpp token types: 1 normal, 3 control.
    pub token_types: Vec<i32>,
    /// Merges as `"left right"`, in priority order.
    pub merges: Vec<String>,
    /// The end-of-text token (also used as beginning of text).
    pub eot_id: u32,
}

/// Original English text the merges are learned from.
const CORPUS: &str = "The river ran past the old mill, and the children of the village \
played on its banks every morning. The miller was a patient man who told stories about the \
stars, the rain and the long roads to the sea. When the summer came, the water was warm and \
the fields were gold. The children asked the miller where the river went, and he said that \
it went to the sea, where the ships are waiting for the wind. One morning the river was \
quiet, and the mill stood still. The children ran to the miller and asked him what had \
happened. He smiled and said that the river was resting, and that tomorrow it would sing \
again. They waited and watched, and in the evening the water began to move. The wheel \
turned, the stones ground the grain, and the village had bread for the winter. \
Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 20 42 100 2024. It's what they're doing, isn't it?";

/// Learns a byte-level BPE vocabulary of exactly `vocab` tokens from the built-in corpus.
pub fn bpe_vocab(vocab: u32) -> BpeVocab {
    let alphabet = byte_to_unicode();
    let mut tokens: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
    let mut known: HashSet<String> = tokens.iter().cloned().collect();
    let want_merges = vocab.saturating_sub(MIN_VOCAB) as usize;

    // Words with their leading space, mapped into the byte alphabet, with counts.
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for (i, word) in CORPUS.split(' ').filter(|w| !w.is_empty()).enumerate() {
        let with_space = if i == 0 { word.to_string() } else { format!(" {word}") };
        let mapped: String = with_space.bytes().map(|b| alphabet[b as usize]).collect();
        *counts.entry(mapped).or_insert(0) += 1;
    }
    let mut words: Vec<(Vec<String>, u32)> =
        counts.into_iter().map(|(w, n)| (w.chars().map(|c| c.to_string()).collect(), n)).collect();

    let mut merges = Vec::with_capacity(want_merges);
    while merges.len() < want_merges {
        let mut pairs: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        for (syms, n) in &words {
            for w in syms.windows(2) {
                *pairs.entry((w[0].as_str(), w[1].as_str())).or_insert(0) += n;
            }
        }
        // Most frequent pair; ties go to the smallest pair (BTreeMap order).
        let best = pairs
            .iter()
            .filter(|(p, _)| !known.contains(&format!("{}{}", p.0, p.1)))
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(p, _)| (p.0.to_string(), p.1.to_string()));
        let Some((left, right)) = best else { break };
        let merged = format!("{left}{right}");
        for (syms, _) in &mut words {
            let mut i = 0;
            while i + 1 < syms.len() {
                if syms[i] == left && syms[i + 1] == right {
                    syms[i] = merged.clone();
                    syms.remove(i + 1);
                }
                i += 1;
            }
        }
        merges.push(format!("{left} {right}"));
        known.insert(merged.clone());
        tokens.push(merged);
    }
    // The corpus ran out of pairs: extend with merges of existing tokens, in order.
    let mut a = 0;
    while merges.len() < want_merges {
        let left = tokens[a % tokens.len()].clone();
        for b in 0..tokens.len() {
            if merges.len() >= want_merges {
                break;
            }
            let merged = format!("{left}{}", tokens[b]);
            if !known.contains(&merged) {
                merges.push(format!("{left} {}", tokens[b]));
                known.insert(merged.clone());
                tokens.push(merged);
            }
        }
        a += 1;
    }
    let mut token_types = vec![1; tokens.len()];
    tokens.push("<|endoftext|>".to_string());
    token_types.push(3);
    BpeVocab { eot_id: (tokens.len() - 1) as u32, tokens, token_types, merges }
}
