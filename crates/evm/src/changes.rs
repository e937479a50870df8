//! revm's committed state as Arbor's account-model changes: [`evm_changes`] turns the
//! `EvmState` revm returns after a transaction into one [`EthChanges`].
//!
//! The rules, per account revm reports:
//! - untouched: nothing changed (revm loaded it only to read it);
//! - self-destructed: removed, with its storage (since Cancun revm marks only accounts
//!   created in the same transaction);
//! - created (CREATE/CREATE2, and before Spurious Dragon an empty account a transaction
//!   brought into existence): written with its storage cleared first, since a contract
//!   created where storage was left starts with none, then its new slots;
//! - empty and touched: removed (EIP-161; before Spurious Dragon revm's journal already
//!   untouches existing empty accounts and marks new ones created, so this rule holds for
//!   every fork);
//! - otherwise written with its changed slots (present value differs from the value at
//!   the start of the transaction).
//!
//! New code is recorded for created accounts and for accounts whose code hash changed
//! (an EIP-7702 delegation set or cleared). Cost: one pass over revm's state, one keccak per
//! new code.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use eth::{AccountWrite, CodeHashMismatch, EthChanges};
use revm::primitives::KECCAK_EMPTY;
use revm::state::{Account as RevmAccount, EvmState};
use state::H256;

use crate::database::address_bytes;

/// Why revm's state could not be turned into changes (revm broke its own invariants).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// An account has a new code hash but revm holds no code for it.
    #[error("account 0x{address} has new code hash {code_hash} but revm holds no code", address = hex::encode(.address))]
    MissingCode {
        /// The account.
        address: eth::Address,
        /// Its code hash.
        code_hash: H256,
    },
    /// revm's code does not hash to the account's code hash.
    #[error(transparent)]
    CodeHash(#[from] CodeHashMismatch),
}

/// The changes of one transaction, from the state revm returned for it.
pub fn evm_changes(state: &EvmState) -> Result<EthChanges, ConvertError> {
    let mut changes = EthChanges::new();
    for (address, account) in state {
        if !account.is_touched() {
            continue;
        }
        let address = address_bytes(address);
        if account.is_selfdestructed() {
            changes.remove_account(address);
            continue;
        }
        let created = account.is_created();
        if !created && account.is_empty() {
            changes.remove_account(address);
            continue;
        }
        if let Some(code) = new_code(account, created) {
            let hash = H256(account.info.code_hash.0);
            let code = code.ok_or(ConvertError::MissingCode { address, code_hash: hash })?;
            changes.add_code(hash, code)?;
        }
        changes.write_account(address, account_write(account, created));
    }
    Ok(changes)
}

/// The fields and slot writes of a written account.
fn account_write(account: &RevmAccount, created: bool) -> AccountWrite {
    let storage: BTreeMap<H256, U256> = account
        .storage
        .iter()
        // A created account starts from empty storage: every non-zero slot is written.
        .filter(|(_, slot)| slot.is_changed() || (created && !slot.present_value.is_zero()))
        .map(|(key, slot)| (H256(key.to_be_bytes::<32>()), slot.present_value))
        .collect();
    AccountWrite {
        nonce: account.info.nonce,
        balance: account.info.balance,
        code_hash: H256(account.info.code_hash.0),
        storage_cleared: created,
        storage,
    }
}

