//! The store back-end of the reads (`StoreWorld`): random blocks of account-model changes
//! committed through `StateDb::commit_nested` read the same through the store (at the head
//! from the committer and from a read handle, at recent blocks through views, and through
//! revm's database adapter) as through the in-memory `MemoryWorld` they were applied to,
//! and the store's tries (`StoreTries`) prove them with `eth::AccountReader` against the
//! memory world's roots; block hashes come from the caller's source; leaves that do not
//! decode and reads and proofs of a reverted block are typed errors.

use std::collections::BTreeMap;

use alloy_primitives::{Address as RevmAddress, B256, U256};
use eth::{
    secure_key, AccountModel, AccountReader, AccountWrite, Address, EthChanges, MemoryWorld,
    ReadError, TrieProver,
};
use evm::{DbError, NoBlockHashes, StoreReadError, StoreTries, StoreWorld, WorldDb, WorldReader};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use revm::database_interface::DatabaseRef;
use state::{ChangeSet, TrieId, H256};
use store::{StateDb, StoreConfig};
use trie::{keccak256, EMPTY_CODE_HASH};

/// Addresses the blocks draw from, and one more that no block writes.
const ACCOUNTS: u8 = 12;
/// Slots read back per account: the ones blocks write and some they never do.
const SLOTS: u16 = 40;

fn address(i: u8) -> Address {
    [i; 20]
}

fn slot(i: u16) -> H256 {
    H256(U256::from(i).to_be_bytes::<32>())
}

fn test_seed(test: &str) -> u64 {
    let seed = match std::env::var("ARBOR_SEED") {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("ARBOR_SEED={s:?} is not a u64")),
        Err(_) => rand::thread_rng().gen(),
    };
    eprintln!("{test}: seed {seed} (replay with ARBOR_SEED={seed})");
    seed
}

fn small_config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.rocksdb.block_cache_bytes = 4 << 20;
    c.rocksdb.write_buffer_bytes = 1 << 20;
    c.rocksdb.max_total_wal_bytes = 0;
    c.cache.node_cache_bytes = 256 << 10;
    c.cache.flat_cache_bytes = 256 << 10;
    c.cache.resident_bytes = 256 << 10;
    c.layers.unpersisted_bytes_max = 2 << 20;
    c.layers.history_depth = 16;
    c.history.recent_blocks = 16;
    c
}

/// One block of the seeded sequence: accounts written (slots set and zeroed, sometimes
/// their storage cleared first, sometimes code) or removed.
fn eth_block(rng: &mut ChaCha8Rng) -> EthChanges {
    let mut changes = EthChanges::new();
    for _ in 0..rng.gen_range(1..8) {
        let a = address(rng.gen_range(0..ACCOUNTS - 1));
        if rng.gen_ratio(1, 7) {
            let mut removal = EthChanges::new();
            removal.remove_account(a);
            changes.merge(removal);
            continue;
        }
        let storage = (0..rng.gen_range(0..10))
            .map(|_| {
                let value = match rng.gen_ratio(1, 4) {
                    true => U256::ZERO,
                    false => U256::from(rng.gen_range(1..u64::MAX)),
                };
                (slot(rng.gen_range(0..SLOTS - 8)), value)
            })
            .collect();
        let mut block = EthChanges::new();
        let code_hash = match rng.gen_ratio(1, 5) {
            true => block.insert_code((0..rng.gen_range(1..100)).map(|_| rng.gen()).collect()),
            false => EMPTY_CODE_HASH,
        };
        let write = AccountWrite {
            nonce: rng.gen_range(0..100),
            balance: U256::from(rng.gen::<u64>()),
            code_hash,
            storage_cleared: rng.gen_ratio(1, 8),
            storage,
        };
        block.write_account(a, write);
        changes.merge(block);
    }
    changes
}

