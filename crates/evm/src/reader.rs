//! [`WorldReader`]: the reads execution runs over, in the account model's terms (an
//! account by address, a storage slot, code by hash, a block hash by number), each
//! fallible with the reader's own typed error. revm's `Database` is implemented once over
//! it ([`crate::WorldDb`]); a back-end only implements these four reads. The in-memory
//! [`MemoryWorld`] is one back-end (it never fails and knows no chain, so it has no block
//! hashes); the RocksDB store is the second ([`crate::StoreWorld`], block hashes from the
//! caller).

use std::convert::Infallible;

use alloy_primitives::U256;
use eth::{Account, Address, MemoryWorld};
use state::H256;

/// Account-model reads at one state (see the module docs).
pub trait WorldReader {
    /// Why a read failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The account at `address` (its storage root included), or `None` if it does not
    /// exist.
    fn account(&self, address: &Address) -> Result<Option<Account>, Self::Error>;

    /// The value of `slot` in the storage of `address`; zero when absent.
    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, Self::Error>;

    /// The code whose keccak256 is `code_hash`, or `None` if unknown. Never asked for the
    /// empty code's hash.
    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, Self::Error>;

    /// The hash of block `number` (one of the 256 before the executing block), or `None`
    /// if this reader does not know it.
    fn block_hash(&self, number: u64) -> Result<Option<H256>, Self::Error>;
}

impl<T: WorldReader + ?Sized> WorldReader for &T {
    type Error = T::Error;

    fn account(&self, address: &Address) -> Result<Option<Account>, Self::Error> {
        (**self).account(address)
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, Self::Error> {
        (**self).storage(address, slot)
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, Self::Error> {
        (**self).code(code_hash)
    }

    fn block_hash(&self, number: u64) -> Result<Option<H256>, Self::Error> {
        (**self).block_hash(number)
    }
}

/// The in-memory world: reads never fail; it holds no block hashes.
impl WorldReader for MemoryWorld {
    type Error = Infallible;

    fn account(&self, address: &Address) -> Result<Option<Account>, Infallible> {
        Ok(MemoryWorld::account(self, address).copied())
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, Infallible> {
        Ok(MemoryWorld::storage(self, address, slot))
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, Infallible> {
        Ok(MemoryWorld::code(self, code_hash).map(<[u8]>::to_vec))
    }

    fn block_hash(&self, _number: u64) -> Result<Option<H256>, Infallible> {
        Ok(None)
    }
}
