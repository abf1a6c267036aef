//! Weights for a stage: a local GGUF path on the node, or an `http://` URL downloaded once
//! into the node's cache directory, resumably (HTTP range requests), and checked against
//! the size and sha256 the plan carries. Each failure has its own
//! [`WeightsFailure`] reason. `https://` sources use TLS (rustls) checked against the
//! Mozilla root certificates (webpki-roots) and the system's certificate store.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::wire::reason::WeightsFailure;
use crate::wire::{WeightRange, WeightSource};

/// A failure to make weights available, with its stable reason.
#[derive(Debug, thiserror::Error)]
#[error("weights: {reason}: {detail}")]
pub struct WeightsError {
    /// Stable reason.
    pub reason: WeightsFailure,
    /// What exactly.
    pub detail: String,
}

fn fail(reason: WeightsFailure, detail: impl Into<String>) -> WeightsError {
    WeightsError { reason, detail: detail.into() }
}

/// Progress of a download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsProgress {
    /// The download starts (or resumes at `from`).
    Started {
        /// Expected size.
        bytes: u64,
        /// Bytes already in the partial file.
        from: u64,
    },
    /// Bytes arrived (sparse downloads report as they go): `bytes` of `total` held.
    Received {
        /// Bytes held so far.
        bytes: u64,
        /// Bytes the download needs in all.
        total: u64,
    },
    /// The file is complete and verified.
    Downloaded {
        /// Its size.
        bytes: u64,
    },
}

/// The sha256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Makes the weights available on this node; returns the local path. A URL source with
/// ranges is downloaded into a sparse file that holds only those ranges, at their offsets
/// (see [`resolve_ranges`]); without, the whole file.
pub fn resolve(
    source: &WeightSource,
    cache: &Path,
    mut progress: impl FnMut(WeightsProgress),
) -> Result<PathBuf, WeightsError> {
    match source {
        WeightSource::Local { path } => {
            let p = PathBuf::from(path);
            if p.is_file() {
                Ok(p)
            } else {
                Err(fail(
                    WeightsFailure::DownloadFailed,
                    format!("{path} is not a file on this node"),
                ))
            }
        }
        WeightSource::Url { url, size, sha256, ranges } => {
            if !is_sha256(sha256) {
                return Err(fail(
                    WeightsFailure::ChecksumMismatch,
                    "the plan's sha256 is not 64 hex digits",
                ));
            }
            std::fs::create_dir_all(cache)
                .map_err(|e| fail(WeightsFailure::DownloadFailed, e.to_string()))?;
            let done = cache.join(format!("{}.gguf", sha256.to_ascii_lowercase()));
            if done.metadata().is_ok_and(|m| m.len() == *size) {
                return Ok(done);
            }
            if !ranges.is_empty() {
                let source = CachedSource { url, size: *size, sha256 };
                return resolve_ranges(&source, ranges, cache, progress);
            }
            let part = done.with_extension("gguf.part");
            write_sidecar(&done, url, *size, sha256, None);
            let from = part.metadata().map(|m| m.len()).unwrap_or(0).min(*size);
            progress(WeightsProgress::Started { bytes: *size, from });
            download(url, &part, from, *size)?;
            let got = part.metadata().map(|m| m.len()).unwrap_or(0);
            if got != *size {
                return Err(fail(
                    WeightsFailure::SizeMismatch,
                    format!("downloaded {got} bytes, the plan says {size}"),
                ));
            }
            let digest = sha256_file(&part)
                .map_err(|e| fail(WeightsFailure::DownloadFailed, e.to_string()))?;
            if !digest.eq_ignore_ascii_case(sha256) {
                let _ = std::fs::remove_file(&part);
                let _ = std::fs::remove_file(sidecar(&done));
                return Err(fail(
                    WeightsFailure::ChecksumMismatch,
                    format!("sha256 {digest}, the plan says {sha256}"),
                ));
            }
            std::fs::rename(&part, &done)
                .map_err(|e| fail(WeightsFailure::DownloadFailed, e.to_string()))?;
            progress(WeightsProgress::Downloaded { bytes: *size });
            Ok(done)
        }
    }
}

