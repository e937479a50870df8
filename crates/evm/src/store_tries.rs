//! [`StoreTries`]: one state of the RocksDB store as `eth`'s [`TrieReader`] (point reads of
//! its tries, code by hash) and, where that state is one fixed block, as its [`TrieProver`]
//! (the block's root and single-key proofs), so that [`eth::AccountReader`] reads accounts
//! and slots and assembles eth_getProof answers over the store as it does over an in-memory
//! state. `eth` does not depend on the store and the store knows no account model; this
//! crate knows both, and every reader of accounts over the store goes through these impls:
//! [`crate::StoreWorld`] (revm's reads), `arbor prove --db --address` and the C ABI's
//! account calls.
//!
//! The states, one impl each:
//! - the head through `&StateDb` (the committer's thread, or a locked store): reads and
//!   proofs of one state, since no commit runs while it is borrowed;
//! - the head through a `ReadHandle` (other threads, owned or borrowed): reads only. Each
//!   read sees the newest block published when it runs, so a root and proofs taken across
//!   a commit would not agree; [`eth::AccountReader::prove`] would report them
//!   inconsistent, and nothing here offers them;
//! - one recent block through a `BlockView`: reads and proofs of that block, or
//!   [`AtError`] once it has left the window or been reverted.
//!
//! Errors are the store's own ([`StoreError`] at the head, [`AtError`] at a block), so
//! callers map them as they map every other store error. Cost: the store's calls, nothing
//! more.

use eth::{TrieProver, TrieReader};
use state::{StateReader, TrieId, H256};
use store::{AtError, BlockView, ReadHandle, StateDb, StoreError};

/// The store state `S` (`&StateDb`, `ReadHandle`, `&ReadHandle` or `BlockView`) as the
/// account model's tries (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct StoreTries<S>(pub S);

/// The head, on the committer's thread (or under the store's lock).
impl TrieReader for StoreTries<&StateDb> {
    type Error = StoreError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.get(trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.code(hash)
    }
}

impl TrieProver for StoreTries<&StateDb> {
    fn state_root(&self) -> Result<H256, StoreError> {
        Ok(self.0.head_root())
    }

    fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.0.prove(*trie, key)
    }
}

/// The head, from another thread than the committer's (reads only: see the module docs).
impl TrieReader for StoreTries<&ReadHandle> {
    type Error = StoreError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        StateReader::get(self.0, trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.code(hash)
    }
}

/// An owned read handle reads as a borrowed one.
impl TrieReader for StoreTries<ReadHandle> {
    type Error = StoreError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        StoreTries(&self.0).get(trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        StoreTries(&self.0).code(hash)
    }
}

/// A recent block.
impl TrieReader for StoreTries<BlockView<'_>> {
    type Error = AtError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, AtError> {
        self.0.get(trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, AtError> {
        self.0.code(hash)
    }
}

impl TrieProver for StoreTries<BlockView<'_>> {
    fn state_root(&self) -> Result<H256, AtError> {
        Ok(self.0.root())
    }

    fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, AtError> {
        self.0.prove(*trie, key)
    }
}
