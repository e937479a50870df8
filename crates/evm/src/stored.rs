//! [`StoreWorld`]: the account-model reads ([`WorldReader`]) over a RocksDB store, the
//! second back-end beside the in-memory [`eth::MemoryWorld`].
//!
//! Accounts, slots and code are read by [`eth::AccountReader`] over the store's tries
//! ([`StoreTries`]): an account is the main trie's leaf under `keccak(address)`, a slot the
//! leaf under `keccak(slot)` of the storage trie `Storage(keccak(address))` (absent is
//! zero), code the store's blob under its hash. The state read is the head through a
//! [`store::ReadHandle`] (other threads; each read sees the newest published block when it
//! runs) or the committer's `&StateDb`, or one recent block through a [`store::BlockView`].
//! The store keeps no block hashes: they come from a [`BlockHashes`] source the caller
//! hands in (a map, a closure, or [`NoBlockHashes`]). Leaves that do not decode are typed
//! errors naming the address and slot ([`StoreReadError`]), never a guess. Cost: one store
//! point read per account or slot (the store's caches and layers first), keccak256 of the
//! key.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use eth::{Account, AccountError, AccountReader, Address, ReadError, TrieReader};
use state::H256;
use store::{AtError, StoreError};

use crate::reader::WorldReader;
use crate::store_tries::StoreTries;

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
    /// Another failure `eth`'s account reader reports. Its account, slot and code reads
    /// report none today (its other failures are of proofs, which are not read here); a
    /// failure it learns to report arrives here, typed, rather than as a panic.
    #[error(transparent)]
    Model(Box<dyn std::error::Error + Send + Sync>),
}

impl StoreReadError {
    /// The error of a read through [`eth::AccountReader`]: the store's as they are, leaves
    /// that do not decode named by their address and slot.
    fn from_read<E>(e: ReadError<E>) -> StoreReadError
    where
        E: std::error::Error + Send + Sync + 'static,
        StoreReadError: From<E>,
    {
        match e {
            ReadError::Source(e) => e.into(),
            ReadError::Account { address, source } => StoreReadError::Account { address, source },
            ReadError::Slot { address, slot, source } => {
                StoreReadError::StorageValue { address, slot, source }
            }
            e => StoreReadError::Model(Box::new(e)),
        }
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

/// Account-model reads over a store state `S` (`&StateDb`, `ReadHandle`, `BlockView`: the
/// states [`StoreTries`] reads), with block hashes from `H` (see the module docs).
#[derive(Debug, Clone)]
pub struct StoreWorld<S, H> {
    reader: AccountReader<StoreTries<S>>,
    hashes: H,
}

impl<S, H> StoreWorld<S, H> {
    /// Reads of `state`, block hashes from `hashes`.
    pub fn new(state: S, hashes: H) -> Self {
        StoreWorld { reader: AccountReader::new(StoreTries(state)), hashes }
    }

    /// The store state read.
    pub fn state(&self) -> &S {
        &self.reader.tries().0
    }
}

impl<S, H: BlockHashes> WorldReader for StoreWorld<S, H>
where
    StoreTries<S>: TrieReader,
    StoreReadError: From<<StoreTries<S> as TrieReader>::Error>,
{
    type Error = StoreReadError;

    fn account(&self, address: &Address) -> Result<Option<Account>, StoreReadError> {
        self.reader.account(address).map_err(StoreReadError::from_read)
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, StoreReadError> {
        self.reader.storage(address, slot).map_err(StoreReadError::from_read)
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, StoreReadError> {
        self.reader.code(code_hash).map_err(StoreReadError::from_read)
    }

    fn block_hash(&self, number: u64) -> Result<Option<H256>, StoreReadError> {
        Ok(self.hashes.block_hash(number))
    }
}