/// `Some(code)` when the account's code is new (`Some(None)` when revm lacks it), `None`
/// when the account keeps its code or has none.
fn new_code(account: &RevmAccount, created: bool) -> Option<Option<Vec<u8>>> {
    let hash = account.info.code_hash;
    if hash == KECCAK_EMPTY || (!created && account.original_info().code_hash == hash) {
        return None;
    }
    Some(account.info.code.as_ref().map(|c| c.original_byte_slice().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{Address as RevmAddress, Bytes, B256};
    use eth::AccountChange;
    use revm::bytecode::Bytecode;
    use revm::state::{AccountInfo, EvmStorageSlot, TransactionId};

    fn info(nonce: u64, balance: u64) -> AccountInfo {
        AccountInfo { nonce, balance: U256::from(balance), ..AccountInfo::default() }
    }

    fn slot(original: u64, present: u64) -> EvmStorageSlot {
        EvmStorageSlot::new_changed(U256::from(original), U256::from(present), TransactionId::ZERO)
    }

    fn write(changes: &EthChanges, a: RevmAddress) -> &AccountWrite {
        match &changes.accounts[&a.into_array()] {
            AccountChange::Write(w) => w,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_rule_gives_its_change() {
        let mut state = EvmState::default();
        let untouched = RevmAddress::repeat_byte(1);
        state.insert(untouched, RevmAccount::from(info(1, 1)));
        let destroyed = RevmAddress::repeat_byte(2);
        state.insert(
            destroyed,
            RevmAccount::from(info(1, 5)).with_touched_mark().with_selfdestruct_mark(),
        );
        let emptied = RevmAddress::repeat_byte(3);
        let mut e = RevmAccount::from(info(0, 5)).with_touched_mark();
        e.info.balance = U256::ZERO;
        state.insert(emptied, e);
        let changed = RevmAddress::repeat_byte(4);
        let mut c = RevmAccount::from(info(3, 7)).with_touched_mark();
        c.storage.insert(U256::from(1u8), slot(5, 6));
        c.storage.insert(U256::from(2u8), slot(9, 9));
        state.insert(changed, c);
        let code = Bytecode::new_legacy(Bytes::from(vec![0x60, 0x00]));
        let created = RevmAddress::repeat_byte(5);
        let mut n = RevmAccount::from(info(1, 0)).with_touched_mark().with_created_mark();
        n.info.code_hash = code.hash_slow();
        n.info.code = Some(code.clone());
        n.storage.insert(U256::from(7u8), slot(0, 3));
        n.storage.insert(U256::from(8u8), EvmStorageSlot::new(U256::ZERO, TransactionId::ZERO));
        state.insert(created, n);

        let changes = evm_changes(&state).unwrap();
        assert_eq!(changes.accounts.len(), 4, "the untouched account is left out");
        assert_eq!(changes.accounts[&destroyed.into_array()], AccountChange::Removed);
        assert_eq!(changes.accounts[&emptied.into_array()], AccountChange::Removed, "EIP-161");
        let w = write(&changes, changed);
        assert_eq!((w.nonce, w.balance, w.storage_cleared), (3, U256::from(7u8), false));
        assert_eq!(w.storage.len(), 1, "only the changed slot: {w:?}");
        let w = write(&changes, created);
        assert!(w.storage_cleared, "a created account starts with empty storage");
        assert_eq!(w.storage.values().copied().collect::<Vec<_>>(), vec![U256::from(3u8)]);
        assert_eq!(changes.code().get(&H256(code.hash_slow().0)), Some(&vec![0x60, 0x00]));
        assert_eq!(changes.code().len(), 1);
    }

    #[test]
    fn new_code_without_bytes_or_with_a_wrong_hash_is_refused() {
        let delegated = RevmAddress::repeat_byte(9);
        let mut d = RevmAccount::from(info(1, 1)).with_touched_mark();
        d.info.code_hash = B256::repeat_byte(0xab);
        d.info.code = None;
        let mut state = EvmState::default();
        state.insert(delegated, d.clone());
        assert!(matches!(evm_changes(&state), Err(ConvertError::MissingCode { .. })));
        d.info.code = Some(Bytecode::new_eip7702(RevmAddress::repeat_byte(1)));
        state.insert(delegated, d.clone());
        assert!(matches!(evm_changes(&state), Err(ConvertError::CodeHash(_))));
        // A delegation (EIP-7702): the code hash changed without a creation.
        let code = Bytecode::new_eip7702(RevmAddress::repeat_byte(1));
        d.info.code_hash = code.hash_slow();
        d.info.code = Some(code);
        state.insert(delegated, d);
        let changes = evm_changes(&state).unwrap();
        assert_eq!(changes.code().values().next().map(Vec::len), Some(23));
    }
}
