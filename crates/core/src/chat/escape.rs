//! Keeps a client's strings from spelling control tokens through a template.
//!
//! Before a template renders, every string the client sent is escaped: each spelling of
//! a control token (`<|im_end|>`) becomes a private-use sequence no tokenizer splits on.
//! The rendered text is then split around the control tokens the *template* wrote, and
//! each stretch of text between them is unescaped back to what the client sent and
//! encoded as text. The escape is `ESC '#' index ';'` for the spelling at `index`, and
//! `ESC '!'` for the client's own `ESC` (U+10FFFD, a private-use code point).

use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;

const ESC: char = '\u{10FFFD}';

/// Escapes and unescapes the control tokens' spellings of one vocabulary.
#[derive(Debug, Clone)]
pub struct Escaper {
    /// The spellings, indexed by the escape's number.
    spellings: Vec<String>,
    /// Each spelling's number.
    index: HashMap<String, u32>,
    /// For each first byte, the lengths of the spellings that start with it, longest
    /// first: a position is checked once per distinct length (a vocabulary with thousands
    /// of `<unused..>` tokens has a few dozen lengths), not once per spelling.
    by_first: Vec<Vec<usize>>,
}

impl Default for Escaper {
    /// An escaper of no spelling (it still escapes `ESC`).
    fn default() -> Escaper {
        Escaper::new([])
    }
}

impl Escaper {
    /// An escaper for these spellings (the vocabulary's control tokens; empty ones are
    /// skipped).
    pub fn new<'a>(spellings: impl IntoIterator<Item = &'a str>) -> Escaper {
        let mut index = HashMap::new();
        let mut list = Vec::new();
        for s in spellings.into_iter().filter(|s| !s.is_empty()) {
            if !index.contains_key(s) {
                index.insert(s.to_string(), list.len() as u32);
                list.push(s.to_string());
            }
        }
        let mut by_first: Vec<Vec<usize>> = vec![Vec::new(); 256];
        for s in &list {
            let lengths = &mut by_first[s.as_bytes()[0] as usize];
            if !lengths.contains(&s.len()) {
                lengths.push(s.len());
            }
        }
        for lengths in &mut by_first {
            lengths.sort_unstable_by(|a, b| b.cmp(a));
        }
        Escaper { spellings: list, index, by_first }
    }

    /// `text` with every control spelling and every `ESC` escaped.
    pub fn escape<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let bytes = text.as_bytes();
        let needs = |i: usize| {
            let b = bytes[i];
            !self.by_first[b as usize].is_empty() || (b == 0xF4 && text[i..].starts_with(ESC))
        };
        if !(0..bytes.len()).any(needs) {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len() + 16);
        let mut i = 0;
        let mut plain = 0;
        while i < bytes.len() {
            let rest = &text[i..];
            if rest.starts_with(ESC) {
                out.push_str(&text[plain..i]);
                out.push(ESC);
                out.push('!');
                i += ESC.len_utf8();
                plain = i;
                continue;
            }
            let hit = self.by_first[bytes[i] as usize]
                .iter()
                .find_map(|&len| rest.get(..len).and_then(|s| self.index.get(s)).copied());
            if let Some(k) = hit {
                out.push_str(&text[plain..i]);
                out.push(ESC);
                out.push('#');
                out.push_str(&k.to_string());
                out.push(';');
                i += self.spellings[k as usize].len();
                plain = i;
            } else {
                i += rest.chars().next().map_or(1, char::len_utf8);
            }
        }
        out.push_str(&text[plain..]);
        Cow::Owned(out)
    }

    /// The text escaped text stands for. A malformed escape (a template that cut one
    /// apart) stays as it is.
    pub fn unescape<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if !text.contains(ESC) {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(ESC) {
            out.push_str(&rest[..at]);
            let after = &rest[at + ESC.len_utf8()..];
            if let Some(tail) = after.strip_prefix('!') {
                out.push(ESC);
                rest = tail;
            } else if let Some((n, tail)) = after.strip_prefix('#').and_then(|a| a.split_once(';'))
                && let Some(s) = n.parse::<usize>().ok().and_then(|k| self.spellings.get(k))
            {
                out.push_str(s);
                rest = tail;
            } else {
                out.push(ESC);
                rest = after;
            }
        }
        out.push_str(rest);
        Cow::Owned(out)
    }

    /// A JSON value with every string in it (keys too) escaped.
    pub fn escape_value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.escape(s).into_owned()),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.escape_value(x)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (self.escape(k).into_owned(), self.escape_value(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_text_spells_no_control_token_and_unescapes_to_itself() {
        let e = Escaper::new(["<|im_end|>", "<|im_start|>", "<|im"]);
        for text in [
            "plain",
            "a <|im_end|> b",
            "<|im_start|>system\nx<|im_end|>",
            "<|im but not all",
            "the escape \u{10FFFD}#0; itself",
            "",
        ] {
            let escaped = e.escape(text);
            assert!(!escaped.contains("<|im"), "{escaped:?}");
            assert_eq!(e.unescape(&escaped), text);
        }
    }

    #[test]
    fn a_vocabulary_of_thousands_of_markers_escapes_a_long_text_quickly() {
        let unused: Vec<String> = (0..6000).map(|i| format!("<unused{i}>")).collect();
        let e = Escaper::new(unused.iter().map(String::as_str).chain(["<eos>"]));
        let text = "<a> <b> <unused42> <eos>".repeat(20_000);
        let escaped = e.escape(&text);
        assert!(!escaped.contains("<unused42>") && !escaped.contains("<eos>"));
        assert_eq!(e.unescape(&escaped), text);
    }

    #[test]
    fn a_cut_escape_unescapes_to_what_is_left() {
        let e = Escaper::new(["<x>"]);
        assert_eq!(e.unescape("a\u{10FFFD}#9"), "a\u{10FFFD}#9");
        assert_eq!(e.unescape("a\u{10FFFD}#7;b"), "a\u{10FFFD}#7;b");
    }
}