/// Every account, slot and code `world` can hold reads the same through `reader`, and
/// through revm's adapter over it.
fn assert_reads_match<R: WorldReader>(reader: R, world: &MemoryWorld, ctx: &str) {
    for i in 0..ACCOUNTS {
        let a = address(i);
        let account = reader.account(&a).unwrap();
        assert_eq!(account.as_ref(), world.account(&a), "{ctx}: account {i}");
        for s in 0..SLOTS {
            assert_eq!(reader.storage(&a, &slot(s)).unwrap(), world.storage(&a, &slot(s)));
        }
        if let Some(account) = account.filter(|a| a.code_hash != EMPTY_CODE_HASH) {
            let code = reader.code(&account.code_hash).unwrap();
            assert_eq!(code.as_deref(), world.code(&account.code_hash), "{ctx}: code of {i}");
        }
    }
    let db = WorldDb::new(reader);
    for i in 0..ACCOUNTS {
        let info = db.basic_ref(RevmAddress::from(address(i))).unwrap();
        let want = world.account(&address(i));
        assert_eq!(info.map(|a| (a.nonce, a.balance)), want.map(|a| (a.nonce, a.balance)));
        let value = db.storage_ref(RevmAddress::from(address(i)), U256::from(3u8)).unwrap();
        assert_eq!(value, world.storage(&address(i), &slot(3)), "{ctx}: adapter, {i}");
    }
}

/// Every account of `world`, with slots it holds and slots it does not (one asked twice),
/// is proven through `tries` against `world`'s root: the answer verifies, answers its
/// question and carries the world's values.
fn assert_proofs_match<T: TrieProver>(tries: T, world: &MemoryWorld, ctx: &str) {
    let root = world.root();
    let reader = AccountReader::new(tries);
    assert_eq!(reader.tries().state_root().unwrap(), root, "{ctx}: root");
    let slots = [slot(3), slot(0), slot(SLOTS - 1), slot(3), slot(17)];
    for i in 0..ACCOUNTS {
        let a = address(i);
        let proof = reader.prove(&a, &slots).unwrap();
        proof.verify(&root).unwrap();
        proof.check_query(&a, &slots).unwrap();
        assert_eq!(proof.account, world.account(&a).cloned().unwrap_or_default(), "{ctx}: {i}");
        for s in &proof.storage_proof {
            assert_eq!(s.value, world.storage(&a, &s.key), "{ctx}: account {i}, slot {}", s.key);
        }
    }
}

#[test]
fn the_store_reads_what_the_memory_world_holds() {
    let seed = test_seed("the_store_reads_what_the_memory_world_holds");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(dir.path(), small_config()).unwrap();
    let mut world = MemoryWorld::new();
    let mut snapshots = vec![world.to_genesis()];
    let blocks = 24u64;
    for number in 1..=blocks {
        let changes = eth_block(&mut rng);
        let want = world.apply(&changes).unwrap();
        let got = db.commit_nested(&changes.to_nested(), &AccountModel).unwrap().root;
        let ctx = format!("seed {seed}, block {number}");
        assert_eq!(got, want, "{ctx}: root");
        snapshots.push(world.to_genesis());
        assert_reads_match(StoreWorld::new(&db, NoBlockHashes), &world, &ctx);
        let handle = db.read_handle().unwrap();
        assert_reads_match(StoreWorld::new(handle, NoBlockHashes), &world, &ctx);
        if number % 4 == 0 {
            assert_proofs_match(StoreTries(&db), &world, &ctx);
        }
        if number % 8 == 0 {
            db.flush().unwrap();
        }
    }
    for back in [1, 5, 12] {
        let n = blocks - back;
        let then = MemoryWorld::from_genesis(&snapshots[n as usize]).unwrap();
        let ctx = format!("seed {seed}, at block {n}");
        assert_reads_match(StoreWorld::new(db.at(n).unwrap(), NoBlockHashes), &then, &ctx);
        let handle = db.read_handle().unwrap();
        assert_reads_match(StoreWorld::new(handle.at(n).unwrap(), NoBlockHashes), &then, &ctx);
        assert_proofs_match(StoreTries(db.at(n).unwrap()), &then, &ctx);
        assert_proofs_match(StoreTries(handle.at(n).unwrap()), &then, &ctx);
    }
}

