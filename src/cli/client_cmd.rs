//! `swactor chat` and `swactor complete`: clients of the OpenAI-compatible API, so scripts
//! need no other tool. Text streams to stdout as it arrives; `--json` prints JSON lines.
//! Exit codes: 3 for a request the server refused (400 / 401 / 404 / 413), 8 when no
//! session can serve (unreachable, 429, 503), 7 when the session faulted mid-answer.

use std::io::{BufRead, IsTerminal, Write};

use color_eyre::eyre::eyre;
use serde_json::{Value, json};

use super::args::{ChatArgs, CompleteArgs, ServerFlags};
use super::exit::{CliError, ExitCode};
use super::output::Output;

/// A server and how to reach it.
struct Client {
    base: String,
    key: Option<String>,
    http: reqwest::Client,
}

/// How an answer ended.
struct Ended {
    text: String,
    finish: Value,
    usage: Value,
    timings: Value,
}

impl Client {
    fn new(flags: &ServerFlags) -> Result<Client, CliError> {
        let key = match &flags.api_key_file {
            Some(path) => Some(
                crate::server::key::read_key(path)
                    .map_err(|m| CliError::new(ExitCode::Input, "api_key_file", eyre!(m)))?,
            ),
            // Read here, at the edge.
            None => std::env::var("SWACTOR_API_KEY").ok().filter(|k| !k.is_empty()),
        };
        let base = flags.server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(super::config::run::usage(format!(
                "--server {base}: an http:// or https:// URL"
            )));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| CliError::internal(eyre!("HTTP client: {e}")))?;
        Ok(Client { base, key, http })
    }

    /// POSTs `body` to `path`; an error status becomes its exit code.
    async fn post(&self, path: &str, body: &Value) -> Result<reqwest::Response, CliError> {
        let mut r = self
            .http
            .post(format!("{}{path}", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(k) = &self.key {
            r = r.bearer_auth(k);
        }
        let r = r.send().await.map_err(|e| {
            CliError::new(
                ExitCode::PoolNotReady,
                "server_unreachable",
                eyre!("cannot reach {}: {e}", self.base),
            )
            .with_suggestion(
                "is `swactor orchestrate serve` (or `run local --serve`) running there?",
            )
        })?;
        if r.status().is_success() {
            return Ok(r);
        }
        let status = r.status().as_u16();
        let body: Value =
            serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or(Value::Null);
        Err(api_error(status, &body["error"]))
    }

    /// Streams a completion at `path`, giving each piece of text to `piece`.
    async fn stream(
        &self,
        path: &str,
        body: Value,
        mut piece: impl FnMut(&str) -> std::io::Result<()>,
    ) -> Result<Ended, CliError> {
        let mut r = self.post(path, &body).await?;
        let mut buf = Vec::new();
        let mut ended = Ended {
            text: String::new(),
            finish: Value::Null,
            usage: Value::Null,
            timings: Value::Null,
        };
        let lost = |e: reqwest::Error| {
            CliError::new(ExitCode::RunFaulted, "stream_lost", eyre!("the stream broke off: {e}"))
        };
        while let Some(chunk) = r.chunk().await.map_err(lost)? {
            buf.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buf) {
                let event: Vec<u8> = buf.drain(..end.1).collect();
                let event = String::from_utf8_lossy(&event[..end.0]).into_owned();
                for data in event.lines().filter_map(|l| l.strip_prefix("data: ")) {
                    if data == "[DONE]" {
                        return Ok(ended);
                    }
                    let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                    if !v["error"].is_null() {
                        return Err(api_error(
                            v["error"]["code"].as_u64().unwrap_or(503) as u16,
                            &v["error"],
                        ));
                    }
                    let choice = &v["choices"][0];
                    let text = choice["delta"]["content"]
                        .as_str()
                        .or(choice["text"].as_str())
                        .unwrap_or("");
                    if !text.is_empty() {
                        ended.text.push_str(text);
                        piece(text)?;
                    }
                    if !choice["finish_reason"].is_null() {
                        ended.finish = choice["finish_reason"].clone();
                    }
                    if !v["usage"].is_null() {
                        ended.usage = v["usage"].clone();
                    }
                    if !v["timings"].is_null() {
                        ended.timings = v["timings"].clone();
                    }
                }
            }
        }
        Err(CliError::new(
            ExitCode::RunFaulted,
            "stream_lost",
            eyre!("the stream ended before [DONE]"),
        ))
    }
}

