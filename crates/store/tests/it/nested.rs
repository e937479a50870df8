//! The nested commit (the Ethereum account model in one commit): random blocks of
//! account-model changes (accounts written and removed, storage cleared, big storages
//! wiped, code) committed through `StateDb::commit_nested` and through the in-memory
//! `eth::MemoryWorld` give the same root at every block; reads, reads at recent blocks and
//! `verify` agree; a revert across a wipe restores every slot; a child trie left without
//! its parent is refused with nothing committed; and SIGKILL during such commits reopens
//! at a committed block whose root the replay gives.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use alloy_primitives::U256;
use eth::{
    decode_storage_value, secure_key, Account, AccountModel, AccountWrite, Address, EthChanges,
    MemoryWorld,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{NestedChanges, TrieId, H256};
use store::{CommitError, StateDb, StoreConfig};
use trie::EMPTY_CODE_HASH;

use crate::common::{env_number, open, small_config, spawn_child, test_seed};

/// Addresses blocks draw from: few, so that accounts are written, removed and re-created.
const ACCOUNTS: u8 = 24;

fn address(i: u8) -> Address {
    [i; 20]
}

fn slot(i: u16) -> H256 {
    H256(U256::from(i).to_be_bytes::<32>())
}

/// Block `number` of the seeded sequence: a few accounts written (slots, sometimes a
/// storage cleared first, sometimes a big storage of 300 slots, sometimes code) or removed.
fn eth_block(seed: u64, number: u64) -> EthChanges {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ number.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut changes = EthChanges::new();
    for _ in 0..rng.gen_range(1..10) {
        let a = address(rng.gen_range(0..ACCOUNTS));
        if rng.gen_ratio(1, 8) {
            changes.remove_account(a);
            continue;
        }
        let (slots, domain) = match rng.gen_ratio(1, 25) {
            true => (300, 1_000u16),
            false => (rng.gen_range(0..8), 24),
        };
        let storage = (0..slots)
            .map(|_| {
                let value = match rng.gen_ratio(1, 4) {
                    true => U256::ZERO,
                    false => U256::from(rng.gen_range(1..u64::MAX)),
                };
                (slot(rng.gen_range(0..domain)), value)
            })
            .collect();
        let code_hash = match rng.gen_ratio(1, 6) {
            true => changes.insert_code((0..rng.gen_range(1..200)).map(|_| rng.gen()).collect()),
            false => EMPTY_CODE_HASH,
        };
        let write = AccountWrite {
            nonce: rng.gen_range(0..1_000),
            balance: U256::from(rng.gen::<u64>()),
            code_hash,
            storage_cleared: rng.gen_ratio(1, 10),
            storage,
        };
        let mut block = EthChanges::new();
        block.write_account(a, write);
        changes.merge(block);
    }
    changes
}

/// The store's view of one account, decoded: its leaf and its storage.
fn store_account(db: &StateDb, a: &Address) -> Option<Account> {
    let leaf = db.get(&TrieId::Main, secure_key(a).as_bytes()).unwrap()?;
    Some(Account::decode(&leaf).unwrap())
}

fn store_slot(db: &StateDb, a: &Address, s: &H256) -> U256 {
    let trie = TrieId::Storage(secure_key(a));
    match db.get(&trie, secure_key(&s.0).as_bytes()).unwrap() {
        Some(v) => decode_storage_value(&v).unwrap(),
        None => U256::ZERO,
    }
}

/// Every account and slot the blocks can touch reads the same from the store as from the
/// world, and every code the world's accounts name is in the store.
fn assert_same_state(db: &StateDb, world: &MemoryWorld, ctx: &str) {
    for i in 0..ACCOUNTS {
        let a = address(i);
        let account = store_account(db, &a);
        assert_eq!(account.as_ref(), world.account(&a), "{ctx}: account {i}");
        for s in (0..1_000).step_by(7).chain(0..24) {
            assert_eq!(store_slot(db, &a, &slot(s)), world.storage(&a, &slot(s)), "{ctx}: {i}/{s}");
        }
        if let Some(account) = account.filter(|a| a.code_hash != EMPTY_CODE_HASH) {
            let code = db.code(&account.code_hash).unwrap();
            assert_eq!(code.as_deref(), world.code(&account.code_hash), "{ctx}: code of {i}");
        }
    }
}

#[test]
fn nested_commits_match_the_memory_world() {
    let seed = test_seed("nested_commits_match_the_memory_world");
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    let mut world = MemoryWorld::new();
    let mut roots = vec![db.head_root()];
    let mut snapshots = vec![world.to_genesis()];
    let blocks = env_number("ARBOR_NESTED_BLOCKS", 60);
    for number in 1..=blocks {
        let changes = eth_block(seed, number);
        let expected = world.apply(&changes).unwrap();
        let info = db.commit_nested(&changes.to_nested(), &AccountModel).unwrap();
        assert_eq!(info.root, expected, "seed {seed}, block {number}");
        roots.push(expected);
        snapshots.push(world.to_genesis());
        if number.is_multiple_of(20) {
            assert_same_state(&db, &world, &format!("seed {seed}, block {number}"));
        }
    }
    // Reads at recent blocks give those blocks' accounts.
    for back in [1, 7, 30] {
        let n = blocks - back;
        let view = db.at(n).unwrap();
        assert_eq!(view.root(), roots[n as usize], "seed {seed}: root at {n}");
        let then = MemoryWorld::from_genesis(&snapshots[n as usize]).unwrap();
        for i in 0..ACCOUNTS {
            let key = secure_key(&address(i));
            let leaf = view.get(&TrieId::Main, key.as_bytes()).unwrap();
            let account = leaf.map(|l| Account::decode(&l).unwrap());
            assert_eq!(account.as_ref(), then.account(&address(i)), "seed {seed}: {i} at {n}");
        }
    }
    db.flush().unwrap();
    let report = db.verify().unwrap();
    assert!(report.ok(), "seed {seed}: {report:?}");
    // Reverts restore every slot, big wiped storages included.
    for target in [blocks - 5, blocks - 23] {
        db.revert(db.head_number() - target).unwrap();
        assert_eq!(db.head_root(), roots[target as usize], "seed {seed}: revert to {target}");
        let then = MemoryWorld::from_genesis(&snapshots[target as usize]).unwrap();
        assert_same_state(&db, &then, &format!("seed {seed}, reverted to {target}"));
    }
    assert!(db.verify().unwrap().ok(), "seed {seed}: verify after the reverts");
}

#[test]
fn a_wipe_of_a_big_storage_reverts_slot_by_slot() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    let a = address(1);
    let storage = (0..2_000u16).map(|i| (slot(i), U256::from(u64::from(i) + 1))).collect();
    let write = AccountWrite {
        nonce: 1,
        balance: U256::from(5u8),
        code_hash: EMPTY_CODE_HASH,
        storage_cleared: false,
        storage,
    };
    let mut block = EthChanges::new();
    block.write_account(a, write);
    db.commit_nested(&block.to_nested(), &AccountModel).unwrap();
    let full = db.head_root();
    let trie = TrieId::Storage(secure_key(&a));
    let storage_root = db.trie_root(&trie).unwrap();
    assert_eq!(store_account(&db, &a).unwrap().storage_root, storage_root);
    let mut removal = EthChanges::new();
    removal.remove_account(a);
    let info = db.commit_nested(&removal.to_nested(), &AccountModel).unwrap();
    assert_eq!(info.root, trie::EMPTY_ROOT, "the only account is gone");
    assert_eq!(db.trie_root(&trie).unwrap(), trie::EMPTY_ROOT, "its storage went with it");
    assert_eq!(db.range(&trie, &[], None).unwrap().count(), 0);
    db.revert(1).unwrap();
    assert_eq!(db.head_root(), full);
    assert_eq!(db.trie_root(&trie).unwrap(), storage_root);
    for i in 0..2_000u16 {
        assert_eq!(store_slot(&db, &a, &slot(i)), U256::from(u64::from(i) + 1), "slot {i}");
    }
    assert!(db.verify().unwrap().ok());
}

