//! `tojson` as chat templates expect it: Python's `json.dumps` (what `transformers`
//! installs), with `", "` and `": "` between items, no escaping of non-ASCII or HTML
//! characters, and `indent`, `separators`, `sort_keys` and `ensure_ascii` honoured.

use serde_json::Value;

/// How `json.dumps` was asked to write.
#[derive(Debug, Clone, Default)]
pub struct DumpOptions {
    /// Spaces per level (`None`: one line).
    pub indent: Option<String>,
    /// Between items and between a key and its value (`None`: Python's defaults).
    pub separators: Option<(String, String)>,
    /// Keys in sorted order.
    pub sort_keys: bool,
    /// Non-ASCII characters as `\uXXXX`.
    pub ensure_ascii: bool,
}

/// `value` as Python's `json.dumps` writes it with `opts`.
pub fn dumps(value: &Value, opts: &DumpOptions) -> String {
    let (item, key) = match &opts.separators {
        Some((i, k)) => (i.clone(), k.clone()),
        None if opts.indent.is_some() => (",".into(), ": ".into()),
        None => (", ".into(), ": ".into()),
    };
    let mut out = String::new();
    write(value, opts, &item, &key, 0, &mut out);
    out
}

fn newline(opts: &DumpOptions, depth: usize, out: &mut String) {
    if let Some(ind) = &opts.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn string(s: &str, ascii: bool, out: &mut String) {
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    if !ascii {
        out.push_str(&quoted);
        return;
    }
    for c in quoted.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
}

fn write(v: &Value, opts: &DumpOptions, item: &str, key: &str, depth: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => string(s, opts.ensure_ascii, out),
        Value::Array(a) if a.is_empty() => out.push_str("[]"),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                newline(opts, depth + 1, out);
                write(x, opts, item, key, depth + 1, out);
            }
            newline(opts, depth, out);
            out.push(']');
        }
        Value::Object(m) if m.is_empty() => out.push_str("{}"),
        Value::Object(m) => {
            out.push('{');
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            if opts.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                newline(opts, depth + 1, out);
                string(k, opts.ensure_ascii, out);
                out.push_str(key);
                write(x, opts, item, key, depth + 1, out);
            }
            newline(opts, depth, out);
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_written_as_pythons_json_dumps_writes_them() {
        let v = json!({"b": [1, 2.5, "é<&>"], "a": {}, "c": null, "d": true});
        assert_eq!(
            dumps(&v, &DumpOptions::default()),
            r#"{"b": [1, 2.5, "é<&>"], "a": {}, "c": null, "d": true}"#
        );
        let opts = DumpOptions { indent: Some("  ".into()), sort_keys: true, ..Default::default() };
        assert_eq!(
            dumps(&json!({"b": [1], "a": "x"}), &opts),
            "{\n  \"a\": \"x\",\n  \"b\": [\n    1\n  ]\n}"
        );
        let ascii = DumpOptions { ensure_ascii: true, ..Default::default() };
        assert_eq!(dumps(&json!("é😀\n"), &ascii), r#""\u00e9\ud83d\ude00\n""#);
    }
}
