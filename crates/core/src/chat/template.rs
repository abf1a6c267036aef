//! The GGUF's `tokenizer.chat_template`, rendered by `minijinja` configured as Hugging
//! Face `transformers` renders templates: `trim_blocks` and `lstrip_blocks`, loop
//! controls, Python's string and dict methods, `tojson` as Python's `json.dumps`,
//! `raise_exception` and `strftime_now`. Every render runs under fuel, recursion and
//! output limits, so a hostile template stops with a typed error.

use std::io::Write;

use minijinja::value::{Kwargs, Rest, Value as Jv};
use minijinja::{Environment, ErrorKind, UndefinedBehavior, syntax::SyntaxConfig};
use serde_json::Value;
use thiserror::Error;

use super::clock::strftime;
use super::escape::Escaper;
use super::message::Conversation;
use super::pyjson::{DumpOptions, dumps};

/// Why a template cannot render a conversation. [`TemplateError::code`] is stable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TemplateError {
    /// The template does not compile.
    #[error("the chat template does not compile: {message}")]
    Invalid {
        /// The engine's message.
        message: String,
    },
    /// The template refused the conversation (`raise_exception`) or failed on it.
    #[error("the chat template cannot write this conversation: {message}")]
    Refused {
        /// The template's or the engine's message.
        message: String,
    },
    /// The render ran past its fuel (a template that loops without end).
    #[error("the chat template ran past its limit of {fuel} steps")]
    OutOfFuel {
        /// The steps allowed.
        fuel: u64,
    },
    /// Macros or includes nested past the recursion limit.
    #[error("the chat template nests calls deeper than {limit} levels")]
    TooDeep {
        /// The levels allowed.
        limit: usize,
    },
    /// The rendered text grew past its limit.
    #[error("the chat template wrote more than {limit} bytes")]
    TooLarge {
        /// The bytes allowed.
        limit: usize,
    },
}

impl TemplateError {
    /// A stable `snake_case` code for this error.
    pub const fn code(&self) -> &'static str {
        match self {
            TemplateError::Invalid { .. } => "template_invalid",
            TemplateError::Refused { .. } => "template_refused",
            TemplateError::OutOfFuel { .. } => "template_out_of_fuel",
            TemplateError::TooDeep { .. } => "template_too_deep",
            TemplateError::TooLarge { .. } => "template_too_large",
        }
    }
}

/// What one render may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateLimits {
    /// Engine steps (each instruction one, plus one per 64 bytes a string operation makes).
    pub fuel: u64,
    /// Nesting of calls, includes and macros.
    pub recursion: usize,
}

impl Default for TemplateLimits {
    /// 4 million steps and 64 levels. Real templates take a few hundred steps per message
    /// (a 1000-message conversation well under a million); a template that builds strings
    /// without end runs out after about 256 MB of them (fuel is charged per 64 bytes).
    fn default() -> TemplateLimits {
        TemplateLimits { fuel: 4_000_000, recursion: 64 }
    }
}

/// A compiled chat template with the tokens and escaper of its vocabulary.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    escaper: Escaper,
    limits: TemplateLimits,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("bos", &self.bos).field("eos", &self.eos).finish()
    }
}

const NAME: &str = "chat_template";

fn py_tojson(value: &Jv, args: Rest<Jv>, kwargs: Kwargs) -> Result<Jv, minijinja::Error> {
    let json: Value = serde_json::to_value(value)
        .map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))?;
    // Python's positional order: ensure_ascii, indent, separators, sort_keys.
    let positional = |i: usize| args.get(i).cloned();
    let get = |name: &str, i: usize| -> Result<Option<Jv>, minijinja::Error> {
        Ok(kwargs.get::<Option<Jv>>(name)?.or_else(|| positional(i)))
    };
    let mut opts = DumpOptions::default();
    if let Some(v) = get("ensure_ascii", 0)? {
        opts.ensure_ascii = v.is_true();
    }
    if let Some(v) = get("indent", 1)?.filter(|v| !v.is_none()) {
        opts.indent = Some(match v.as_str() {
            Some(s) => s.to_string(),
            None => " ".repeat(i64::try_from(v).unwrap_or(0).clamp(0, 64) as usize),
        });
    }
    if let Some(v) = get("separators", 2)?.filter(|v| !v.is_none()) {
        let item = v.get_item_by_index(0).ok().and_then(|x| x.as_str().map(str::to_string));
        let key = v.get_item_by_index(1).ok().and_then(|x| x.as_str().map(str::to_string));
        if let (Some(item), Some(key)) = (item, key) {
            opts.separators = Some((item, key));
        }
    }
    if let Some(v) = get("sort_keys", 3)? {
        opts.sort_keys = v.is_true();
    }
    kwargs.assert_all_used()?;
    Ok(Jv::from(dumps(&json, &opts)))
}

fn raise_exception(message: String) -> Result<Jv, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

