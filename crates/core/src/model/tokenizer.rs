//! Tokenizers built from GGUF metadata, producing llama.cpp's token ids.
//!
//! - `gpt2` vocabularies: byte-level BPE. Text is split by the pre-tokenizer that
//!   `tokenizer.ggml.pre` names (one or more regexes applied in turn), each piece is mapped
//!   to GPT-2's byte alphabet, and merges are applied lowest rank first (leftmost on ties).
//! - `llama` vocabularies: SentencePiece. Spaces become `▁`, a `▁` is prepended, and
//!   adjacent symbols are merged highest score first when the merge is a token; symbols
//!   that are not tokens fall back to `<0xXX>` byte tokens.
//!
//! User-defined tokens are always matched as whole tokens; control tokens only when asked
//! (`parse_special`). [`Detokenizer`] turns ids back into text without ever emitting a
//! broken UTF-8 sequence.

use std::collections::HashMap;

use fancy_regex::Regex;

use super::facts::ModelError;

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
    ranks: HashMap<(String, String), usize>,
    regexes: Vec<Regex>,
    specials: Vec<u32>,
    byte_tokens: [Option<u32>; 256],
    unicode_to_byte: HashMap<char, u8>,
    /// Beginning-of-sequence token.
    pub bos: Option<u32>,
    /// End-of-sequence token.
    pub eos: Option<u32>,
    /// Whether prompts start with `bos`.
    pub add_bos: bool,
}

const GPT2_RE: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3_RE: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
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
        _ => return None,
    })
}

