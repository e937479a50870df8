//! Arbor's C ABI: open, close, get, commit, root, prove, verify a proof, get and prove at
//! a recent block, Ethereum accounts, slots, code and eth_getProof answers (`account`),
//! commit Ethereum account changes with their storage roots computed (`account_commit`),
//! create and restore checkpoints (with cancellation), free returned bytes. The header
//! (`include/arbor.h`) is generated from this crate by cbindgen.
//!
//! Contract, for every export:
//! - It returns an [`ArborCode`]; on anything but `ARBOR_CODE_OK` the `error` out-parameter
//!   (when not NULL) receives a UTF-8 message owned by Rust. It never unwinds into the
//!   caller: a panic is caught and returned as `ARBOR_CODE_PANIC`.
//! - Input bytes are `(pointer, length)` pairs, borrowed for the call only: NULL is allowed
//!   with length 0; lengths are checked against the limits below; Rust keeps no pointer to
//!   caller memory after the call returns.
//! - Output bytes ([`ArborBytes`]) are owned by Rust until the caller passes them to
//!   [`arbor_bytes_free`] exactly once; a double free is an error, not undefined behaviour.
//! - Databases are named by generation-checked handles; a closed or stale handle is
//!   `ARBOR_CODE_CLOSED`.
//!
//! Byte formats (all integers big-endian):
//! - a trie: `account_len` 0 (the main trie) or 32 (the storage trie of that account key);
//! - a change set: `count (u32)`, then per change `account_len (u8: 0 | 32) ‖ account ‖
//!   key_len (u16) ‖ key ‖ op (u8: 0 delete, 1 set) ‖ [value_len (u32) ‖ value]` (set values
//!   are never empty);
//! - a proof: `count (u32)`, then per node `len (u32) ‖ node`;
//! - checkpoint sources: addresses separated by `\n`;
//! - accounts, slots and account proofs: see `account`; account change sets: see
//!   `account_commit`.

mod account;
mod account_commit;
mod buf;
mod error;
mod handle;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use state::{ChangeSet, TrieId, H256};
use store::{StateDb, StoreConfig};
use trie::LayoutName;

pub use account::{
    arbor_get_account, arbor_get_account_at, arbor_get_code, arbor_get_proof, arbor_get_proof_at,
    arbor_get_storage, arbor_get_storage_at, ArborAccount, ARBOR_PROOF_SLOTS_MAX,
};
pub use account_commit::arbor_commit_accounts;
pub use buf::{copy_out, ArborBytes};
pub use error::ArborCode;

use buf::{give, input, put};
use error::FfiError;

/// Longest path accepted.
pub const ARBOR_PATH_MAX: usize = 4096;
/// Longest TOML configuration accepted.
pub const ARBOR_CONFIG_MAX: usize = 1 << 20;
/// Longest key.
pub const ARBOR_KEY_MAX: usize = 127;
/// Longest value in a change set.
pub const ARBOR_VALUE_MAX: usize = 16 << 20;

// Every value the package takes can be checkpointed.
const _: () = assert!(ARBOR_VALUE_MAX as u64 == checkpoint::VALUE_BYTES_MAX as u64);
/// Largest encoded change set or proof.
pub const ARBOR_INPUT_MAX: usize = 1 << 30;

/// Run an export's body: its error (or panic) becomes the code and message.
fn run(error: *mut ArborBytes, f: impl FnOnce() -> Result<(), FfiError>) -> ArborCode {
    put(error, ArborBytes::EMPTY);
    let e = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return ArborCode::Ok,
        Ok(Err(e)) => e,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            FfiError::new(ArborCode::Panic, format!("Arbor panicked: {what}"))
        }
    };
    put(error, give(e.message.into_bytes()));
    e.code
}

fn utf8<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str, FfiError> {
    std::str::from_utf8(bytes).map_err(|_| FfiError::invalid_owned(format!("{what} is not UTF-8")))
}

/// A non-empty UTF-8 path argument.
fn path_arg<'a>(ptr: *const u8, len: usize, what: &'static str) -> Result<&'a str, FfiError> {
    let path = utf8(input(ptr, len, what, ARBOR_PATH_MAX)?, what)?;
    if path.is_empty() {
        return Err(FfiError::invalid_owned(format!("{what} is empty")));
    }
    Ok(path)
}

