//! [`PendingWorld`]: the account-model reads ([`WorldReader`]) of the import road's
//! [`Pending`] state, the store's published state under the change sets of the blocks
//! executed but not yet committed.
//!
//! An account is the main trie's leaf under `keccak(address)`, a slot the leaf under
//! `keccak(slot)` of the account's storage trie, code the blob under its hash, block hashes
//! the keccak of the block records (headers) the store and the blocks in flight keep.
//!
//! Storage roots: a leaf a block in flight wrote carries the placeholder root its commit
//! will replace ([`eth::EthChanges::to_nested`]), so for such a leaf the root is not
//! known. Its one reader, EIP-7610's collision check ([`crate::WorldDb`]), asks only
//! whether the storage is empty, and that answer decides something only for an account
//! with no nonce and no code (any other is a collision anyway): for such an account this
//! reader answers from the storage trie itself (whether the merged range of the store and
//! the blocks in flight holds any key), giving the empty root or a non-empty stand-in;
//! any other in-flight account gets the non-empty stand-in unread. Leaves from the store
//! carry their real roots. Cost: one merged point read per account or slot; one range
//! seek more per nonce-less, code-less account a block in flight wrote.

use alloy_primitives::U256;
use chain::Pending;
use eth::{decode_storage_value, secure_key, Account, Address};
use state::{StateReader, TrieId, H256};
use trie::{EMPTY_CODE_HASH, EMPTY_ROOT};

use crate::block::NON_EMPTY_STAND_IN;
use crate::reader::WorldReader;
use crate::stored::StoreReadError;

/// Account-model reads of a [`Pending`] state (see the module docs).
pub(crate) struct PendingWorld<'a> {
    state: &'a Pending,
}

impl<'a> PendingWorld<'a> {
    pub(crate) fn new(state: &'a Pending) -> Self {
        PendingWorld { state }
    }

    /// Whether the storage trie `trie` holds any key in this state.
    fn holds_storage(&self, trie: &TrieId) -> Result<bool, StoreReadError> {
        match self.state.range(trie, &[], None)?.next() {
            None => Ok(false),
            Some(item) => item.map(|_| true).map_err(StoreReadError::from),
        }
    }
}

