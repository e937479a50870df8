//! [`BlockOverlay`]: the state a transaction of a block runs on, the block's parent state
//! (any [`WorldReader`]) under the changes of the block's earlier transactions and system
//! calls, and the block hashes BLOCKHASH reads ([`crate::BlockHashes`], the caller's).
//!
//! Reads look in the changes first (a removed account is absent with empty storage, a
//! written one has its new fields, a slot its new value, storage cleared reads zero), then
//! in the parent state. Invariant: the changes are the merge, in order, of everything
//! applied so far, so a read answers as the state after them would.
//!
//! Storage roots: the overlay does not compute the root of storage the block changed (the
//! commit does). For such an account it reports `EMPTY_ROOT` when the storage is certainly
//! empty (cleared or empty before, no non-zero slot written since) and otherwise a
//! non-empty stand-in, the parent's root when it had one. Its one reader,
//! [`crate::WorldDb`]'s EIP-7610 check, asks only whether the root is empty; a storage
//! that writes of zeros emptied after the block started reads as non-empty, which needs
//! code or a nonce at the account, and either is a collision already.

use alloy_primitives::U256;
use eth::{Account, AccountChange, Address, EthChanges};
use state::H256;
use trie::EMPTY_ROOT;

use crate::reader::WorldReader;
use crate::stored::BlockHashes;

/// The parent state under a block's changes so far (see the module docs).
pub(crate) struct BlockOverlay<'a, R, B: ?Sized> {
    parent: R,
    hashes: &'a B,
    changes: EthChanges,
}

/// A stand-in storage root for storage known to be non-empty whose root is not computed.
pub(crate) const NON_EMPTY_STAND_IN: H256 = H256([0xff; 32]);

impl<'a, R: WorldReader, B: BlockHashes + ?Sized> BlockOverlay<'a, R, B> {
    /// The parent state with no changes yet.
    pub(crate) fn new(parent: R, hashes: &'a B) -> Self {
        BlockOverlay { parent, hashes, changes: EthChanges::new() }
    }

    /// Apply `later` on top of the changes so far.
    pub(crate) fn apply(&mut self, later: EthChanges) {
        self.changes.merge(later);
    }

    /// The block's changes so far.
    pub(crate) fn into_changes(self) -> EthChanges {
        self.changes
    }
}

impl<R: WorldReader, B: BlockHashes + ?Sized> WorldReader for BlockOverlay<'_, R, B> {
    type Error = R::Error;

    fn account(&self, address: &Address) -> Result<Option<Account>, R::Error> {
        let write = match self.changes.accounts.get(address) {
            None => return self.parent.account(address),
            Some(AccountChange::Removed) => return Ok(None),
            Some(AccountChange::Write(w)) => w,
            Some(other) => unknown_change(other),
        };
        let written = write.storage.values().any(|v| !v.is_zero());
        let before = if write.storage_cleared {
            EMPTY_ROOT
        } else {
            self.parent.account(address)?.map_or(EMPTY_ROOT, |a| a.storage_root)
        };
        let storage_root = match (before == EMPTY_ROOT, written) {
            (true, false) => EMPTY_ROOT,
            (true, true) => NON_EMPTY_STAND_IN,
            (false, _) => before,
        };
        Ok(Some(Account {
            nonce: write.nonce,
            balance: write.balance,
            storage_root,
            code_hash: write.code_hash,
        }))
    }

    fn storage(&self, address: &Address, slot: &H256) -> Result<U256, R::Error> {
        match self.changes.accounts.get(address) {
            None => self.parent.storage(address, slot),
            Some(AccountChange::Removed) => Ok(U256::ZERO),
            Some(AccountChange::Write(w)) => match w.storage.get(slot) {
                Some(v) => Ok(*v),
                None if w.storage_cleared => Ok(U256::ZERO),
                None => self.parent.storage(address, slot),
            },
            Some(other) => unknown_change(other),
        }
    }

    fn code(&self, code_hash: &H256) -> Result<Option<Vec<u8>>, R::Error> {
        match self.changes.code().get(code_hash) {
            Some(code) => Ok(Some(code.clone())),
            None => self.parent.code(code_hash),
        }
    }

    fn block_hash(&self, number: u64) -> Result<Option<H256>, R::Error> {
        Ok(self.hashes.block_hash(number))
    }
}

/// Invariant: the overlay knows every kind of account change (the enum is
/// `non_exhaustive` for other crates only as a courtesy to their matches).
fn unknown_change(change: &AccountChange) -> ! {
    panic!("BlockOverlay does not know the account change {change:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use eth::{AccountWrite, Genesis, GenesisAccount, MemoryWorld};
    use std::collections::BTreeMap;

    fn write(cleared: bool, slots: &[(u8, u64)]) -> AccountWrite {
        AccountWrite {
            nonce: 1,
            balance: U256::from(5u8),
            code_hash: trie::EMPTY_CODE_HASH,
            storage_cleared: cleared,
            storage: slots.iter().map(|(s, v)| (H256([*s; 32]), U256::from(*v))).collect(),
        }
    }

    #[test]
    fn reads_see_the_changes_over_the_parent() {
        let a = [1u8; 20];
        let b = [2u8; 20];
        let mut alloc = BTreeMap::new();
        let storage = [(H256([1; 32]), U256::from(10u8)), (H256([2; 32]), U256::from(20u8))];
        let account =
            GenesisAccount { storage: storage.into_iter().collect(), ..Default::default() };
        alloc.insert(a, account.clone());
        alloc.insert(b, account);
        let world = MemoryWorld::from_genesis(&Genesis { alloc }).unwrap();
        let mut overlay = BlockOverlay::new(&world, &crate::NoBlockHashes);
        let mut changes = EthChanges::new();
        changes.write_account(a, write(false, &[(1, 0), (3, 30)]));
        changes.remove_account(b);
        overlay.apply(changes);
        let read = |addr: &Address, s: u8| overlay.storage(addr, &H256([s; 32])).unwrap();
        assert_eq!(
            (read(&a, 1), read(&a, 2), read(&a, 3)),
            (U256::ZERO, U256::from(20u8), U256::from(30u8))
        );
        assert_eq!(read(&b, 2), U256::ZERO);
        assert!(overlay.account(&b).unwrap().is_none());
        let parent_root = world.account(&a).unwrap().storage_root;
        assert_eq!(overlay.account(&a).unwrap().unwrap().storage_root, parent_root);

        let mut again = EthChanges::new();
        again.write_account(b, write(false, &[(4, 0)]));
        overlay.apply(again);
        let read = |addr: &Address, s: u8| overlay.storage(addr, &H256([s; 32])).unwrap();
        assert_eq!(
            overlay.account(&b).unwrap().unwrap().storage_root,
            EMPTY_ROOT,
            "removed, then zeros"
        );
        assert_eq!(read(&b, 1), U256::ZERO, "a removal clears the storage for later writes");
        let mut fresh = EthChanges::new();
        fresh.write_account([3; 20], write(true, &[(5, 1)]));
        overlay.apply(fresh);
        assert_ne!(overlay.account(&[3; 20]).unwrap().unwrap().storage_root, EMPTY_ROOT);
        assert_eq!(overlay.block_hash(1).unwrap(), None);
    }
}