/// A TOML store configuration argument (empty: the defaults).
fn config_arg(ptr: *const u8, len: usize) -> Result<StoreConfig, FfiError> {
    let toml = utf8(input(ptr, len, "config", ARBOR_CONFIG_MAX)?, "config")?;
    if toml.is_empty() {
        return Ok(StoreConfig::default());
    }
    StoreConfig::from_toml_str(toml).map_err(|e| FfiError::invalid_owned(e.to_string()))
}

fn trie_of(account: &[u8]) -> Result<TrieId, FfiError> {
    match account.len() {
        0 => Ok(TrieId::Main),
        32 => Ok(TrieId::Storage(
            H256::from_slice(account).ok_or_else(|| FfiError::invalid("bad account"))?,
        )),
        n => {
            Err(FfiError::invalid_owned(format!("a trie's account key is 0 or 32 bytes, not {n}")))
        }
    }
}

fn root_in(ptr: *const u8) -> Result<H256, FfiError> {
    if ptr.is_null() {
        return Err(FfiError::invalid("root: NULL"));
    }
    let bytes = input(ptr, 32, "root", 32)?;
    H256::from_slice(bytes).ok_or_else(|| FfiError::invalid("root: not 32 bytes"))
}

fn put_root(out: *mut u8, root: &H256) {
    if !out.is_null() {
        // SAFETY: the C contract: a non-NULL root out-pointer points at 32 writable bytes,
        // not overlapping any input of the call.
        #[allow(unsafe_code)]
        unsafe {
            std::ptr::copy_nonoverlapping(root.0.as_ptr(), out, 32)
        };
    }
}

/// Open (or create) the database at `path` (UTF-8) with an optional TOML configuration
/// (`config_len` 0: defaults); `*handle` receives its handle.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_open(
    path: *const u8,
    path_len: usize,
    config: *const u8,
    config_len: usize,
    handle: *mut u64,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let path = path_arg(path, path_len, "path")?;
        let config = config_arg(config, config_len)?;
        let db = StateDb::open(std::path::Path::new(path), config)?;
        put(handle, handle::register(db)?);
        Ok(())
    })
}

/// Close a database: new calls fail at once; calls in flight are waited for up to
/// `timeout_ms` (past it: `ARBOR_CODE_CLOSED`, and the store closes when they end).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_close(handle: u64, timeout_ms: u64, error: *mut ArborBytes) -> ArborCode {
    run(error, || handle::close(handle, Duration::from_millis(timeout_ms)))
}

/// The value of `key` in a trie (`account_len` 0: the main trie; 32: that account's
/// storage trie) into `*value`; `ARBOR_CODE_NOT_FOUND` when absent.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get(
    handle: u64,
    account: *const u8,
    account_len: usize,
    key: *const u8,
    key_len: usize,
    value: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(value, ArborBytes::EMPTY);
    run(error, || {
        let trie = trie_of(input(account, account_len, "account", 32)?)?;
        let key = input(key, key_len, "key", ARBOR_KEY_MAX)?;
        let call = handle::call(handle)?;
        found(value, state::StateReader::get(&call.entry.reader, &trie, key)?)
    })
}

/// Hand a read value to the caller, or `ARBOR_CODE_NOT_FOUND` when absent.
fn found(value: *mut ArborBytes, v: Option<Vec<u8>>) -> Result<(), FfiError> {
    match v {
        Some(v) => {
            put(value, give(v));
            Ok(())
        }
        None => Err(FfiError::new(ArborCode::NotFound, "key not found")),
    }
}

/// The value of `key` in a trie at recent block `block` (head - `history.recent_blocks`
/// to the head), as [`arbor_get`] reads it at the head; a block outside that window is
/// `ARBOR_CODE_OUTSIDE_WINDOW` (the message names the window).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_get_at(
    handle: u64,
    block: u64,
    account: *const u8,
    account_len: usize,
    key: *const u8,
    key_len: usize,
    value: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(value, ArborBytes::EMPTY);
    run(error, || {
        let trie = trie_of(input(account, account_len, "account", 32)?)?;
        let key = input(key, key_len, "key", ARBOR_KEY_MAX)?;
        let call = handle::call(handle)?;
        found(value, call.entry.reader.at(block)?.get(&trie, key)?)
    })
}