/// Whether `s` is 64 hex digits.
fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// A byte stream to the server: plain TCP or TLS over it.
trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// Wraps `tcp` in TLS for `host` (a DNS name or an IP address), checked against the
/// Mozilla roots and the system's store.
fn tls(tcp: TcpStream, host: &str) -> Result<Box<dyn Conn>, String> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    // The system's store too (corporate proxies install their own authority there).
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: {e}"))?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(|e| e.to_string())?;
    Ok(Box::new(rustls::StreamOwned::new(conn, tcp)))
}

/// An HTTP response's status, `Content-Length`, `Location` and body.
struct Response {
    code: u16,
    length: Option<u64>,
    location: Option<String>,
    body: BufReader<Box<dyn Conn>>,
}

/// Redirects followed for one request at most (a Hugging Face `resolve/` URL takes one or
/// two).
const MAX_REDIRECTS: usize = 8;

/// Sends `GET url` with `Range: bytes=<range>` (HTTP/1.1, over TLS for `https://`),
/// following redirects (301, 302, 303, 307, 308) up to [`MAX_REDIRECTS`], and reads the
/// final status line and headers.
fn get(url: &str, range: &str) -> Result<Response, WeightsError> {
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let response = get_once(&current, range)?;
        if !matches!(response.code, 301 | 302 | 303 | 307 | 308) {
            return Ok(response);
        }
        let Some(location) = response.location else {
            return Err(fail(
                WeightsFailure::DownloadFailed,
                format!("HTTP {} without a Location for {current}", response.code),
            ));
        };
        current = redirect_target(&current, &location)?;
    }
    Err(fail(
        WeightsFailure::DownloadFailed,
        format!("more than {MAX_REDIRECTS} redirects for {url}"),
    ))
}

/// Where a redirect from `base` to `location` leads: an absolute URL, one without a scheme
/// (`//host/path`), an absolute path, or a path relative to `base`'s directory.
fn redirect_target(base: &str, location: &str) -> Result<String, WeightsError> {
    let dl = |d: String| fail(WeightsFailure::DownloadFailed, d);
    let location = location.trim();
    // A scheme (`name:` before any `/`, `?` or `#`) makes it absolute: http(s) only.
    let scheme_end = location.find(':').filter(|&i| {
        let name = &location[..i];
        name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if scheme_end.is_some() {
        crate::wire::WeightsUrl::parse(location).map_err(dl)?;
        return Ok(location.to_string());
    }
    let parsed = crate::wire::WeightsUrl::parse(base).map_err(dl)?;
    let scheme = if parsed.secure { "https" } else { "http" };
    let target = if location.starts_with("//") {
        format!("{scheme}:{location}")
    } else {
        let joined = if location.starts_with('/') {
            location.to_string()
        } else {
            let path = parsed.path.split(['?', '#']).next().unwrap_or("/");
            format!("{}{location}", &path[..path.rfind('/').map_or(0, |i| i + 1)])
        };
        format!("{scheme}://{}{}", parsed.host_header(), without_dot_segments(&joined))
    };
    crate::wire::WeightsUrl::parse(&target).map_err(dl)?;
    Ok(target)
}

/// `path` (with its query) without `.` and `..` segments (RFC 3986, 5.2.4).
fn without_dot_segments(path: &str) -> String {
    let (path, query) = match path.find('?') {
        Some(i) => path.split_at(i),
        None => (path, ""),
    };
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." | ".." => {
                if *segment == ".." {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}{query}", out.join("/"))
}

/// One `GET url` with `Range: bytes=<range>`: the status line and headers.
fn get_once(url: &str, range: &str) -> Result<Response, WeightsError> {
    let dl = |d: String| fail(WeightsFailure::DownloadFailed, d);
    let parsed = crate::wire::WeightsUrl::parse(url).map_err(dl)?;
    let addr = parsed.connect_addr();
    let tcp = TcpStream::connect(&addr).map_err(|e| dl(format!("{addr}: {e}")))?;
    tcp.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| dl(e.to_string()))?;
    let mut stream: Box<dyn Conn> =
        if parsed.secure { tls(tcp, parsed.server_name()).map_err(dl)? } else { Box::new(tcp) };
    let (path, host) = (&parsed.path, parsed.host_header());
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nRange: bytes={range}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).map_err(|e| dl(e.to_string()))?;
    let mut body = BufReader::new(stream);
    let mut status = String::new();
    body.read_line(&mut status).map_err(|e| dl(e.to_string()))?;
    let code: u16 = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| dl(format!("bad status line {status:?}")))?;
    let (mut length, mut location) = (None, None);
    loop {
        let mut line = String::new();
        body.read_line(&mut line).map_err(|e| dl(e.to_string()))?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().ok();
            } else if k.eq_ignore_ascii_case("location") {
                location = Some(v.trim().to_string());
            }
        }
    }
    Ok(Response { code, length, location, body })
}

