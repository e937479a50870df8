//! The account model in the plain RocksDB baseline of `arbor bench evm`: flattened to keys
//! with no trie and no hashing ([`plain_account_key`], [`plain_slot_key`],
//! [`plain_code_key`]; the first byte `a`, `s` or `c` keeps each kind together): an account
//! is `nonce ‖ balance ‖ code hash` (72 bytes), a slot its 32-byte value, code its bytes.
//! [`PlainWorld`] is what revm reads through there (an `evm::WorldReader`; revm's
//! `Database` is then `evm::WorldDb` over it, cached per block by revm's `CacheDB`), as
//! Arbor's engine reads through `evm::StoreWorld`. It knows no block hashes (no benchmark
//! contract asks for one). Reads fail with [`ReadError`]; a value that does not decode is
//! an error, never a guess.

use alloy_primitives::U256;
use eth::{Account, Address};
use state::H256;
use trie::EMPTY_ROOT;

use crate::common::plain_db::PlainDb;

/// Why a read of the plain state failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ReadError {
    /// The plain database's read failed.
    #[error(transparent)]
    Plain(#[from] rocksdb::Error),
    /// A plain account or slot value of the wrong size.
    #[error("a plain value of {0} bytes")]
    PlainValue(usize),
}

/// The plain key of an account.
pub(crate) fn plain_account_key(address: &Address) -> Vec<u8> {
    let mut k = Vec::with_capacity(21);
    k.push(b'a');
    k.extend_from_slice(address);
    k
}

/// The prefix of an account's plain slot keys.
pub(crate) fn plain_storage_prefix(address: &Address) -> Vec<u8> {
    let mut k = Vec::with_capacity(53);
    k.push(b's');
    k.extend_from_slice(address);
    k
}

/// The plain key of a slot.
pub(crate) fn plain_slot_key(address: &Address, slot: &H256) -> Vec<u8> {
    let mut k = plain_storage_prefix(address);
    k.extend_from_slice(&slot.0);
    k
}

/// The plain key of code.
pub(crate) fn plain_code_key(hash: &H256) -> Vec<u8> {
    let mut k = Vec::with_capacity(33);
    k.push(b'c');
    k.extend_from_slice(&hash.0);
    k
}

/// An account's plain value: nonce (8 bytes), balance (32), code hash (32), big-endian.
pub(crate) fn plain_account_value(nonce: u64, balance: &U256, code_hash: &H256) -> Vec<u8> {
    let mut v = Vec::with_capacity(72);
    v.extend_from_slice(&nonce.to_be_bytes());
    v.extend_from_slice(&balance.to_be_bytes::<32>());
    v.extend_from_slice(&code_hash.0);
    v
}

/// An account from its plain value (its storage root left empty: the plain state has
/// none).
pub(crate) fn plain_account(value: &[u8]) -> Result<Account, ReadError> {
    let v: &[u8; 72] = value.try_into().map_err(|_| ReadError::PlainValue(value.len()))?;
    let mut nonce = [0u8; 8];
    nonce.copy_from_slice(&v[..8]);
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&v[40..]);
    Ok(Account {
        nonce: u64::from_be_bytes(nonce),
        balance: U256::from_be_slice(&v[8..40]),
        storage_root: EMPTY_ROOT,
        code_hash: H256(hash),
    })
}

/// A slot from its plain value.
pub(crate) fn plain_slot(value: &[u8]) -> Result<U256, ReadError> {
    match value.len() {
        32 => Ok(U256::from_be_slice(value)),
        n => Err(ReadError::PlainValue(n)),
    }
}

/// revm's reads over the plain database.
pub(crate) struct PlainWorld<'a>(pub(crate) &'a PlainDb);

impl evm::WorldReader for PlainWorld<'_> {
    type Error = ReadError;

    fn account(&self, address: &Address) -> Result<Option<Account>, ReadError> {
        self.0.get(&plain_account_key(address))?.map(|v| plain_account(&v)).transpose()
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, ReadError> {
        match self.0.get(&plain_slot_key(address, slot))? {
            Some(v) => plain_slot(&v),
            None => Ok(U256::ZERO),
        }
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, ReadError> {
        Ok(self.0.get(&plain_code_key(code_hash))?)
    }

    fn block_hash(&self, _number: u64) -> Result<Option<H256>, ReadError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_round_trip_and_refuse_other_sizes() {
        let hash = H256([7; 32]);
        let v = plain_account_value(9, &U256::from(1234u64), &hash);
        let a = plain_account(&v).unwrap();
        assert_eq!((a.nonce, a.balance, a.code_hash), (9, U256::from(1234u64), hash));
        assert!(matches!(plain_account(&v[1..]), Err(ReadError::PlainValue(71))));
        assert_eq!(plain_slot(&[1; 32]).unwrap(), U256::from_be_bytes([1; 32]));
        assert!(plain_slot(&[1; 31]).is_err());
        let (a, b) = ([1u8; 20], [2u8; 20]);
        assert!(plain_slot_key(&a, &hash).starts_with(&plain_storage_prefix(&a)));
        assert!(!plain_slot_key(&b, &hash).starts_with(&plain_storage_prefix(&a)));
        assert_ne!(plain_account_key(&a)[0], plain_code_key(&hash)[0]);
    }
}