/// Decode a change set (see the crate docs).
fn decode_changes(bytes: &[u8]) -> Result<ChangeSet, FfiError> {
    let bad = |what: &'static str| FfiError::invalid_owned(format!("change set: {what}"));
    let mut r = bytes;
    let mut take = |n: usize| -> Result<&[u8], FfiError> {
        if r.len() < n {
            return Err(bad("truncated"));
        }
        let (a, b) = r.split_at(n);
        r = b;
        Ok(a)
    };
    let count = u32::from_be_bytes(take(4)?.try_into().map_err(|_| bad("truncated"))?);
    // Entries first, sorted once, then the maps built from sorted runs (a bulk build,
    // not one tree insertion per key); the last change of a key wins.
    let mut entries: Vec<(TrieId, Vec<u8>, Option<Vec<u8>>)> =
        Vec::with_capacity((count as usize).min(bytes.len() / 8));
    for _ in 0..count {
        let alen = take(1)?[0] as usize;
        let trie = trie_of(take(alen)?)?;
        let klen = u16::from_be_bytes(take(2)?.try_into().map_err(|_| bad("truncated"))?) as usize;
        if klen > ARBOR_KEY_MAX {
            return Err(bad("key longer than 127 bytes"));
        }
        let key = take(klen)?.to_vec();
        let value = match take(1)?[0] {
            0 => None,
            1 => {
                let vlen =
                    u32::from_be_bytes(take(4)?.try_into().map_err(|_| bad("truncated"))?) as usize;
                if vlen == 0 || vlen > ARBOR_VALUE_MAX {
                    return Err(bad("a set value must be 1 byte to 16 MiB"));
                }
                Some(take(vlen)?.to_vec())
            }
            _ => return Err(bad("op must be 0 (delete) or 1 (set)")),
        };
        entries.push((trie, key, value));
    }
    if !r.is_empty() {
        return Err(bad("trailing bytes"));
    }
    // Stable: equal keys keep their order, and the last one is kept below.
    entries.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut changes = ChangeSet::new();
    let mut run: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    let mut current: Option<TrieId> = None;
    for (trie, key, value) in entries {
        if current != Some(trie) {
            if let Some(t) = current.take() {
                changes.insert(t, std::mem::take(&mut run).into_iter().collect());
            }
            current = Some(trie);
        }
        match run.last_mut() {
            Some(last) if last.0 == key => last.1 = value,
            _ => run.push((key, value)),
        }
    }
    if let Some(t) = current {
        changes.insert(t, run.into_iter().collect());
    }
    Ok(changes)
}

/// Commit a change set (see the crate docs) as the next block: `*number` and the 32 bytes
/// at `root` receive the new head.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_commit(
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
        let changes = decode_changes(input(changes, changes_len, "changes", ARBOR_INPUT_MAX)?)?;
        let mut db = call.entry.db.lock();
        let db = db.as_mut().ok_or_else(|| FfiError::closed("the database is closed"))?;
        let info = db.commit(&changes)?;
        put(number, info.number);
        put_root(root, &info.root);
        Ok(())
    })
}

/// The head: `*number` and the 32 bytes at `root`.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_root(
    handle: u64,
    number: *mut u64,
    root: *mut u8,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let call = handle::call(handle)?;
        let db = call.entry.db.lock();
        let db = db.as_ref().ok_or_else(|| FfiError::closed("the database is closed"))?;
        put(number, db.head_number());
        put_root(root, &db.head_root());
        Ok(())
    })
}

/// The root of a trie at the head (`account_len` 0: the main trie; 32: that account's
/// storage trie, the empty root when it has no keys) into the 32 bytes at `root`.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_trie_root(
    handle: u64,
    account: *const u8,
    account_len: usize,
    root: *mut u8,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let trie = trie_of(input(account, account_len, "account", 32)?)?;
        let call = handle::call(handle)?;
        let db = call.entry.db.lock();
        let db = db.as_ref().ok_or_else(|| FfiError::closed("the database is closed"))?;
        put_root(root, &db.trie_root(&trie)?);
        Ok(())
    })
}

/// Encode proof nodes (see the crate docs).
fn encode_proof(nodes: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + nodes.iter().map(|n| n.len() + 4).sum::<usize>());
    out.extend_from_slice(&(nodes.len() as u32).to_be_bytes());
    for n in nodes {
        out.extend_from_slice(&(n.len() as u32).to_be_bytes());
        out.extend_from_slice(n);
    }
    out
}

