//! Node identity: a persistent 32-byte secret key in a 0600 file, created on first boot.
//! Its public half is the node's iroh endpoint id (64 lowercase hex digits), which is what
//! pool files name.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use iroh::{EndpointId, SecretKey};

/// Why the key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Reading or creating the file failed.
    #[error("key file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a 32-byte key, or others may read it.
    #[error("key file {path}: {why}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
}

/// A node's secret key.
#[derive(Debug, Clone)]
pub struct NodeKey {
    secret: SecretKey,
}

impl NodeKey {
    /// Loads the key at `path`, creating it (0600, from the system's random source) if
    /// the file does not exist.
    pub fn load_or_create(path: &Path) -> Result<NodeKey, IdentityError> {
        let io = |source| IdentityError::Io { path: path.display().to_string(), source };
        let invalid = |why: &str| IdentityError::Invalid {
            path: path.display().to_string(),
            why: why.into(),
        };
        match std::fs::File::open(path) {
            Ok(mut f) => {
                let meta = f.metadata().map_err(io)?;
                if meta.permissions().mode() & 0o077 != 0 {
                    return Err(invalid("is readable by others (chmod 600 it)"));
                }
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).map_err(io)?;
                let key: [u8; 32] =
                    bytes.try_into().map_err(|_| invalid("does not hold exactly 32 bytes"))?;
                Ok(NodeKey { secret: SecretKey::from_bytes(&key) })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; 32];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut r| r.read_exact(&mut key))
                    .map_err(io)?;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(io)?;
                f.write_all(&key).and_then(|()| f.sync_all()).map_err(io)?;
                Ok(NodeKey { secret: SecretKey::from_bytes(&key) })
            }
            Err(e) => Err(io(e)),
        }
    }

    /// A fresh key from the system's random source, held only in memory.
    pub fn generate() -> std::io::Result<NodeKey> {
        let mut key = [0u8; 32];
        std::fs::File::open("/dev/urandom").and_then(|mut r| r.read_exact(&mut key))?;
        Ok(NodeKey { secret: SecretKey::from_bytes(&key) })
    }

    /// A key from raw bytes (tests, fresh `run local` nodes).
    pub fn from_bytes(bytes: &[u8; 32]) -> NodeKey {
        NodeKey { secret: SecretKey::from_bytes(bytes) }
    }

    /// The secret key.
    pub fn secret(&self) -> &SecretKey {
        &self.secret
    }

    /// The endpoint id.
    pub fn endpoint_id(&self) -> EndpointId {
        self.secret.public()
    }

    /// The endpoint id as pool files write it.
    pub fn endpoint_id_hex(&self) -> String {
        self.endpoint_id().to_string()
    }
}