/// Where the first SSE event in `buf` ends: `(its length, with its blank line)`.
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, i + 2));
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// An API error as an exit code: the request's fault (3), no session to serve it (8), or
/// a session that faulted while it ran (7).
fn api_error(status: u16, error: &Value) -> CliError {
    let kind = error["type"].as_str().unwrap_or("error");
    let reason = error["reason"].as_str().unwrap_or(kind).to_string();
    let message = error["message"].as_str().unwrap_or("the server refused the request");
    let code = match status {
        429 | 503 if reason.contains('.') => ExitCode::RunFaulted,
        429 | 503 => ExitCode::PoolNotReady,
        400..=499 => ExitCode::Input,
        _ => ExitCode::Internal,
    };
    CliError::new(code, reason, eyre!("{status} {kind}: {message}"))
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// The request fields the flags set.
fn sampling(flags: &ServerFlags, body: &mut Value) {
    if let Some(n) = flags.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if let Some(t) = flags.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(s) = flags.seed {
        body["seed"] = json!(s);
    }
    if !flags.stop.is_empty() {
        body["stop"] = json!(flags.stop);
    }
}

/// `swactor complete`.
pub fn complete(args: &CompleteArgs, out: &mut Output) -> Result<(), CliError> {
    let client = Client::new(&args.server)?;
    let prompt = if args.prompt == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut s)?;
        s
    } else {
        args.prompt.clone()
    };
    let json = args.output.json;
    let mut body = json!({"prompt": prompt, "stream": args.stream});
    if args.stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    sampling(&args.server, &mut body);
    runtime()?.block_on(async {
        if !args.stream {
            let r = client.post("/v1/completions", &body).await?;
            let text = r.text().await.map_err(|e| CliError::internal(eyre!("{e}")))?;
            let v: Value =
                serde_json::from_str(&text).map_err(|e| CliError::internal(eyre!("{e}")))?;
            if json {
                out.json("completion", &v)?;
            } else {
                out.line(v["choices"][0]["text"].as_str().unwrap_or(""))?;
            }
            return Ok(());
        }
        let ended = client
            .stream("/v1/completions", body, |t| {
                if json { out.json("text", &json!({"text": t})) } else { out.write_str(t) }
            })
            .await?;
        finish(out, json, &ended)
    })
}

/// The end of a streamed answer: a newline, or the `completion` line.
fn finish(out: &mut Output, json: bool, ended: &Ended) -> Result<(), CliError> {
    if json {
        let line = json!({"text": ended.text, "finish_reason": ended.finish, "usage": ended.usage, "timings": ended.timings});
        out.json("completion", &line)?;
    } else {
        out.line("")?;
    }
    Ok(())
}

/// `swactor chat`.
pub fn chat(args: &ChatArgs, out: &mut Output) -> Result<(), CliError> {
    let client = Client::new(&args.server)?;
    let json = args.output.json;
    let mut messages = Vec::new();
    if let Some(s) = &args.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    let interactive = std::io::stdin().is_terminal();
    runtime()?.block_on(async {
        if !interactive {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut s)?;
            messages.push(json!({"role": "user", "content": s.trim_end()}));
            let ended = exchange(&client, &args.server, &messages, json, out).await?;
            return finish(out, json, &ended);
        }
        eprintln!("swactor chat with {} (an empty line or Ctrl-D ends it)", client.base);
        loop {
            eprint!("> ");
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            if std::io::stdin().lock().read_line(&mut line)? == 0 || line.trim().is_empty() {
                return Ok(());
            }
            messages.push(json!({"role": "user", "content": line.trim_end()}));
            match exchange(&client, &args.server, &messages, json, out).await {
                Ok(ended) => {
                    finish(out, json, &ended)?;
                    messages.push(json!({"role": "assistant", "content": ended.text}));
                }
                Err(e) => {
                    messages.pop();
                    eprintln!("swactor: {:#}", e.report);
                }
            }
        }
    })
}

/// One streamed exchange of the conversation `messages`.
async fn exchange(
    client: &Client,
    flags: &ServerFlags,
    messages: &[Value],
    json: bool,
    out: &mut Output,
) -> Result<Ended, CliError> {
    let mut body =
        json!({"messages": messages, "stream": true, "stream_options": {"include_usage": true}});
    sampling(flags, &mut body);
    client
        .stream("/v1/chat/completions", body, |t| {
            if json { out.json("text", &json!({"text": t})) } else { out.write_str(t) }
        })
        .await
}
