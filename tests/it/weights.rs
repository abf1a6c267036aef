//! Weights sources: local paths, and HTTP downloads that are cached, resumed and checked.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::scratch;
use swactor::stage::weights::{WeightsProgress, resolve, sha256_file};
use swactor::wire::reason::WeightsFailure;
use swactor::wire::{WeightRange, WeightSource};

/// A loopback HTTP server of one file, as the tests watch it.
pub struct Served {
    /// The file's URL.
    pub url: String,
    /// Connections accepted.
    pub hits: Arc<AtomicUsize>,
    /// Every request's `Range` value.
    pub ranges: Arc<Mutex<Vec<String>>>,
    /// Body bytes sent, all connections together.
    pub bytes: Arc<AtomicU64>,
}

/// A one-file HTTP server on loopback. `cut_first` makes the first response stop halfway.
pub fn serve(
    body: Vec<u8>,
    status: u16,
    cut_first: bool,
) -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let s = server(body, status, cut_first);
    (s.url, s.hits, s.ranges)
}

/// The range `a-b` or `a-` of a body of `len` bytes, as start and end (exclusive).
fn range_of(v: &str, len: usize) -> (usize, usize) {
    let (a, b) = v.split_once('-').unwrap_or((v, ""));
    let from = a.trim().parse().unwrap_or(0usize).min(len);
    let to = b.trim().parse::<usize>().map_or(len, |b| (b + 1).min(len));
    (from, to.max(from))
}

/// [`serve`], counting the bytes it sends; understands `Range: bytes=a-b` and `a-`.
pub fn server(body: Vec<u8>, status: u16, cut_first: bool) -> Served {
    server_with(body, status, cut_first, true)
}

/// [`server`]; without `partial` it ignores `Range` and sends the whole file with 200, as
/// a server without range support does.
pub fn server_with(body: Vec<u8>, status: u16, cut_first: bool, partial: bool) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/model.gguf", listener.local_addr().expect("addr"));
    let hits = Arc::new(AtomicUsize::new(0));
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let bytes = Arc::new(AtomicU64::new(0));
    let (h, r, sent) = (Arc::clone(&hits), Arc::clone(&ranges), Arc::clone(&bytes));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let n = h.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let (mut from, mut to) = (0, body.len());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("Range: bytes=") {
                    (from, to) = range_of(v, body.len());
                    r.lock().expect("lock").push(v.trim().to_string());
                }
            }
            let mut out = stream;
            if status != 200 {
                let _ = write!(out, "HTTP/1.1 {status} Nope\r\nContent-Length: 0\r\n\r\n");
                continue;
            }
            if !partial {
                (from, to) = (0, body.len());
            }
            let rest = &body[from..to];
            let head = if partial { "206 Partial Content" } else { "200 OK" };
            let _ = write!(out, "HTTP/1.1 {head}\r\nContent-Length: {}\r\n\r\n", rest.len());
            let send = if cut_first && n == 0 { &rest[..rest.len() / 2] } else { rest };
            if out.write_all(send).is_ok() {
                sent.fetch_add(send.len() as u64, Ordering::SeqCst);
            }
        }
    });
    Served { url, hits, ranges, bytes }
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
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b), ranges: vec![] };
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
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b), ranges: vec![] };
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
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b), ranges: vec![] };
    assert_eq!(
        resolve(&source, &scratch().join("wcache-404"), |_| {}).expect_err("404").reason,
        WeightsFailure::DownloadFailed
    );

    let (url, _, _) = serve(b.clone(), 200, false);
    let source =
        WeightSource::Url { url, size: b.len() as u64, sha256: "0".repeat(64), ranges: vec![] };
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
    let source = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b), ranges: vec![] };
    let err = resolve(&source, &scratch().join("wcache-tls"), |_| {}).expect_err("no TLS");
    assert_eq!(err.reason, WeightsFailure::DownloadFailed);
    assert!(!scratch().join("wcache-tls").join(format!("{}.gguf", sha(&b))).exists());
}