fn decode_proof(bytes: &[u8]) -> Result<Vec<&[u8]>, FfiError> {
    let bad = || FfiError::invalid("proof: malformed encoding");
    let count =
        u32::from_be_bytes(bytes.get(..4).ok_or_else(bad)?.try_into().map_err(|_| bad())?) as usize;
    let mut rest = &bytes[4..];
    if count > rest.len() / 4 {
        return Err(bad());
    }
    let mut nodes = Vec::with_capacity(count);
    for _ in 0..count {
        let len = u32::from_be_bytes(rest.get(..4).ok_or_else(bad)?.try_into().map_err(|_| bad())?)
            as usize;
        let node = rest.get(4..4 + len).ok_or_else(bad)?;
        nodes.push(node);
        rest = &rest[4 + len..];
    }
    if !rest.is_empty() {
        return Err(bad());
    }
    Ok(nodes)
}

/// The proof of a main-trie `key` at the head (inclusion or exclusion) into `*proof`.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_prove(
    handle: u64,
    key: *const u8,
    key_len: usize,
    proof: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(proof, ArborBytes::EMPTY);
    run(error, || {
        let key = input(key, key_len, "key", ARBOR_KEY_MAX)?;
        let call = handle::call(handle)?;
        let db = call.entry.db.lock();
        let db = db.as_ref().ok_or_else(|| FfiError::closed("the database is closed"))?;
        let nodes = db.prove(TrieId::Main, key)?;
        put(proof, give(encode_proof(&nodes)));
        Ok(())
    })
}

/// The proof of a main-trie `key` at recent block `block` (inclusion or exclusion) into
/// `*proof`, and that block's state root into the 32 bytes at `root` (when not NULL): the
/// root the proof verifies against. A block outside the window is
/// `ARBOR_CODE_OUTSIDE_WINDOW` (the message names the window).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_prove_at(
    handle: u64,
    block: u64,
    key: *const u8,
    key_len: usize,
    root: *mut u8,
    proof: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(proof, ArborBytes::EMPTY);
    run(error, || {
        let key = input(key, key_len, "key", ARBOR_KEY_MAX)?;
        let call = handle::call(handle)?;
        let view = call.entry.reader.at(block)?;
        let nodes = view.prove(TrieId::Main, key)?;
        put_root(root, &view.root());
        put(proof, give(encode_proof(&nodes)));
        Ok(())
    })
}

/// Verify a proof of `key` against the 32-byte `root` in Ethereum's layout: the proven
/// value into `*value`, or `ARBOR_CODE_NOT_FOUND` when the proof shows the key absent; a
/// proof that does not verify is `ARBOR_CODE_INVALID_ARGUMENT`.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_verify_proof(
    root: *const u8,
    key: *const u8,
    key_len: usize,
    proof: *const u8,
    proof_len: usize,
    value: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(value, ArborBytes::EMPTY);
    run(error, || verify_in(LayoutName::Ethereum, root, (key, key_len), (proof, proof_len), value))
}

/// [`arbor_verify_proof`] in the layout named by the UTF-8 `layout` ("ethereum",
/// "substrate-v0", "substrate-v1"; another name is `ARBOR_CODE_INVALID_ARGUMENT`).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_verify_proof_in(
    layout: *const u8,
    layout_len: usize,
    root: *const u8,
    key: *const u8,
    key_len: usize,
    proof: *const u8,
    proof_len: usize,
    value: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(value, ArborBytes::EMPTY);
    run(error, || {
        let name = utf8(input(layout, layout_len, "layout", ARBOR_PATH_MAX)?, "layout")?;
        let layout: LayoutName = name
            .parse()
            .map_err(|e: trie::UnknownLayout| FfiError::invalid_owned(e.to_string()))?;
        verify_in(layout, root, (key, key_len), (proof, proof_len), value)
    })
}

/// The layout of the database's tries, as its name, into `*name`.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_layout(
    handle: u64,
    name: *mut ArborBytes,
    error: *mut ArborBytes,
) -> ArborCode {
    put(name, ArborBytes::EMPTY);
    run(error, || {
        let call = handle::call(handle)?;
        let db = call.entry.db.lock();
        let db = db.as_ref().ok_or_else(|| FfiError::closed("the database is closed"))?;
        put(name, give(db.layout().as_str().as_bytes().to_vec()));
        Ok(())
    })
}

