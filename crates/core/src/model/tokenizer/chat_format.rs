//! A model's chat format: its own `tokenizer.chat_template` rendered by the Jinja engine
//! ([`crate::chat::ChatTemplate`]), or, for a file without a template or with one the
//! engine cannot compile, the hand-written formats of [`chat_pieces`].
//!
//! Either way only the template's own text parses control tokens: the client's strings
//! are escaped while the template renders, and each stretch of text between the control
//! tokens the template wrote is unescaped and encoded as text.

use crate::chat::{
    ChatTemplate, Conversation, Escaper, OutputParser, TemplateError, TemplateLimits, ToolFormat,
};

use super::chat::{ChatError, chat_pieces};
use super::{Fragment, Tokenizer, token_type};

/// How one model writes conversations.
#[derive(Debug)]
pub struct ChatFormat {
    /// The model's own template, compiled; or why it did not compile.
    own: Option<Result<ChatTemplate, TemplateError>>,
    /// The template's text.
    source: Option<String>,
    /// What the hand-written formats sniff: the template's text, or the vocabulary's
    /// control tokens when there is no template.
    sniff: String,
}

impl ChatFormat {
    /// The chat format of `tokenizer`'s model, whose template (`tokenizer.chat_template`,
    /// see [`super::chat_template`]) is `source`.
    pub fn new(tokenizer: &Tokenizer, source: Option<&str>) -> ChatFormat {
        let text = |id: Option<u32>| {
            id.and_then(|i| tokenizer.tokens.get(i as usize)).cloned().unwrap_or_default()
        };
        let own = source.map(|s| {
            let (bos, eos) = (text(tokenizer.bos), text(tokenizer.eos));
            ChatTemplate::new(s, &bos, &eos, tokenizer.escaper(), TemplateLimits::default())
        });
        let sniff = match source {
            Some(s) => s.to_string(),
            None => tokenizer
                .specials
                .iter()
                .filter(|&&id| tokenizer.types[id as usize] == token_type::CONTROL)
                .map(|&id| tokenizer.tokens[id as usize].as_str())
                .collect::<Vec<_>>()
                .join(" "),
        };
        ChatFormat { own, source: source.map(str::to_string), sniff }
    }

    /// Whether the model's own template renders conversations (otherwise a hand-written
    /// format does, and tools are refused).
    pub fn renders_own_template(&self) -> bool {
        matches!(self.own, Some(Ok(_)))
    }

    /// The tool-call format of the model's own template (`ToolFormat::None` under the
    /// fallback, which renders no tools).
    pub fn tool_format(&self) -> ToolFormat {
        match (&self.own, &self.source) {
            (Some(Ok(_)), Some(src)) => ToolFormat::of_template(src),
            _ => ToolFormat::None,
        }
    }

    /// Why the model's template did not compile, if it did not.
    pub fn template_error(&self) -> Option<&TemplateError> {
        self.own.as_ref().and_then(|r| r.as_ref().err())
    }

    /// The conversation written out, escaped where the client's strings are (see
    /// [`Escaper`]), at most `max_bytes` long; `now_unix` is the time templates may print.
    fn rendered(
        &self,
        tokenizer: &Tokenizer,
        conv: &Conversation,
        now_unix: i64,
        max_bytes: usize,
    ) -> Result<(String, Escaper), ChatError> {
        if let Some(Ok(t)) = &self.own {
            let text = t.render(conv, now_unix, max_bytes).map_err(ChatError::Template)?;
            return Ok((text, t.escaper().clone()));
        }
        if !conv.tools.is_empty() || conv.messages.iter().any(|m| !m.tool_calls.is_empty()) {
            return Err(ChatError::ToolsNeedTemplate);
        }
        let pairs: Vec<(&str, &str)> = conv
            .messages
            .iter()
            .map(|m| (m.role.as_str(), m.content.as_deref().unwrap_or("")))
            .collect();
        let sniff = (!self.sniff.is_empty()).then_some(self.sniff.as_str());
        let pieces = chat_pieces(sniff, &pairs)?;
        // The hand-written pieces keep contents apart; escape them as a template would.
        let escaper = tokenizer.escaper();
        let text: String = pieces
            .iter()
            .map(|p| match p {
                super::ChatPiece::Marker(s) => s.clone(),
                super::ChatPiece::Content(s) => escaper.escape(s).into_owned(),
            })
            .collect();
        if text.len() > max_bytes {
            return Err(ChatError::Template(TemplateError::TooLarge { limit: max_bytes }));
        }
        Ok((text, escaper))
    }