/// Ranges of `b` with their digests.
fn ranges_of(b: &[u8], extents: &[(u64, u64)]) -> Vec<WeightRange> {
    extents
        .iter()
        .map(|&(offset, len)| WeightRange {
            offset,
            len,
            sha256: sha(&b[offset as usize..(offset + len) as usize]),
        })
        .collect()
}

#[test]
fn a_source_with_ranges_downloads_only_them_into_a_sparse_file_at_their_offsets() {
    let b = body();
    let s = server(b.clone(), 200, false);
    let extents = [(0, 1000), (50_000, 20_000), (150_000, 5)];
    let ranges = ranges_of(&b, &extents);
    let source = WeightSource::Url { url: s.url, size: b.len() as u64, sha256: sha(&b), ranges };
    let cache = scratch().join("wcache-ranges");
    let _ = std::fs::remove_dir_all(&cache);
    let mut progress = Vec::new();
    let path = resolve(&source, &cache, |p| progress.push(p)).expect("ranges");
    let held = std::fs::read(&path).expect("read");
    assert_eq!(held.len(), b.len(), "the sparse file has the whole file's length");
    for (i, byte) in held.iter().enumerate() {
        let inside = extents.iter().any(|&(o, l)| (o..o + l).contains(&(i as u64)));
        assert_eq!(*byte, if inside { b[i] } else { 0 }, "byte {i}");
    }
    let wanted: u64 = extents.iter().map(|e| e.1).sum();
    assert_eq!(s.bytes.load(Ordering::SeqCst), wanted, "only the ranges were served");
    assert_eq!(*s.ranges.lock().expect("lock"), ["0-999", "50000-69999", "150000-150004"]);
    assert_eq!(progress.first(), Some(&WeightsProgress::Started { bytes: wanted, from: 0 }));
    assert_eq!(progress.last(), Some(&WeightsProgress::Downloaded { bytes: wanted }));
    let again = resolve(&source, &cache, |_| panic!("no second download")).expect("cached");
    assert_eq!(again, path);
    assert_eq!(s.hits.load(Ordering::SeqCst), 3);
}

#[test]
fn a_range_whose_bytes_differ_from_its_digest_is_a_checksum_mismatch_and_nothing_is_kept() {
    let b = body();
    let extents = [(0, 1000), (50_000, 20_000)];
    let ranges = ranges_of(&b, &extents);
    let mut corrupt = b.clone();
    corrupt[60_000] ^= 0xff;
    let s = server(corrupt, 200, false);
    let source = WeightSource::Url { url: s.url, size: b.len() as u64, sha256: sha(&b), ranges };
    let cache = scratch().join("wcache-ranges-corrupt");
    let _ = std::fs::remove_dir_all(&cache);
    let err = resolve(&source, &cache, |_| {}).expect_err("corrupt range");
    assert_eq!(err.reason, WeightsFailure::ChecksumMismatch, "{err}");
    assert!(err.detail.contains("50000+20000"), "names the range: {err}");
    let left: Vec<_> =
        std::fs::read_dir(&cache).expect("dir").flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "no partial file is kept: {left:?}");
}

#[test]
fn an_interrupted_sparse_download_fetches_only_the_ranges_it_does_not_hold() {
    let b = body();
    let extents = [(0, 1000), (50_000, 20_000)];
    let ranges = ranges_of(&b, &extents);
    let s = server(b.clone(), 200, false);
    let cache = scratch().join("wcache-ranges-resume");
    let _ = std::fs::remove_dir_all(&cache);
    // The first range arrived before the cut: it is served again only if it is wrong.
    let first = WeightSource::Url {
        url: s.url.clone(),
        size: b.len() as u64,
        sha256: sha(&b),
        ranges: ranges[..1].to_vec(),
    };
    let held = resolve(&first, &cache, |_| {}).expect("first range");
    let full = WeightSource::Url { url: s.url, size: b.len() as u64, sha256: sha(&b), ranges };
    let part = scratch().join("wcache-ranges-resume-part");
    let _ = std::fs::remove_dir_all(&part);
    std::fs::create_dir_all(&part).expect("dir");
    let path = resolve(&full, &part, |_| {}).expect("cold");
    // Simulate a cut: the finished file becomes a `.part` holding only the first range.
    std::fs::remove_file(&path).expect("rm");
    let part_file = path.with_extension("gguf.part");
    std::fs::copy(&held, &part_file).expect("copy");
    let before = s.bytes.load(Ordering::SeqCst);
    let mut progress = Vec::new();
    let again = resolve(&full, &part, |p| progress.push(p)).expect("resumed");
    assert_eq!(s.bytes.load(Ordering::SeqCst) - before, 20_000, "only the missing range");
    assert_eq!(progress[0], WeightsProgress::Started { bytes: 21_000, from: 1000 });
    assert_eq!(std::fs::read(again).expect("read")[50_000..70_000], b[50_000..70_000]);
}

