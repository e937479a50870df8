//! The account model as a store commits it: [`AccountModel`] tells a model-agnostic store
//! that the account leaf under `keccak(address)` commits to the storage trie
//! `TrieId::Storage(keccak(address))` and how a leaf reads with a new storage root, and
//! [`EthChanges::to_nested`] turns a block's account-model changes into the trie writes,
//! cleared storage tries and code one nested commit takes.
//!
//! An account leaf handed to the store carries the empty root as a placeholder: the commit
//! computes the account's storage root (its new one when the storage changed, else the one
//! it has) and sets it in the leaf.

use std::collections::BTreeMap;

use state::{ChildRoots, LeafError, NestedChanges, TrieId, H256};
use trie::EMPTY_ROOT;

use crate::account::{secure_keys, storage_value_rlp, Account};
use crate::changes::{AccountChange, EthChanges};

/// The Ethereum account model's nesting: every 32-byte main-trie key (an account's secure
/// key) commits to the storage trie named by that key.
#[derive(Debug, Clone, Copy, Default)]
pub struct AccountModel;

impl ChildRoots for AccountModel {
    fn child_of(&self, key: &[u8]) -> Option<TrieId> {
        H256::from_slice(key).map(TrieId::Storage)
    }

    fn parent_of(&self, child: &TrieId) -> Option<Vec<u8>> {
        match child {
            TrieId::Storage(account) => Some(account.0.to_vec()),
            TrieId::Main => None,
        }
    }

    fn with_child_root(&self, key: &[u8], leaf: &[u8], root: &H256) -> Result<Vec<u8>, LeafError> {
        let mut account = decode(key, leaf)?;
        account.storage_root = *root;
        Ok(account.rlp())
    }

    fn child_root(&self, key: &[u8], leaf: &[u8]) -> Result<H256, LeafError> {
        Ok(decode(key, leaf)?.storage_root)
    }
}

fn decode(key: &[u8], leaf: &[u8]) -> Result<Account, LeafError> {
    Account::decode(leaf).map_err(|e| LeafError { key: key.to_vec(), source: Box::new(e) })
}

impl EthChanges {
    /// The changes as one nested commit takes them: account leaves (with a placeholder
    /// storage root, see the module docs) or their deletion in the main trie, slot writes
    /// `keccak(slot) → RLP(value)` (a zero value deletes) in each account's storage trie,
    /// the storage tries cleared first, and the new code.
    pub fn to_nested(&self) -> NestedChanges {
        let mut nested = NestedChanges { code: self.code().clone(), ..NestedChanges::default() };
        let mut main = BTreeMap::new();
        let keys = secure_keys(self.accounts.keys().map(|a| a.as_slice()));
        for ((_, change), key) in self.accounts.iter().zip(keys) {
            let trie = TrieId::Storage(key);
            match change {
                AccountChange::Removed => {
                    main.insert(key.0.to_vec(), None);
                    nested.cleared.insert(trie);
                }
                AccountChange::Write(w) => {
                    let account = Account {
                        nonce: w.nonce,
                        balance: w.balance,
                        storage_root: EMPTY_ROOT,
                        code_hash: w.code_hash,
                    };
                    main.insert(key.0.to_vec(), Some(account.rlp()));
                    if w.storage_cleared {
                        nested.cleared.insert(trie);
                    }
                    if w.storage.is_empty() {
                        continue;
                    }
                    let slots = nested.changes.entry(trie).or_default();
                    let keys = secure_keys(w.storage.keys().map(|slot| slot.0.as_slice()));
                    for ((_, value), key) in w.storage.iter().zip(keys) {
                        let value = (!value.is_zero()).then(|| storage_value_rlp(value));
                        slots.insert(key.0.to_vec(), value);
                    }
                }
            }
        }
        if !main.is_empty() {
            nested.changes.insert(TrieId::Main, main);
        }
        nested
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::U256;
    use trie::EMPTY_CODE_HASH;

    use super::*;
    use crate::account::secure_key;
    use crate::changes::AccountWrite;

    #[test]
    fn leaves_take_their_storage_root() {
        let model = AccountModel;
        let key = [7u8; 32];
        let account = Account { nonce: 3, balance: U256::from(9u8), ..Account::default() };
        let root = H256([5; 32]);
        let leaf = model.with_child_root(&key, &account.rlp(), &root).unwrap();
        assert_eq!(model.child_root(&key, &leaf).unwrap(), root);
        assert_eq!(Account::decode(&leaf).unwrap().nonce, 3);
        assert_eq!(model.child_of(&key), Some(TrieId::Storage(H256(key))));
        assert_eq!(model.parent_of(&TrieId::Storage(H256(key))), Some(key.to_vec()));
        assert_eq!(model.child_of(&key[..31]), None);
        let e = model.with_child_root(&key, b"not rlp", &root).unwrap_err();
        assert!(e.to_string().contains("0x0707"), "{e}");
    }

    #[test]
    fn changes_become_trie_writes() {
        let (a, b) = ([1u8; 20], [2u8; 20]);
        let mut changes = EthChanges::new();
        changes.remove_account(a);
        let storage =
            BTreeMap::from([(H256([1; 32]), U256::from(5u8)), (H256([2; 32]), U256::ZERO)]);
        let write = AccountWrite {
            nonce: 1,
            balance: U256::from(2u8),
            code_hash: EMPTY_CODE_HASH,
            storage_cleared: true,
            storage,
        };
        changes.write_account(b, write);
        let nested = changes.to_nested();
        let (ka, kb) = (secure_key(&a), secure_key(&b));
        assert_eq!(nested.changes[&TrieId::Main][&ka.0.to_vec()], None);
        let leaf = nested.changes[&TrieId::Main][&kb.0.to_vec()].clone().unwrap();
        assert_eq!(Account::decode(&leaf).unwrap().nonce, 1);
        let slots = &nested.changes[&TrieId::Storage(kb)];
        assert_eq!(slots[&secure_key(&[1; 32]).0.to_vec()], Some(vec![5]));
        assert_eq!(slots[&secure_key(&[2; 32]).0.to_vec()], None);
        assert!(nested.cleared.contains(&TrieId::Storage(ka)));
        assert!(nested.cleared.contains(&TrieId::Storage(kb)));
    }
}