#[test]
fn a_child_without_its_parent_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    let orphan = TrieId::Storage(secure_key(&address(9)));
    let mut block = NestedChanges::default();
    block.changes.entry(orphan).or_default().insert(vec![1; 32], Some(vec![0x05]));
    let e = db.commit_nested(&block, &AccountModel).unwrap_err();
    assert!(matches!(e, CommitError::ChildWithoutParent { trie, .. } if trie == orphan), "{e}");
    assert_eq!(db.head_number(), 0, "nothing was committed");
    // A trie the model does not nest is refused too.
    let mut block = NestedChanges::default();
    block.cleared.insert(TrieId::Main);
    let e = db.commit_nested(&block, &AccountModel).unwrap_err();
    assert!(matches!(e, CommitError::NotAChild { .. }), "{e}");
    // A main-trie value that is not an account leaf is refused by the model.
    let mut block = NestedChanges::default();
    block.changes.entry(TrieId::Main).or_default().insert(vec![3; 32], Some(b"junk".to_vec()));
    let e = db.commit_nested(&block, &AccountModel).unwrap_err();
    assert!(matches!(e, CommitError::Leaf(_)), "{e}");
    assert_eq!(db.head_number(), 0);
}

const CHILD_DIR_ENV: &str = "ARBOR_NESTED_CHILD_DIR";
const CHILD_SEED_ENV: &str = "ARBOR_NESTED_CHILD_SEED";