#[test]
fn a_range_outside_the_file_is_an_invalid_range() {
    let b = body();
    let ranges = vec![WeightRange { offset: 199_000, len: 2000, sha256: "0".repeat(64) }];
    let source = WeightSource::Url {
        url: "http://127.0.0.1:9/m.gguf".into(),
        size: b.len() as u64,
        sha256: sha(&b),
        ranges,
    };
    let err = resolve(&source, &scratch().join("wcache-ranges-outside"), |_| {}).expect_err("out");
    assert_eq!(err.reason, WeightsFailure::InvalidRange);
}

/// The token ids of a run's JSON lines.
fn token_ids(lines: &[serde_json::Value]) -> Vec<u64> {
    crate::run::events(lines, "token").iter().filter_map(|v| v["id"].as_u64()).collect()
}

#[test]
fn a_three_stage_run_over_a_url_fetches_only_each_stages_ranges_and_yields_the_whole_file_tokens() {
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = crate::support::synth_model(6);
    let file = std::fs::read(&model).expect("model");
    let s = server(file.clone(), 200, false);
    let nodes = crate::run::Nodes::boot("weights-ranges-run", 3, |_| vec![]);
    let (code, whole, err) = nodes.orchestrate(&model, &["--max-tokens", "8"]).finish();
    assert_eq!(code, 0, "{err}");
    let args = ["--max-tokens", "8", "--run-id", "2", "--weights-url", &s.url];
    let (code, lines, err) = nodes.orchestrate(&model, &args).finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(token_ids(&lines), token_ids(&whole), "the same tokens as from the whole file");
    assert_eq!(token_ids(&lines).len(), 8);
    let started = crate::run::events(&lines, "weights_download_started");
    assert_eq!(started.len(), 3, "each node downloads: {started:?}");
    let size = file.len() as u64;
    let mut sum = 0;
    for e in &started {
        let bytes = e["bytes"].as_u64().expect("bytes");
        eprintln!("node {} downloads {bytes} of {size} bytes", e["node_id"]);
        assert!(
            bytes < size / 2,
            "node {} fetches only its ranges: {bytes} of {size}",
            e["node_id"]
        );
        sum += bytes;
    }
    assert_eq!(s.bytes.load(Ordering::SeqCst), sum, "the server sent exactly the nodes' ranges");
    assert_eq!(crate::run::events(&lines, "weights_downloaded").len(), 3);
    // Each node reports its download moving on, up to all of its bytes.
    for node in 1..=3u64 {
        let moving: Vec<&serde_json::Value> = crate::run::events(&lines, "weights_downloading")
            .into_iter()
            .filter(|v| v["node_id"] == node)
            .collect();
        let last = moving.last().unwrap_or_else(|| panic!("node {node} reports progress"));
        assert_eq!(last["bytes"], last["total"], "node {node}: {last}");
    }
}