/// The body of the proof checks: `*value` gets the proven value.
fn verify_in(
    layout: LayoutName,
    root: *const u8,
    key: (*const u8, usize),
    proof: (*const u8, usize),
    value: *mut ArborBytes,
) -> Result<(), FfiError> {
    struct Verify<'a>(&'a H256, &'a [u8], &'a [&'a [u8]]);
    impl trie::WithLayout for Verify<'_> {
        type Output = Result<Option<Vec<u8>>, trie::ProofError>;
        fn run<L: trie::Layout>(self) -> Self::Output {
            trie::verify_proof::<L>(self.0, self.1, self.2)
        }
    }
    let root = root_in(root)?;
    let key = input(key.0, key.1, "key", ARBOR_KEY_MAX)?;
    let nodes = decode_proof(input(proof.0, proof.1, "proof", ARBOR_INPUT_MAX)?)?;
    match layout.dispatch(Verify(&root, key, &nodes)) {
        Ok(Some(v)) => {
            put(value, give(v));
            Ok(())
        }
        Ok(None) => Err(FfiError::new(ArborCode::NotFound, "the proof shows the key absent")),
        Err(e) => Err(FfiError::invalid_owned(format!("invalid proof: {e}"))),
    }
}

/// Free bytes Arbor returned (each exactly once).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_bytes_free(bytes: ArborBytes, error: *mut ArborBytes) -> ArborCode {
    run(error, || buf::take_back(&bytes))
}

/// How many returned buffers are not freed yet (leak checks).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_live_buffers() -> u64 {
    buf::live_count() as u64
}

/// Panics inside Rust (debug builds; release builds refuse): tests that a panic comes back
/// as `ARBOR_CODE_PANIC` and the process survives.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_debug_panic(error: *mut ArborBytes) -> ArborCode {
    run(error, || {
        if cfg!(debug_assertions) {
            panic!("arbor_debug_panic called");
        }
        Err(FfiError::invalid("arbor_debug_panic exists in debug builds only"))
    })
}

/// Cancellation tokens: id → flag.
fn tokens() -> &'static Mutex<std::collections::HashMap<u64, Arc<AtomicBool>>> {
    static TOKENS: OnceLock<Mutex<std::collections::HashMap<u64, Arc<AtomicBool>>>> =
        OnceLock::new();
    TOKENS.get_or_init(Default::default)
}

/// A new cancellation token for a long operation (free it with [`arbor_cancel_free`]).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_cancel_new() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    tokens().lock().insert(id, Arc::new(AtomicBool::new(false)));
    id
}

/// Cancel the operation running with `token` (it returns `ARBOR_CODE_CANCELLED`).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_cancel(token: u64, error: *mut ArborBytes) -> ArborCode {
    run(error, || match tokens().lock().get(&token) {
        Some(flag) => {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        }
        None => Err(FfiError::invalid("unknown cancellation token")),
    })
}

/// Free a cancellation token.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_cancel_free(token: u64, error: *mut ArborBytes) -> ArborCode {
    run(error, || match tokens().lock().remove(&token) {
        Some(_) => Ok(()),
        None => Err(FfiError::invalid("unknown cancellation token")),
    })
}

fn token(id: u64) -> Result<Arc<AtomicBool>, FfiError> {
    if id == 0 {
        return Ok(Arc::new(AtomicBool::new(false)));
    }
    tokens().lock().get(&id).cloned().ok_or_else(|| FfiError::invalid("unknown cancellation token"))
}

/// Create a checkpoint of the database's head into directory `dir` with `threads` threads
/// (1 to 256; 0: 2); the manifest id's 32 bytes go to `id`. `token` (0: none) cancels it
/// (`ARBOR_CODE_CANCELLED`).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_checkpoint_create(
    handle: u64,
    dir: *const u8,
    dir_len: usize,
    threads: u32,
    token: u64,
    id: *mut u8,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let dir = path_arg(dir, dir_len, "dir")?;
        let threads = if threads == 0 { 2 } else { threads as usize };
        if threads > checkpoint::THREADS_MAX {
            return Err(FfiError::invalid("threads must be 1..=256"));
        }
        let stop = self::token(token)?;
        let call = handle::call(handle)?;
        if let Some(db) = call.entry.db.lock().as_ref() {
            db.flush()?;
        }
        let state = call.entry.reader.persisted()?;
        let opts = checkpoint::CreateOptions { threads, ..Default::default() };
        let created = checkpoint::create_cancellable(
            &state,
            &opts,
            &checkpoint::CheckpointDir::new(dir),
            &AtomicU64::new(0),
            &stop,
        )?;
        put_root(id, &created.id);
        Ok(())
    })
}