#[test]
fn block_hashes_come_from_the_callers_source() {
    let dir = tempfile::tempdir().unwrap();
    let db = StateDb::open(dir.path(), small_config()).unwrap();
    let hashes = BTreeMap::from([(7u64, H256([7; 32]))]);
    let world = StoreWorld::new(&db, hashes);
    assert_eq!(world.block_hash(7).unwrap(), Some(H256([7; 32])));
    assert_eq!(world.block_hash(8).unwrap(), None);
    let adapter = WorldDb::new(world);
    assert_eq!(adapter.block_hash_ref(7).unwrap(), B256::from([7; 32]));
    assert!(matches!(adapter.block_hash_ref(8), Err(DbError::MissingBlockHash(8))));

    let by_number = |n: u64| (n < 100).then(|| keccak256(n.to_string().as_bytes()));
    let world = StoreWorld::new(&db, by_number);
    assert_eq!(world.block_hash(5).unwrap(), Some(keccak256(b"5")));
    assert_eq!(world.block_hash(100).unwrap(), None);

    let adapter = WorldDb::new(StoreWorld::new(&db, NoBlockHashes));
    assert!(matches!(adapter.block_hash_ref(1), Err(DbError::MissingBlockHash(1))));
}

#[test]
fn bad_leaves_and_reverted_blocks_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = StateDb::open(dir.path(), small_config()).unwrap();
    let (a, b) = (address(1), address(2));
    // Raw writes the account-model commit would refuse: a leaf that is no account, a slot
    // value with a leading zero byte.
    let mut block = ChangeSet::new();
    block
        .entry(TrieId::Main)
        .or_default()
        .insert(secure_key(&a).0.to_vec(), Some(b"junk".to_vec()));
    let storage = block.entry(TrieId::Storage(secure_key(&b))).or_default();
    storage.insert(secure_key(&slot(4).0).0.to_vec(), Some(vec![0x82, 0x00, 0x01]));
    db.commit(&block).unwrap();

    let world = StoreWorld::new(&db, NoBlockHashes);
    let e = world.account(&a).unwrap_err();
    assert!(matches!(e, StoreReadError::Account { address, .. } if address == a), "{e}");
    assert!(e.to_string().contains(&hex::encode(a)), "{e}");
    let e = world.storage(&b, &slot(4)).unwrap_err();
    assert!(matches!(e, StoreReadError::StorageValue { slot: s, .. } if s == slot(4)), "{e}");
    assert_eq!(world.storage(&b, &slot(5)).unwrap(), U256::ZERO, "an absent slot is zero");
    let adapter = WorldDb::new(StoreWorld::new(&db, NoBlockHashes));
    let e = adapter.basic_ref(RevmAddress::from(a)).unwrap_err();
    assert!(matches!(e, DbError::Read(StoreReadError::Account { .. })), "{e}");

    // A view of a block reverted since it was taken.
    let next = BTreeMap::from([(vec![9; 32], Some(vec![1]))]);
    db.commit(&ChangeSet::from([(TrieId::Main, next)])).unwrap();
    let handle = db.read_handle().unwrap();
    let view = handle.at(2).unwrap();
    db.revert(1).unwrap();
    let e = StoreWorld::new(view, NoBlockHashes).account(&b).unwrap_err();
    assert!(matches!(e, StoreReadError::At(_)), "{e}");
    // Proofs of a block replaced since its view was taken: the store's error, as it is.
    let reader = AccountReader::new(StoreTries(handle.at(1).unwrap()));
    db.revert(1).unwrap();
    let other = BTreeMap::from([(vec![8; 32], Some(vec![2]))]);
    db.commit(&ChangeSet::from([(TrieId::Main, other)])).unwrap();
    let e = reader.prove(&b, &[slot(4)]).unwrap_err();
    assert!(matches!(e, ReadError::Source(store::AtError::Reverted { block: 1 })), "{e}");
}
