//! Tokenizers built from GGUF metadata, producing llama.cpp's token ids.
//!
//! - `gpt2` vocabularies: byte-level BPE. Text is split by the pre-tokenizer that
//!   `tokenizer.ggml.pre` names (one or more regexes applied in turn), each piece is mapped
//!   to GPT-2's byte alphabet, and merges are applied lowest rank first (leftmost on ties).
//! - `llama` vocabularies: SentencePiece. Spaces become `▁`, a `▁` is prepended, and
//!   adjacent symbols are merged highest score first when the merge is a token; symbols
//!   that are not tokens fall back to `<0xXX>` byte tokens.
//!
//! Merging is `O(n log n)` in a word's length (a queue of candidate pairs over a linked
//! list of symbols, `merge.rs`), with the ids of the quadratic loop it replaced. Merges
//! are checked when the tokenizer is built: each is two tokens whose join is a token.
//!
//! User-defined tokens are always matched as whole tokens; control tokens only when asked
//! (`parse_special`). A chat prompt ([`ChatFormat`], [`Tokenizer::encode_chat`]) parses
//! them only in the template's own text, never in a message's content. [`Detokenizer`] turns ids back into
//! text without ever emitting a broken UTF-8 sequence.

use std::collections::HashMap;

use fancy_regex::Regex;

use super::facts::ModelError;

mod chat;
mod chat_format;
mod gguf;
mod merge;
#[cfg(test)]
mod tests;

pub use chat::{
    ChatError, ChatPiece, GEMMA_TEMPLATE, chat_pieces, chat_text, chatml_default_system,
};
pub use chat_format::ChatFormat;
pub use gguf::{chat_template, tokenizer_from_gguf};
use merge::{MergeTable, merge_bpe, merge_spm};

/// llama.cpp token types.
pub mod token_type {
    /// An ordinary token.
    pub const NORMAL: i32 = 1;
    /// The unknown token.
    pub const UNKNOWN: i32 = 2;
    /// A control token (bos, eos, chat markers).
    pub const CONTROL: i32 = 3;
    /// A user-defined token, always matched whole.
    pub const USER_DEFINED: i32 = 4;
    /// An unused slot.
    pub const UNUSED: i32 = 5;
    /// A byte-fallback token `<0xXX>`.
    pub const BYTE: i32 = 6;
}

/// GPT-2's reversible map from bytes to printable characters.
pub fn byte_to_unicode() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0u32..256 {
        let printable = (u32::from('!')..=u32::from('~')).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b);
        let cp = if printable {
            b
        } else {
            extra += 1;
            255 + extra
        };
        out[b as usize] = char::from_u32(cp).unwrap_or('?');
    }
    out
}

/// Which algorithm the vocabulary uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Byte-level BPE with pre-tokenizer regexes.
    Bpe {
        /// Regexes applied one after the other.
        pre: Vec<String>,
        /// Use a whole pre-tokenized word when it is a token (llama3).
        ignore_merges: bool,
    },
    /// SentencePiece with scores.
    Spm {
        /// Prepend a space (`▁`) to the text.
        add_space_prefix: bool,
    },
}

/// A tokenizer for one vocabulary.
#[derive(Debug)]
pub struct Tokenizer {
    kind: Kind,
    tokens: Vec<String>,
    types: Vec<i32>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
    merges: MergeTable,
    regexes: Vec<Regex>,
    specials: Vec<u32>,
    byte_tokens: [Option<u32>; 256],
    unicode_to_byte: HashMap<char, u8>,
    /// Control tokens whose text is printed (tool-call and reasoning markers), sorted.
    printed: Vec<u32>,
    /// Beginning-of-sequence token.
    pub bos: Option<u32>,
    /// End-of-sequence token.
    pub eos: Option<u32>,
    /// Whether prompts start with `bos`.
    pub add_bos: bool,
}

const GPT2_RE: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3_RE: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// o200k (gpt-4o, gpt-oss) as llama.cpp writes it: a letter run is upper-then-lower or
/// lower-only (`[^a-z]` / `[^A-Z]` among letters), with an optional contraction.
const GPT4O_RE: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_RE: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The pre-tokenizer regexes of a `tokenizer.ggml.pre` name, and whether whole words that
/// are tokens skip the merges. `None` for names this build does not know.
pub fn pre_tokenizer(name: &str) -> Option<(Vec<&'static str>, bool)> {
    Some(match name {
        "default" | "gpt-2" | "gpt2" | "mpt" | "olmo" | "jais" => (vec![GPT2_RE], false),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => (vec![LLAMA3_RE], true),
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
            (vec![r"\p{N}", GPT2_RE], false)
        }
        "qwen2" | "stablelm2" | "hunyuan" => (vec![QWEN2_RE], false),
        "gpt-4o" | "llama4" | "kanana2" | "talkie" => (vec![GPT4O_RE], false),
        _ => return None,
    })
}

