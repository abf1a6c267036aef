//! The hand-written chat formats: ChatML (`<|im_start|>`), Llama 3
//! (`<|start_header_id|>`), Gemma (`<start_of_turn>`) and Llama 2 / Mistral (`[INST]`),
//! picked by sniffing. They are the fallback of [`super::ChatFormat`] for files whose
//! template is missing or does not compile; a model's own template is rendered by the
//! Jinja engine ([`crate::chat`]).
//!
//! A conversation is written as [`ChatPiece`]s: the template's own markers, whose special
//! tokens are parsed, and the messages' contents, which are text. A content that spells a
//! control token (`<|im_end|>`) stays text, so a user cannot forge a turn of another role.

use thiserror::Error;

use super::{ChatFormat, Tokenizer};
use crate::chat::{Conversation, Message, TemplateError};

/// Why a conversation cannot be written in the model's chat format. [`ChatError::code`]
/// is a stable reason.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChatError {
    /// The model has no `tokenizer.chat_template`.
    #[error("the model has no tokenizer.chat_template")]
    NoTemplate,
    /// A message's role is not `system`, `user` or `assistant`.
    #[error("unknown role {role:?} (system, user or assistant)")]
    UnknownRole {
        /// The role given.
        role: String,
    },
    /// The template belongs to none of the families this build writes.
    #[error("the model's chat template is not ChatML, Llama 3, Gemma or Llama 2 style")]
    UnsupportedTemplate,
    /// The model's template failed on the conversation.
    #[error("{0}")]
    Template(TemplateError),
    /// Tools were offered (or called) but the model has no template that renders them.
    #[error("tools need the model's own chat template, and this model has none that compiles")]
    ToolsNeedTemplate,
}

impl ChatError {
    /// A stable `snake_case` code for this error.
    pub const fn code(&self) -> &'static str {
        match self {
            ChatError::NoTemplate => "no_template",
            ChatError::UnknownRole { .. } => "unknown_role",
            ChatError::UnsupportedTemplate => "unsupported_template",
            ChatError::Template(e) => e.code(),
            ChatError::ToolsNeedTemplate => "tools_need_template",
        }
    }
}

/// One piece of a conversation written in a chat format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatPiece<'a> {
    /// The template's own text: its special tokens (`<|im_start|>`) are parsed.
    Marker(String),
    /// A message's content: text, whatever it spells.
    Content(&'a str),
}

/// Gemma's chat template (Gemma 3 files from some converters carry none).
pub const GEMMA_TEMPLATE: &str = "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\n{{ message['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n";

/// Writes a conversation (`(role, content)` pairs, roles `system`, `user`, `assistant`)
/// in the chat format `template` belongs to, ending where the assistant's next turn
/// begins. Other templates, and other roles, are refused.
pub fn chat_pieces<'a>(
    template: Option<&str>,
    messages: &[(&str, &'a str)],
) -> Result<Vec<ChatPiece<'a>>, ChatError> {
    let t = template.ok_or(ChatError::NoTemplate)?;
    if let Some((role, _)) =
        messages.iter().find(|(r, _)| !matches!(*r, "system" | "user" | "assistant"))
    {
        return Err(ChatError::UnknownRole { role: role.to_string() });
    }
    let mut out = Vec::new();
    let marker = |out: &mut Vec<ChatPiece<'a>>, s: String| out.push(ChatPiece::Marker(s));
    if t.contains("<|im_start|>") {
        if messages.first().is_none_or(|(role, _)| *role != "system")
            && let Some(default) = chatml_default_system(t)
        {
            // The template's own turn, written as the template writes it.
            marker(&mut out, format!("<|im_start|>system\n{default}<|im_end|>\n"));
        }
        for &(role, content) in messages {
            marker(&mut out, format!("<|im_start|>{role}\n"));
            out.push(ChatPiece::Content(content));
            marker(&mut out, "<|im_end|>\n".into());
        }
        marker(&mut out, "<|im_start|>assistant\n".into());
    } else if t.contains("<|start_header_id|>") {
        for &(role, content) in messages {
            marker(&mut out, format!("<|start_header_id|>{role}<|end_header_id|>\n\n"));
            out.push(ChatPiece::Content(content));
            marker(&mut out, "<|eot_id|>".into());
        }
        marker(&mut out, "<|start_header_id|>assistant<|end_header_id|>\n\n".into());
    } else if t.contains("<start_of_turn>") {
        // Gemma: no system role (a system message opens the first user turn), and the
        // assistant is "model".
        let mut system: Option<&'a str> = None;
        for &(role, content) in messages {
            if role == "system" {
                system = Some(content);
                continue;
            }
            let role = if role == "assistant" { "model" } else { role };
            marker(&mut out, format!("<start_of_turn>{role}\n"));
            if let Some(s) = system.take() {
                out.push(ChatPiece::Content(s));
                marker(&mut out, "\n\n".into());
            }
            out.push(ChatPiece::Content(content));
            marker(&mut out, "<end_of_turn>\n".into());
        }
        marker(&mut out, "<start_of_turn>model\n".into());
    } else if t.contains("[INST]") {
        // A system message goes inside the next user turn; a later one replaces it.
        let mut system: Option<&'a str> = None;
        for &(role, content) in messages {
            match role {
                "system" => system = Some(content),
                "user" => {
                    marker(&mut out, "[INST] ".into());
                    if let Some(s) = system.take() {
                        marker(&mut out, "<<SYS>>\n".into());
                        out.push(ChatPiece::Content(s));
                        marker(&mut out, "\n<</SYS>>\n\n".into());
                    }
                    out.push(ChatPiece::Content(content));
                    marker(&mut out, " [/INST]".into());
                }
                _ => {
                    marker(&mut out, " ".into());
                    out.push(ChatPiece::Content(content));
                    marker(&mut out, " ".into());
                }
            }
        }
    } else {
        return Err(ChatError::UnsupportedTemplate);
    }
    Ok(out)
}

