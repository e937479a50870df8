//! The Ethereum account model over the C ABI: an account, a storage slot and code by hash
//! at the head or at a recent block, and the eth_getProof (EIP-1186) answer for an account
//! and slots, read through `eth::AccountReader` over the store's tries as `evm::StoreTries`
//! gives them (the head of the locked store for proofs, the read handle for point reads,
//! a block view at a recent block). Refused on a database of another layout than
//! Ethereum's.
//!
//! Byte formats (integers big-endian; a proof as in the crate docs):
//! - an address: 20 bytes; a slot, a value, a hash: 32 bytes;
//! - the slots of [`arbor_get_proof`]: their 32-byte words one after another
//!   (at most [`ARBOR_PROOF_SLOTS_MAX`]);
//! - an account proof: `exists (u8: 0 | 1) ‖ nonce (u64) ‖ balance (32) ‖ storage_root
//!   (32) ‖ code_hash (32) ‖ account proof (a proof) ‖ count (u32)`, then per slot
//!   `slot (32) ‖ value (32) ‖ proof (a proof)`. An account that does not exist is
//!   all-empty (zero nonce and balance, the empty trie's root, the empty code's hash).

use eth::{Account, AccountProof, AccountReader, Address, ReadError, TrieProver};
use evm::StoreTries;
use state::H256;
use trie::LayoutName;

use crate::buf::{give, input, put};
use crate::error::{ArborCode, FfiError};
use crate::{encode_proof, handle, put_root, run, ArborBytes};

/// Most slots one [`arbor_get_proof`] call proves.
pub const ARBOR_PROOF_SLOTS_MAX: usize = 4096;

/// An Ethereum account as the state trie commits to it; numbers and hashes big-endian.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArborAccount {
    /// The nonce.
    pub nonce: u64,
    /// The balance in wei.
    pub balance: [u8; 32],
    /// The root of the account's storage trie.
    pub storage_root: [u8; 32],
    /// keccak256 of the account's code.
    pub code_hash: [u8; 32],
}

impl From<&Account> for ArborAccount {
    fn from(a: &Account) -> Self {
        ArborAccount {
            nonce: a.nonce,
            balance: a.balance.to_be_bytes::<32>(),
            storage_root: a.storage_root.0,
            code_hash: a.code_hash.0,
        }
    }
}

impl<E: Into<FfiError> + std::fmt::Display> From<ReadError<E>> for FfiError {
    fn from(e: ReadError<E>) -> Self {
        match e {
            ReadError::Source(e) => e.into(),
            // The tries hold no account model there: written by plain commits that do not
            // keep it (a leaf that is no account, a storage root its trie does not have).
            e => FfiError::invalid_owned(e.to_string()),
        }
    }
}

fn address_arg(ptr: *const u8, len: usize) -> Result<Address, FfiError> {
    let bytes = input(ptr, len, "address", 20)?;
    bytes
        .try_into()
        .map_err(|_| FfiError::invalid_owned(format!("an address is 20 bytes, not {len}")))
}

fn word_arg(ptr: *const u8, len: usize, what: &'static str) -> Result<H256, FfiError> {
    let bytes = input(ptr, len, what, 32)?;
    H256::from_slice(bytes)
        .ok_or_else(|| FfiError::invalid_owned(format!("{what}: 32 bytes, not {len}")))
}

fn slots_arg(ptr: *const u8, len: usize) -> Result<Vec<H256>, FfiError> {
    let bytes = input(ptr, len, "slots", ARBOR_PROOF_SLOTS_MAX * 32)?;
    if bytes.len() % 32 != 0 {
        return Err(FfiError::invalid_owned(format!(
            "slots: {len} bytes is not a whole number of 32-byte slots"
        )));
    }
    // Each chunk is 32 bytes: `from_slice` cannot refuse it.
    Ok(bytes.chunks_exact(32).filter_map(H256::from_slice).collect())
}