impl Tokenizer {
    /// Builds a tokenizer from its parts. A merge that is not two space-separated symbols,
    /// or that names (or makes) a text that is not a token, is refused
    /// ([`ModelError::InvalidVocabulary`]), as is a pre-tokenizer regex that does not
    /// compile. A NaN score counts as the lowest score.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kind: Kind,
        tokens: Vec<String>,
        mut types: Vec<i32>,
        mut scores: Vec<f32>,
        merges: &[String],
        bos: Option<u32>,
        eos: Option<u32>,
        add_bos: bool,
    ) -> Result<Tokenizer, ModelError> {
        types.resize(tokens.len(), token_type::NORMAL);
        scores.resize(tokens.len(), 0.0);
        for s in &mut scores {
            if s.is_nan() {
                *s = f32::NEG_INFINITY;
            }
        }
        let ids: HashMap<String, u32> =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let merges = merge_table(merges, &ids)?;
        let regexes = match &kind {
            Kind::Bpe { pre, .. } => pre
                .iter()
                .map(|r| {
                    Regex::new(r).map_err(|e| ModelError::Inconsistent {
                        detail: format!("pre-tokenizer regex: {e}"),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            Kind::Spm { .. } => Vec::new(),
        };
        let alphabet = byte_to_unicode();
        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            *slot = match &kind {
                Kind::Bpe { .. } => ids.get(&alphabet[b].to_string()).copied(),
                Kind::Spm { .. } => ids.get(&format!("<0x{b:02X}>")).copied(),
            };
        }
        let unicode_to_byte = alphabet.iter().enumerate().map(|(b, c)| (*c, b as u8)).collect();
        let mut specials: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&i| {
                matches!(
                    types[i as usize],
                    token_type::CONTROL | token_type::USER_DEFINED | token_type::UNKNOWN
                )
            })
            .filter(|&i| !tokens[i as usize].is_empty())
            .collect();
        specials.sort_by(|a, b| {
            tokens[*b as usize].len().cmp(&tokens[*a as usize].len()).then(a.cmp(b))
        });
        Ok(Tokenizer {
            kind,
            tokens,
            types,
            scores,
            ids,
            merges,
            regexes,
            specials,
            byte_tokens,
            unicode_to_byte,
            printed: Vec::new(),
            bos,
            eos,
            add_bos,
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The id of the token spelled `text`, if the vocabulary has one.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// Whether `id` is a control token (not printed).
    pub fn is_control(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|t| *t == token_type::CONTROL)
    }

    /// Tokenizes `text`. `add_special` prepends `bos` when the vocabulary asks for it;
    /// `parse_special` lets control tokens written in the text (`<|im_start|>`) match.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.encode_fragments(&self.partition(text, parse_special), add_special, &mut 0)
    }

    /// Tokenizes fragments: tokens as they are, text by the vocabulary's algorithm. `work`
    /// counts the merge loops' queue operations.
    fn encode_fragments(
        &self,
        frags: &[Fragment<'_>],
        add_special: bool,
        work: &mut u64,
    ) -> Vec<u32> {
        let mut out = Vec::new();
        if add_special
            && self.add_bos
            && let Some(bos) = self.bos
        {
            out.push(bos);
        }
        let mut prev_special = true;
        for fragment in frags {
            match *fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(t) => {
                    match &self.kind {
                        Kind::Bpe { ignore_merges, .. } => {
                            self.encode_bpe(t, *ignore_merges, &mut out, work)
                        }
                        Kind::Spm { add_space_prefix } => {
                            let mut s = String::with_capacity(t.len() + 3);
                            if *add_space_prefix && prev_special {
                                s.push(' ');
                            }
                            s.push_str(t);
                            self.encode_spm(&s.replace(' ', "\u{2581}"), &mut out, work);
                        }
                    }
                    prev_special = false;
                }
            }
        }
        out
    }

    /// Splits text around special tokens (user-defined always, control when asked).
    fn partition<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text(text)];
        for &id in &self.specials {
            let ty = self.types[id as usize];
            if !parse_special && ty != token_type::USER_DEFINED {
                continue;
            }
            let needle = self.tokens[id as usize].as_str();
            let mut next = Vec::with_capacity(frags.len());
            for f in frags {
                match f {
                    Fragment::Text(t) if t.contains(needle) => {
                        let mut rest = t;
                        while let Some(at) = rest.find(needle) {
                            if at > 0 {
                                next.push(Fragment::Text(&rest[..at]));
                            }
                            next.push(Fragment::Token(id));
                            rest = &rest[at + needle.len()..];
                        }
                        if !rest.is_empty() {
                            next.push(Fragment::Text(rest));
                        }
                    }
                    other => next.push(other),
                }
            }
            frags = next;
        }
        frags
    }

    /// Applies the pre-tokenizer regexes in turn; unmatched stretches stay pieces too.
    fn pre_split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = vec![text];
        for re in &self.regexes {
            let mut next = Vec::new();
            for piece in pieces {
                let mut last = 0;
                for m in re.find_iter(piece).flatten() {
                    if m.start() > last {
                        next.push(&piece[last..m.start()]);
                    }
                    if m.end() > m.start() {
                        next.push(m.as_str());
                    }
                    last = m.end();
                }
                if last < piece.len() {
                    next.push(&piece[last..]);
                }
            }
            pieces = next;
        }
        pieces
    }

    /// Byte-level BPE: each pre-tokenized piece is merged on its own.
    fn encode_bpe(&self, text: &str, ignore_merges: bool, out: &mut Vec<u32>, work: &mut u64) {
        let alphabet = byte_to_unicode();
        for piece in self.pre_split(text) {
            if ignore_merges {
                let word: String = piece.bytes().map(|b| alphabet[b as usize]).collect();
                if let Some(&id) = self.ids.get(&word) {
                    out.push(id);
                    continue;
                }
            }
            // Each byte is one symbol (its GPT-2 character); a byte the vocabulary lacks is
            // dropped, as no merge names it.
            let initial: Vec<Option<u32>> =
                piece.bytes().map(|b| self.byte_tokens[b as usize]).collect();
            out.extend(merge_bpe(&initial, &self.merges, work).into_iter().flatten());
        }
    }

    /// SentencePiece: characters merged by score; a symbol that is not a token falls back
    /// to its `<0xXX>` byte tokens.
    fn encode_spm(&self, text: &str, out: &mut Vec<u32>, work: &mut u64) {
        let score = |s: &str| self.ids.get(s).map(|&id| self.scores[id as usize]);
        for (start, len) in merge_spm(text, &score, work) {
            let s = &text[start..start + len];
            match self.ids.get(s) {
                Some(&id) => out.push(id),
                None => {
                    for b in s.bytes() {
                        if let Some(id) = self.byte_tokens[b as usize] {
                            out.push(id);
                        }
                    }
                }
            }
        }
    }

    /// Prints the control tokens spelled `spellings` (those the vocabulary has): a chat
    /// answer's tool-call and reasoning markers (`[TOOL_CALLS]`, `<|python_tag|>`) must
    /// reach the parser that reads them ([`crate::chat::OutputParser`]).
    pub fn print_controls(&mut self, spellings: &[&str]) {
        for s in spellings {
            if let Some(&id) = self.ids.get(*s)
                && self.types[id as usize] == token_type::CONTROL
                && let Err(at) = self.printed.binary_search(&id)
            {
                self.printed.insert(at, id);
            }
        }
    }

    /// The bytes a token stands for (control tokens give none, unless printed).
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let Some(text) = self.tokens.get(id as usize) else { return Vec::new() };
        if self.printed.binary_search(&id).is_ok() {
            return text.as_bytes().to_vec();
        }
        match self.types[id as usize] {
            token_type::CONTROL | token_type::UNKNOWN | token_type::UNUSED => return Vec::new(),
            token_type::BYTE => {
                return u8::from_str_radix(
                    text.trim_start_matches("<0x").trim_end_matches('>'),
                    16,
                )
                .map(|b| vec![b])
                .unwrap_or_default();
            }
            token_type::USER_DEFINED => return text.as_bytes().to_vec(),
            _ => {}
        }
        match &self.kind {
            Kind::Bpe { .. } => text
                .chars()
                .flat_map(|c| match self.unicode_to_byte.get(&c) {
                    Some(b) => vec![*b],
                    None => c.to_string().into_bytes(),
                })
                .collect(),
            Kind::Spm { .. } => text.replace('\u{2581}', " ").into_bytes(),
        }
    }

    /// Decodes ids into text (invalid UTF-8 is replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut d = Detokenizer::new(self);
        let mut s: String = ids.iter().map(|&id| d.push(id)).collect();
        s.push_str(&d.finish());
        s
    }
}

