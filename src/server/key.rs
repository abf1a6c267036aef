//! The API key: read from a file, compared in constant time.

use sha2::{Digest, Sha256};

/// Whether `given` is `key`, in time that does not depend on where they differ (both are
/// hashed first, so neither their lengths nor their bytes shape the comparison).
pub fn same_key(given: &str, key: &str) -> bool {
    let (a, b) = (Sha256::digest(given.as_bytes()), Sha256::digest(key.as_bytes()));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads an API key file: its first line, trimmed; an empty key is refused.
pub fn read_key(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the API key file {}: {e}", path.display()))?;
    let key = text.lines().next().unwrap_or("").trim().to_string();
    if key.is_empty() {
        return Err(format!("the API key file {} holds no key", path.display()));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_key_matches() {
        assert!(same_key("s3cret", "s3cret"));
        assert!(!same_key("s3cre", "s3cret"));
        assert!(!same_key("", "s3cret"));
        assert!(!same_key("s3cret ", "s3cret"));
    }
}