#[test]
fn a_run_over_a_url_whose_served_range_is_corrupt_faults_typed_with_checksum_mismatch() {
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = crate::support::synth_model(6);
    let mut file = std::fs::read(&model).expect("model");
    let middle = file.len() / 2;
    file[middle] ^= 0x55; // inside the middle blocks' tensor data
    let s = server(file, 200, false);
    let nodes = crate::run::Nodes::boot("weights-ranges-corrupt", 3, |_| vec![]);
    let (code, lines, err) =
        nodes.orchestrate(&model, &["--max-tokens", "4", "--weights-url", &s.url]).finish();
    assert_eq!(code, 7, "{err}");
    let faulted = crate::run::events(&lines, "run_faulted");
    assert_eq!(faulted.len(), 1, "{lines:?}");
    assert_eq!(faulted[0]["reason"], "weights.checksum_mismatch", "{}", faulted[0]);
    assert_eq!(faulted[0]["component"], "weights");
    assert!(token_ids(&lines).is_empty(), "no token from a corrupt stage");
}

/// Runs `swactor cache <args>`; returns the exit code and stdout.
fn cache_cmd(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(crate::run::exe())
        .arg("cache")
        .args(args)
        .output()
        .expect("swactor cache");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn cache_ls_lists_whole_sparse_and_partial_downloads_and_cache_clear_removes_only_them() {
    let b = body();
    let cache = scratch().join("wcache-cli");
    let _ = std::fs::remove_dir_all(&cache);
    let s = server(b.clone(), 200, false);
    let whole = WeightSource::Url {
        url: s.url.clone(),
        size: b.len() as u64,
        sha256: sha(&b),
        ranges: vec![],
    };
    resolve(&whole, &cache, |_| {}).expect("whole");
    let other: Vec<u8> = b.iter().map(|x| x ^ 1).collect();
    let s2 = server(other.clone(), 200, false);
    let ranges = ranges_of(&other, &[(0, 1000)]);
    let sparse = WeightSource::Url {
        url: s2.url.clone(),
        size: b.len() as u64,
        sha256: sha(&other),
        ranges,
    };
    resolve(&sparse, &cache, |_| {}).expect("sparse");
    std::fs::write(cache.join(format!("{}.gguf.part", "c".repeat(64))), b"half").expect("part");
    std::fs::write(cache.join("notes.txt"), b"mine").expect("foreign file");
    let dir = cache.to_str().expect("utf8");

    let (code, stdout) = cache_cmd(&["ls", "--json", "--cache", dir]);
    assert_eq!(code, 0, "{stdout}");
    let entries = json_lines(&stdout);
    assert_eq!(entries.len(), 3, "{stdout}");
    assert!(entries.iter().all(|e| e["type"] == "cache_entry"), "{stdout}");
    let find = |sha: &str| entries.iter().find(|e| e["sha256"] == sha).expect("listed").clone();
    let w = find(&sha(&b));
    assert_eq!((w["kind"].as_str(), w["complete"].as_bool()), (Some("whole"), Some(true)));
    assert_eq!((w["url"].as_str(), w["size"].as_u64()), (Some(&s.url[..]), Some(b.len() as u64)));
    let r = find(&sha(&other));
    assert_eq!((r["kind"].as_str(), r["url"].as_str()), (Some("ranges"), Some(&s2.url[..])));
    assert_eq!(r["ranges"], serde_json::json!([[0, 1000]]));
    assert_eq!(find(&"c".repeat(64))["complete"], false);

    let (code, text) = cache_cmd(&["ls", "--cache", dir]);
    assert_eq!(code, 0);
    assert!(text.contains("partial") && text.contains(&s.url), "{text}");

    let (code, stdout) = cache_cmd(&["clear", "--json", "--cache", dir]);
    assert_eq!(code, 0, "{stdout}");
    let cleared = json_lines(&stdout);
    assert_eq!(cleared[0]["type"], "cache_cleared");
    assert_eq!(cleared[0]["removed"].as_array().map(Vec::len), Some(5), "{stdout}");
    let left: Vec<String> = std::fs::read_dir(&cache)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["notes.txt"], "a file not the cache's is never touched");
    assert_eq!(cache_cmd(&["ls", "--json", "--cache", dir]), (0, String::new()));
}

