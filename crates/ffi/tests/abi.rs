//! The C ABI called from Rust: round trips, handles, buffers, panics, bad input.

#![allow(clippy::unwrap_used)]

use arbor_ffi::*;

fn take(b: ArborBytes) -> Vec<u8> {
    let v = copy_out(&b).expect("a live buffer");
    assert_eq!(arbor_bytes_free(b, std::ptr::null_mut()), ArborCode::Ok);
    v
}

fn message(e: ArborBytes) -> String {
    String::from_utf8(take(e)).unwrap()
}

fn open(dir: &std::path::Path) -> u64 {
    let p = dir.to_str().unwrap().as_bytes();
    let mut h = 0u64;
    let mut e = ArborBytes::EMPTY;
    let c = arbor_open(p.as_ptr(), p.len(), std::ptr::null(), 0, &mut h, &mut e);
    assert_eq!(c, ArborCode::Ok, "{}", if c == ArborCode::Ok { String::new() } else { message(e) });
    h
}

fn change_set(entries: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    let mut out = (entries.len() as u32).to_be_bytes().to_vec();
    for (k, v) in entries {
        out.push(0);
        out.extend_from_slice(&(k.len() as u16).to_be_bytes());
        out.extend_from_slice(k);
        match v {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    out
}

#[test]
fn round_trip_prove_verify_close() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path());
    let cs = change_set(&[(b"alpha", Some(b"one")), (b"beta", Some(b"two"))]);
    let (mut n, mut root) = (0u64, [0u8; 32]);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_commit(h, cs.as_ptr(), cs.len(), &mut n, root.as_mut_ptr(), &mut e),
        ArborCode::Ok
    );
    assert_eq!(n, 1);
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e),
        ArborCode::Ok
    );
    assert_eq!(take(v), b"one");
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, std::ptr::null(), 0, b"gamma".as_ptr(), 5, &mut v, &mut e),
        ArborCode::NotFound
    );
    message(e);
    let mut proof = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_prove(h, b"beta".as_ptr(), 4, &mut proof, &mut e), ArborCode::Ok);
    let proof = take(proof);
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_verify_proof(
            root.as_ptr(),
            b"beta".as_ptr(),
            4,
            proof.as_ptr(),
            proof.len(),
            &mut v,
            &mut e
        ),
        ArborCode::Ok
    );
    assert_eq!(take(v), b"two");
    let mut bad = proof.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_verify_proof(
            root.as_ptr(),
            b"beta".as_ptr(),
            4,
            bad.as_ptr(),
            bad.len(),
            &mut v,
            &mut e
        ),
        ArborCode::InvalidArgument
    );
    message(e);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_close(h, 1000, &mut e), ArborCode::Ok);
    // Use after close and double close: errors, not undefined behaviour.
    assert_eq!(arbor_root(h, &mut n, root.as_mut_ptr(), &mut e), ArborCode::Closed);
    message(e);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_close(h, 0, &mut e), ArborCode::Closed);
    message(e);
    // A reopened database gets another handle; the old one stays dead.
    let h2 = open(dir.path());
    assert_ne!(h, h2);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_root(h, &mut n, root.as_mut_ptr(), &mut e), ArborCode::Closed);
    message(e);
    assert_eq!(arbor_root(h2, &mut n, root.as_mut_ptr(), std::ptr::null_mut()), ArborCode::Ok);
    assert_eq!(n, 1);
    assert_eq!(arbor_close(h2, 1000, std::ptr::null_mut()), ArborCode::Ok);
}

