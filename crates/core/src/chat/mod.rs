//! Chat conversations as the model's own template writes them.
//!
//! A conversation ([`Conversation`]: messages with their tool calls and tool results, the
//! tools offered, template options) is rendered by the GGUF's `tokenizer.chat_template`
//! with a Jinja engine configured as Hugging Face `transformers` renders templates
//! ([`ChatTemplate`]), then tokenized so that only the template's own text parses control
//! tokens: every string the client sent is escaped before rendering ([`Escaper`]) and
//! turned back into plain text after, so a message that spells `<|im_end|>` cannot forge
//! a turn. The answer is read back ([`OutputParser`]) into reasoning, content and tool
//! calls in the format the template taught the model.

mod clock;
mod delta;
mod escape;
mod forced;
mod harmony;
mod message;
mod output;
mod pyjson;
mod template;

pub use clock::strftime;
pub use escape::Escaper;
pub use forced::forced_call_grammar;
pub use message::{Conversation, Message, ToolCall};
pub use output::{Delta, MARKERS, OutputParser, ParsedCall, ToolFormat, parse_whole};
pub use template::{ChatTemplate, TemplateError, TemplateLimits};
