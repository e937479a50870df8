//! [`EthChanges`]: one block's (or one transaction's) changes to an Ethereum state, in the
//! account model's own terms: per address either "removed" (self-destruct, EIP-161's
//! removal of a touched empty account) or the account's new nonce, balance and code hash,
//! with a flag "storage cleared before these writes" (self-destruct followed by
//! re-creation, or a contract created at an address that had storage) and its slot
//! writes (a zero value deletes the slot); plus the new contract code by hash.
//!
//! This is what execution hands to a commit (the in-memory [`crate::MemoryWorld`] or a
//! store): the commit computes the storage roots of the touched accounts, folds them into
//! the account leaves and commits the account trie. Invariants: a removed account carries
//! no slot writes (removal clears its storage); every code entry is keyed by the keccak256
//! of its bytes (checked by [`EthChanges::add_code`]). Merging a later change set into an
//! earlier one ([`EthChanges::merge`]) gives the change set that applying both in order
//! gives, so per-transaction changes sum to a block's.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use state::H256;
use trie::{keccak256, EMPTY_CODE_HASH};

use crate::genesis::{Address, Genesis};

/// An account's fields after a change (its storage root is the commit's to compute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountWrite {
    /// The new nonce.
    pub nonce: u64,
    /// The new balance in wei.
    pub balance: U256,
    /// keccak256 of the account's code (`EMPTY_CODE_HASH` without code).
    pub code_hash: H256,
    /// The account's storage is emptied before `storage` is applied (self-destruct and
    /// re-creation in one block, a contract created where storage was left).
    pub storage_cleared: bool,
    /// Slot → new value; a zero value removes the slot.
    pub storage: BTreeMap<H256, U256>,
}

/// What happened to one account.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccountChange {
    /// The account no longer exists: its leaf and all its storage go.
    Removed,
    /// The account exists afterwards with these fields and storage writes.
    Write(AccountWrite),
}

/// A code entry whose key is not the keccak256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("code keyed by {claimed} hashes to {actual}")]
pub struct CodeHashMismatch {
    /// The hash the code was offered under.
    pub claimed: H256,
    /// keccak256 of the bytes.
    pub actual: H256,
}

/// One block's or one transaction's Ethereum state changes (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EthChanges {
    /// Per address, what happened to it.
    pub accounts: BTreeMap<Address, AccountChange>,
    /// New contract code by its hash. Invariant: each key is keccak256 of its bytes.
    code: BTreeMap<H256, Vec<u8>>,
}

impl EthChanges {
    /// No changes.
    pub fn new() -> Self {
        Self::default()
    }

    /// The changes that create a genesis allocation from an empty world: every account
    /// written (an empty one too: a genesis account exists), its slots, its code.
    pub fn from_genesis(genesis: &Genesis) -> EthChanges {
        let mut changes = EthChanges::new();
        for (address, account) in &genesis.alloc {
            let code_hash = if account.code.is_empty() {
                EMPTY_CODE_HASH
            } else {
                changes.insert_code(account.code.clone())
            };
            let write = AccountWrite {
                nonce: account.nonce,
                balance: account.balance,
                code_hash,
                storage_cleared: false,
                storage: account.storage.clone(),
            };
            changes.write_account(*address, write);
        }
        changes
    }

    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty() && self.code.is_empty()
    }

    /// Record new contract code, keyed by its hash (computed here).
    pub fn insert_code(&mut self, code: Vec<u8>) -> H256 {
        let hash = keccak256(&code);
        self.code.insert(hash, code);
        hash
    }

    /// Record new contract code whose hash the caller already knows (an executor hashes
    /// code when it deploys it); refused unless `hash` is the keccak256 of `code`.
    pub fn add_code(&mut self, hash: H256, code: Vec<u8>) -> Result<(), CodeHashMismatch> {
        let actual = keccak256(&code);
        if actual != hash {
            return Err(CodeHashMismatch { claimed: hash, actual });
        }
        self.code.insert(hash, code);
        Ok(())
    }

    /// The new code entries, by hash.
    pub fn code(&self) -> &BTreeMap<H256, Vec<u8>> {
        &self.code
    }

    /// Mark `address` removed (dropping any writes recorded for it).
    pub fn remove_account(&mut self, address: Address) {
        self.accounts.insert(address, AccountChange::Removed);
    }

    /// Set the account at `address` (replacing any change recorded for it).
    pub fn write_account(&mut self, address: Address, write: AccountWrite) {
        self.accounts.insert(address, AccountChange::Write(write));
    }

    /// Fold `later` (changes applied after `self`) into `self`: applying the result equals
    /// applying `self` and then `later`.
    pub fn merge(&mut self, later: EthChanges) {
        self.code.extend(later.code);
        for (address, change) in later.accounts {
            let merged = match (self.accounts.remove(&address), change) {
                (_, AccountChange::Removed) => AccountChange::Removed,
                (None, AccountChange::Write(w)) => AccountChange::Write(w),
                // After a removal the storage is empty: the later writes start from nothing.
                (Some(AccountChange::Removed), AccountChange::Write(mut w)) => {
                    w.storage_cleared = true;
                    AccountChange::Write(w)
                }
                (Some(AccountChange::Write(mut earlier)), AccountChange::Write(w)) => {
                    if w.storage_cleared {
                        earlier.storage.clear();
                        earlier.storage_cleared = true;
                    }
                    earlier.storage.extend(w.storage);
                    earlier.nonce = w.nonce;
                    earlier.balance = w.balance;
                    earlier.code_hash = w.code_hash;
                    AccountChange::Write(earlier)
                }
            };
            self.accounts.insert(address, merged);
        }
    }

    /// Counts for reports: (accounts written, accounts removed, slot writes, storage
    /// clears, code entries).
    pub fn counts(&self) -> ChangeCounts {
        let mut counts = ChangeCounts { code: self.code.len(), ..ChangeCounts::default() };
        for change in self.accounts.values() {
            match change {
                AccountChange::Removed => counts.accounts_removed += 1,
                AccountChange::Write(w) => {
                    counts.accounts_written += 1;
                    counts.slots_written += w.storage.len();
                    counts.storage_clears += usize::from(w.storage_cleared);
                }
            }
        }
        counts
    }
}

