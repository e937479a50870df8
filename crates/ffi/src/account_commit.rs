//! Committing Ethereum account changes over the C ABI: one block of accounts written or
//! removed, storages cleared, slots written and new code, decoded into `eth::EthChanges`
//! and committed with the store's nested commit (`StateDb::commit_nested` with
//! `eth::AccountModel`), which computes the touched accounts' storage roots and folds them
//! into their leaves: the caller never computes a storage root. Ethereum databases only.
//!
//! Encoding (integers big-endian): `count (u32)`, then per account `address (20) ‖ op (u8:
//! 0 remove, 1 write)` and, for a write, `nonce (u64) ‖ balance (32) ‖ code_hash (32) ‖
//! clear_storage (u8: 0 | 1) ‖ slots (u32)` and per slot `slot (32) ‖ value (32; zero
//! deletes)`; then `codes (u32)` and per code `len (u32) ‖ code`. An address, or a slot
//! of one account, given twice is refused; every code hash written must be the empty
//! code's, one of the codes given, or one the database holds.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use eth::{AccountModel, AccountWrite, Address, EthChanges};
use state::H256;
use trie::EMPTY_CODE_HASH;

use crate::account::ethereum_only;
use crate::buf::{input, put};
use crate::error::FfiError;
use crate::{handle, put_root, run, ArborBytes, ArborCode, ARBOR_INPUT_MAX, ARBOR_VALUE_MAX};

/// The bytes of an encoded change set not read yet.
struct Cursor<'a>(&'a [u8]);