    /// The conversation as the model reads it, as text (for showing it).
    pub fn text(
        &self,
        tokenizer: &Tokenizer,
        conv: &Conversation,
        now_unix: i64,
        max_bytes: usize,
    ) -> Result<String, ChatError> {
        let (text, escaper) = self.rendered(tokenizer, conv, now_unix, max_bytes)?;
        Ok(escaper.unescape(&text).into_owned())
    }

    /// The conversation's token ids: the control tokens the template wrote, and every
    /// other stretch as text; `bos` first when the vocabulary asks for it (once, whether
    /// or not the template wrote it).
    pub fn encode(
        &self,
        tokenizer: &Tokenizer,
        conv: &Conversation,
        now_unix: i64,
        max_bytes: usize,
    ) -> Result<Vec<u32>, ChatError> {
        let (text, escaper) = self.rendered(tokenizer, conv, now_unix, max_bytes)?;
        Ok(tokenizer.encode_rendered(&text, &escaper))
    }
}

impl ChatFormat {
    /// [`ChatFormat::encode`], with a parser of the answer to it (reasoning and tool calls
    /// as the model's own template teaches them; plain text under the fallback).
    pub fn encode_for_answer(
        &self,
        tokenizer: &Tokenizer,
        conv: &Conversation,
        now_unix: i64,
        max_bytes: usize,
    ) -> Result<(Vec<u32>, OutputParser), ChatError> {
        let (text, escaper) = self.rendered(tokenizer, conv, now_unix, max_bytes)?;
        let parser = match (&self.own, &self.source) {
            (Some(Ok(_)), Some(src)) => {
                let names = conv
                    .tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect();
                OutputParser::for_template(src, &text, !conv.tools.is_empty())
                    .with_tool_names(names)
            }
            _ => OutputParser::new(ToolFormat::None, false, false),
        };
        Ok((tokenizer.encode_rendered(&text, &escaper), parser))
    }
}

impl Tokenizer {
    /// An escaper of the spellings that only a template may write: the control tokens
    /// (and the unknown token), which `encode(.., parse_special: false)` keeps as text.
    pub fn escaper(&self) -> Escaper {
        Escaper::new(
            self.specials
                .iter()
                .filter(|&&id| self.types[id as usize] != token_type::USER_DEFINED)
                .map(|&id| self.tokens[id as usize].as_str()),
        )
    }

    /// Tokenizes text a template rendered: control tokens parsed, every other stretch
    /// unescaped by `escaper` and encoded as text; `bos` first when the vocabulary asks
    /// for it and the text does not begin with it.
    pub fn encode_rendered(&self, text: &str, escaper: &Escaper) -> Vec<u32> {
        let frags = self.partition(text, true);
        let texts: Vec<std::borrow::Cow<'_, str>> = frags
            .iter()
            .map(|f| match f {
                Fragment::Text(t) => escaper.unescape(t),
                Fragment::Token(_) => std::borrow::Cow::Borrowed(""),
            })
            .collect();
        let frags: Vec<Fragment<'_>> = frags
            .iter()
            .zip(&texts)
            .map(|(f, t)| match f {
                Fragment::Text(_) => Fragment::Text(t),
                Fragment::Token(id) => Fragment::Token(*id),
            })
            .collect();
        let starts_with_bos =
            matches!(frags.first(), Some(Fragment::Token(id)) if Some(*id) == self.bos);
        self.encode_fragments(&frags, !starts_with_bos, &mut 0)
    }
}