/// Restore the checkpoint of (`block`, the 32-byte `root`) from `sources` (addresses
/// separated by `\n`) into the new or resumable database at `path` (UTF-8, optional TOML
/// `config`), then close it. `token` (0: none) cancels it: `ARBOR_CODE_CANCELLED`, and the
/// database resumes on the next restore.
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_restore(
    path: *const u8,
    path_len: usize,
    config: *const u8,
    config_len: usize,
    block: u64,
    root: *const u8,
    sources: *const u8,
    sources_len: usize,
    token: u64,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let path = path_arg(path, path_len, "path")?;
        let mut config = config_arg(config, config_len)?;
        let trusted = checkpoint::Trusted { block, root: root_in(root)? };
        let list = utf8(input(sources, sources_len, "sources", ARBOR_CONFIG_MAX)?, "sources")?;
        let stop = self::token(token)?;
        let opts = checkpoint::SourceOptions::default();
        let sources = list
            .split('\n')
            .filter(|s| !s.is_empty())
            .map(|s| checkpoint::open_source(s, &opts))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| FfiError::invalid_owned(e.to_string()))?;
        if sources.is_empty() {
            return Err(FfiError::invalid("no sources"));
        }
        // A new database takes the checkpoint's layout (an existing one must have it).
        let candidates = checkpoint::find_candidates(trusted, &sources, &stop);
        if config.layout.is_none() {
            config.layout = candidates.layout();
        }
        let mut db = StateDb::open(std::path::Path::new(path), config)?;
        let (_, outcome) = candidates.restore(
            &mut db,
            &checkpoint::RestoreOptions::in_database(std::path::Path::new(path)),
            &checkpoint::FetchOptions::default(),
            &stop,
            &|_| {},
        );
        let closed = db.close();
        outcome?;
        Ok(closed?)
    })
}

/// Benchmark helper: the mean nanoseconds of `iterations` native `StateDb` reads of a
/// main-trie `key` (the figure the Go package's `Get` is compared with).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_native_get_ns(
    handle: u64,
    key: *const u8,
    key_len: usize,
    iterations: u64,
    ns: *mut f64,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let key = input(key, key_len, "key", ARBOR_KEY_MAX)?;
        if iterations == 0 || iterations > 1 << 32 {
            return Err(FfiError::invalid("iterations must be 1..=2^32"));
        }
        let call = handle::call(handle)?;
        let t0 = std::time::Instant::now();
        for _ in 0..iterations {
            std::hint::black_box(state::StateReader::get(&call.entry.reader, &TrieId::Main, key)?);
        }
        put(ns, t0.elapsed().as_nanos() as f64 / iterations as f64);
        Ok(())
    })
}

/// Benchmark helper: commit an encoded change set natively, timing only `StateDb::commit`
/// (the figure the Go package's `Commit` is compared with); `*ns` receives the time, and
/// `*decode_ns` the time the change set's decoding took (part of the Go call's cost).
// SAFETY: an `arbor_`-prefixed name, exported once: no other symbol of the link has it.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn arbor_native_commit_ns(
    handle: u64,
    changes: *const u8,
    changes_len: usize,
    ns: *mut f64,
    decode_ns: *mut f64,
    error: *mut ArborBytes,
) -> ArborCode {
    run(error, || {
        let t0 = std::time::Instant::now();
        let changes = decode_changes(input(changes, changes_len, "changes", ARBOR_INPUT_MAX)?)?;
        put(decode_ns, t0.elapsed().as_nanos() as f64);
        let call = handle::call(handle)?;
        let mut db = call.entry.db.lock();
        let db = db.as_mut().ok_or_else(|| FfiError::closed("the database is closed"))?;
        let t0 = std::time::Instant::now();
        db.commit(&changes)?;
        put(ns, t0.elapsed().as_nanos() as f64);
        Ok(())
    })
}