/// The merges of a BPE vocabulary, checked: each line is two symbols split at the first
/// space after the first character (llama.cpp's rule), both tokens, whose join is a token.
/// A pair listed twice keeps its first rank.
fn merge_table(merges: &[String], ids: &HashMap<String, u32>) -> Result<MergeTable, ModelError> {
    let invalid = |detail: String| ModelError::InvalidVocabulary { detail };
    let mut table = MergeTable::with_capacity(merges.len());
    for (rank, line) in merges.iter().enumerate() {
        let split = line.char_indices().skip(1).find(|&(_, c)| c == ' ').map(|(at, _)| at);
        let Some((a, b)) = split.map(|at| (&line[..at], &line[at + 1..])) else {
            return Err(invalid(format!(
                "merge {rank} ({line:?}) is not two space-separated symbols"
            )));
        };
        if b.is_empty() {
            return Err(invalid(format!(
                "merge {rank} ({line:?}) is not two space-separated symbols"
            )));
        }
        let id = |s: &str| {
            ids.get(s).copied().ok_or_else(|| {
                invalid(format!("merge {rank} ({line:?}) names {s:?}, which is not a token"))
            })
        };
        let (a_id, b_id, joined) = (id(a)?, id(b)?, id(&format!("{a}{b}"))?);
        table.entry((a_id, b_id)).or_insert((rank, joined));
    }
    Ok(table)
}

