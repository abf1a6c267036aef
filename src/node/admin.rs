//! The node's admin socket (`swactor edge inspect`): claiming its path without touching
//! anything but a stale socket, answering every client on its own task with a write
//! timeout, and removing the socket at shutdown only while it is still the one this node
//! created.

use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;

use super::inspect::EdgeInspect;
use crate::wire::reason::BootFault;

/// How long one admin client may take to accept its snapshot before it is dropped.
pub const ADMIN_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the admin socket's path cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Something other than a stale socket of ours is at the path; it was left untouched.
    #[error("{path} {what}; it was left untouched")]
    InUse {
        /// The path.
        path: String,
        /// What is there (`is a regular file`, `is the admin socket of a live node`, ...).
        what: String,
    },
    /// The socket could not be created.
    #[error("cannot create the admin socket {path}: {source}")]
    Bind {
        /// The path.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
}

impl ClaimError {
    /// The boot fault this failure is reported as.
    pub fn boot_fault(&self) -> BootFault {
        match self {
            ClaimError::InUse { .. } => BootFault::AdminSocketInUse,
            ClaimError::Bind { .. } => BootFault::AdminSocket,
        }
    }
}

/// The admin socket this node created. Dropping it removes the socket file, but only while
/// the path still names the very socket this node bound (same device and inode).
#[derive(Debug)]
pub struct AdminSocket {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl AdminSocket {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        if let Ok(meta) = std::fs::symlink_metadata(&self.path)
            && meta.file_type().is_socket()
            && (meta.dev(), meta.ino()) == (self.dev, self.ino)
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn describe(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_file() {
        "is a regular file"
    } else if file_type.is_dir() {
        "is a directory"
    } else if file_type.is_symlink() {
        "is a symbolic link"
    } else {
        "is not a socket"
    }
}

/// Claims `path` for the admin socket and listens on it. Nothing exists there: the socket
/// is created. A stale socket (a Unix socket of this user that nobody accepts connections
/// on) is replaced. Anything else (a file, a directory, a link, a live socket, another
/// user's socket) is refused and left untouched. Must run inside a tokio runtime.
pub fn claim(path: &Path) -> Result<(AdminSocket, UnixListener), ClaimError> {
    let shown = path.display().to_string();
    let in_use = |what: String| ClaimError::InUse { path: shown.clone(), what };
    let bind_failed = |source| ClaimError::Bind { path: shown.clone(), source };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(bind_failed(e)),
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(in_use(describe(meta.file_type()).into()));
        }
        Ok(meta) if meta.uid() != rustix::process::geteuid().as_raw() => {
            return Err(in_use("is a socket of another user".into()));
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(in_use(
                    "is the admin socket of a live node (give this node another --admin path)"
                        .into(),
                ));
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                // Stale: its node is gone. Replace it.
                std::fs::remove_file(path).or_else(|e| {
                    if e.kind() == ErrorKind::NotFound { Ok(()) } else { Err(bind_failed(e)) }
                })?;
            }
            Err(e) => return Err(in_use(format!("is a socket that cannot be probed ({e})"))),
        },
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(|e| {
        if e.kind() == ErrorKind::AddrInUse {
            in_use("was taken by another process meanwhile".into())
        } else {
            bind_failed(e)
        }
    })?;
    let meta = std::fs::symlink_metadata(path).map_err(bind_failed)?;
    let socket = AdminSocket { path: path.to_path_buf(), dev: meta.dev(), ino: meta.ino() };
    listener.set_nonblocking(true).map_err(bind_failed)?;
    let listener = UnixListener::from_std(listener).map_err(bind_failed)?;
    Ok((socket, listener))
}

/// Asks the node's loop to bring the admin view up to date; it answers once it has.
pub type Refresh = tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>;

/// How long a client waits for the node's loop to bring the view up to date before it is
/// answered with the view as it is (a loop busy for that long is itself worth seeing).
const REFRESH_WAIT: Duration = Duration::from_secs(1);

/// Answers every connection with one JSON line of `inspect`'s state, brought up to date by
/// the node's loop first (`refresh`), each answer written on its own task, so a client that
/// never reads holds up nobody else and is dropped after [`ADMIN_WRITE_TIMEOUT`].
pub async fn serve(listener: UnixListener, inspect: Arc<Mutex<EdgeInspect>>, refresh: Refresh) {
    loop {
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: keep serving once some are freed.
                eprintln!("swactor node: admin socket: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // The view is current when it is read: what the node did just before is in it.
        let (done, updated) = tokio::sync::oneshot::channel();
        if refresh.send(done).is_ok() {
            let _ = tokio::time::timeout(REFRESH_WAIT, updated).await;
        }
        let body = {
            let state = inspect.lock().unwrap_or_else(|e| e.into_inner());
            let mut body = serde_json::to_string(&*state).unwrap_or_default();
            body.push('\n');
            body
        };
        tokio::spawn(async move {
            let _ = tokio::time::timeout(ADMIN_WRITE_TIMEOUT, async {
                stream.write_all(body.as_bytes()).await?;
                stream.shutdown().await
            })
            .await;
        });
    }
}

#[cfg(test)]
mod tests;
