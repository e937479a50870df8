//! The store as the account model reads it: `eth`'s [`TrieProver`] over a database's head
//! ([`HeadTries`]) and over one recent block ([`BlockTries`]), so that `arbor prove --db
//! --address` answers eth_getProof through [`eth::AccountReader`] as an in-memory state
//! does. (`eth` does not depend on the store; this crate knows both.)

use eth::{TrieProver, TrieReader};
use state::{TrieId, H256};
use store::{AtError, BlockView, StateDb, StoreError};

/// A database's head state.
pub(crate) struct HeadTries<'a>(pub(crate) &'a StateDb);

impl TrieReader for HeadTries<'_> {
    type Error = StoreError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.get(trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.code(hash)
    }
}

impl TrieProver for HeadTries<'_> {
    fn state_root(&self) -> Result<H256, StoreError> {
        Ok(self.0.head_root())
    }

    fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.0.prove(*trie, key)
    }
}

/// The state of one recent block.
pub(crate) struct BlockTries<'a>(pub(crate) BlockView<'a>);

impl TrieReader for BlockTries<'_> {
    type Error = AtError;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, AtError> {
        self.0.get(trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, AtError> {
        self.0.code(hash)
    }
}

impl TrieProver for BlockTries<'_> {
    fn state_root(&self) -> Result<H256, AtError> {
        Ok(self.0.root())
    }

    fn prove(&self, trie: &TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, AtError> {
        self.0.prove(*trie, key)
    }
}