/// A piece of text to tokenize: text, or a special token already matched.
#[derive(Debug, Clone, Copy)]
enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

/// Streams token ids into text, holding back bytes until they form whole UTF-8 characters.
#[derive(Debug)]
pub struct Detokenizer<'a> {
    tokenizer: &'a Tokenizer,
    state: DetokenizerState,
}

impl<'a> Detokenizer<'a> {
    /// A detokenizer at the start of a text.
    pub fn new(tokenizer: &'a Tokenizer) -> Detokenizer<'a> {
        Detokenizer { tokenizer, state: DetokenizerState::default() }
    }

    /// Adds a token; returns the text that became complete.
    pub fn push(&mut self, id: u32) -> String {
        self.state.push(self.tokenizer, id)
    }

    /// Flushes whatever is held back (lossy).
    pub fn finish(&mut self) -> String {
        self.state.finish()
    }
}

/// A [`Detokenizer`]'s state apart from its tokenizer, for an owner that holds the
/// tokenizer itself. What [`DetokenizerState::push`] returns, concatenated with
/// [`DetokenizerState::finish`], is `String::from_utf8_lossy` of every token's bytes (less
/// the space SentencePiece puts before the first);
/// only an incomplete character at the end is held back.
#[derive(Debug, Clone)]
pub struct DetokenizerState {
    pending: Vec<u8>,
    first: bool,
}

impl Default for DetokenizerState {
    fn default() -> Self {
        DetokenizerState { pending: Vec::new(), first: true }
    }
}

impl DetokenizerState {
    /// Adds a token; returns the text that became complete.
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
        let mut bytes = tokenizer.token_bytes(id);
        if self.first && !bytes.is_empty() {
            // SentencePiece prepends a space to the text; do not print it.
            if matches!(tokenizer.kind, Kind::Spm { add_space_prefix: true }) && bytes[0] == b' ' {
                bytes.remove(0);
            }
            self.first = false;
        }
        self.pending.extend_from_slice(&bytes);
        // Everything up to an incomplete character at the end is final: each invalid
        // sequence becomes one U+FFFD exactly where `String::from_utf8_lossy` of the whole
        // text puts one, and the valid text after it is released with it.
        let mut done = 0;
        let mut out = String::new();
        while done < self.pending.len() {
            match std::str::from_utf8(&self.pending[done..]) {
                Ok(s) => {
                    out.push_str(s);
                    done = self.pending.len();
                }
                Err(e) => {
                    let valid = &self.pending[done..done + e.valid_up_to()];
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    let Some(bad) = e.error_len() else {
                        // An incomplete character at the end: wait for its next bytes.
                        done += e.valid_up_to();
                        break;
                    };
                    out.push(char::REPLACEMENT_CHARACTER);
                    done += e.valid_up_to() + bad;
                }
            }
        }
        self.pending.drain(..done);
        out
    }

    /// Flushes whatever is held back (lossy).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}