fn crash_config() -> StoreConfig {
    let mut c = small_config();
    c.rocksdb.write_buffer_bytes = 1 << 20;
    c
}

/// The crash test's child: commits the seeded blocks until killed, printing `durable
/// <number> <root>` after each flush (every third block).
#[test]
fn nested_crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else { return };
    let seed: u64 = std::env::var(CHILD_SEED_ENV).unwrap().parse().unwrap();
    let mut db = open(Path::new(&dir), &crash_config());
    let mut out = std::io::stdout();
    loop {
        let number = db.head_number() + 1;
        db.commit_nested(&eth_block(seed, number).to_nested(), &AccountModel).unwrap();
        if number.is_multiple_of(3) {
            db.flush().unwrap();
            writeln!(out, "durable {number} {}", db.head_root()).unwrap();
            out.flush().unwrap();
        }
    }
}

/// SIGKILL while blocks with wipes and code commit: every reopen is at a committed block
/// whose root (and accounts, slots and code) the in-memory replay gives, at or past the
/// last block reported durable, and `verify` passes.
#[test]
fn sigkill_during_nested_commits() {
    let seed = test_seed("sigkill_during_nested_commits");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut world = MemoryWorld::new();
    let mut replayed = 0;
    for iteration in 0..env_number("ARBOR_CRASH_ITERATIONS", 3) {
        let ctx = format!("seed {seed}, iteration {iteration}");
        let block_seed = seed.to_string();
        let envs = [(CHILD_DIR_ENV, dir.path().as_os_str()), (CHILD_SEED_ENV, block_seed.as_ref())];
        let mut child = spawn_child("nested::nested_crash_child", &envs);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let lines = BufReader::new(stdout).lines().map_while(Result::ok);
            lines.filter(|l| l.contains("durable ")).last()
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..=700)));
        child.kill().unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(9), "{ctx}: the child ended early");
        let last = reader.join().unwrap();
        let db = open(dir.path(), &crash_config());
        let head = db.head_number();
        assert!(head >= replayed, "{ctx}: head {head} went back from {replayed}");
        if let Some(line) = last {
            let number: u64 = line.rsplit(' ').nth(1).unwrap().parse().unwrap();
            assert!(head >= number, "{ctx}: head {head} is behind durable block {number}");
        }
        while replayed < head {
            replayed += 1;
            world.apply(&eth_block(seed, replayed)).unwrap();
        }
        assert_eq!(db.head_root(), world.root(), "{ctx}: root of head {head}");
        assert_same_state(&db, &world, &ctx);
        assert!(db.verify().unwrap().ok(), "{ctx}: verify");
        eprintln!("{ctx}: reopened at block {head}");
    }
    assert!(replayed > 0, "seed {seed}: no block was committed before the kills");
}