#[test]
fn cache_commands_on_a_path_that_is_not_a_directory_fail_typed_and_touch_nothing() {
    let file = scratch().join("wcache-not-a-dir");
    std::fs::write(&file, b"keep me").expect("write");
    for cmd in ["ls", "clear"] {
        let (code, stdout) = cache_cmd(&[cmd, "--json", "--cache", file.to_str().expect("utf8")]);
        assert_eq!(code, 3, "{stdout}");
        let err = json_lines(&stdout).into_iter().find(|v| v["type"] == "error").expect("error");
        assert_eq!(err["reason"], "cache_not_a_directory", "{stdout}");
    }
    assert_eq!(std::fs::read(&file).expect("read"), b"keep me");
}

#[test]
fn a_symlinked_cache_directory_is_listed_and_cleared_and_a_link_inside_it_is_never_touched() {
    let b = body();
    let base = scratch().join("wcache-linked");
    let _ = std::fs::remove_dir_all(&base);
    let (real, outside) = (base.join("real"), base.join("outside"));
    std::fs::create_dir_all(&outside).expect("outside");
    let s = server(b.clone(), 200, false);
    let whole =
        WeightSource::Url { url: s.url, size: b.len() as u64, sha256: sha(&b), ranges: vec![] };
    resolve(&whole, &real, |_| {}).expect("whole");
    // A file outside the cache, linked from inside it under a cached file's name.
    let precious = outside.join("precious.gguf");
    std::fs::write(&precious, b"keep").expect("write");
    let alias = real.join(format!("{}.gguf", "d".repeat(64)));
    std::os::unix::fs::symlink(&precious, &alias).expect("link inside");
    let link = base.join("link");
    std::os::unix::fs::symlink(&real, &link).expect("link to the cache");
    let dir = link.to_str().expect("utf8");

    let (code, stdout) = cache_cmd(&["ls", "--json", "--cache", dir]);
    assert_eq!(code, 0, "{stdout}");
    let entries = json_lines(&stdout);
    assert_eq!(entries.len(), 1, "the link inside is not listed: {stdout}");
    assert_eq!(entries[0]["sha256"], sha(&b));
    let (code, stdout) = cache_cmd(&["clear", "--json", "--cache", dir]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(json_lines(&stdout)[0]["removed"].as_array().map(Vec::len), Some(2), "{stdout}");
    assert!(std::fs::symlink_metadata(&alias).is_ok(), "the link inside is left");
    assert_eq!(std::fs::read(&precious).expect("read"), b"keep", "nothing outside is touched");
    assert!(std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()));

    let dangling = base.join("dangling");
    std::os::unix::fs::symlink(base.join("nowhere"), &dangling).expect("link to nothing");
    let (code, stdout) = cache_cmd(&["ls", "--json", "--cache", dangling.to_str().expect("utf8")]);
    assert_eq!(code, 3, "{stdout}");
    assert!(stdout.contains("cache_not_a_directory"), "{stdout}");
}

/// A loopback server that answers each request path in `routes` with `code` and a
/// `Location`; returns its address (`http://127.0.0.1:PORT`) and the requests it had.
fn redirector(routes: Vec<(&'static str, u16, String)>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            h.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
            }
            let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
            let mut out = stream;
            match routes.iter().find(|(p, ..)| *p == path) {
                Some((_, code, to)) => {
                    let _ = write!(
                        out,
                        "HTTP/1.1 {code} Moved\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n"
                    );
                }
                None => {
                    let _ = write!(out, "HTTP/1.1 404 Nope\r\nContent-Length: 0\r\n\r\n");
                }
            }
        }
    });
    (base, hits)
}