/// Appends `url`'s bytes from offset `from` to `part` (an HTTP/1.1 range request, over TLS
/// for `https://`).
fn download(url: &str, part: &Path, from: u64, size: u64) -> Result<(), WeightsError> {
    let dl = |d: String| fail(WeightsFailure::DownloadFailed, d);
    let Response { code, length, body, .. } = get(url, &format!("{from}-"))?;
    let append = match code {
        206 => true,
        200 => false, // no range support: start over
        416 if from == size => return Ok(()),
        other => return Err(dl(format!("HTTP {other} for {url}"))),
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(part)
        .map_err(|e| dl(e.to_string()))?;
    let limit = length.unwrap_or(size);
    let copied = std::io::copy(&mut body.take(limit), &mut file).map_err(|e| dl(e.to_string()))?;
    if length.is_some_and(|l| copied < l) {
        return Err(dl(format!("connection closed after {copied} of {limit} bytes")));
    }
    file.sync_all().map_err(|e| dl(e.to_string()))
}

/// Fetches `ranges` (sorted by offset, not overlapping) of `url` into `file` at their
/// offsets, and checks each against its digest as soon as it is written (`check`). Each
/// range is one HTTP range request; a server without range support answers the first with
/// the whole file (200), which is then read once, every range taken from it as it passes.
/// `received` is told the bytes as they arrive.
fn download_ranges(
    url: &str,
    file: &mut std::fs::File,
    ranges: &[&WeightRange],
    received: &mut dyn FnMut(u64),
    check: &mut dyn FnMut(&mut std::fs::File, &WeightRange) -> Result<(), WeightsError>,
) -> Result<(), WeightsError> {
    let dl = |d: String| fail(WeightsFailure::DownloadFailed, d);
    let mut next = 0;
    while let Some(r) = ranges.get(next) {
        let last = r.offset + r.len - 1;
        let Response { code, mut body, .. } = get(url, &format!("{}-{last}", r.offset))?;
        match code {
            206 => {
                copy_range(&mut body, file, r, received)?;
                check(file, r)?;
                next += 1;
            }
            200 => {
                // The whole file, from its first byte: every range left comes from it.
                let mut at = 0u64;
                for r in &ranges[next..] {
                    let skip = r.offset.checked_sub(at).ok_or_else(|| {
                        dl(format!("ranges overlap at offset {} for {url}", r.offset))
                    })?;
                    let skipped = std::io::copy(&mut (&mut body).take(skip), &mut std::io::sink())
                        .map_err(|e| dl(e.to_string()))?;
                    if skipped < skip {
                        return Err(dl(format!("the file ended before offset {}", r.offset)));
                    }
                    copy_range(&mut body, file, r, received)?;
                    check(file, r)?;
                    at = r.offset + r.len;
                }
                next = ranges.len();
            }
            other => return Err(dl(format!("HTTP {other} for {url} bytes {}-{last}", r.offset))),
        }
    }
    Ok(())
}

/// Copies the next `r.len` bytes of `body` into `file` at `r.offset`.
fn copy_range(
    body: &mut impl Read,
    file: &mut std::fs::File,
    r: &WeightRange,
    received: &mut dyn FnMut(u64),
) -> Result<(), WeightsError> {
    let dl = |d: String| fail(WeightsFailure::DownloadFailed, d);
    file.seek(SeekFrom::Start(r.offset)).map_err(|e| dl(e.to_string()))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut copied = 0u64;
    while copied < r.len {
        let want = usize::try_from((r.len - copied).min(buf.len() as u64)).unwrap_or(buf.len());
        let n = body.read(&mut buf[..want]).map_err(|e| dl(e.to_string()))?;
        if n == 0 {
            return Err(dl(format!("connection closed after {copied} of {} bytes", r.len)));
        }
        file.write_all(&buf[..n]).map_err(|e| dl(e.to_string()))?;
        copied += n as u64;
        received(n as u64);
    }
    Ok(())
}

/// A URL source as the cache knows it.
#[derive(Debug, Clone, Copy)]
pub struct CachedSource<'a> {
    /// The URL.
    pub url: &'a str,
    /// The whole file's size.
    pub size: u64,
    /// The whole file's sha256.
    pub sha256: &'a str,
}