#[test]
fn buffers_panics_and_bad_input() {
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_debug_panic(&mut e), ArborCode::Panic);
    assert!(message(e).contains("panicked"));
    // A double free is an error.
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_debug_panic(&mut e), ArborCode::Panic);
    let copy = ArborBytes { ptr: e.ptr, len: e.len };
    assert_eq!(arbor_bytes_free(e, std::ptr::null_mut()), ArborCode::Ok);
    let mut e2 = ArborBytes::EMPTY;
    assert_eq!(arbor_bytes_free(copy, &mut e2), ArborCode::InvalidArgument);
    message(e2);
    // NULL with a length, lengths past the limits, non-UTF-8 paths, a bad change set.
    let mut h = 0u64;
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_open(std::ptr::null(), 5, std::ptr::null(), 0, &mut h, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let bad_path = [0xffu8, 0xfe];
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_open(bad_path.as_ptr(), 2, std::ptr::null(), 0, &mut h, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db");
    let p = p.to_str().unwrap().as_bytes();
    let toml = b"[cache]\nno_such_key = 1\n";
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_open(p.as_ptr(), p.len(), toml.as_ptr(), toml.len(), &mut h, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let h = open(&dir.path().join("db"));
    let key = [7u8; 128];
    let mut v = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, std::ptr::null(), 0, key.as_ptr(), key.len(), &mut v, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, key.as_ptr(), 7, key.as_ptr(), 1, &mut v, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    for cs in [vec![0, 0, 0, 1], vec![0, 0, 0, 1, 0, 0, 1, 9, 1, 0, 0, 0, 0], vec![0, 0, 0, 0, 9]] {
        let mut e = ArborBytes::EMPTY;
        let (mut n, mut root) = (0u64, [0u8; 32]);
        assert_eq!(
            arbor_commit(h, cs.as_ptr(), cs.len(), &mut n, root.as_mut_ptr(), &mut e),
            ArborCode::InvalidArgument
        );
        message(e);
    }
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
    // A directory holding something else is corrupt, not a new database.
    let junk = tempfile::tempdir().unwrap();
    std::fs::write(junk.path().join("CURRENT"), b"garbage\n").unwrap();
    let p = junk.path().to_str().unwrap().as_bytes();
    let mut e = ArborBytes::EMPTY;
    let mut h3 = 0u64;
    let c = arbor_open(p.as_ptr(), p.len(), std::ptr::null(), 0, &mut h3, &mut e);
    let m = message(e);
    assert!(matches!(c, ArborCode::Corrupt), "{c:?}: {m}");
}

#[test]
fn get_and_prove_at_recent_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path());
    let mut roots = Vec::new();
    for value in [&b"one"[..], b"two", b"three"] {
        let cs = change_set(&[(b"alpha", Some(value)), (b"beta", Some(b"fixed"))]);
        let (mut n, mut root) = (0u64, [0u8; 32]);
        let c =
            arbor_commit(h, cs.as_ptr(), cs.len(), &mut n, root.as_mut_ptr(), std::ptr::null_mut());
        assert_eq!(c, ArborCode::Ok);
        roots.push(root);
    }
    // Block 1 holds the first value; its proof verifies against block 1's root only.
    let mut v = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 1, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::Ok);
    assert_eq!(take(v), b"one");
    let (mut proof, mut root) = (ArborBytes::EMPTY, [0u8; 32]);
    let c = arbor_prove_at(h, 1, b"alpha".as_ptr(), 5, root.as_mut_ptr(), &mut proof, &mut e);
    assert_eq!(c, ArborCode::Ok);
    assert_eq!(root, roots[0]);
    let proof = take(proof);
    let verify = |root: &[u8; 32], v: &mut ArborBytes, e: &mut ArborBytes| {
        arbor_verify_proof(root.as_ptr(), b"alpha".as_ptr(), 5, proof.as_ptr(), proof.len(), v, e)
    };
    let mut v = ArborBytes::EMPTY;
    assert_eq!(verify(&roots[0], &mut v, &mut e), ArborCode::Ok);
    assert_eq!(take(v), b"one");
    let mut v = ArborBytes::EMPTY;
    assert_eq!(verify(&roots[2], &mut v, &mut e), ArborCode::InvalidArgument);
    message(e);
    // Block 0 (empty): absent, with an exclusion proof; a NULL root out-pointer is allowed.
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 0, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::NotFound);
    message(e);
    let mut proof = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    let c = arbor_prove_at(h, 0, b"alpha".as_ptr(), 5, std::ptr::null_mut(), &mut proof, &mut e);
    assert_eq!(c, ArborCode::Ok);
    take(proof);
    // Above the head: outside the window, named in the message; bad keys still checked.
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 4, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::OutsideWindow);
    assert!(message(e).contains("blocks 0 to 3"));
    let (mut e, mut proof) = (ArborBytes::EMPTY, ArborBytes::EMPTY);
    let c =
        arbor_prove_at(h, u64::MAX, b"alpha".as_ptr(), 5, root.as_mut_ptr(), &mut proof, &mut e);
    assert_eq!(c, ArborCode::OutsideWindow);
    message(e);
    let key = [7u8; 128];
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 1, std::ptr::null(), 0, key.as_ptr(), key.len(), &mut v, &mut e);
    assert_eq!(c, ArborCode::InvalidArgument);
    message(e);
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 1, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::Closed);
    message(e);
}

