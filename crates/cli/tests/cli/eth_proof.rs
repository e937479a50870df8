//! `prove --db --address`: eth_getProof answers for accounts with storage in a database of
//! the account model (committed with the store's nested commit, or bulk-loaded by `init
//! --genesis`), at the head and at recent blocks after later commits changed the account;
//! `verify-proof` accepts them (also bound to the question with `--address`/`--slot`), and
//! the answer with any one byte changed is never valid and never a panic.

use alloy_primitives::U256;
use eth::{AccountModel, AccountProof, AccountWrite, Address, EthChanges, Genesis, MemoryWorld};
use state::H256;
use store::{StateDb, StoreConfig};
use trie::EMPTY_CODE_HASH;

use super::{
    arbor, arbor_stdin, assert_one_line_error, fresh_db, ok, stderr, stdout, testdata,
    EXEC_APIS_ROOT, STORAGE_ACCOUNT,
};

/// A contract whose storage every block changes.
const CONTRACT: Address = [0xc0; 20];
/// An account without storage, removed at block [`USER_REMOVED`].
const USER: Address = [0xee; 20];
/// An address no block writes.
const MISSING: Address = [0xdd; 20];
const USER_REMOVED: u64 = 5;
const BLOCKS: u64 = 6;
/// The contract's slots asked for: present, deleted at block 3, present, written at
/// block 4, never written, present.
const ASKED: [u64; 6] = [5, 3, 7, 104, 999, 0];

fn slot(i: u64) -> H256 {
    H256(U256::from(i).to_be_bytes::<32>())
}

fn hex_address(a: &Address) -> String {
    format!("0x{}", hex::encode(a))
}

/// Block `n` (1 to [`BLOCKS`]): block 1 creates the contract (code, 40 slots), the user
/// and 30 more accounts (a main trie a few levels deep); each later block changes the
/// contract's nonce, balance and slots (deletes slot `n`, writes `100 + n`, rewrites 5).
fn block(n: u64) -> EthChanges {
    let mut changes = EthChanges::new();
    let write = |nonce: u64, balance: u64, code_hash, storage| AccountWrite {
        nonce,
        balance: U256::from(balance),
        code_hash,
        storage_cleared: false,
        storage,
    };
    if n == 1 {
        let code = changes.insert_code(vec![0x60, 0x2a, 0x60, 0x00, 0x55, 0x00]);
        let slots = (0..40).map(|i| (slot(i), U256::from(i * 7 + 1))).collect();
        changes.write_account(CONTRACT, write(1, 1_000, code, slots));
        changes.write_account(USER, write(5, 10u64.pow(18), EMPTY_CODE_HASH, Default::default()));
        for i in 1..=30u8 {
            changes.write_account(
                [i; 20],
                write(0, u64::from(i), EMPTY_CODE_HASH, Default::default()),
            );
        }
        return changes;
    }
    let code = trie::keccak256(&[0x60, 0x2a, 0x60, 0x00, 0x55, 0x00]);
    let slots =
        [(slot(n), U256::ZERO), (slot(100 + n), U256::from(n)), (slot(5), U256::from(n * 1000))];
    changes.write_account(CONTRACT, write(n, 1_000 + n, code, slots.into_iter().collect()));
    if n == USER_REMOVED {
        changes.remove_account(USER);
    }
    changes
}

/// A database of blocks 1 to [`BLOCKS`] committed with `commit_nested`, and the model's
/// state after each block (index = block number; 0 is empty).
pub(super) fn build(name: &str) -> (String, Vec<Genesis>) {
    let dir = fresh_db(name);
    let mut db = StateDb::open(std::path::Path::new(&dir), StoreConfig::default()).unwrap();
    let mut world = MemoryWorld::new();
    let mut states = vec![world.to_genesis()];
    for n in 1..=BLOCKS {
        let changes = block(n);
        let root = world.apply(&changes).unwrap();
        let info = db.commit_nested(&changes.to_nested(), &AccountModel).unwrap();
        assert_eq!((info.number, info.root), (n, root), "block {n}");
        states.push(world.to_genesis());
    }
    db.close().unwrap();
    (dir, states)
}

