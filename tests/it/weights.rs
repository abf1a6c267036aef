//! Weights sources: local paths, and HTTP downloads that are cached, resumed and checked.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::scratch;
use swactor::stage::weights::{WeightsProgress, resolve, sha256_file};
use swactor::wire::WeightSource;
use swactor::wire::reason::WeightsFailure;

/// A one-file HTTP server on loopback. `cut_first` makes the first response stop halfway.
pub fn serve(
    body: Vec<u8>,
    status: u16,
    cut_first: bool,
) -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/model.gguf", listener.local_addr().expect("addr"));
    let hits = Arc::new(AtomicUsize::new(0));
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let (h, r) = (Arc::clone(&hits), Arc::clone(&ranges));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let n = h.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut from = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("Range: bytes=") {
                    from = v.trim().trim_end_matches('-').parse().unwrap_or(0);
                    r.lock().expect("lock").push(v.trim().to_string());
                }
            }
            let mut out = stream;
            if status != 200 {
                let _ = write!(out, "HTTP/1.1 {status} Nope\r\nContent-Length: 0\r\n\r\n");
                continue;
            }
            let rest = &body[from.min(body.len())..];
            let _ = write!(
                out,
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\n\r\n",
                rest.len()
            );
            let send = if cut_first && n == 0 { &rest[..rest.len() / 2] } else { rest };
            let _ = out.write_all(send);
        }
    });
    (url, hits, ranges)
}

fn body() -> Vec<u8> {
    (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_file_digest_matches_the_in_memory_one() {
    let b = body();
    let p = scratch().join("sha-check.bin");
    std::fs::write(&p, &b).expect("write");
    assert_eq!(sha256_file(&p).expect("sha"), sha(&b));
}

#[test]
fn a_url_is_downloaded_once_checked_and_then_served_from_the_cache() {
    let b = body();
    let (url, hits, _) = serve(b.clone(), 200, false);
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b) };
    let cache = scratch().join("wcache-once");
    let mut progress = Vec::new();
    let path = resolve(&source, &cache, |p| progress.push(p)).expect("download");
    assert_eq!(std::fs::read(&path).expect("read"), b);
    assert_eq!(
        progress,
        [
            WeightsProgress::Started { bytes: b.len() as u64, from: 0 },
            WeightsProgress::Downloaded { bytes: b.len() as u64 }
        ]
    );
    let again = resolve(&source, &cache, |_| panic!("no second download")).expect("cached");
    assert_eq!(again, path);
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[test]
fn an_interrupted_download_resumes_where_it_stopped() {
    let b = body();
    let (url, hits, ranges) = serve(b.clone(), 200, true);
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b) };
    let cache = scratch().join("wcache-resume");
    let err = resolve(&source, &cache, |_| {}).expect_err("the first response is cut");
    assert_eq!(err.reason, WeightsFailure::DownloadFailed);
    let path = resolve(&source, &cache, |_| {}).expect("resumed");
    assert_eq!(std::fs::read(path).expect("read"), b);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    let ranges = ranges.lock().expect("lock").clone();
    assert_eq!(ranges[0], "0-");
    assert_eq!(ranges[1], format!("{}-", b.len() / 2), "the second request resumes");
}

#[test]
fn a_404_a_wrong_digest_and_a_missing_local_file_each_have_their_reason() {
    let b = body();
    let (url, _, _) = serve(b.clone(), 404, false);
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b) };
    assert_eq!(
        resolve(&source, &scratch().join("wcache-404"), |_| {}).expect_err("404").reason,
        WeightsFailure::DownloadFailed
    );

    let (url, _, _) = serve(b.clone(), 200, false);
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: "0".repeat(64) };
    let cache = scratch().join("wcache-sha");
    assert_eq!(
        resolve(&source, &cache, |_| {}).expect_err("digest").reason,
        WeightsFailure::ChecksumMismatch
    );
    assert_eq!(
        std::fs::read_dir(&cache).expect("dir").count(),
        0,
        "a corrupt download is not kept"
    );

    let local = WeightSource::Local { path: scratch().join("nope.gguf").display().to_string() };
    assert_eq!(
        resolve(&local, &scratch().join("wcache-local"), |_| {}).expect_err("missing").reason,
        WeightsFailure::DownloadFailed
    );
}

#[test]
fn an_https_url_speaks_tls_and_a_server_without_it_is_a_typed_download_failure() {
    let b = body();
    // A plain-HTTP server behind an https:// URL: the TLS handshake must fail, typed.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("https://{}/model.gguf", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        if let Some(Ok(mut s)) = listener.incoming().next() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b) };
    let err = resolve(&source, &scratch().join("wcache-tls"), |_| {}).expect_err("no TLS");
    assert_eq!(err.reason, WeightsFailure::DownloadFailed);
    assert!(!scratch().join("wcache-tls").join(format!("{}.gguf", sha(&b))).exists());
}