/// Block 1 creates a contract (code, slots 0..20) and a user; block 2 rewrites slot 5,
/// deletes slot 3, raises the contract's balance and removes the user.
fn eth_blocks() -> [eth::EthChanges; 2] {
    use alloy_primitives::U256;
    use eth::{AccountWrite, EthChanges};
    let write = |nonce, balance: u64, code_hash, storage| AccountWrite {
        nonce,
        balance: U256::from(balance),
        code_hash,
        storage_cleared: false,
        storage,
    };
    let mut block = EthChanges::new();
    let code = block.insert_code(CODE.to_vec());
    let slots = (0..20u64).map(|i| (word(i), U256::from(i + 100))).collect();
    block.write_account(CONTRACT, write(1, 7, code, slots));
    block.write_account(USER, write(3, 9, trie::EMPTY_CODE_HASH, Default::default()));
    let mut later = EthChanges::new();
    let slots = [(word(5), U256::from(555u64)), (word(3), U256::ZERO)].into_iter().collect();
    later.write_account(CONTRACT, write(2, 70, code, slots));
    later.remove_account(USER);
    [block, later]
}

/// [`eth_blocks`] committed with the store's nested commit; the handle opens the closed
/// database. Returns the handle and each block's root (index = block).
fn eth_db(dir: &std::path::Path) -> (u64, Vec<[u8; 32]>) {
    let mut db = store::StateDb::open(dir, store::StoreConfig::default()).unwrap();
    let mut roots = vec![db.head_root().0];
    for changes in eth_blocks() {
        roots.push(db.commit_nested(&changes.to_nested(), &eth::AccountModel).unwrap().root.0);
    }
    db.close().unwrap();
    (open(dir), roots)
}

/// An account change set as `arbor_commit_accounts` takes it.
fn encode_account_changes(changes: &eth::EthChanges) -> Vec<u8> {
    let mut out = (changes.accounts.len() as u32).to_be_bytes().to_vec();
    for (address, change) in &changes.accounts {
        out.extend_from_slice(address);
        match change {
            eth::AccountChange::Write(w) => {
                out.push(1);
                out.extend_from_slice(&w.nonce.to_be_bytes());
                out.extend_from_slice(&w.balance.to_be_bytes::<32>());
                out.extend_from_slice(&w.code_hash.0);
                out.push(u8::from(w.storage_cleared));
                out.extend_from_slice(&(w.storage.len() as u32).to_be_bytes());
                for (slot, value) in &w.storage {
                    out.extend_from_slice(&slot.0);
                    out.extend_from_slice(&value.to_be_bytes::<32>());
                }
            }
            _ => out.push(0),
        }
    }
    out.extend_from_slice(&(changes.code().len() as u32).to_be_bytes());
    for code in changes.code().values() {
        out.extend_from_slice(&(code.len() as u32).to_be_bytes());
        out.extend_from_slice(code);
    }
    out
}

const CONTRACT: [u8; 20] = [0xc0; 20];
const USER: [u8; 20] = [0xee; 20];
const CODE: &[u8] = &[0x60, 0x01, 0x60, 0x00, 0x55];

fn word(i: u64) -> state::H256 {
    state::H256(alloy_primitives::U256::from(i).to_be_bytes::<32>())
}

/// An account proof's encoding (see `account.rs`) back into eth's shape, and whether the
/// account exists.
fn decode_account_proof(address: [u8; 20], b: &[u8]) -> (bool, eth::AccountProof) {
    fn proof<'a>(b: &mut &'a [u8]) -> Vec<Vec<u8>> {
        let u32_at = |b: &mut &'a [u8]| {
            let (n, rest) = b.split_at(4);
            *b = rest;
            u32::from_be_bytes(n.try_into().unwrap()) as usize
        };
        let count = u32_at(b);
        (0..count)
            .map(|_| {
                let len = u32_at(b);
                let (node, rest) = b.split_at(len);
                *b = rest;
                node.to_vec()
            })
            .collect()
    }
    let h256 = |b: &[u8]| state::H256::from_slice(b).unwrap();
    let account = eth::Account {
        nonce: u64::from_be_bytes(b[1..9].try_into().unwrap()),
        balance: alloy_primitives::U256::from_be_slice(&b[9..41]),
        storage_root: h256(&b[41..73]),
        code_hash: h256(&b[73..105]),
    };
    let mut rest = &b[105..];
    let account_proof = proof(&mut rest);
    let count = u32::from_be_bytes(rest[..4].try_into().unwrap());
    rest = &rest[4..];
    let storage_proof = (0..count)
        .map(|_| {
            let (key, value) =
                (h256(&rest[..32]), alloy_primitives::U256::from_be_slice(&rest[32..64]));
            rest = &rest[64..];
            eth::StorageProof { key, value, proof: proof(&mut rest) }
        })
        .collect();
    assert!(rest.is_empty(), "trailing bytes");
    (b[0] == 1, eth::AccountProof { address, account, account_proof, storage_proof })
}