/// The file beside a cached (or partial) file that says where it came from (JSON:
/// `url`, `size`, `sha256`, and the `ranges` it holds when it is sparse).
pub fn sidecar(cached: &Path) -> PathBuf {
    let mut name = cached.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// Records where `cached` comes from (best effort: the cache works without it).
pub fn write_sidecar(
    cached: &Path,
    url: &str,
    size: u64,
    sha256: &str,
    ranges: Option<&[WeightRange]>,
) {
    let ranges: Option<Vec<[u64; 2]>> =
        ranges.map(|r| r.iter().map(|r| [r.offset, r.len]).collect());
    let v = serde_json::json!({ "url": url, "size": size, "sha256": sha256, "ranges": ranges });
    let _ = std::fs::write(sidecar(cached), v.to_string());
}

/// The sha256 of `len` bytes of `file` at `offset`, lowercase hex.
fn sha256_range(file: &mut std::fs::File, offset: u64, len: u64) -> std::io::Result<String> {
    file.seek(SeekFrom::Start(offset))?;
    let mut h = Sha256::new();
    let mut take = file.take(len);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = take.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks a plan's ranges: each non-empty, inside a file of `size` bytes, with a
/// 64-hex-digit digest.
fn check_ranges(ranges: &[WeightRange], size: u64) -> Result<(), WeightsError> {
    for r in ranges {
        if r.len == 0 || r.end().is_none_or(|end| end > size) {
            return Err(fail(
                WeightsFailure::InvalidRange,
                format!("bytes {}+{} do not lie inside the {size}-byte file", r.offset, r.len),
            ));
        }
        if !is_sha256(&r.sha256) {
            return Err(fail(
                WeightsFailure::ChecksumMismatch,
                format!("the digest of bytes {}+{} is not 64 hex digits", r.offset, r.len),
            ));
        }
    }
    Ok(())
}

/// Downloads only `ranges` of `source` into a sparse file of the whole file's size (every
/// other byte absent, read as zero), each range checked against its sha256 (a mismatch is
/// `weights.checksum_mismatch` and the partial file is deleted). The file is cached as
/// `<sha256>.<ranges key>.ranges.gguf` (the key: a digest of the ranges); an interrupted
/// download keeps its `.part` file and fetches only the ranges it does not hold yet.
/// Progress counts the ranges' bytes.
pub fn resolve_ranges(
    source: &CachedSource<'_>,
    ranges: &[WeightRange],
    cache: &Path,
    mut progress: impl FnMut(WeightsProgress),
) -> Result<PathBuf, WeightsError> {
    let dl = |d: String| fail(WeightsFailure::DownloadFailed, d);
    check_ranges(ranges, source.size)?;
    let key: String = {
        let mut h = Sha256::new();
        for r in ranges {
            h.update(format!("{}+{}:{}\n", r.offset, r.len, r.sha256.to_ascii_lowercase()));
        }
        h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
    };
    let sha = source.sha256.to_ascii_lowercase();
    let done = cache.join(format!("{sha}.{key}.ranges.gguf"));
    if done.metadata().is_ok_and(|m| m.len() == source.size) {
        return Ok(done);
    }
    let part = done.with_extension("gguf.part");
    write_sidecar(&done, source.url, source.size, &sha, Some(ranges));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&part)
        .map_err(|e| dl(e.to_string()))?;
    file.set_len(source.size).map_err(|e| dl(e.to_string()))?;
    let mut missing = Vec::new();
    for r in ranges {
        let held = sha256_range(&mut file, r.offset, r.len).map_err(|e| dl(e.to_string()))?;
        if !held.eq_ignore_ascii_case(&r.sha256) {
            missing.push(r);
        }
    }
    let total: u64 = ranges.iter().map(|r| r.len).sum();
    let mut have = total - missing.iter().map(|r| r.len).sum::<u64>();
    progress(WeightsProgress::Started { bytes: total, from: have });
    // A report per 1% (at least 1 MiB), not per read.
    let step = (total / 100).max(1 << 20);
    let mut reported = have;
    missing.sort_by_key(|r| r.offset);
    let mut received = |n: u64| {
        have += n;
        if have - reported >= step || have == total {
            reported = have;
            progress(WeightsProgress::Received { bytes: have, total });
        }
    };
    let mut check = |file: &mut std::fs::File, r: &WeightRange| {
        let got = sha256_range(file, r.offset, r.len).map_err(|e| dl(e.to_string()))?;
        if got.eq_ignore_ascii_case(&r.sha256) {
            return Ok(());
        }
        Err(fail(
            WeightsFailure::ChecksumMismatch,
            format!("bytes {}+{} have sha256 {got}, the plan says {}", r.offset, r.len, r.sha256),
        ))
    };
    let fetched = download_ranges(source.url, &mut file, &missing, &mut received, &mut check);
    if let Err(e) = fetched {
        if e.reason == WeightsFailure::ChecksumMismatch {
            drop(file);
            let _ = std::fs::remove_file(&part);
            let _ = std::fs::remove_file(sidecar(&done));
        }
        return Err(e);
    }
    file.sync_all().map_err(|e| dl(e.to_string()))?;
    drop(file);
    std::fs::rename(&part, &done).map_err(|e| dl(e.to_string()))?;
    progress(WeightsProgress::Downloaded { bytes: total });
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::{redirect_target, without_dot_segments};

    #[test]
    fn a_redirect_location_resolves_against_the_url_it_came_from() {
        let base = "https://hf.example/org/model/resolve/main/m.gguf?download=1";
        let cases = [
            ("https://cdn.example/x/m.gguf?sig=1", "https://cdn.example/x/m.gguf?sig=1"),
            ("//cdn.example/m.gguf", "https://cdn.example/m.gguf"),
            ("/api/m.gguf", "https://hf.example/api/m.gguf"),
            ("other.gguf", "https://hf.example/org/model/resolve/main/other.gguf"),
            ("../../blob/m.gguf", "https://hf.example/org/model/blob/m.gguf"),
        ];
        for (location, want) in cases {
            assert_eq!(redirect_target(base, location).expect(location), want, "{location}");
        }
        assert!(redirect_target(base, "ftp://x/m.gguf").is_err(), "only http(s)");
        assert_eq!(without_dot_segments("/a/./b/../../c?q=../x"), "/c?q=../x");
        assert_eq!(without_dot_segments("/../a/.."), "/");
    }
}