impl WorldReader for PendingWorld<'_> {
    type Error = StoreReadError;

    fn account(&self, address: &Address) -> Result<Option<Account>, StoreReadError> {
        let key = secure_key(address);
        let Some(leaf) = self.state.get(&TrieId::Main, &key.0)? else { return Ok(None) };
        let mut account = Account::decode(&leaf)
            .map_err(|source| StoreReadError::Account { address: *address, source })?;
        if self.state.in_flight(&TrieId::Main, &key.0) {
            // Only an account without nonce and code can collide through its storage alone;
            // any other collides anyway, so its storage is not read (see the module docs).
            let asked = account.nonce == 0 && account.code_hash == EMPTY_CODE_HASH;
            account.storage_root = match !asked || self.holds_storage(&TrieId::Storage(key))? {
                true => NON_EMPTY_STAND_IN,
                false => EMPTY_ROOT,
            };
        }
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
        Ok(self.state.code(code_hash)?)
    }

    fn block_hash(&self, number: u64) -> Result<Option<H256>, StoreReadError> {
        Ok(self.state.block_record(number)?.map(|record| trie::keccak256(&record)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chain::BlockChanges;
    use eth::{AccountModel, AccountWrite, EthChanges};
    use store::{StateDb, StoreConfig};
    use trie::EMPTY_CODE_HASH;

    use super::*;
    use crate::stored::{NoBlockHashes, StoreWorld};

    fn write(nonce: u64, cleared: bool, slots: &[(u8, u64)]) -> AccountWrite {
        AccountWrite {
            nonce,
            balance: U256::from(7u8),
            code_hash: EMPTY_CODE_HASH,
            storage_cleared: cleared,
            storage: slots.iter().map(|(s, v)| (H256([*s; 32]), U256::from(*v))).collect(),
        }
    }

    fn in_flight(number: u64, changes: &EthChanges) -> (u64, Arc<BlockChanges>) {
        (number, Arc::new(BlockChanges::Nested(changes.to_nested())))
    }

    /// Leaves a block in flight wrote without nonce and code report whether their storage
    /// trie holds a key (the EIP-7610 question), whatever placeholder root they carry, the
    /// others a non-empty stand-in; the store's leaves keep
    /// their real roots; slots and absent accounts read through the blocks in flight.
    #[test]
    fn in_flight_leaves_report_whether_their_storage_holds_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = StateDb::open(dir.path(), StoreConfig::default()).unwrap();
        let (a, b, c, d, e, f) = ([1u8; 20], [2; 20], [3; 20], [4; 20], [5; 20], [6; 20]);
        let g = [7u8; 20];
        let mut base = EthChanges::new();
        base.write_account(a, write(1, false, &[(1, 5)]));
        base.write_account(b, write(1, false, &[]));
        base.write_account(c, write(1, false, &[(2, 9), (3, 4)]));
        base.write_account(e, write(1, false, &[(4, 1)]));
        base.write_account(f, write(1, false, &[(5, 2)]));
        db.commit_nested(&base.to_nested(), &AccountModel).unwrap();

        // Block 2 in flight: a's nonce (storage untouched), c's storage cleared, d created
        // with a slot, e's only slot zeroed; block 3: d's slot zeroed again.
        let mut two = EthChanges::new();
        two.write_account(a, write(2, false, &[]));
        two.write_account(b, write(0, false, &[]));
        two.write_account(c, write(0, true, &[]));
        two.write_account(d, write(0, false, &[(6, 3)]));
        two.write_account(e, write(0, false, &[(4, 0)]));
        two.write_account(g, write(3, false, &[]));
        let mut three = EthChanges::new();
        three.write_account(d, write(0, false, &[(6, 0)]));

        let stored = StoreWorld::new(&db, NoBlockHashes);
        let f_root = stored.account(&f).unwrap().unwrap().storage_root;
        assert_ne!(f_root, EMPTY_ROOT);
        let handle = db.read_handle().unwrap();
        let pending = Pending::new(handle.clone(), vec![in_flight(2, &two)]);
        let world = PendingWorld::new(&pending);
        let root = |x: &Address| world.account(x).unwrap().unwrap().storage_root;
        assert_eq!(world.account(&a).unwrap().unwrap().nonce, 2);
        assert_ne!(root(&a), EMPTY_ROOT, "a keeps its slot");
        assert_eq!(root(&b), EMPTY_ROOT);
        assert_eq!(root(&c), EMPTY_ROOT, "c's storage was cleared");
        assert_ne!(root(&d), EMPTY_ROOT, "d was created with a slot");
        assert_eq!(root(&e), EMPTY_ROOT, "e's only slot was zeroed");
        assert_eq!(root(&f), f_root, "f is the store's, with its real root");
        // g has a nonce: a creation at it collides whatever its storage, which is not read.
        assert_eq!(root(&g), NON_EMPTY_STAND_IN);
        assert_eq!(world.storage(&a, &H256([1; 32])).unwrap(), U256::from(5u8));
        assert_eq!(world.storage(&c, &H256([2; 32])).unwrap(), U256::ZERO);
        assert_eq!(world.storage(&d, &H256([6; 32])).unwrap(), U256::from(3u8));
        assert!(world.account(&[9; 20]).unwrap().is_none());

        let pending = Pending::new(handle, vec![in_flight(2, &two), in_flight(3, &three)]);
        let world = PendingWorld::new(&pending);
        assert_eq!(world.account(&d).unwrap().unwrap().storage_root, EMPTY_ROOT);
        assert_eq!(world.storage(&d, &H256([6; 32])).unwrap(), U256::ZERO);
        assert_eq!(world.storage(&a, &H256([1; 32])).unwrap(), U256::from(5u8));
    }
}