#[test]
fn accounts_slots_code_and_proofs_of_the_account_model() {
    let dir = tempfile::tempdir().unwrap();
    let (h, roots) = eth_db(dir.path());
    // Accounts at the head and at block 1; the removed user is not found at the head.
    let mut a =
        ArborAccount { nonce: 0, balance: [0; 32], storage_root: [0; 32], code_hash: [0; 32] };
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_get_account(h, CONTRACT.as_ptr(), 20, &mut a, &mut e), ArborCode::Ok);
    assert_eq!((a.nonce, a.balance[31], a.code_hash), (2, 70, trie::keccak256(CODE).0));
    assert_eq!(arbor_get_account_at(h, 1, CONTRACT.as_ptr(), 20, &mut a, &mut e), ArborCode::Ok);
    assert_eq!((a.nonce, a.balance[31]), (1, 7));
    assert_eq!(arbor_get_account_at(h, 1, USER.as_ptr(), 20, &mut a, &mut e), ArborCode::Ok);
    assert_eq!(a.nonce, 3);
    assert_eq!(arbor_get_account(h, USER.as_ptr(), 20, &mut a, &mut e), ArborCode::NotFound);
    message(e);
    // Slots: rewritten, deleted (zero), untouched, never written.
    for (block, slot, value) in [
        (None, 5, 555),
        (Some(1), 5, 105),
        (None, 3, 0),
        (Some(1), 3, 103),
        (None, 7, 107),
        (None, 99, 0),
    ] {
        let (mut v, s) = ([0xffu8; 32], word(slot));
        let mut e = ArborBytes::EMPTY;
        let c = match block {
            None => arbor_get_storage(
                h,
                CONTRACT.as_ptr(),
                20,
                s.0.as_ptr(),
                32,
                v.as_mut_ptr(),
                &mut e,
            ),
            Some(n) => arbor_get_storage_at(
                h,
                n,
                CONTRACT.as_ptr(),
                20,
                s.0.as_ptr(),
                32,
                v.as_mut_ptr(),
                &mut e,
            ),
        };
        assert_eq!(c, ArborCode::Ok, "slot {slot} at {block:?}");
        assert_eq!(v, word(value).0, "slot {slot} at {block:?}");
    }
    // Code by hash; the empty code's hash is the empty code; an unknown hash is not found.
    let (mut code, mut e) = (ArborBytes::EMPTY, ArborBytes::EMPTY);
    let hash = trie::keccak256(CODE);
    assert_eq!(arbor_get_code(h, hash.0.as_ptr(), 32, &mut code, &mut e), ArborCode::Ok);
    assert_eq!(take(code), CODE);
    let mut code = ArborBytes::EMPTY;
    let c = arbor_get_code(h, trie::EMPTY_CODE_HASH.0.as_ptr(), 32, &mut code, &mut e);
    assert_eq!((c, take(code)), (ArborCode::Ok, Vec::new()));
    let mut code = ArborBytes::EMPTY;
    assert_eq!(arbor_get_code(h, [9u8; 32].as_ptr(), 32, &mut code, &mut e), ArborCode::NotFound);
    message(e);
    // Proofs at the head and at block 1 verify against their block's root, answering the
    // question asked; the removed user is proven absent at the head.
    let slots: Vec<u8> = [5, 3, 99, 5].iter().flat_map(|&i| word(i).0).collect();
    let asked: Vec<state::H256> = [5, 3, 99, 5].into_iter().map(word).collect();
    for (address, block) in [(CONTRACT, None), (CONTRACT, Some(1)), (USER, None), (USER, Some(1))] {
        let (mut proof, mut root, mut n) = (ArborBytes::EMPTY, [0u8; 32], 0u64);
        let mut e = ArborBytes::EMPTY;
        let (a, s) = (address.as_ptr(), slots.as_ptr());
        let c = match block {
            None => arbor_get_proof(
                h,
                a,
                20,
                s,
                slots.len(),
                &mut n,
                root.as_mut_ptr(),
                &mut proof,
                &mut e,
            ),
            Some(b) => {
                n = b;
                arbor_get_proof_at(
                    h,
                    b,
                    a,
                    20,
                    s,
                    slots.len(),
                    root.as_mut_ptr(),
                    &mut proof,
                    &mut e,
                )
            }
        };
        assert_eq!(c, ArborCode::Ok, "{address:?} at {block:?}");
        assert_eq!(root, roots[n as usize]);
        let (exists, p) = decode_account_proof(address, &take(proof));
        assert_eq!(exists, address == CONTRACT || block == Some(1));
        p.check_query(&address, &asked).unwrap();
        p.verify(&state::H256(root)).unwrap();
        assert!(p.verify(&state::H256(roots[3 - n as usize])).is_err(), "another block's root");
    }
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
}