/// `arbor prove --db` of `address` and slots (at `block` when given): the printed answer
/// and the stderr line naming the block and its root.
fn prove(db: &str, address: &Address, slots: &[u64], block: Option<u64>) -> (String, String) {
    let mut args = vec!["prove".to_string(), "--db".into(), db.into()];
    args.extend(["--address".into(), hex_address(address)]);
    for s in slots {
        args.extend(["--slot".into(), format!("{s:#x}")]);
    }
    if let Some(n) = block {
        args.extend(["--block".into(), n.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = arbor(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    (stdout(&o), stderr(&o))
}

/// `verify-proof` of `text` (through stdin) against `root`, bound to `query` when given:
/// the exit code and stdout. Never a panic.
fn verify_cli(text: &str, root: &H256, query: Option<(&Address, &[u64])>) -> (Option<i32>, String) {
    let mut args = vec!["verify-proof".to_string(), "--root".into(), root.to_string(), "-".into()];
    if let Some((address, slots)) = query {
        args.extend(["--address".into(), hex_address(address)]);
        for s in slots {
            args.extend(["--slot".into(), format!("{s:#x}")]);
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = arbor_stdin(&args, text);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    (o.status.code(), stdout(&o))
}

/// The verdict `verify-proof` reaches on `text`, in process: the same parser and checks.
/// `Err` when the text is no proof, `Ok(false)` when it does not verify.
fn verdict(text: &str, root: &H256, query: Option<(&Address, &[H256])>) -> Result<bool, String> {
    let json = eth::parse_json_strict(text).map_err(|e| e.to_string())?;
    let proof = AccountProof::from_json(&json).map_err(|e| e.to_string())?;
    if let Some((address, slots)) = query {
        if proof.check_query(address, slots).is_err() {
            return Ok(false);
        }
    }
    Ok(proof.verify(root).is_ok())
}

/// The answer's claims against the model's state at that block.
fn check_claims(text: &str, state: &Genesis, address: &Address, slots: &[u64]) {
    let proof = AccountProof::from_json(&serde_json::from_str(text).unwrap()).unwrap();
    let world = MemoryWorld::from_genesis(state).unwrap();
    assert_eq!(proof.address, *address);
    assert_eq!(proof.account, world.account(address).copied().unwrap_or_default());
    let keys: Vec<H256> = proof.storage_proof.iter().map(|s| s.key).collect();
    assert_eq!(keys, slots.iter().map(|&s| slot(s)).collect::<Vec<_>>());
    for s in &proof.storage_proof {
        assert_eq!(s.value, world.storage(address, &s.key), "slot {}", s.key);
    }
}

/// A byte changed to another: a hex digit to the next one (still hex), anything else
/// with its lowest bit flipped.
fn flip(byte: u8) -> u8 {
    const DIGITS: &[u8] = b"0123456789abcdef";
    match DIGITS.iter().position(|&d| d == byte.to_ascii_lowercase()) {
        Some(i) => DIGITS[(i + 1) % 16],
        None => byte ^ 1,
    }
}

/// Every one-byte change of `text` (in process), and a sample through `verify-proof`:
/// never valid when bound to the question; unbound, valid only as the answer to another
/// question (another address or slot: an exclusion proof of an absent slot proves others
/// absent too).
fn assert_every_flip_fails(text: &str, root: &H256, address: &Address, slots: &[u64]) {
    let words: Vec<H256> = slots.iter().map(|&s| slot(s)).collect();
    let query = Some((address, words.as_slice()));
    assert_eq!(verdict(text, root, query), Ok(true));
    let original = AccountProof::from_json(&serde_json::from_str(text).unwrap()).unwrap();
    let mut bytes = text.as_bytes().to_vec();
    let mut unbound_valid = 0;
    for i in 0..bytes.len() {
        let old = bytes[i];
        bytes[i] = flip(old);
        let changed = String::from_utf8_lossy(&bytes).into_owned();
        bytes[i] = old;
        assert_ne!(verdict(&changed, root, query), Ok(true), "byte {i} changed still verifies");
        if verdict(&changed, root, None) == Ok(true) {
            let p = AccountProof::from_json(&serde_json::from_str(&changed).unwrap()).unwrap();
            let other_question = p.address != original.address
                || p.storage_proof.iter().zip(&original.storage_proof).any(|(a, b)| a.key != b.key);
            assert!(other_question, "byte {i} changed verifies as the same question");
            unbound_valid += 1;
        }
    }
    // The binary on a spread of positions (every field is hit: the stride is small).
    let stride = bytes.len() / 60 + 1;
    for i in (0..bytes.len()).step_by(stride).chain([bytes.len() - 2]) {
        let old = bytes[i];
        bytes[i] = flip(old);
        let changed = String::from_utf8_lossy(&bytes).into_owned();
        bytes[i] = old;
        let (code, out) = verify_cli(&changed, root, Some((address, slots)));
        assert_eq!(code, Some(1), "byte {i}: {out}");
        let (code, out) = verify_cli(&changed, root, None);
        let valid_in_process = verdict(&changed, root, None) == Ok(true);
        assert_eq!(code == Some(0), valid_in_process, "byte {i}: {out}");
    }
    assert!(unbound_valid < bytes.len() / 4, "{unbound_valid} of {} changes verify", bytes.len());
    eprintln!("{} bytes changed one by one; {unbound_valid} answer another question", bytes.len());
}

#[test]
fn accounts_with_storage_prove_and_verify_at_the_head_and_at_recent_blocks() {
    let (db, states) = build("eth-proof");
    let root_of = |n: u64| eth::genesis_state_root(&states[n as usize]);
    for (block, n) in [(None, BLOCKS), (Some(2), 2), (Some(4), 4), (Some(BLOCKS), BLOCKS)] {
        for (address, slots) in
            [(&CONTRACT, &ASKED[..]), (&USER, &[1, 2][..]), (&MISSING, &[0][..])]
        {
            let (text, note) = prove(&db, address, slots, block);
            let root = root_of(n);
            assert_eq!(note.trim(), format!("proof of block {n}, state root {root}"));
            check_claims(&text, &states[n as usize], address, slots);
            let (code, out) = verify_cli(&text, &root, None);
            assert_eq!((code, out.as_str()), (Some(0), "valid\n"), "{address:?} at {n}");
            let (code, out) = verify_cli(&text, &root, Some((address, slots)));
            assert_eq!((code, out.as_str()), (Some(0), "valid\n"), "{address:?} at {n}");
            // Another question, another block's root: invalid.
            let (code, out) = verify_cli(&text, &root, Some((address, &slots[1..])));
            assert_eq!(code, Some(1), "{out}");
            let (code, out) = verify_cli(&text, &root_of(n - 1), None);
            assert_eq!(code, Some(1), "{out}");
        }
    }
    // The user exists up to the block before its removal and is proven absent after.
    let (text, _) = prove(&db, &USER, &[], Some(USER_REMOVED - 1));
    assert_ne!(
        AccountProof::from_json(&serde_json::from_str(&text).unwrap()).unwrap().account.nonce,
        0
    );
    let (text, _) = prove(&db, &USER, &[], None);
    assert_eq!(
        AccountProof::from_json(&serde_json::from_str(&text).unwrap()).unwrap().account,
        Default::default()
    );
}

#[test]
fn a_proof_with_any_byte_changed_is_never_valid() {
    let (db, states) = build("eth-proof-flips");
    // At the head, and at a block the later commits changed (the contract's slots 5, 3
    // and 104 differ between the two).
    for block in [None, Some(3)] {
        let n = block.unwrap_or(BLOCKS);
        let (text, _) = prove(&db, &CONTRACT, &ASKED, block);
        let root = eth::genesis_state_root(&states[n as usize]);
        assert_every_flip_fails(&text, &root, &CONTRACT, &ASKED);
    }
    // An absent account's exclusion proof.
    let (text, _) = prove(&db, &MISSING, &[1], None);
    assert_every_flip_fails(
        &text,
        &eth::genesis_state_root(&states[BLOCKS as usize]),
        &MISSING,
        &[1],
    );
}

/// `init --genesis` bulk-loads storage tries that read and prove: the database's answer is
/// the in-memory genesis state's, byte for byte.
#[test]
fn a_genesis_with_storage_loaded_by_init_proves_its_slots() {
    let genesis = testdata("execution-apis/genesis.json");
    let db = fresh_db("eth-proof-init");
    ok(&["init", "--db", &db, "--genesis", &genesis]);
    let slots = ["--slot", "0x1", "--slot", "0x2", "--slot", "0x3", "--slot", "0x7"];
    let from_db =
        ok(&[&["prove", "--db", &db, "--address", STORAGE_ACCOUNT][..], &slots[..]].concat());
    let from_genesis =
        ok(&[&["prove", "--genesis", &genesis, "--address", STORAGE_ACCOUNT][..], &slots[..]]
            .concat());
    assert_eq!(from_db, from_genesis);
    let root = H256::from_hex(EXEC_APIS_ROOT).unwrap();
    let address: Address = eth::parse_address(STORAGE_ACCOUNT).unwrap();
    assert_eq!(verify_cli(&from_db, &root, Some((&address, &[1, 2, 3, 7]))).0, Some(0));
    let values: Vec<String> = serde_json::from_str::<serde_json::Value>(&from_db).unwrap()
        ["storageProof"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value"].as_str().unwrap().to_string())
        .collect();
    assert!(values[..3].iter().all(|v| v != "0x0") && values[3] == "0x0", "{values:?}");
}

#[test]
fn prove_and_verify_refuse_what_they_cannot_use() {
    let (db, _) = build("eth-proof-usage");
    let addr = hex_address(&CONTRACT);
    let usage = |args: &[&str], mentions: &str| {
        let o = arbor(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_one_line_error(&o, mentions);
    };
    usage(&["prove", "--db", &db, "--address", "0x12"], "--address");
    usage(&["prove", "--db", &db, "--address", &addr, "--slot", "0xq"], "--slot");
    let too_wide = format!("0x1{}", "0".repeat(64));
    usage(&["prove", "--db", &db, "--address", &addr, "--slot", &too_wide], "--slot");
    usage(&["prove", "--db", &db], "--address");
    usage(&["prove", "--db", &db, "0x01", "--address", &addr], "cannot be used");
    usage(&["prove", "--db", &db, "0x01", "--slot", "0x1"], "cannot be used");
    usage(
        &["prove", "--db", &db, "--address", &addr, "--block", "99"],
        "outside the readable window",
    );
    usage(&["prove", "--db", &db, "--address", &addr, "--block", "9223372036854775808"], "--block");
    usage(&["prove", "--db", &db, "--address", &addr, "--layout", "substrate-v0"], "Ethereum");
    usage(&["verify-proof", "--root", EXEC_APIS_ROOT, "-", "--slot", "0x1"], "--address");
    usage(&["verify-proof", "--root", EXEC_APIS_ROOT, "-", "--address", "0xzz"], "--address");
    // A key proof is no answer to an account question.
    let key_proof = ok(&["prove", "--db", &db, "0x01"]);
    let root: serde_json::Value = serde_json::from_str(&key_proof).unwrap();
    let root = H256::from_hex(root["root"].as_str().unwrap()).unwrap();
    assert_eq!(verify_cli(&key_proof, &root, None).0, Some(0));
    let (code, out) = verify_cli(&key_proof, &root, Some((&CONTRACT, &[])));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("invalid: --address"), "{out}");
}

/// The flags of a database make no sense with `--genesis` (clap waives their `requires`).
#[test]
fn a_genesis_takes_no_database_flags() {
    let genesis = testdata("execution-apis/genesis.json");
    for flag in [&["--block", "1"][..], &["--config", "c.toml"], &["--layout", "ethereum"]] {
        let args = [&["prove", "--genesis", &genesis, "--address", STORAGE_ACCOUNT][..], flag];
        let o = arbor(&args.concat());
        assert_eq!(o.status.code(), Some(2), "{flag:?}: {}", stderr(&o));
        assert_one_line_error(&o, &format!("{} needs --db", flag[0]));
    }
}