#[test]
fn a_url_that_redirects_relatively_then_absolutely_is_followed_to_the_file() {
    let b = body();
    let s = server(b.clone(), 200, false);
    // As a Hugging Face `resolve/` URL: a relative hop on the first host, then another host.
    let (base, hops) = redirector(vec![
        ("/resolve/main/model.gguf", 302, "../files/model.gguf".to_string()),
        ("/resolve/files/model.gguf", 307, s.url.clone()),
    ]);
    let url = format!("{base}/resolve/main/model.gguf");
    let whole = WeightSource::Url {
        url: url.clone(),
        size: b.len() as u64,
        sha256: sha(&b),
        ranges: vec![],
    };
    let path = resolve(&whole, &scratch().join("wcache-redirect"), |_| {}).expect("followed");
    assert_eq!(std::fs::read(path).expect("read"), b);
    assert_eq!(hops.load(Ordering::SeqCst), 2);
    let ranges = ranges_of(&b, &[(0, 1000), (90_000, 5000)]);
    let sparse = WeightSource::Url { url, size: b.len() as u64, sha256: sha(&b), ranges };
    resolve(&sparse, &scratch().join("wcache-redirect-ranges"), |_| {}).expect("ranges followed");
    assert_eq!(s.ranges.lock().expect("lock")[1..], ["0-999", "90000-94999"]);

    let (looping, _) = redirector(vec![("/m.gguf", 301, "/m.gguf".to_string())]);
    let endless = WeightSource::Url {
        url: format!("{looping}/m.gguf"),
        size: b.len() as u64,
        sha256: sha(&b),
        ranges: vec![],
    };
    let err = resolve(&endless, &scratch().join("wcache-redirect-loop"), |_| {}).expect_err("loop");
    assert_eq!(err.reason, WeightsFailure::DownloadFailed);
    assert!(err.detail.contains("redirects"), "{}", err.detail);
}

#[test]
fn a_server_without_range_support_is_read_once_for_every_range() {
    let b = body();
    let s = server_with(b.clone(), 200, false, false);
    let ranges = ranges_of(&b, &[(150_000, 5000), (0, 1000), (40_000, 2000)]);
    let source = WeightSource::Url { url: s.url, size: b.len() as u64, sha256: sha(&b), ranges };
    let mut progress = Vec::new();
    let path = resolve(&source, &scratch().join("wcache-no-ranges"), |p| progress.push(p))
        .expect("ranges from one response");
    assert_eq!(s.hits.load(Ordering::SeqCst), 1, "one request for three ranges");
    let got = std::fs::read(&path).expect("read");
    for (offset, len) in [(0, 1000), (40_000, 2000), (150_000, 5000)] {
        assert_eq!(got[offset..offset + len], b[offset..offset + len], "bytes at {offset}");
    }
    assert_eq!(progress.last(), Some(&WeightsProgress::Downloaded { bytes: 8000 }));

    // A corrupt range in such a response is still named and nothing is kept.
    let mut bad = b.clone();
    bad[40_500] ^= 0xff;
    let s = server_with(bad, 200, false, false);
    let ranges = ranges_of(&b, &[(0, 1000), (40_000, 2000)]);
    let source = WeightSource::Url { url: s.url, size: b.len() as u64, sha256: sha(&b), ranges };
    let cache = scratch().join("wcache-no-ranges-bad");
    let err = resolve(&source, &cache, |_| {}).expect_err("corrupt");
    assert_eq!(err.reason, WeightsFailure::ChecksumMismatch);
    assert!(err.detail.contains("bytes 40000+2000"), "{}", err.detail);
    assert_eq!(std::fs::read_dir(&cache).expect("dir").count(), 0, "nothing kept");
}

#[test]
fn a_server_whose_weights_url_keeps_serving_wrong_bytes_backs_off_and_gives_up_typed() {
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = crate::support::synth_model(6);
    let mut file = std::fs::read(&model).expect("model");
    let middle = file.len() / 2;
    file[middle] ^= 0x55; // inside the middle blocks' tensor data
    let s = server(file, 200, false);
    let nodes = crate::run::Nodes::boot("weights-serve-give-up", 3, |_| vec![]);
    let events = scratch().join("weights-give-up-events.jsonl");
    let _ = std::fs::remove_file(&events);
    let mut cmd = std::process::Command::new(crate::run::exe());
    cmd.args(["orchestrate", "serve", "--json", "--http", "127.0.0.1:0"])
        .args(["--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0", "--window-ms", "300"])
        .args(["--pool-timeout", "30", "--max-seq-len", "256", "--weights-url", &s.url])
        .arg("--pool")
        .arg(nodes.pool_file())
        .arg("--key")
        .arg(nodes.key())
        .arg("--model")
        .arg(&model)
        .arg("--events")
        .arg(&events);
    let t0 = std::time::Instant::now();
    let (code, lines, err) = crate::run::Running::spawn(cmd).finish();
    let took = t0.elapsed();
    assert_eq!(code, 7, "{err}");
    let error = lines.iter().find(|v| v["type"] == "error").expect("an error line");
    assert_eq!(error["reason"], "weights.checksum_mismatch", "{error}");
    let text = std::fs::read_to_string(&events).expect("events");
    let faults: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "run_faulted")
        .collect();
    assert_eq!(faults.len(), 4, "four sessions, then given up: {faults:?}");
    assert!(faults.iter().all(|f| f["reason"] == "weights.checksum_mismatch"), "{faults:?}");
    // Between them, pauses of 1, 2 and 4 s.
    assert!(took >= std::time::Duration::from_secs(7), "backed off: {took:?}");
}

