//! Output: data on stdout (human text or JSON Lines with a `type` tag), everything else on
//! stderr. Write errors propagate so that a closed pipe ends the command quietly.

use serde::Serialize;
use std::io::{self, Write};

/// The data sink of a command: stdout, line-buffered.
pub struct Output {
    out: io::LineWriter<io::Stdout>,
}

impl Default for Output {
    fn default() -> Self {
        Output { out: io::LineWriter::new(io::stdout()) }
    }
}

#[derive(Serialize)]
struct Tagged<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(flatten)]
    inner: &'a T,
}

impl Output {
    /// Writes one line of human text.
    pub fn line(&mut self, text: impl AsRef<str>) -> io::Result<()> {
        self.out.write_all(text.as_ref().as_bytes())?;
        self.out.write_all(b"\n")
    }

    /// Writes text as it is, flushing it at once (streamed output).
    pub fn write_str(&mut self, text: &str) -> io::Result<()> {
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    /// Writes one JSON Lines record: `value`'s fields beside `"type": kind`.
    pub fn json(&mut self, kind: &str, value: &impl Serialize) -> io::Result<()> {
        let line =
            serde_json::to_string(&Tagged { kind, inner: value }).map_err(io::Error::other)?;
        self.line(line)
    }

    /// Flushes buffered output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Formats a byte count with binary units (`1.5 MiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// Renders rows as left-aligned columns separated by two spaces.
pub fn table(rows: &[Vec<String>]) -> Vec<String> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c + 1 == r.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// Why generation stopped, in words, from its stable name (`eos`, `max_tokens`,
/// `context_full`): the same sentence in `generate`'s and `run local`'s summaries.
pub fn stop_words(stop: &impl serde::Serialize) -> String {
    let name = serde_json::to_value(stop).ok().and_then(|v| v.as_str().map(str::to_string));
    match name.as_deref() {
        Some("eos") => "the model ended its text".into(),
        Some("max_tokens") => "max tokens reached".into(),
        Some("context_full") => "the context is full".into(),
        Some(other) => other.replace('_', " "),
        None => "stopped".into(),
    }
}
