//! `swactor bench serve --http`: the same session as [`super::serve::serve_run`] served
//! through the HTTP API (`run local --serve`), N concurrent streamed completions measured
//! from the client: aggregate decode tokens/s, time to first token and inter-token
//! latency, for the figures without HTTP beside them.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::serve::{Counts, PROMPTS, ServeFigure, Shape, figure_of};
use super::{BenchError, err};

/// A `run local --serve` child, stopped and reaped when dropped.
pub(super) struct Served(Child);

/// Starts `run local --serve` on `model` with `args` on a loopback port; returns the child
/// and its URL once it prints that it serves.
pub(super) fn start(
    exe: &Path,
    model: &Path,
    args: &[String],
) -> Result<(Served, String), BenchError> {
    let mut child = Command::new(exe)
        .args(["run", "local", "--serve", "--json", "--http", "127.0.0.1:0", "--model"])
        .arg(model)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let stdout = child.stdout.take().ok_or_else(|| err("no stdout"))?;
    let stderr = child.stderr.take().ok_or_else(|| err("no stderr"))?;
    let served = Served(child);
    // Its stderr is kept (the last lines) to say why, should it end before serving.
    let said = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    let keep = said.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut kept = keep.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            kept.push_back(line);
            if kept.len() > 8 {
                kept.pop_front();
            }
        }
    });
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let Some(line) = lines.next() else {
            let kept = said.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let why = kept.iter().cloned().collect::<Vec<_>>().join("\n");
            return Err(err(format!("the server ended before serving: {why}")));
        };
        let line = line.map_err(err)?;
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["type"] == "serving" {
            break v["url"].as_str().unwrap_or_default().trim_end_matches('/').to_string();
        }
    };
    // The rest of its output is not read: a thread drains it so the child never blocks.
    std::thread::spawn(move || lines.for_each(drop));
    Ok((served, url))
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One stream's token arrivals and whether it ended well.
struct Stream {
    arrivals: Vec<Instant>,
    sent: Instant,
    tokens: u64,
    ok: bool,
}

/// Serves `model` laid out as `shape` with `concurrency` slots and measures
/// `concurrency` concurrent greedy streamed completions of `tokens` tokens.
pub fn serve_http_run(
    exe: &Path,
    model: &Path,
    shape: Shape,
    concurrency: u32,
    tokens: u32,
) -> Result<ServeFigure, BenchError> {
    let mut args = shape.args();
    args.extend(["--max-sequences".into(), concurrency.to_string()]);
    args.extend(["--max-seq-len".into(), "512".into()]);
    let (served, url) = start(exe, model, &args)?;
    let (client, rt) = client_and_runtime()?;
    let streams = rt.block_on(async {
        wait_ready(&client, &url).await?;
        let calls = (0..concurrency as usize)
            .map(|i| one(&client, &url, PROMPTS[i % PROMPTS.len()], tokens));
        let streams = futures_util::future::join_all(calls).await;
        let loaded = if concurrency > 1 {
            loaded_ttft(&client, &url, concurrency, tokens).await
        } else {
            Vec::new()
        };
        Ok::<_, BenchError>((streams, loaded))
    })?;
    drop(served);
    let (streams, mut loaded) = streams;
    let mut fig = figure(&streams, concurrency, shape.stages);
    loaded.sort_by(f64::total_cmp);
    fig.ttft_loaded_ms = super::serve::quantile(&loaded, 0.5);
    Ok(fig)
}

/// Probes sent one after another while `concurrency - 1` other streams decode: each
/// probe's time to first token (ms), the latency a request meets arriving into a loaded
/// session.
async fn loaded_ttft(
    client: &reqwest::Client,
    url: &str,
    concurrency: u32,
    tokens: u32,
) -> Vec<f64> {
    let (first_tx, mut first_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let background = (1..concurrency as usize).map(|i| {
        let first_tx = first_tx.clone();
        async move {
            one_notifying(client, url, PROMPTS[i % PROMPTS.len()], tokens * 8, Some(first_tx)).await
        }
    });
    let probes = async {
        for _ in 1..concurrency {
            if first_rx.recv().await.is_none() {
                return Vec::new();
            }
        }
        let mut ttft = Vec::new();
        for i in 0..LOADED_PROBES {
            let s = one(client, url, PROMPTS[(i + 8) % PROMPTS.len()], 1).await;
            if let (true, Some(first)) = (s.ok, s.arrivals.first()) {
                ttft.push((*first - s.sent).as_secs_f64() * 1e3);
            }
        }
        ttft
    };
    // The probes end first; the background streams are cut when the server stops.
    tokio::select! {
        ttft = probes => ttft,
        _ = futures_util::future::join_all(background) => Vec::new(),
    }
}

/// Probes of [`loaded_ttft`].
const LOADED_PROBES: usize = 5;

/// An HTTP client for a loopback server and a runtime to drive it.
pub(super) fn client_and_runtime() -> Result<(reqwest::Client, tokio::runtime::Runtime), BenchError>
{
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().map_err(err)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(err)?;
    Ok((client, rt))
}

pub(super) async fn wait_ready(client: &reqwest::Client, url: &str) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{url}/health")).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(err("the server never became healthy"))
}

/// One streamed completion: the instant each token's chunk arrived.
async fn one(client: &reqwest::Client, url: &str, prompt: &str, tokens: u32) -> Stream {
    one_notifying(client, url, prompt, tokens, None).await
}

/// As [`one`], telling `first` when the first token arrived.
async fn one_notifying(
    client: &reqwest::Client,
    url: &str,
    prompt: &str,
    tokens: u32,
    mut first: Option<tokio::sync::mpsc::UnboundedSender<()>>,
) -> Stream {
    let body = json!({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": true,
                      "stream_options": {"include_usage": true}});
    let sent = Instant::now();
    let mut s = Stream { arrivals: Vec::new(), sent, tokens: 0, ok: false };
    let Ok(mut r) = client
        .post(format!("{url}/v1/completions"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
    else {
        return s;
    };
    let mut buf = String::new();
    while let Ok(Some(chunk)) = r.chunk().await {
        let now = Instant::now();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let Some(data) = event.trim().strip_prefix("data: ") else { continue };
            if data == "[DONE]" {
                s.ok = true;
                continue;
            }
            let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            if v["choices"][0]["text"].as_str().is_some_and(|t| !t.is_empty()) {
                s.arrivals.push(now);
                if let Some(tx) = first.take() {
                    let _ = tx.send(());
                }
            }
            if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
                s.tokens = n;
            }
        }
    }
    s
}

fn figure(streams: &[Stream], concurrency: u32, stages: u32) -> ServeFigure {
    let ok: Vec<&Stream> = streams.iter().filter(|s| s.ok && !s.arrivals.is_empty()).collect();
    let arrivals: Vec<&[Instant]> = ok.iter().map(|s| s.arrivals.as_slice()).collect();
    let counts = Counts {
        total: ok.iter().map(|s| s.tokens).sum(),
        after_first: ok.iter().map(|s| s.tokens.saturating_sub(1)).sum(),
        failed: (streams.len() - ok.len()) as u64,
    };
    let ttft = ok.iter().map(|s| (s.arrivals[0] - s.sent).as_secs_f64() * 1e3).collect();
    figure_of(&arrivals, counts, ttft, concurrency, stages)
}