#[test]
fn account_calls_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _) = eth_db(dir.path());
    let mut a =
        ArborAccount { nonce: 0, balance: [0; 32], storage_root: [0; 32], code_hash: [0; 32] };
    let long = [1u8; 33];
    let expect = |c: ArborCode, e: ArborBytes, want: ArborCode, mentions: &str| {
        assert_eq!(c, want);
        let m = message(e);
        assert!(m.contains(mentions), "{m}");
    };
    for len in [0, 19, 21] {
        let mut e = ArborBytes::EMPTY;
        let c = arbor_get_account(h, long.as_ptr(), len, &mut a, &mut e);
        expect(c, e, ArborCode::InvalidArgument, "address");
    }
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_account(h, std::ptr::null(), 20, &mut a, &mut e);
    expect(c, e, ArborCode::InvalidArgument, "NULL");
    let mut v = [0u8; 32];
    for len in [31, 33] {
        let mut e = ArborBytes::EMPTY;
        let c =
            arbor_get_storage(h, CONTRACT.as_ptr(), 20, long.as_ptr(), len, v.as_mut_ptr(), &mut e);
        expect(c, e, ArborCode::InvalidArgument, "slot");
        let (mut code, mut e) = (ArborBytes::EMPTY, ArborBytes::EMPTY);
        let c = arbor_get_code(h, long.as_ptr(), len, &mut code, &mut e);
        expect(c, e, ArborCode::InvalidArgument, "code hash");
    }
    let too_many = vec![0u8; (ARBOR_PROOF_SLOTS_MAX + 1) * 32];
    for (slots, mentions) in [(&too_many[..], "limit"), (&long[..], "whole number")] {
        let (mut proof, mut e) = (ArborBytes::EMPTY, ArborBytes::EMPTY);
        let c = arbor_get_proof(
            h,
            CONTRACT.as_ptr(),
            20,
            slots.as_ptr(),
            slots.len(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut proof,
            &mut e,
        );
        expect(c, e, ArborCode::InvalidArgument, mentions);
    }
    let (mut proof, mut e) = (ArborBytes::EMPTY, ArborBytes::EMPTY);
    let c = arbor_get_proof_at(
        h,
        3,
        CONTRACT.as_ptr(),
        20,
        std::ptr::null(),
        0,
        std::ptr::null_mut(),
        &mut proof,
        &mut e,
    );
    expect(c, e, ArborCode::OutsideWindow, "blocks 0 to 2");
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_account_at(h, 9, CONTRACT.as_ptr(), 20, &mut a, &mut e);
    expect(c, e, ArborCode::OutsideWindow, "outside");
    // Plain commits that break the account model: a leaf that is no account, a slot the
    // account's storage root does not commit to.
    let key = trie::keccak256(&USER);
    let mut cs = change_set(&[(&key.0[..], Some(&b"no account"[..]))]);
    let slot_key = trie::keccak256(&word(1).0);
    let account = trie::keccak256(&CONTRACT);
    cs[..4].copy_from_slice(&2u32.to_be_bytes());
    cs.push(32);
    cs.extend_from_slice(account.as_bytes());
    cs.extend_from_slice(&32u16.to_be_bytes());
    cs.extend_from_slice(slot_key.as_bytes());
    cs.extend_from_slice(&[1, 0, 0, 0, 1, 0x09]);
    let (mut n, mut root) = (0u64, [0u8; 32]);
    let c = arbor_commit(h, cs.as_ptr(), cs.len(), &mut n, root.as_mut_ptr(), std::ptr::null_mut());
    assert_eq!(c, ArborCode::Ok);
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_account(h, USER.as_ptr(), 20, &mut a, &mut e);
    expect(c, e, ArborCode::InvalidArgument, "no Ethereum account");
    let (mut proof, mut e) = (ArborBytes::EMPTY, ArborBytes::EMPTY);
    let c = arbor_get_proof(
        h,
        CONTRACT.as_ptr(),
        20,
        word(1).0.as_ptr(),
        32,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        &mut proof,
        &mut e,
    );
    expect(c, e, ArborCode::InvalidArgument, "does not verify");
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_account(h, CONTRACT.as_ptr(), 20, &mut a, &mut e);
    expect(c, e, ArborCode::Closed, "closed");
    // A Substrate database holds no Ethereum accounts.
    let sub = tempfile::tempdir().unwrap();
    let p = sub.path().to_str().unwrap().as_bytes();
    let toml = b"layout = \"substrate-v1\"\n";
    let (mut h, mut e) = (0u64, ArborBytes::EMPTY);
    assert_eq!(
        arbor_open(p.as_ptr(), p.len(), toml.as_ptr(), toml.len(), &mut h, &mut e),
        ArborCode::Ok
    );
    let c = arbor_get_account(h, CONTRACT.as_ptr(), 20, &mut a, &mut e);
    expect(c, e, ArborCode::InvalidArgument, "substrate-v1");
    let (none, mut e) = ([0u8; 8], ArborBytes::EMPTY);
    let c = arbor_commit_accounts(
        h,
        none.as_ptr(),
        8,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        &mut e,
    );
    expect(c, e, ArborCode::InvalidArgument, "substrate-v1");
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
}

