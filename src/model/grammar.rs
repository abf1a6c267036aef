//! Constrained sampling's grammar engine: `llguidance` over this vocabulary. A request's
//! `response_format` (a JSON schema, or any JSON object), or a forced tool call, becomes a
//! [`SharedConstraint`]
//! whose masks the scheduler sends with each of the sequence's sampling entries.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenizerEnv};

use crate::model::constraint::{Constraint, SharedConstraint};
use crate::model::tokenizer::Tokenizer;
use crate::wire::mask::MaskSet;

/// The longest schema taken (its JSON text).
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// The vocabulary as llguidance sees it: each token's bytes (control tokens marked as
/// special, so no text grammar allows them), and our tokenizer for its text.
struct Env {
    trie: TokTrie,
    tokenizer: Arc<Tokenizer>,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        self.tokenizer.encode(&String::from_utf8_lossy(s), false, false)
    }

    fn tokenize_is_canonical(&self) -> bool {
        true
    }
}

/// Grammars over one vocabulary.
pub struct Grammars {
    factory: ParserFactory,
}

impl std::fmt::Debug for Grammars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Grammars")
    }
}

/// One sequence's grammar state.
struct Llg {
    matcher: Matcher,
    /// Tokens that end the sequence: allowed alone once the grammar is done or broken.
    ends: Vec<u32>,
    words: usize,
}

impl Constraint for Llg {
    fn mask(&mut self) -> MaskSet {
        match self.matcher.compute_mask_or_eos() {
            Ok(v) if v.num_set() > 0 => MaskSet::compact(v.as_slice().to_vec()),
            _ => {
                let mut words = vec![0u32; self.words];
                for &t in &self.ends {
                    if let Some(w) = words.get_mut(t as usize / 32) {
                        *w |= 1 << (t % 32);
                    }
                }
                MaskSet::compact(words)
            }
        }
    }

    fn masks_along(&mut self, draft: &[u32]) -> Vec<MaskSet> {
        let mut out = vec![self.mask()];
        let mut taken = 0;
        for &d in draft {
            let allowed = out.last().is_some_and(|m| m.allows(d)) && !self.ends.contains(&d);
            if !allowed || self.matcher.consume_token(d).is_err() {
                break;
            }
            taken += 1;
            out.push(self.mask());
        }
        if taken > 0 {
            let _ = self.matcher.rollback(taken);
        }
        out
    }

    fn commit(&mut self, token: u32) {
        // A token the mask allowed; an error leaves the matcher stopped (its mask is
        // then the end of sequence alone).
        let _ = self.matcher.consume_token(token);
    }
}

impl Grammars {
    /// Grammars over `tokenizer`'s vocabulary; `ends` are the tokens that end a sequence
    /// (end of sequence, end of turn).
    pub fn new(tokenizer: Arc<Tokenizer>, ends: &[u32]) -> Result<Grammars, String> {
        let n = tokenizer.vocab_size();
        let words: Vec<Vec<u8>> = (0..n as u32)
            .map(|id| {
                if tokenizer.is_control(id) || tokenizer.token_bytes(id).is_empty() {
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    w.extend_from_slice(format!("<[{id}]>").as_bytes());
                    w
                } else {
                    tokenizer.token_bytes(id)
                }
            })
            .collect();
        let eos = ends.first().copied().unwrap_or(0);
        let trie = TokTrie::from(&TokRxInfo::new(n as u32, eos), &words).with_eos_tokens(ends);
        let env: TokEnv = Arc::new(Env { trie, tokenizer });
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
        factory.quiet();
        Ok(Grammars { factory })
    }

    /// A constraint to `schema` (a JSON schema), or why it cannot be one (too large,
    /// unsupported or unsatisfiable): checked before any compute.
    pub fn json_schema(
        &self,
        schema: &serde_json::Value,
        ends: &[u32],
    ) -> Result<SharedConstraint, String> {
        let text = schema.to_string();
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(format!(
                "the schema is {} bytes; at most {MAX_SCHEMA_BYTES} are taken",
                text.len()
            ));
        }
        self.constraint(TopLevelGrammar::from_json_schema(schema.clone()), ends)
    }

    /// A constraint to a Lark grammar (a forced tool call:
    /// [`crate::chat::forced_call_grammar`]).
    pub fn lark(&self, grammar: &str, ends: &[u32]) -> Result<SharedConstraint, String> {
        if grammar.len() > MAX_SCHEMA_BYTES {
            return Err(format!("the tools' grammar is over {MAX_SCHEMA_BYTES} bytes"));
        }
        self.constraint(TopLevelGrammar::from_lark(grammar.to_string()), ends)
    }

    fn constraint(
        &self,
        grammar: TopLevelGrammar,
        ends: &[u32],
    ) -> Result<SharedConstraint, String> {
        let parser = self.factory.create_parser(grammar).map_err(|e| e.to_string())?;
        let mut matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(e);
        }
        // A grammar that allows nothing at all is unsatisfiable.
        let first = matcher.compute_mask().map_err(|e| e.to_string())?;
        if first.num_set() == 0 {
            return Err("the schema allows no output".into());
        }
        let words = self.factory.tok_env().tok_trie().vocab_size().div_ceil(32);
        Ok(SharedConstraint::new(Llg { matcher, ends: ends.to_vec(), words }))
    }
}
