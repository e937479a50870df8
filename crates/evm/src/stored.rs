//! [`StoreWorld`]: the account-model reads ([`WorldReader`]) over a RocksDB store, the
//! second back-end beside the in-memory [`eth::MemoryWorld`].
//!
//! An account is the main trie's leaf under `keccak(address)` ([`eth::Account::decode`]),
//! a slot the leaf under `keccak(slot)` of the storage trie `Storage(keccak(address))`
//! ([`eth::decode_storage_value`]; absent is zero), code the store's blob under its hash.
//! The state read is that of a [`StoreState`]: the head through a [`store::ReadHandle`]
//! (other threads; each read sees the newest published block when it runs) or the
//! committer's `&StateDb`, or one recent block through a [`store::BlockView`]. The store
//! keeps no block hashes: they come from a [`BlockHashes`] source the caller hands in (a
//! map, a closure, or [`NoBlockHashes`]). Leaves that do not decode are typed errors
//! ([`StoreReadError`]), never a guess. Cost: one store point read per account or slot
//! (the store's caches and layers first), keccak256 of the key.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use eth::{decode_storage_value, secure_key, Account, AccountError, Address};
use state::{StateReader, TrieId, H256};
use store::{AtError, BlockView, ReadHandle, StateDb, StoreError};

use crate::reader::WorldReader;

/// Why a read through a [`StoreWorld`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreReadError {
    /// The store failed (I/O, corruption, an unfinished bulk load).
    #[error("store read failed: {0}")]
    Store(#[from] StoreError),
    /// A read at a recent block failed (outside the window, reverted since).
    #[error("read at a recent block failed: {0}")]
    At(#[from] AtError),
    /// The main trie's leaf of an address is not an account.
    #[error("the account leaf of 0x{} does not decode: {source}", hex::encode(address))]
    Account {
        /// The address read.
        address: Address,
        /// What is wrong with the leaf.
        source: AccountError,
    },
    /// A storage leaf is not an RLP-encoded word.
    #[error("slot {slot} of 0x{} does not decode: {source}", hex::encode(address))]
    StorageValue {
        /// The account.
        address: Address,
        /// The slot read (not its secure key).
        slot: H256,
        /// What is wrong with the value.
        source: AccountError,
    },
}

/// One state of a store as a [`StoreWorld`] reads it: trie values and code by hash.
pub trait StoreState {
    /// The value of `key` in `trie` (`None`: absent).
    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreReadError>;

    /// The blob (contract code) stored under `hash`, if any.
    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreReadError>;
}

impl<T: StoreState + ?Sized> StoreState for &T {
    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreReadError> {
        (**self).get(trie, key)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreReadError> {
        (**self).code(hash)
    }
}

/// The head, from another thread than the committer's.
impl StoreState for ReadHandle {
    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreReadError> {
        Ok(StateReader::get(self, trie, key)?)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreReadError> {
        Ok(ReadHandle::code(self, hash)?)
    }
}

/// The head, on the committer's thread (use it as `&StateDb`).
impl StoreState for StateDb {
    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreReadError> {
        Ok(StateDb::get(self, trie, key)?)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreReadError> {
        Ok(StateDb::code(self, hash)?)
    }
}

/// A recent block.
impl StoreState for BlockView<'_> {
    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreReadError> {
        Ok(BlockView::get(self, trie, key)?)
    }

    fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreReadError> {
        Ok(BlockView::code(self, hash)?)
    }
}

/// Where a [`StoreWorld`] takes block hashes from (the store keeps none): the hash of
/// block `number`, or `None` when unknown (revm's BLOCKHASH then fails with
/// [`crate::DbError::MissingBlockHash`]).
pub trait BlockHashes {
    /// The hash of block `number`, if known.
    fn block_hash(&self, number: u64) -> Option<H256>;
}

/// No block hashes at all.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoBlockHashes;

impl BlockHashes for NoBlockHashes {
    fn block_hash(&self, _number: u64) -> Option<H256> {
        None
    }
}

/// The hashes a map holds.
impl BlockHashes for BTreeMap<u64, H256> {
    fn block_hash(&self, number: u64) -> Option<H256> {
        self.get(&number).copied()
    }
}

/// The hashes a function gives.
impl<F: Fn(u64) -> Option<H256>> BlockHashes for F {
    fn block_hash(&self, number: u64) -> Option<H256> {
        self(number)
    }
}

/// Account-model reads over a store state `S`, with block hashes from `H` (see the
/// module docs).
#[derive(Debug, Clone)]
pub struct StoreWorld<S, H> {
    state: S,
    hashes: H,
}

impl<S: StoreState, H: BlockHashes> StoreWorld<S, H> {
    /// Reads of `state`, block hashes from `hashes`.
    pub fn new(state: S, hashes: H) -> Self {
        StoreWorld { state, hashes }
    }

    /// The store state read.
    pub fn state(&self) -> &S {
        &self.state
    }
}

impl<S: StoreState, H: BlockHashes> WorldReader for StoreWorld<S, H> {
    type Error = StoreReadError;

    fn account(&self, address: &Address) -> Result<Option<Account>, StoreReadError> {
        let Some(leaf) = self.state.get(&TrieId::Main, &secure_key(address).0)? else {
            return Ok(None);
        };
        let account = Account::decode(&leaf)
            .map_err(|source| StoreReadError::Account { address: *address, source })?;
        Ok(Some(account))
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, StoreReadError> {
        let trie = TrieId::Storage(secure_key(address));
        let Some(value) = self.state.get(&trie, &secure_key(&slot.0).0)? else {
            return Ok(U256::ZERO);
        };
        decode_storage_value(&value).map_err(|source| StoreReadError::StorageValue {
            address: *address,
            slot: *slot,
            source,
        })
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, StoreReadError> {
        self.state.code(code_hash)
    }

    fn block_hash(&self, number: u64) -> Result<Option<H256>, StoreReadError> {
        Ok(self.hashes.block_hash(number))
    }
}
