//! Shared helpers: Ethereum-shaped random states (accounts whose storage roots commit to
//! their storage tries), stores loaded with them, and whole-store comparisons.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;

use alloy_primitives::U256;
use checkpoint::{
    CheckpointDir, CreateOptions, Created, Offered, RestoreOptions, Restorer, Trusted,
};
use eth::Account;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{TrieId, H256};
use store::{StateDb, StoreConfig};
use trie::{keccak256, root_from_sorted, EthLayout};

const MIB: u64 = 1 << 20;

/// Small caches so that tests are quick.
pub(crate) fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.rocksdb.block_cache_bytes = 4 * MIB;
    c.rocksdb.write_buffer_bytes = 2 * MIB;
    c.rocksdb.max_open_files = 64;
    c.cache.node_cache_bytes = 256 << 10;
    c.cache.flat_cache_bytes = 256 << 10;
    c.cache.resident_bytes = 1 << 20;
    c.layers.unpersisted_bytes_max = 2 * MIB;
    c
}

pub(crate) fn open(dir: &Path) -> StateDb {
    StateDb::open(dir, config()).unwrap()
}

/// A whole state: trie → key → value.
pub(crate) type State = BTreeMap<TrieId, BTreeMap<Vec<u8>, Vec<u8>>>;

/// A random Ethereum-shaped state: `accounts` accounts, of which those picked get a
/// storage trie of 1..=`slots_max` slots.
pub(crate) fn eth_state(
    seed: u64,
    accounts: usize,
    with_storage: usize,
    slots_max: usize,
) -> State {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut state = State::new();
    let mut main = BTreeMap::new();
    for i in 0..accounts {
        let key = keccak256(
            &(seed, i)
                .0
                .to_be_bytes()
                .iter()
                .chain(&(i as u64).to_be_bytes())
                .copied()
                .collect::<Vec<u8>>(),
        );
        let mut account = Account {
            nonce: rng.gen_range(0..1000),
            balance: U256::from(rng.gen::<u64>()),
            ..Account::default()
        };
        if i < with_storage {
            let n = rng.gen_range(1..=slots_max);
            let slots: BTreeMap<Vec<u8>, Vec<u8>> = (0..n)
                .map(|_| {
                    let k = keccak256(&rng.gen::<[u8; 32]>()).0.to_vec();
                    let v = trie::rlp_encode_string(&rng.gen::<[u8; 8]>());
                    (k, v)
                })
                .collect();
            let pairs: Vec<(&Vec<u8>, &Vec<u8>)> = slots.iter().collect();
            account.storage_root = root_from_sorted::<EthLayout, _, _>(&pairs).unwrap().0;
            state.insert(TrieId::Storage(key), slots);
        }
        main.insert(key.0.to_vec(), account.rlp());
    }
    if !main.is_empty() {
        state.insert(TrieId::Main, main);
    }
    state
}

/// A database at block 0 holding `state` (bulk load + bottom-up rebuild).
pub(crate) fn load(dir: &Path, state: &State) -> StateDb {
    let mut db = open(dir);
    let entries =
        state.iter().flat_map(|(t, kv)| kv.iter().map(move |(k, v)| (*t, k.clone(), v.clone())));
    db.bulk_load("test state", entries).unwrap();
    db
}

/// Create a checkpoint of `db`'s persisted head into `out`.
pub(crate) fn create(db: &StateDb, out: &CheckpointDir, opts: &CreateOptions) -> Created {
    db.flush().unwrap();
    let handle = db.read_handle().unwrap();
    let state = handle.persisted().unwrap();
    checkpoint::create(&state, opts, out, &AtomicU64::new(0)).unwrap()
}

/// Small chunks so that small states span many.
pub(crate) fn small_chunks(threads: usize) -> CreateOptions {
    CreateOptions {
        rule: checkpoint::BoundaryRule { target_entries: 16, max_bytes: 4096 },
        threads,
    }
}

/// Offer every chunk of `created` (state and code chunks: [`checkpoint::Manifest::chunk_name`])
/// from `src` in the order `order`, then the staged ones until none is left; finish.
pub(crate) fn restore(
    db: &mut StateDb,
    src: &CheckpointDir,
    created: &Created,
    order: &[usize],
    staging: &Path,
) -> Trusted {
    let trusted = Trusted { block: created.manifest.block, root: created.manifest.root };
    let bytes = src.manifest_bytes(&created.id).unwrap().unwrap();
    let r = Restorer::begin(db, trusted, &bytes, &RestoreOptions::new(staging)).unwrap();
    for &i in order {
        let (digest, _) = created.manifest.chunk_name(i).unwrap();
        let c = src.chunk(&digest).unwrap().unwrap();
        let o = r.offer(i, &c).unwrap();
        assert!(matches!(o, Offered::Applied { .. } | Offered::Staged | Offered::AlreadyDone));
        r.retry_staged().unwrap();
    }
    while r.retry_staged().unwrap() > 0 {}
    assert!(r.missing().is_empty());
    r.finish().unwrap()
}

/// Every flat entry of a database's persisted state, by trie.
pub(crate) fn dump(db: &StateDb) -> State {
    db.flush().unwrap();
    let h = db.read_handle().unwrap();
    let s = h.persisted().unwrap();
    let mut cur = s.cursor(&[]).unwrap();
    let mut out = State::new();
    while let Some((k, v)) = cur.entry() {
        let (t, key) = TrieId::split(k).unwrap();
        out.entry(t).or_default().insert(key.to_vec(), v.to_vec());
        cur.advance();
    }
    cur.status().unwrap();
    out
}

/// The root of every trie of `state` as the store records it.
pub(crate) fn roots(db: &StateDb, state: &State) -> BTreeMap<TrieId, H256> {
    state.keys().map(|t| (*t, db.trie_root(t).unwrap())).collect()
}

/// A deterministic shuffle.
pub(crate) fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for i in (1..n).rev() {
        v.swap(i, rng.gen_range(0..=i));
    }
    v
}