/// The system message a ChatML template writes when the conversation brings none, if it
/// has one (SmolLM2's "You are a helpful AI assistant named SmolLM, trained by Hugging
/// Face", Qwen2.5's "You are Qwen, ..."): the first string literal of the template that
/// opens a system turn with fixed text, `'<|im_start|>system\n...<|im_end|>'`. A turn
/// built from a message (`'<|im_start|>system\n' + message['content']`) is not one.
/// Until templates are rendered by a Jinja engine, this keeps the model's own default.
pub fn chatml_default_system(template: &str) -> Option<String> {
    const OPEN: &str = "<|im_start|>system";
    const END: &str = "<|im_end|>";
    let mut from = 0;
    while let Some(at) = template[from..].find(OPEN).map(|i| from + i) {
        from = at + OPEN.len();
        let quote = template[..at].chars().next_back();
        if !matches!(quote, Some('\'' | '"')) {
            continue;
        }
        let rest = &template[from..];
        let Some(body) = rest.strip_prefix('\n').or_else(|| rest.strip_prefix("\\n")) else {
            continue;
        };
        let Some(end) = body.find(END) else { continue };
        let text = &body[..end];
        let literal = !text.contains(['\'', '"', '{', '}', '+']);
        if literal && !text.trim().is_empty() {
            return Some(text.replace("\\n", "\n"));
        }
    }
    None
}

/// The text of a written conversation (for showing it; tokenize it with
/// [`Tokenizer::encode_chat`], which keeps the contents text).
pub fn chat_text(pieces: &[ChatPiece<'_>]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            ChatPiece::Marker(s) => s.as_str(),
            ChatPiece::Content(s) => s,
        })
        .collect()
}

impl Tokenizer {
    /// Tokenizes a conversation of `(role, content)` messages in the model's chat format
    /// ([`ChatFormat`]: its own template `template`, or the hand-written fallback) at the
    /// time `now_unix`, `bos` first when the vocabulary asks for it. Only the template's
    /// own text is parsed for control tokens; every content is text.
    pub fn encode_chat(
        &self,
        template: Option<&str>,
        messages: &[(&str, &str)],
        now_unix: i64,
    ) -> Result<Vec<u32>, ChatError> {
        let conv = Conversation::new(messages.iter().map(|(r, c)| Message::new(r, c)).collect());
        ChatFormat::new(self, template).encode(self, &conv, now_unix, usize::MAX)
    }

    /// [`Tokenizer::encode_chat`] of one user message.
    pub fn encode_chat_prompt(
        &self,
        template: Option<&str>,
        user: &str,
        now_unix: i64,
    ) -> Result<Vec<u32>, ChatError> {
        self.encode_chat(template, &[("user", user)], now_unix)
    }
}