/// A writer that fails past `limit` bytes.
struct Capped {
    out: Vec<u8>,
    limit: usize,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.limit {
            return Err(std::io::Error::other("over the limit"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ChatTemplate {
    /// Compiles `source` for a vocabulary whose beginning and end tokens are spelled
    /// `bos` and `eos` and whose control tokens `escaper` escapes.
    pub fn new(
        source: &str,
        bos: &str,
        eos: &str,
        escaper: Escaper,
        limits: TemplateLimits,
    ) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| TemplateError::Invalid { message: e.to_string() })?;
        env.set_syntax(syntax);
        env.set_undefined_behavior(UndefinedBehavior::Lenient);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_fuel(Some(limits.fuel));
        env.set_recursion_limit(limits.recursion);
        env.add_filter("tojson", py_tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| TemplateError::Invalid { message: e.to_string() })?;
        Ok(ChatTemplate { env, bos: bos.into(), eos: eos.into(), escaper, limits })
    }

    /// The escaper of the template's vocabulary.
    pub fn escaper(&self) -> &Escaper {
        &self.escaper
    }

    /// Renders `conv` at the time `now_unix` (seconds since the epoch, for
    /// `strftime_now`), at most `max_bytes` long. The client's strings come out escaped
    /// ([`Escaper`]): tokenize the text with them unescaped only between control tokens.
    pub fn render(
        &self,
        conv: &Conversation,
        now_unix: i64,
        max_bytes: usize,
    ) -> Result<String, TemplateError> {
        let e = &self.escaper;
        let messages: Vec<Value> =
            conv.messages.iter().map(|m| e.escape_value(&m.to_value())).collect();
        let mut ctx = serde_json::Map::new();
        for (k, v) in &conv.kwargs {
            ctx.insert(k.clone(), e.escape_value(v));
        }
        ctx.insert("messages".into(), Value::Array(messages));
        if !conv.tools.is_empty() {
            let tools = conv.tools.iter().map(|t| e.escape_value(t)).collect();
            ctx.insert("tools".into(), Value::Array(tools));
        }
        ctx.insert("add_generation_prompt".into(), Value::Bool(conv.add_generation_prompt));
        ctx.insert("bos_token".into(), Value::String(self.bos.clone()));
        ctx.insert("eos_token".into(), Value::String(self.eos.clone()));
        let mut ctx = Jv::from(minijinja::value::Serde(&ctx));
        let now = Jv::from_function(move |fmt: String| strftime(&fmt, now_unix));
        ctx = minijinja::context! { strftime_now => now, ..ctx };
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| TemplateError::Invalid { message: e.to_string() })?;
        let mut out = Capped { out: Vec::new(), limit: max_bytes };
        match tmpl.render_captured_to(ctx, &mut out) {
            Ok(_) => Ok(String::from_utf8(out.out).unwrap_or_default()),
            Err(err) => Err(match err.kind() {
                ErrorKind::OutOfFuel => TemplateError::OutOfFuel { fuel: self.limits.fuel },
                ErrorKind::WriteFailure => TemplateError::TooLarge { limit: max_bytes },
                _ if err.detail() == Some("recursion limit exceeded") => {
                    TemplateError::TooDeep { limit: self.limits.recursion }
                }
                _ => TemplateError::Refused {
                    message: err.detail().map_or_else(|| err.to_string(), str::to_string),
                },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Message;

    fn render(source: &str, max_bytes: usize) -> Result<String, TemplateError> {
        let t = ChatTemplate::new(
            source,
            "<s>",
            "</s>",
            Escaper::default(),
            TemplateLimits::default(),
        )?;
        t.render(&Conversation::new(vec![Message::new("user", "hi")]), 0, max_bytes)
    }

    #[test]
    fn hostile_templates_stop_with_typed_errors() {
        let looping =
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
        assert_eq!(render(looping, 1 << 30), Err(TemplateError::OutOfFuel { fuel: 4_000_000 }));
        let doubling = "{% set s = namespace(x='ab') %}{% for i in range(64) %}{% set s.x = s.x ~ s.x %}{% endfor %}{{ s.x|length }}";
        assert_eq!(render(doubling, 1 << 30), Err(TemplateError::OutOfFuel { fuel: 4_000_000 }));
        let recursing = "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}";
        assert_eq!(render(recursing, 1 << 30), Err(TemplateError::TooDeep { limit: 64 }));
        let huge = "{% for a in range(1000) %}{{ 'x' * 100000 }}{% endfor %}";
        assert_eq!(render(huge, 1 << 20), Err(TemplateError::TooLarge { limit: 1 << 20 }));
        assert!(matches!(render("{% for %}", 100), Err(TemplateError::Invalid { .. })));
        let refused = "{{ raise_exception('roles must alternate') }}";
        assert_eq!(
            render(refused, 100),
            Err(TemplateError::Refused { message: "roles must alternate".into() })
        );
    }

    #[test]
    fn helpers_behave_as_transformers_defines_them() {
        let t = "{{ messages | tojson }}|{{ {'b': 1, 'a': [1, 2]} | tojson(indent=2, sort_keys=true) }}|{{ strftime_now('%Y-%m-%d') }}|{{ 'a,b'.split(',') | length }}|{{ bos_token }}";
        assert_eq!(
            render(t, 1 << 20).expect("renders"),
            "[{\"role\": \"user\", \"content\": \"hi\"}]|{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": 1\n}|1970-01-01|2|<s>"
        );
    }
}