impl Tokenizer {
    /// Builds a tokenizer from its parts.
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
        let ids: HashMap<String, u32> =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let mut ranks = HashMap::with_capacity(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            if let Some((a, b)) = m.split_once(' ') {
                ranks.entry((a.to_string(), b.to_string())).or_insert(rank);
            }
        }
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
            ranks,
            regexes,
            specials,
            byte_tokens,
            unicode_to_byte,
            bos,
            eos,
            add_bos,
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The token's text as stored in the vocabulary.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Whether `id` is a control token (not printed).
    pub fn is_control(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|t| *t == token_type::CONTROL)
    }

    /// Tokenizes `text`. `add_special` prepends `bos` when the vocabulary asks for it;
    /// `parse_special` lets control tokens written in the text (`<|im_start|>`) match.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if add_special
            && self.add_bos
            && let Some(bos) = self.bos
        {
            out.push(bos);
        }
        let mut prev_special = true;
        for fragment in self.partition(text, parse_special) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(t) => {
                    match &self.kind {
                        Kind::Bpe { ignore_merges, .. } => {
                            self.encode_bpe(t, *ignore_merges, &mut out)
                        }
                        Kind::Spm { add_space_prefix } => {
                            let mut s = String::with_capacity(t.len() + 3);
                            if *add_space_prefix && prev_special {
                                s.push(' ');
                            }
                            s.push_str(t);
                            self.encode_spm(&s.replace(' ', "\u{2581}"), &mut out);
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

    fn encode_bpe(&self, text: &str, ignore_merges: bool, out: &mut Vec<u32>) {
        let alphabet = byte_to_unicode();
        for piece in self.pre_split(text) {
            let word: String = piece.bytes().map(|b| alphabet[b as usize]).collect();
            if ignore_merges && let Some(&id) = self.ids.get(&word) {
                out.push(id);
                continue;
            }
            let mut symbols: Vec<String> = word.chars().map(String::from).collect();
            loop {
                let best = symbols
                    .windows(2)
                    .enumerate()
                    .filter_map(|(i, w)| {
                        self.ranks.get(&(w[0].clone(), w[1].clone())).map(|r| (*r, i))
                    })
                    .min();
                let Some((_, i)) = best else { break };
                merge_at(&mut symbols, i);
            }
            for s in symbols {
                match self.ids.get(&s) {
                    Some(&id) => out.push(id),
                    None => {
                        for c in s.chars() {
                            if let Some(b) = self.unicode_to_byte.get(&c)
                                && let Some(id) = self.byte_tokens[*b as usize]
                            {
                                out.push(id);
                            }
                        }
                    }
                }
            }
        }
    }

    fn encode_spm(&self, text: &str, out: &mut Vec<u32>) {
        // Symbols are characters; merge the adjacent pair whose concatenation is the
        // highest-scoring token (leftmost on ties) until none is a token.
        let mut symbols: Vec<String> = text.chars().map(String::from).collect();
        loop {
            let mut best: Option<(f32, usize)> = None;
            for i in 0..symbols.len().saturating_sub(1) {
                let joined = format!("{}{}", symbols[i], symbols[i + 1]);
                if let Some(&id) = self.ids.get(&joined) {
                    let score = self.scores[id as usize];
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, i));
                    }
                }
            }
            let Some((_, i)) = best else { break };
            merge_at(&mut symbols, i);
        }
        for s in symbols {
            match self.ids.get(&s) {
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

    /// The bytes a token stands for (control tokens give none).
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let Some(text) = self.tokens.get(id as usize) else { return Vec::new() };
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

/// Replaces symbols `i` and `i + 1` by their concatenation.
fn merge_at(symbols: &mut Vec<String>, i: usize) {
    let right = symbols.remove(i + 1);
    symbols[i].push_str(&right);
}

enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

/// Streams token ids into text, holding back bytes until they form whole UTF-8 characters.
#[derive(Debug)]
pub struct Detokenizer<'a> {
    tokenizer: &'a Tokenizer,
    pending: Vec<u8>,
    first: bool,
}

impl<'a> Detokenizer<'a> {
    /// A detokenizer at the start of a text.
    pub fn new(tokenizer: &'a Tokenizer) -> Detokenizer<'a> {
        Detokenizer { tokenizer, pending: Vec::new(), first: true }
    }

    /// Adds a token; returns the text that became complete.
    pub fn push(&mut self, id: u32) -> String {
        let mut bytes = self.tokenizer.token_bytes(id);
        if self.first && !bytes.is_empty() {
            // SentencePiece prepends a space to the text; do not print it.
            if matches!(self.tokenizer.kind, Kind::Spm { add_space_prefix: true })
                && bytes[0] == b' '
            {
                bytes.remove(0);
            }
            self.first = false;
        }
        self.pending.extend_from_slice(&bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(), // incomplete tail: wait
            Err(e) => e.valid_up_to() + e.error_len().unwrap_or(1), // invalid: flush lossy
        };
        let out: Vec<u8> = self.pending.drain(..valid).collect();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Flushes whatever is held back (lossy).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

/// Wraps a user message in the chat format a GGUF's `tokenizer.chat_template` uses, for
/// the template families seen in practice: ChatML (`<|im_start|>`), Llama 3
/// (`<|start_header_id|>`) and Llama 2 / Mistral (`[INST]`). The result is meant to be
/// encoded with special tokens parsed. Other templates are refused with a description.
pub fn chat_prompt(template: Option<&str>, user: &str) -> Result<String, String> {
    chat_messages(template, &[("user", user)])
}

/// Writes a conversation (`(role, content)` pairs, roles `system`, `user`, `assistant`)
/// in the chat format of [`chat_prompt`], ending where the assistant's next turn begins.
pub fn chat_messages(template: Option<&str>, messages: &[(&str, &str)]) -> Result<String, String> {
    let Some(t) = template else {
        return Err("the model has no tokenizer.chat_template".into());
    };
    if let Some((role, _)) =
        messages.iter().find(|(r, _)| !matches!(*r, "system" | "user" | "assistant"))
    {
        return Err(format!("unknown role {role:?} (system, user or assistant)"));
    }
    let mut out = String::new();
    if t.contains("<|im_start|>") {
        for (role, content) in messages {
            out.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
        }
        out.push_str("<|im_start|>assistant\n");
    } else if t.contains("<|start_header_id|>") {
        for (role, content) in messages {
            out.push_str(&format!(
                "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"
            ));
        }
        out.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
    } else if t.contains("[INST]") {
        let mut system = String::new();
        for (role, content) in messages {
            match *role {
                "system" => system = format!("<<SYS>>\n{content}\n<</SYS>>\n\n"),
                "user" => out
                    .push_str(&format!("[INST] {}{content} [/INST]", std::mem::take(&mut system))),
                _ => out.push_str(&format!(" {content} ")),
            }
        }
    } else {
        return Err("the model's chat template is not ChatML, Llama 3 or Llama 2 style".into());
    }
    Ok(out)
}