#[test]
fn account_changes_commit_through_the_abi() {
    let (dir, nested) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (reference, roots) = eth_db(nested.path());
    assert_eq!(arbor_close(reference, 1000, std::ptr::null_mut()), ArborCode::Ok);
    let h = open(dir.path());
    let mut world = eth::MemoryWorld::new();
    for (i, changes) in eth_blocks().iter().enumerate() {
        let enc = encode_account_changes(changes);
        let (mut n, mut root, mut e) = (0u64, [0u8; 32], ArborBytes::EMPTY);
        let c =
            arbor_commit_accounts(h, enc.as_ptr(), enc.len(), &mut n, root.as_mut_ptr(), &mut e);
        assert_eq!(c, ArborCode::Ok);
        assert_eq!((n, root), (i as u64 + 1, roots[i + 1]));
        assert_eq!(root, world.apply(changes).unwrap().0);
    }
    let mut code = ArborBytes::EMPTY;
    let hash = trie::keccak256(CODE);
    assert_eq!(
        arbor_get_code(h, hash.0.as_ptr(), 32, &mut code, std::ptr::null_mut()),
        ArborCode::Ok
    );
    assert_eq!(take(code), CODE);
    // Code already stored may be named again without its bytes; unknown code may not.
    let mut again = eth::EthChanges::new();
    let write = |code_hash| eth::AccountWrite {
        nonce: 1,
        balance: alloy_primitives::U256::ZERO,
        code_hash,
        storage_cleared: true,
        storage: Default::default(),
    };
    again.write_account(USER, write(hash));
    let enc = encode_account_changes(&again);
    let (mut n, mut root) = (0u64, [0u8; 32]);
    let c = arbor_commit_accounts(
        h,
        enc.as_ptr(),
        enc.len(),
        &mut n,
        root.as_mut_ptr(),
        std::ptr::null_mut(),
    );
    assert_eq!((c, n), (ArborCode::Ok, 3));
    again.write_account(USER, write(state::H256([7; 32])));
    let enc = encode_account_changes(&again);
    let mut e = ArborBytes::EMPTY;
    let c = arbor_commit_accounts(h, enc.as_ptr(), enc.len(), &mut n, root.as_mut_ptr(), &mut e);
    assert_eq!(c, ArborCode::InvalidArgument);
    assert!(message(e).contains("no code for it"));
    let mut e = ArborBytes::EMPTY;
    let c =
        arbor_commit_accounts(h, enc.as_ptr(), enc.len() - 1, &mut n, root.as_mut_ptr(), &mut e);
    assert_eq!(c, ArborCode::InvalidArgument);
    assert!(message(e).contains("truncated"));
    assert_eq!(arbor_root(h, &mut n, root.as_mut_ptr(), std::ptr::null_mut()), ArborCode::Ok);
    assert_eq!(n, 3, "nothing committed by the refused change sets");
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
}
