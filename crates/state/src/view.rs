//! What a block's execution writes into ([`StateView`]), with its nested transactions and
//! commutative counters, and the shape of a block's changes ([`ChangeSet`]).

use std::collections::BTreeMap;

use crate::id::TrieId;

/// A block's changes: per trie, key → new value (`None` or empty = delete).
pub type ChangeSet = BTreeMap<TrieId, BTreeMap<Vec<u8>, Option<Vec<u8>>>>;

/// A commit or rollback without an open nested transaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// `commit` or `rollback` without an open transaction.
    #[error("no transaction is open: every commit or rollback needs a matching start")]
    NoTransaction,
}

/// What a runtime executes against: the main trie of the state being built, with its own
/// writes visible, commutative counters and nested transactions. The overlay implements
/// it, and so does each Block-STM transaction's view.
pub trait StateView {
    /// Why a read could not be answered (a storage failure, or, under Block-STM, a read
    /// that must wait for another transaction).
    type Error: std::error::Error + 'static;

    /// The value of `key`, or `None`.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;
    /// Write `value` under `key` (an empty value removes it).
    fn set(&mut self, key: &[u8], value: Vec<u8>);
    /// Remove `key`.
    fn remove(&mut self, key: &[u8]);
    /// Add `amount` to the counter under `key` (see [`apply_delta`]). Views that can defer
    /// it do so without reading the key, so transactions that only bump the same counter
    /// do not depend on each other.
    fn add_delta(&mut self, key: &[u8], amount: i64) -> Result<(), Self::Error>;
    /// Open a nested transaction.
    fn start(&mut self);
    /// Keep the innermost open transaction's writes.
    fn commit(&mut self) -> Result<(), TransactionError>;
    /// Discard the innermost open transaction's writes.
    fn rollback(&mut self) -> Result<(), TransactionError>;
}

/// A counter value after adding `amount`: counters are `u64` big-endian; an absent value
/// (or one that is not 8 bytes) counts as 0, and the sum wraps.
pub fn apply_delta(base: Option<&[u8]>, amount: i64) -> Vec<u8> {
    let n = base.and_then(|b| <[u8; 8]>::try_from(b).ok()).map_or(0, u64::from_be_bytes);
    n.wrapping_add_signed(amount).to_be_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_wrap_and_ignore_malformed_bases() {
        assert_eq!(apply_delta(None, 5), 5u64.to_be_bytes().to_vec());
        assert_eq!(apply_delta(Some(&7u64.to_be_bytes()), -2), 5u64.to_be_bytes().to_vec());
        assert_eq!(apply_delta(Some(b"short"), 1), 1u64.to_be_bytes().to_vec());
        assert_eq!(apply_delta(Some(&0u64.to_be_bytes()), -1), u64::MAX.to_be_bytes().to_vec());
    }
}
