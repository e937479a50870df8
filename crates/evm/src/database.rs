//! [`WorldDb`]: revm's `Database` and `DatabaseRef` over any [`WorldReader`], the one
//! adapter between revm and Arbor's back-ends.
//!
//! It also remembers which accounts it served with storage, for EIP-7610's collision
//! rule ([`crate::Eip7610Journal`]): as of the first read of each, so a `WorldDb` serves
//! one state (one per transaction, or per block over a reader whose state does not move
//! under it). Accounts are handed to revm without their code (revm asks for it by hash only when it
//! runs or copies it), so reading a contract's balance costs no code read. A code hash or
//! block hash the reader does not know is a typed error ([`DbError`]), which revm passes
//! back as `EVMError::Database`: execution never continues on a guess.

use std::cell::RefCell;
use std::collections::HashSet;

use alloy_primitives::{Address as RevmAddress, B256, U256};
use revm::bytecode::Bytecode;
use revm::database_interface::{DBErrorMarker, Database, DatabaseRef};
use revm::primitives::KECCAK_EMPTY;
use revm::state::AccountInfo;
use state::H256;
use trie::EMPTY_ROOT;

use crate::reader::WorldReader;

/// Why revm's read through a [`WorldDb`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError<E: std::error::Error + 'static> {
    /// The back-end's read failed.
    #[error("state read failed: {0}")]
    Read(#[source] E),
    /// An account's code hash has no code in the back-end.
    #[error("no code is stored for code hash {0}")]
    MissingCode(H256),
    /// BLOCKHASH asked for a block the back-end has no hash of.
    #[error("the hash of block {0} is not known to this state")]
    MissingBlockHash(u64),
}

impl<E: std::error::Error + Send + Sync + 'static> DBErrorMarker for DbError<E> {}

/// revm's database over a [`WorldReader`].
#[derive(Debug, Clone)]
pub struct WorldDb<R> {
    reader: R,
    /// Accounts served with a non-empty storage root (EIP-7610's collision check).
    with_storage: RefCell<HashSet<eth::Address>>,
}

impl<R: WorldReader> WorldDb<R> {
    /// The database reading through `reader`.
    pub fn new(reader: R) -> Self {
        WorldDb { reader, with_storage: RefCell::new(HashSet::new()) }
    }

    /// Whether this database served `address` with a non-empty storage root.
    pub fn loaded_with_storage(&self, address: &RevmAddress) -> bool {
        self.with_storage.borrow().contains(&address_bytes(address))
    }

    /// The reader.
    pub fn reader(&self) -> &R {
        &self.reader
    }

    /// The reader back.
    pub fn into_reader(self) -> R {
        self.reader
    }
}

/// The 20 bytes of a revm address.
pub(crate) fn address_bytes(address: &RevmAddress) -> eth::Address {
    address.into_array()
}

impl<R: WorldReader> DatabaseRef for WorldDb<R> {
    type Error = DbError<R::Error>;

    fn basic_ref(&self, address: RevmAddress) -> Result<Option<AccountInfo>, Self::Error> {
        let bytes = address_bytes(&address);
        let account = self.reader.account(&bytes).map_err(DbError::Read)?;
        if account.is_some_and(|a| a.storage_root != EMPTY_ROOT) {
            self.with_storage.borrow_mut().insert(bytes);
        }
        Ok(account.map(|a| {
            let code_hash = B256::from(a.code_hash.0);
            // Empty code needs no read; other code is fetched by hash when revm needs it.
            let code = (code_hash == KECCAK_EMPTY).then(Bytecode::default);
            AccountInfo {
                balance: a.balance,
                nonce: a.nonce,
                code_hash,
                code,
                ..AccountInfo::default()
            }
        }))
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        if code_hash == KECCAK_EMPTY {
            return Ok(Bytecode::default());
        }
        let hash = H256(code_hash.0);
        let code = self.reader.code(&hash).map_err(DbError::Read)?;
        let code = code.ok_or(DbError::MissingCode(hash))?;
        Ok(bytecode(code))
    }

    fn storage_ref(&self, address: RevmAddress, index: U256) -> Result<U256, Self::Error> {
        let slot = H256(index.to_be_bytes::<32>());
        self.reader.storage(&address_bytes(&address), &slot).map_err(DbError::Read)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        let hash = self.reader.block_hash(number).map_err(DbError::Read)?;
        hash.map(|h| B256::from(h.0)).ok_or(DbError::MissingBlockHash(number))
    }
}

impl<R: WorldReader> Database for WorldDb<R> {
    type Error = DbError<R::Error>;

    fn basic(&mut self, address: RevmAddress) -> Result<Option<AccountInfo>, Self::Error> {
        self.basic_ref(address)
    }

    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        self.code_by_hash_ref(code_hash)
    }

    fn storage(&mut self, address: RevmAddress, index: U256) -> Result<U256, Self::Error> {
        self.storage_ref(address, index)
    }

    fn block_hash(&mut self, number: u64) -> Result<B256, Self::Error> {
        self.block_hash_ref(number)
    }
}

/// revm's bytecode of stored code: an EIP-7702 delegation when it has that form, else
/// legacy code (code in the 0xef01 space that is not a valid delegation is legacy bytes,
/// as it was before Prague).
pub(crate) fn bytecode(code: Vec<u8>) -> Bytecode {
    let bytes = alloy_primitives::Bytes::from(code);
    Bytecode::new_raw_checked(bytes.clone()).unwrap_or_else(|_| Bytecode::new_legacy(bytes))
}
