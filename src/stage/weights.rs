//! Weights for a stage: a local GGUF path on the node, or an `http://` URL downloaded once
//! into the node's cache directory, resumably (HTTP range requests), and checked against
//! the size and sha256 the plan carries. Each failure has its own
//! [`WeightsFailure`] reason. `https://` sources use TLS (rustls) checked against the
//! Mozilla root certificates (webpki-roots) and the system's certificate store.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::wire::WeightSource;
use crate::wire::reason::WeightsFailure;

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

/// Makes the weights available on this node; returns the local path.
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
        WeightSource::Url { url, size, sha256 } => {
            if !sha256.chars().all(|c| c.is_ascii_hexdigit()) || sha256.len() != 64 {
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
            let part = done.with_extension("gguf.part");
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

/// Appends `url`'s bytes from offset `from` to `part` (an HTTP/1.1 range request, over TLS
/// for `https://`).
fn download(url: &str, part: &Path, from: u64, size: u64) -> Result<(), WeightsError> {
    let dl = |d: String| fail(WeightsFailure::DownloadFailed, d);
    let parsed = crate::wire::WeightsUrl::parse(url).map_err(dl)?;
    let addr = parsed.connect_addr();
    let tcp = TcpStream::connect(&addr).map_err(|e| dl(format!("{addr}: {e}")))?;
    tcp.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| dl(e.to_string()))?;
    let mut stream: Box<dyn Conn> =
        if parsed.secure { tls(tcp, parsed.server_name()).map_err(dl)? } else { Box::new(tcp) };
    let (path, host) = (&parsed.path, parsed.host_header());
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nRange: bytes={from}-\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).map_err(|e| dl(e.to_string()))?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).map_err(|e| dl(e.to_string()))?;
    let code: u16 = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| dl(format!("bad status line {status:?}")))?;
    let mut length: Option<u64> = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| dl(e.to_string()))?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().ok();
        }
    }
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
    let copied =
        std::io::copy(&mut reader.take(limit), &mut file).map_err(|e| dl(e.to_string()))?;
    if length.is_some_and(|l| copied < l) {
        return Err(dl(format!("connection closed after {copied} of {limit} bytes")));
    }
    file.sync_all().map_err(|e| dl(e.to_string()))
}