/// Refuse account-model reads (and commits) of a database in another layout.
pub(crate) fn ethereum_only(layout: LayoutName) -> Result<(), FfiError> {
    if layout != LayoutName::Ethereum {
        return Err(FfiError::invalid_owned(format!(
            "accounts are Ethereum's; the database is in the {layout} layout"
        )));
    }
    Ok(())
}

/// Hand an account to the caller, or `ARBOR_CODE_NOT_FOUND` when it does not exist.
fn found_account(out: *mut ArborAccount, account: Option<Account>) -> Result<(), FfiError> {
    match account {
        Some(a) => {
            put(out, ArborAccount::from(&a));
            Ok(())
        }
        None => Err(FfiError::new(ArborCode::NotFound, "no account at this address")),
    }
}

/// The account at the 20-byte `address` at the head into `*account`;
/// `ARBOR_CODE_NOT_FOUND` when it does not exist.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_account(
    handle: u64,
    address: *const u8,
    address_len: usize,
    account: *mut ArborAccount,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let address = address_arg(address, address_len)?;
        let call = handle::call(handle)?;
        ethereum_only(call.entry.reader.layout())?;
        let reader = AccountReader::new(StoreTries(&call.entry.reader));
        found_account(account, reader.account(&address)?)
    })
}

/// [`arbor_get_account`] at recent block `block` (head - `history.recent_blocks` to the
/// head; outside: `ARBOR_CODE_OUTSIDE_WINDOW`).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_account_at(
    handle: u64,
    block: u64,
    address: *const u8,
    address_len: usize,
    account: *mut ArborAccount,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let address = address_arg(address, address_len)?;
        let call = handle::call(handle)?;
        ethereum_only(call.entry.reader.layout())?;
        let reader = AccountReader::new(StoreTries(call.entry.reader.at(block)?));
        found_account(account, reader.account(&address)?)
    })
}

/// The value of the 32-byte `slot` in the storage of the 20-byte `address` at the head
/// into the 32 bytes at `value` (big-endian; zero when absent, also when the account does
/// not exist).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_storage(
    handle: u64,
    address: *const u8,
    address_len: usize,
    slot: *const u8,
    slot_len: usize,
    value: *mut u8,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let address = address_arg(address, address_len)?;
        let slot = word_arg(slot, slot_len, "slot")?;
        let call = handle::call(handle)?;
        ethereum_only(call.entry.reader.layout())?;
        let word = AccountReader::new(StoreTries(&call.entry.reader)).storage(&address, &slot)?;
        put_root(value, &H256(word.to_be_bytes::<32>()));
        Ok(())
    })
}

/// [`arbor_get_storage`] at recent block `block` (outside the window:
/// `ARBOR_CODE_OUTSIDE_WINDOW`).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_storage_at(
    handle: u64,
    block: u64,
    address: *const u8,
    address_len: usize,
    slot: *const u8,
    slot_len: usize,
    value: *mut u8,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let address = address_arg(address, address_len)?;
        let slot = word_arg(slot, slot_len, "slot")?;
        let call = handle::call(handle)?;
        ethereum_only(call.entry.reader.layout())?;
        let reader = AccountReader::new(StoreTries(call.entry.reader.at(block)?));
        let word = reader.storage(&address, &slot)?;
        put_root(value, &H256(word.to_be_bytes::<32>()));
        Ok(())
    })
}

/// The code whose keccak256 is the 32-byte `hash` into `*code` (empty for the empty
/// code's hash); `ARBOR_CODE_NOT_FOUND` when the database holds none. Code is kept by hash
/// for every block, so there is no `_at` form.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_code(
    handle: u64,
    hash: *const u8,
    hash_len: usize,
    code: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(code, ArborBytes::EMPTY);
    run(error, || {
        let hash = word_arg(hash, hash_len, "code hash")?;
        let call = handle::call(handle)?;
        ethereum_only(call.entry.reader.layout())?;
        match AccountReader::new(StoreTries(&call.entry.reader)).code(&hash)? {
            Some(bytes) => {
                put(code, give(bytes));
                Ok(())
            }
            None => Err(FfiError::new(ArborCode::NotFound, "no code with this hash")),
        }
    })
}

