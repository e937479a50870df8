//! [`H256`]: a 32-byte value (a node hash, a root, a secure-trie key), and the hex
//! parsing it prints and reads back in.
//!
//! The seam names storage tries by a 32-byte key ([`crate::TrieId::Storage`]), so the type
//! lives here; computing hashes (keccak256, Blake2) is the trie's business and never
//! happens in this crate.

use std::fmt;

/// A 32-byte hash (a node hash, a root, a secure-trie key).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct H256(pub [u8; 32]);

impl H256 {
    /// The all-zero hash.
    pub const ZERO: H256 = H256([0u8; 32]);

    /// Borrow the bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parse `0x` + 64 hex digits (the `0x` is optional).
    pub fn from_hex(s: &str) -> Result<H256, HexError> {
        let bytes = decode_hex(s)?;
        let arr: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| HexError::Length { expected: 32, got: bytes.len() })?;
        Ok(H256(arr))
    }

    /// Copy from a slice that must be 32 bytes long.
    pub fn from_slice(s: &[u8]) -> Option<H256> {
        s.try_into().ok().map(H256)
    }
}

impl fmt::Display for H256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl fmt::Debug for H256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl AsRef<[u8]> for H256 {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A malformed hex string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HexError {
    /// The string has an odd number of hex digits.
    #[error("odd number of hex digits ({0})")]
    OddLength(usize),
    /// A character is not a hex digit.
    #[error("invalid hex character {ch:?} at position {index}")]
    InvalidChar {
        /// The offending character.
        ch: char,
        /// Its position after the optional `0x`.
        index: usize,
    },
    /// The decoded value has the wrong length.
    #[error("expected {expected} bytes, got {got}")]
    Length {
        /// Bytes required.
        expected: usize,
        /// Bytes found.
        got: usize,
    },
}

/// Decode a hex string with or without a `0x`/`0X` prefix.
pub fn decode_hex(s: &str) -> Result<Vec<u8>, HexError> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if !digits.len().is_multiple_of(2) {
        return Err(HexError::OddLength(digits.len()));
    }
    hex::decode(digits).map_err(|e| match e {
        hex::FromHexError::InvalidHexCharacter { c, index } => {
            HexError::InvalidChar { ch: c, index }
        }
        hex::FromHexError::OddLength => HexError::OddLength(digits.len()),
        hex::FromHexError::InvalidStringLength => HexError::OddLength(digits.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_errors() {
        assert_eq!(decode_hex("0xabc"), Err(HexError::OddLength(3)));
        assert!(matches!(decode_hex("zz"), Err(HexError::InvalidChar { .. })));
        assert_eq!(decode_hex("0X0aFF").unwrap(), vec![0x0a, 0xff]);
        assert!(H256::from_hex("0x00").is_err());
    }

    #[test]
    fn hex_round_trip() {
        let h = H256([0xab; 32]);
        assert_eq!(H256::from_hex(&h.to_string()), Ok(h));
        assert_eq!(format!("{h:?}"), h.to_string());
        assert_eq!(H256::from_slice(&[0xab; 31]), None);
    }
}