#[test]
fn a_second_attach_of_stage_ranges_reads_none_of_the_file_and_a_re_formation_little_of_it() {
    use swactor::planner::{Placement, PlanRequest, plan};
    use swactor::stage::ranges::{DigestMemo, attach_stage_ranges_with};
    use swactor::wire::{ActivationDType, RunId, RuntimeConfig, SamplingPolicy};
    let model = crate::support::synth_model(6);
    let bytes = std::fs::read(&model).expect("model");
    let facts = swactor::model::read_facts(&model).expect("facts");
    let pool = crate::support::pool(3);
    let url = "http://127.0.0.1:9/m.gguf".to_string();
    let source =
        WeightSource::Url { url, size: bytes.len() as u64, sha256: sha(&bytes), ranges: vec![] };
    let runtime = RuntimeConfig {
        max_seq_len: 256,
        kv_cache: Default::default(),
        activation_dtype: ActivationDType::F32,
        max_tokens: 8,
        sampling: SamplingPolicy::Greedy,
        max_sequences: 1,
        max_top_logprobs: None,
        mask_bytes: 0,
    };
    let request = |stages: u32| PlanRequest {
        run_id: RunId(1),
        model: &facts,
        source: source.clone(),
        pool: &pool,
        stages: Some(stages),
        placement: Placement::default(),
        runtime,
        prompt_tokens: 0,
        fit_context: false,
        prompt_cache_bytes: None,
        min_speedup: None,
    };
    let memo = DigestMemo::default();
    let mut first = plan(&request(3)).expect("plan");
    attach_stage_ranges_with(&mut first, &model, &memo).expect("attach");
    let read = memo.bytes_read();
    let planned: u64 = first.model.stage_ranges.iter().flatten().map(|r| r.len).sum();
    // Every stage's ranges begin with the header: hashed once, for the first that names it.
    assert!(read > 0 && read <= planned, "read {read} of {planned}");
    let mut again = plan(&request(3)).expect("plan");
    attach_stage_ranges_with(&mut again, &model, &memo).expect("attach");
    assert_eq!(memo.bytes_read(), read, "a second attach over the same file reads none of it");
    assert_eq!(again.model.stage_ranges, first.model.stage_ranges);
    // Over two stages: stage 0's ranges start where they did, so only their tail is read.
    let mut two = plan(&request(2)).expect("plan");
    attach_stage_ranges_with(&mut two, &model, &memo).expect("attach");
    let planned_two: u64 = two.model.stage_ranges.iter().flatten().map(|r| r.len).sum();
    let extra = memo.bytes_read() - read;
    let hashed_before = first.model.stage_ranges[0][0].len;
    assert_eq!(
        (two.model.stage_ranges[0][0].offset, first.model.stage_ranges[0][0].offset),
        (0, 0)
    );
    assert!(
        extra <= planned_two - hashed_before,
        "read {extra} of the {planned_two} bytes the two stages name, {hashed_before} known"
    );
    let reference = {
        let mut p = plan(&request(2)).expect("plan");
        attach_stage_ranges_with(&mut p, &model, &DigestMemo::default()).expect("attach");
        p.model.stage_ranges
    };
    assert_eq!(two.model.stage_ranges, reference, "the same digests as from scratch");
}
