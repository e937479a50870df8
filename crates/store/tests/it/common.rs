//! Shared helpers: small store configs, the in-memory model (a `BTreeMap` per trie with
//! its naive root), deterministic random blocks, and per-test seeds.

use std::collections::BTreeMap;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use store::{ChangeSet, StateDb, StoreConfig};
use trie::{keccak256, root_from_sorted, EthLayout, TrieId, H256};

const MIB: u64 = 1 << 20;

/// A storage trie used alongside the main trie.
pub(crate) const STORAGE_A: TrieId = TrieId::Storage(H256([0x11; 32]));
/// A second storage trie.
pub(crate) const STORAGE_B: TrieId = TrieId::Storage(H256([0xa0; 32]));

/// Small caches and buffers so that tests are quick and caches evict.
pub(crate) fn small_config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.rocksdb.block_cache_bytes = 4 * MIB;
    c.rocksdb.target_file_size_bytes = MIB;
    c.rocksdb.write_buffer_bytes = 2 * MIB;
    c.rocksdb.max_total_wal_bytes = 0;
    c.rocksdb.max_open_files = 64;
    c.cache.node_cache_bytes = 256 << 10;
    c.cache.flat_cache_bytes = 256 << 10;
    c.cache.resident_bytes = 256 << 10;
    c.layers.unpersisted_bytes_max = 2 * MIB;
    c.layers.history_depth = 64;
    c
}

/// Open a store, panicking with the error's message on failure.
pub(crate) fn open(dir: &Path, config: &StoreConfig) -> StateDb {
    match StateDb::open(dir, config.clone()) {
        Ok(db) => db,
        Err(e) => panic!("open {}: {e}", dir.display()),
    }
}

/// One trie's contents in the model (no empty values).
pub(crate) type TrieState = BTreeMap<Vec<u8>, Vec<u8>>;
/// The whole state in the model.
pub(crate) type State = BTreeMap<TrieId, TrieState>;

/// Apply a change set to the model (`None` or empty = delete), as the store does.
pub(crate) fn apply(state: &mut State, changes: &ChangeSet) {
    for (trie, kv) in changes {
        let t = state.entry(*trie).or_default();
        for (k, v) in kv {
            match v.as_ref().filter(|v| !v.is_empty()) {
                Some(v) => t.insert(k.clone(), v.clone()),
                None => t.remove(k),
            };
        }
    }
    state.retain(|_, t| !t.is_empty());
}

/// The naive root of one trie of the model.
pub(crate) fn model_root(state: &State, trie: &TrieId) -> H256 {
    let pairs: Vec<(&Vec<u8>, &Vec<u8>)> =
        state.get(trie).map(|t| t.iter().collect()).unwrap_or_default();
    root_from_sorted::<EthLayout, _, _>(&pairs).unwrap().0
}

/// The model's value of `key` in `trie`.
pub(crate) fn model_get<'a>(state: &'a State, trie: &TrieId, key: &[u8]) -> Option<&'a Vec<u8>> {
    state.get(trie).and_then(|t| t.get(key))
}

/// The secure-style 32-byte key number `index` of a deterministic key space.
pub(crate) fn indexed_key(index: u32) -> Vec<u8> {
    keccak256(&index.to_be_bytes()).0.to_vec()
}

/// Block `number`'s changes, a pure function of `(seed, number)`: `updates` random
/// updates (80%) and deletions (20%) over `keys` keys, mostly in the main trie and some
/// in [`STORAGE_A`]. Replaying blocks 1..=n on an empty model gives the state at n.
pub(crate) fn random_block(seed: u64, number: u64, keys: u32, updates: usize) -> ChangeSet {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ number.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut changes = ChangeSet::new();
    for _ in 0..updates {
        let trie = if rng.gen_bool(0.8) { TrieId::Main } else { STORAGE_A };
        let key = indexed_key(rng.gen_range(0..keys));
        let value = if rng.gen_bool(0.2) {
            None
        } else {
            let len = rng.gen_range(1..80);
            Some((0..len).map(|_| rng.gen()).collect())
        };
        changes.entry(trie).or_default().insert(key, value);
    }
    changes
}

/// The seed of one test: `ARBOR_SEED` if set, else fresh. Printed so that a failure
/// (whose captured output the harness shows) can be replayed.
pub(crate) fn test_seed(test: &str) -> u64 {
    let seed = match std::env::var("ARBOR_SEED") {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("ARBOR_SEED={s:?} is not a u64")),
        Err(_) => rand::thread_rng().gen(),
    };
    eprintln!("{test}: seed {seed} (replay with ARBOR_SEED={seed})");
    seed
}

/// An environment variable parsed as a number, or `default`.
pub(crate) fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("{name}={s:?} is not a number")),
        Err(_) => default,
    }
}

/// Check the store's head, roots and every listed key against the model at its head.
pub(crate) fn assert_matches_model(
    db: &StateDb,
    state: &State,
    number: u64,
    keys: &[(TrieId, Vec<u8>)],
    ctx: &str,
) {
    assert_eq!(db.head_number(), number, "{ctx}: head number");
    assert_eq!(db.head_root(), model_root(state, &TrieId::Main), "{ctx}: head root");
    for t in [TrieId::Main, STORAGE_A, STORAGE_B] {
        assert_eq!(db.trie_root(&t).unwrap(), model_root(state, &t), "{ctx}: root of {t:?}");
    }
    for (t, k) in keys {
        assert_eq!(
            db.get(t, k).unwrap().as_ref(),
            model_get(state, t, k),
            "{ctx}: {t:?} key {}",
            hex::encode(k)
        );
    }
}

/// Start this test binary again running only `test` (a child body that acts when its
/// environment names a directory), with `envs` set, its stdout piped to the caller.
pub(crate) fn spawn_child(test: &str, envs: &[(&str, &std::ffi::OsStr)]) -> std::process::Child {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
}