fn bad(what: impl std::fmt::Display) -> FfiError {
    FfiError::invalid_owned(format!("account changes: {what}"))
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FfiError> {
        if self.0.len() < n {
            return Err(bad("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FfiError> {
        self.take(N)?.try_into().map_err(|_| bad("truncated"))
    }

    fn u8(&mut self) -> Result<u8, FfiError> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, FfiError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
}

/// One account write (after its address and op).
fn decode_write(r: &mut Cursor<'_>, address: &Address) -> Result<AccountWrite, FfiError> {
    let nonce = u64::from_be_bytes(r.array()?);
    let balance = U256::from_be_bytes::<32>(r.array()?);
    let code_hash = H256(r.array()?);
    let storage_cleared = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(bad("clear_storage must be 0 or 1")),
    };
    let mut storage = BTreeMap::new();
    for _ in 0..r.u32()? {
        let slot = H256(r.array()?);
        let value = U256::from_be_bytes::<32>(r.array()?);
        if storage.insert(slot, value).is_some() {
            let address = hex::encode(address);
            return Err(bad(format!("slot {slot} of 0x{address} given twice")));
        }
    }
    Ok(AccountWrite { nonce, balance, code_hash, storage_cleared, storage })
}

/// Decode an account change set (see the module docs).
fn decode_account_changes(bytes: &[u8]) -> Result<EthChanges, FfiError> {
    let mut r = Cursor(bytes);
    let mut changes = EthChanges::new();
    for _ in 0..r.u32()? {
        let address: Address = r.array()?;
        if changes.accounts.contains_key(&address) {
            return Err(bad(format!("account 0x{} given twice", hex::encode(address))));
        }
        match r.u8()? {
            0 => changes.remove_account(address),
            1 => {
                let write = decode_write(&mut r, &address)?;
                changes.write_account(address, write);
            }
            _ => return Err(bad("op must be 0 (remove) or 1 (write)")),
        }
    }
    for _ in 0..r.u32()? {
        let len = r.u32()? as usize;
        if len == 0 || len > ARBOR_VALUE_MAX {
            return Err(bad("a code is 1 byte to 16 MiB"));
        }
        changes.insert_code(r.take(len)?.to_vec());
    }
    if !r.0.is_empty() {
        return Err(bad("trailing bytes"));
    }
    Ok(changes)
}

/// Refuse an account whose code hash has no code, neither given nor stored.
fn check_code(db: &store::StateDb, changes: &EthChanges) -> Result<(), FfiError> {
    for (address, change) in &changes.accounts {
        let eth::AccountChange::Write(w) = change else { continue };
        let known = w.code_hash == EMPTY_CODE_HASH
            || changes.code().contains_key(&w.code_hash)
            || db.code(&w.code_hash)?.is_some();
        if !known {
            return Err(bad(format!(
                "account 0x{} has code hash {} but no code for it is given or stored",
                hex::encode(address),
                w.code_hash
            )));
        }
    }
    Ok(())
}

/// Commit Ethereum account changes (encoded as in the `account_commit` module docs:
/// `count (u32)`, per account `address (20) ‖ op (u8: 0 remove, 1 write)` and for a write
/// `nonce (u64) ‖ balance (32) ‖ code_hash (32) ‖ clear_storage (u8) ‖ slots (u32)`, per
/// slot `slot (32) ‖ value (32; zero deletes)`; then `codes (u32)`, per code `len (u32) ‖
/// code`) as the next block: the storage roots are computed here. `*number` and the 32
/// bytes at `root` receive the new head. Ethereum databases only.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_commit_accounts(
    handle: u64,
    changes: *const u8,
    changes_len: usize,
    number: *mut u64,
    root: *mut u8,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        // In flight from here: a close waits for the decoding too.
        let call = handle::call(handle)?;
        let changes =
            decode_account_changes(input(changes, changes_len, "changes", ARBOR_INPUT_MAX)?)?;
        let mut db = call.entry.db.lock();
        let db = db.as_mut().ok_or_else(|| FfiError::closed("the database is closed"))?;
        ethereum_only(db.layout())?;
        check_code(db, &changes)?;
        let info = db.commit_nested(&changes.to_nested(), &AccountModel)?;
        put(number, info.number);
        put_root(root, &info.root);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_sets_decode_or_are_refused() {
        let mut enc = 2u32.to_be_bytes().to_vec();
        enc.extend_from_slice(&[1; 20]);
        enc.push(0);
        enc.extend_from_slice(&[2; 20]);
        enc.push(1);
        enc.extend_from_slice(&7u64.to_be_bytes());
        enc.extend_from_slice(&U256::from(9u8).to_be_bytes::<32>());
        enc.extend_from_slice(&trie::keccak256(b"code").0);
        enc.push(1);
        enc.extend_from_slice(&1u32.to_be_bytes());
        enc.extend_from_slice(&[3; 32]);
        enc.extend_from_slice(&U256::from(4u8).to_be_bytes::<32>());
        enc.extend_from_slice(&1u32.to_be_bytes());
        enc.extend_from_slice(&4u32.to_be_bytes());
        enc.extend_from_slice(b"code");
        let changes = decode_account_changes(&enc).unwrap();
        assert_eq!(changes.accounts[&[1; 20]], eth::AccountChange::Removed);
        let eth::AccountChange::Write(w) = &changes.accounts[&[2; 20]] else { panic!() };
        assert_eq!((w.nonce, w.balance, w.storage_cleared), (7, U256::from(9u8), true));
        assert_eq!(w.storage[&H256([3; 32])], U256::from(4u8));
        assert_eq!(changes.code()[&trie::keccak256(b"code")], b"code");
        // Every truncation, a trailing byte, bad flags, an empty code.
        for n in 0..enc.len() {
            assert!(decode_account_changes(&enc[..n]).is_err(), "cut at {n}");
        }
        let mut trailing = enc.clone();
        trailing.push(0);
        let with = |i: usize, bytes: &[u8]| {
            let mut e = enc.clone();
            e[i..i + bytes.len()].copy_from_slice(bytes);
            e
        };
        let clear_at = 4 + 21 + 20 + 1 + 8 + 32 + 32;
        let empty_code = [&enc[..enc.len() - 8], &0u32.to_be_bytes()[..]].concat();
        for (bytes, mentions) in [
            (trailing, "trailing"),
            (with(4 + 20, &[2]), "op"),
            (with(clear_at, &[2]), "clear_storage"),
            (with(4 + 21, &[1; 20]), "account 0x0101"),
            (empty_code, "1 byte"),
        ] {
            let e = decode_account_changes(&bytes).unwrap_err();
            assert!(e.message.contains(mentions), "{}", e.message);
        }
    }
}