/// Encode an account proof (see the module docs).
fn encode_account_proof(exists: bool, p: &AccountProof) -> Vec<u8> {
    let a = ArborAccount::from(&p.account);
    let mut out = Vec::with_capacity(
        105 + 4 * p.account_proof.len() + p.account_proof.iter().map(Vec::len).sum::<usize>(),
    );
    out.push(u8::from(exists));
    out.extend_from_slice(&a.nonce.to_be_bytes());
    out.extend_from_slice(&a.balance);
    out.extend_from_slice(&a.storage_root);
    out.extend_from_slice(&a.code_hash);
    out.extend_from_slice(&encode_proof(&p.account_proof));
    out.extend_from_slice(&(p.storage_proof.len() as u32).to_be_bytes());
    for s in &p.storage_proof {
        out.extend_from_slice(&s.key.0);
        out.extend_from_slice(&s.value.to_be_bytes::<32>());
        out.extend_from_slice(&encode_proof(&s.proof));
    }
    out
}

/// The proof of an account and slots, and whether the account exists.
fn prove_with<R: TrieProver>(
    reader: &AccountReader<R>,
    address: &Address,
    slots: &[H256],
) -> Result<Vec<u8>, FfiError>
where
    FfiError: From<R::Error>,
{
    let proof = reader.prove(address, slots)?;
    let exists = reader.account(address)?.is_some();
    Ok(encode_account_proof(exists, &proof))
}

/// The eth_getProof answer for the 20-byte `address` and the `slots` (32-byte words one
/// after another, at most [`ARBOR_PROOF_SLOTS_MAX`]) at the head into `*proof`, the head
/// into `*number` and the 32 bytes at `root` (what the proof verifies against). Absent
/// accounts and slots get exclusion proofs; the answer is checked against the root first.
/// Encoding (big-endian): `exists (u8: 0 | 1) ‖ nonce (u64) ‖ balance (32) ‖ storage_root
/// (32) ‖ code_hash (32) ‖ account proof ‖ count (u32)`, then per slot in the order asked
/// `slot (32) ‖ value (32) ‖ proof`, each proof `count (u32)` and per node `len (u32) ‖
/// node`, root first. An account that does not exist is all-empty (zero nonce and balance,
/// the empty trie's root, the empty code's hash).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_proof(
    handle: u64,
    address: *const u8,
    address_len: usize,
    slots: *const u8,
    slots_len: usize,
    number: *mut u64,
    root: *mut u8,
    proof: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(proof, ArborBytes::EMPTY);
    run(error, || {
        let address = address_arg(address, address_len)?;
        let slots = slots_arg(slots, slots_len)?;
        let call = handle::call(handle)?;
        let db = call.entry.db.lock();
        let db = db.as_ref().ok_or_else(|| FfiError::closed("the database is closed"))?;
        ethereum_only(db.layout())?;
        let encoded = prove_with(&AccountReader::new(StoreTries(db)), &address, &slots)?;
        put(number, db.head_number());
        put_root(root, &db.head_root());
        put(proof, give(encoded));
        Ok(())
    })
}

/// [`arbor_get_proof`] at recent block `block`: its root into the 32 bytes at `root`
/// (outside the window: `ARBOR_CODE_OUTSIDE_WINDOW`).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_proof_at(
    handle: u64,
    block: u64,
    address: *const u8,
    address_len: usize,
    slots: *const u8,
    slots_len: usize,
    root: *mut u8,
    proof: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(proof, ArborBytes::EMPTY);
    run(error, || {
        let address = address_arg(address, address_len)?;
        let slots = slots_arg(slots, slots_len)?;
        let call = handle::call(handle)?;
        ethereum_only(call.entry.reader.layout())?;
        let view = call.entry.reader.at(block)?;
        let view_root = view.root();
        let encoded = prove_with(&AccountReader::new(StoreTries(view)), &address, &slots)?;
        put_root(root, &view_root);
        put(proof, give(encoded));
        Ok(())
    })
}
