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
        match std::fs::File::open(path) {
            Ok(f) => NodeKey::read(f, path),
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

    /// Loads the key at `path`, which must exist (a key that vouches for others is never
    /// made up on the spot).
    pub fn load(path: &Path) -> Result<NodeKey, IdentityError> {
        let io = |source| IdentityError::Io { path: path.display().to_string(), source };
        std::fs::File::open(path).map_err(io).and_then(|f| NodeKey::read(f, path))
    }

    fn read(mut f: std::fs::File, path: &Path) -> Result<NodeKey, IdentityError> {
        let io = |source| IdentityError::Io { path: path.display().to_string(), source };
        let invalid = |why: &str| IdentityError::Invalid {
            path: path.display().to_string(),
            why: why.into(),
        };
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

/// What an orchestrator signs to vouch for an observer: a domain tag and the observer's
/// endpoint id, so the signature is good for that observer and nothing else.
fn delegation_message(observer: &EndpointId) -> Vec<u8> {
    let mut msg = b"swactor observer delegation v1\0".to_vec();
    msg.extend_from_slice(observer.as_bytes());
    msg
}

/// The orchestrator's delegation for `observer` (128 hex digits): a read-only session
/// opened by `observer` and carrying it is accepted by the orchestrator's nodes.
pub fn delegate_observer(orchestrator: &NodeKey, observer: &EndpointId) -> String {
    let sig = orchestrator.secret.sign(&delegation_message(observer));
    sig.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `delegation` is `orchestrator`'s signature for `observer`.
pub fn delegation_holds(
    orchestrator: &EndpointId,
    observer: &EndpointId,
    delegation: &str,
) -> bool {
    let Some(bytes) = decode_hex::<64>(delegation) else { return false };
    orchestrator.verify(&delegation_message(observer), &iroh::Signature::from_bytes(&bytes)).is_ok()
}

fn decode_hex<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let hex = hex.as_bytes();
    if hex.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delegation_holds_only_for_the_observer_and_the_orchestrator_it_names() {
        let orch = NodeKey::from_bytes(&[1; 32]);
        let observer = NodeKey::from_bytes(&[2; 32]).endpoint_id();
        let other = NodeKey::from_bytes(&[3; 32]).endpoint_id();
        let d = delegate_observer(&orch, &observer);
        assert_eq!(d.len(), 128);
        assert!(delegation_holds(&orch.endpoint_id(), &observer, &d));
        assert!(!delegation_holds(&orch.endpoint_id(), &other, &d), "another observer");
        assert!(!delegation_holds(&other, &observer, &d), "another orchestrator");
        let forged = delegate_observer(&NodeKey::from_bytes(&[3; 32]), &observer);
        assert!(!delegation_holds(&orch.endpoint_id(), &observer, &forged), "signed by another");
        for junk in ["", "zz", &d[..127], &format!("{d}00")] {
            assert!(!delegation_holds(&orch.endpoint_id(), &observer, junk), "{junk:?}");
        }
    }
}