/// Block records: written with their block, read back, removed by its revert, kept for
/// the 257 newest blocks; block 0's and code come with a bulk load.
#[test]
fn block_records_follow_their_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    let code = b"\x60\x00\x60\x00".to_vec();
    let code_hash = trie::keccak256(&code);
    let mut load = db.begin_bulk_load("genesis").unwrap();
    load.put_code(&code_hash, &code).unwrap();
    load.set_record(b"genesis header");
    load.finish().unwrap();
    assert_eq!(db.block_record(0).unwrap().as_deref(), Some(&b"genesis header"[..]));
    assert_eq!(db.code(&code_hash).unwrap(), Some(code));
    let record = |n: u64| format!("header {n}").into_bytes();
    for n in 1..=300u64 {
        let mut block = eth_block(7, n).to_nested();
        block.record = Some(record(n));
        db.commit_nested(&block, &AccountModel).unwrap();
    }
    let handle = db.read_handle().unwrap();
    assert_eq!(handle.block_record(300).unwrap(), Some(record(300)));
    assert_eq!(db.block_record(44).unwrap(), Some(record(44)), "the oldest kept");
    assert_eq!(db.block_record(43).unwrap(), None, "deleted 257 blocks later");
    assert_eq!(db.block_record(0).unwrap(), None);
    db.revert(3).unwrap();
    assert_eq!(db.block_record(298).unwrap(), None, "reverted with its block");
    assert_eq!(db.block_record(297).unwrap(), Some(record(297)));
    assert_eq!(db.block_record(41).unwrap(), Some(record(41)), "restored by the revert");
    drop(handle);
    drop(db);
    let db = open(dir.path(), &small_config());
    assert_eq!(db.block_record(297).unwrap(), Some(record(297)), "after reopening");
}

/// Reads every key `nested` changes, as an executor reads what it writes (with
/// `keep_reads`, their old values are then the kept ones).
fn read_changed_keys(db: &StateDb, nested: &NestedChanges) {
    for (trie, kv) in &nested.changes {
        for key in kv.keys() {
            db.get(trie, key).unwrap();
        }
    }
}

#[test]
fn kept_reads_give_the_blocks_their_old_values() {
    let seed = test_seed("kept_reads_give_the_blocks_their_old_values");
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), &small_config());
    db.keep_reads(true);
    let mut world = MemoryWorld::new();
    let mut roots = vec![db.head_root()];
    let mut snapshots = vec![world.to_genesis()];
    let blocks = env_number("ARBOR_NESTED_BLOCKS", 60);
    let (mut number, mut step) = (1, 0u64);
    while number <= blocks {
        step += 1;
        let changes = eth_block(seed, number);
        let nested = changes.to_nested();
        // Most blocks read their keys first; some read none (the commit reads them); some
        // read them and then find the head moved under the record (a revert), so what was
        // kept is of another root and must not be used.
        match step % 5 {
            0 => {}
            3 if number > 4 => {
                // Read at this head, then the head moves back two blocks, and the same
                // changes commit there without a read: the record is of another root.
                read_changed_keys(&db, &nested);
                db.revert(2).unwrap();
                roots.truncate(roots.len() - 2);
                snapshots.truncate(snapshots.len() - 2);
                world = MemoryWorld::from_genesis(snapshots.last().unwrap()).unwrap();
                let expected = world.apply(&changes).unwrap();
                let info = db.commit_nested(&nested, &AccountModel).unwrap();
                assert_eq!(info.root, expected, "seed {seed}, block {number} after a revert");
                roots.push(expected);
                snapshots.push(world.to_genesis());
                number -= 1;
                continue;
            }
            _ => read_changed_keys(&db, &nested),
        }
        let expected = world.apply(&changes).unwrap();
        let info = db.commit_nested(&nested, &AccountModel).unwrap();
        assert_eq!(info.root, expected, "seed {seed}, block {number}");
        roots.push(expected);
        snapshots.push(world.to_genesis());
        number += 1;
    }
    db.flush().unwrap();
    assert!(db.verify().unwrap().ok(), "seed {seed}: verify");
    // The reverse diffs hold the true old values: reverts restore every state.
    for back in [3, 11, 9] {
        db.revert(back).unwrap();
        let n = db.head_number() as usize;
        assert_eq!(db.head_root(), roots[n], "seed {seed}: revert to {n}");
        let then = MemoryWorld::from_genesis(&snapshots[n]).unwrap();
        assert_same_state(&db, &then, &format!("seed {seed}, reverted to {n}"));
    }
    assert!(db.verify().unwrap().ok(), "seed {seed}: verify after the reverts");
}