/// How much an [`EthChanges`] holds (see [`EthChanges::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeCounts {
    /// Accounts with new fields.
    pub accounts_written: usize,
    /// Accounts removed.
    pub accounts_removed: usize,
    /// Slot writes (deletions included).
    pub slots_written: usize,
    /// Accounts whose storage is cleared before their writes.
    pub storage_clears: usize,
    /// New code entries.
    pub code: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(nonce: u64, cleared: bool, slots: &[(u8, u64)]) -> AccountChange {
        AccountChange::Write(AccountWrite {
            nonce,
            balance: U256::from(nonce * 10),
            code_hash: trie::EMPTY_CODE_HASH,
            storage_cleared: cleared,
            storage: slots.iter().map(|(s, v)| (H256([*s; 32]), U256::from(*v))).collect(),
        })
    }

    #[test]
    fn code_must_match_its_hash() {
        let mut c = EthChanges::new();
        let h = c.insert_code(vec![0x60, 0x00]);
        assert_eq!(h, keccak256(&[0x60, 0x00]));
        assert!(c.add_code(h, vec![0x60, 0x00]).is_ok());
        let e = c.add_code(h, vec![0x60]).unwrap_err();
        assert_eq!(e.actual, keccak256(&[0x60]));
        assert_eq!(c.code().len(), 1);
    }

    #[test]
    fn merge_keeps_the_later_fields_and_the_clears() {
        let a = [1u8; 20];
        let mut first = EthChanges::new();
        first.accounts.insert(a, write(1, false, &[(1, 1), (2, 2)]));
        let mut second = EthChanges::new();
        second.accounts.insert(a, write(2, false, &[(2, 0), (3, 3)]));
        first.merge(second);
        assert_eq!(first.accounts[&a], write(2, false, &[(1, 1), (2, 0), (3, 3)]));

        let mut cleared = EthChanges::new();
        cleared.accounts.insert(a, write(3, true, &[(4, 4)]));
        first.merge(cleared);
        assert_eq!(first.accounts[&a], write(3, true, &[(4, 4)]));

        let mut removed = EthChanges::new();
        removed.remove_account(a);
        first.merge(removed);
        assert_eq!(first.accounts[&a], AccountChange::Removed);
        let mut again = EthChanges::new();
        again.accounts.insert(a, write(0, false, &[(5, 5)]));
        first.merge(again);
        assert_eq!(first.accounts[&a], write(0, true, &[(5, 5)]), "writes after a removal");
        let counts = first.counts();
        assert_eq!(
            (counts.accounts_written, counts.slots_written, counts.storage_clears),
            (1, 1, 1)
        );
    }
}
