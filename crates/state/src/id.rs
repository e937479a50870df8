//! [`TrieId`]: which trie of a state a key or node belongs to, and its on-disk prefix.

use crate::h256::H256;

/// Which trie of a state a key or node belongs to.
///
/// One state holds the main trie and, in the Ethereum model, one storage trie per account
/// (named by the account's secure key). Stores prefix flat keys and node paths with
/// [`TrieId::prefix`] so that one trie's data sits together on disk.
// Exhaustive on purpose: every variant has an on-disk prefix, so a new one is a schema
// change that must break every match rather than fall into a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrieId {
    /// The main (account) trie.
    Main,
    /// A storage trie, named by its account's secure key.
    Storage(H256),
}

impl TrieId {
    /// Length of [`TrieId::prefix`] for this id.
    pub fn prefix_len(&self) -> usize {
        match self {
            TrieId::Main => 1,
            TrieId::Storage(_) => 33,
        }
    }

    /// Append the on-disk prefix: `0x00` for the main trie, `0x01 ‖ account` for storage.
    pub fn write_prefix(&self, out: &mut Vec<u8>) {
        match self {
            TrieId::Main => out.push(0x00),
            TrieId::Storage(h) => {
                out.push(0x01);
                out.extend_from_slice(&h.0);
            }
        }
    }

    /// The on-disk prefix.
    pub fn prefix(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.prefix_len());
        self.write_prefix(&mut v);
        v
    }

    /// Split a prefixed key into its trie id and the rest; `None` if malformed.
    pub fn split(bytes: &[u8]) -> Option<(TrieId, &[u8])> {
        match bytes.first()? {
            0x00 => Some((TrieId::Main, &bytes[1..])),
            0x01 => {
                let h = H256::from_slice(bytes.get(1..33)?)?;
                Some((TrieId::Storage(h), &bytes[33..]))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_splits_back() {
        for id in [TrieId::Main, TrieId::Storage(H256([7; 32]))] {
            let mut key = id.prefix();
            assert_eq!(key.len(), id.prefix_len());
            key.extend_from_slice(b"rest");
            assert_eq!(TrieId::split(&key), Some((id, &b"rest"[..])));
        }
        assert_eq!(TrieId::split(&[0x01, 0xaa]), None);
        assert_eq!(TrieId::split(&[0x02]), None);
        assert_eq!(TrieId::split(&[]), None);
    }
}
