//! The page at `/` in a real browser: headless Chromium (Debian's package) driven over the
//! DevTools protocol loads the page from `run local --serve`, sees every stage of the pool,
//! sends a chat message and sees the answer stream in.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_websockets::{ClientBuilder, Message};

use crate::cli::smollm2;
use crate::serve::Server;

/// Chromium's executable, if installed (under CI it must be).
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    });
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI must install chromium (.ci/run does)");
        eprintln!("note: chromium is not installed; the page test is skipped");
    }
    found
}

struct Browser(Child);

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A DevTools session over one WebSocket, attached to one page (flat sessions).
struct DevTools {
    ws: tokio_websockets::WebSocketStream<tokio_websockets::MaybeTlsStream<tokio::net::TcpStream>>,
    next: u64,
    session: Option<String>,
}

impl DevTools {
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).await.expect("send");
        loop {
            let m = self.ws.next().await.expect("open").expect("message");
            let Some(text) = m.as_text() else { continue };
            let v: Value = serde_json::from_str(text).expect("json");
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `expr` in the page; its value.
    async fn eval(&mut self, expr: &str) -> Value {
        let r =
            self.call("Runtime.evaluate", json!({"expression": expr, "returnByValue": true})).await;
        assert!(r["exceptionDetails"].is_null(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits until `expr` is true in the page.
    async fn until(&mut self, expr: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.eval(expr).await != json!(true) {
            assert!(Instant::now() < deadline, "never true in the page: {expr}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[test]
fn the_page_shows_every_stage_and_streams_a_chat_answer_in_a_real_browser() {
    let Some(model) = smollm2() else { return };
    let Some(chromium) = chromium() else { return };
    let server = Server::local(&model, &[]);
    let profile = crate::support::scratch().join("chromium-profile");
    let _ = std::fs::remove_dir_all(&profile);
    let mut child = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        .args(["--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium");
    let stderr = child.stderr.take().expect("stderr");
    let _browser = Browser(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("ws://") {
                let _ = tx.send(line[at..].trim().to_string());
            }
        }
    });
    let ws_url = rx.recv_timeout(Duration::from_secs(60)).expect("DevTools listening");
    let page_url = format!("{}/", server.url);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    rt.block_on(async {
        let uri = ws_url.parse().expect("uri");
        let (ws, _) = ClientBuilder::from_uri(uri).connect().await.expect("connect");
        let mut dt = DevTools { ws, next: 0, session: None };
        let target = dt.call("Target.createTarget", json!({"url": page_url})).await;
        let attached = dt
            .call("Target.attachToTarget", json!({"targetId": target["targetId"], "flatten": true}))
            .await;
        dt.session = Some(attached["sessionId"].as_str().expect("session").to_string());
        dt.call("Runtime.enable", json!({})).await;

        // The live view: every stage with its node and layers, every node serving.
        dt.until("document.querySelectorAll('#stages tr.stage').length === 3", Duration::from_secs(30)).await;
        dt.until("document.getElementById('phase').textContent === 'serving'", Duration::from_secs(10)).await;
        let stages = dt
            .eval("[...document.querySelectorAll('#stages tr.stage')].map(r => [...r.cells].map(c => c.textContent))")
            .await;
        let stages = stages.as_array().expect("rows");
        let nodes: Vec<&str> = stages.iter().map(|r| r[1].as_str().expect("node")).collect();
        assert_eq!(nodes, ["1", "2", "3"], "{stages:?}");
        assert!(stages.iter().all(|r| r[2].as_str().is_some_and(|l| l.contains('–'))), "{stages:?}");
        // `run local`'s nodes are reached at their addresses, through no relay.
        assert!(stages.iter().all(|r| r[3] == "direct"), "{stages:?}");
        dt.until(
            "[...document.querySelectorAll('#nodes tr.node')].filter(r => r.cells[1].textContent === 'serving').length === 3",
            Duration::from_secs(10),
        )
        .await;

        // A chat message: the answer streams into its bubble, growing as it comes.
        dt.eval(
            "window.__lengths = []; new MutationObserver(() => { const m = [...document.querySelectorAll('.msg.assistant')].pop(); \
             if (m) window.__lengths.push(m.textContent.length); }).observe(document.getElementById('messages'), \
             {subtree: true, childList: true, characterData: true}); \
             document.getElementById('prompt').value = 'Tell me a story about a dragon who learns to fly.'; \
             document.getElementById('chat').requestSubmit(); true",
        )
        .await;
        dt.until(
            "(() => { const m = [...document.querySelectorAll('.msg')].pop(); return !!m && m.dataset.state === 'done'; })()",
            Duration::from_secs(60),
        )
        .await;
        let answer = dt.eval("[...document.querySelectorAll('.msg.assistant')].pop().textContent").await;
        let answer = answer.as_str().expect("text").to_string();
        assert!(!answer.is_empty());
        let lengths = dt.eval("[...new Set(window.__lengths)].length").await;
        assert!(lengths.as_u64().is_some_and(|n| n >= 3), "the answer came in pieces: {lengths}");
        let last = dt.eval("document.getElementById('last').textContent").await;
        assert!(last.as_str().is_some_and(|t| t.contains("tokens/s")), "{last}");
        answer
    });
}
