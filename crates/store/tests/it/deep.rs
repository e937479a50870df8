//! The resident trie's filter of deeper node keys: with a resident trie a few levels deep,
//! the commit's walk takes a leaf without a read wherever the filter rules out a stored
//! node. Every root must still be the model's, through the fill's three ways of building
//! the filter (the limit dropping during the scan of an open, a refill after a revert that
//! starts below the limit, and the limit dropping during commits as the state grows).

use state::TrieId;
use store::StateDb;

use crate::common::{model_root, open, random_block, small_config, test_seed, Model, STORAGE_A};

/// The key space of the blocks.
const KEYS: u32 = 6_000;

/// Commit `blocks` random blocks of `seed` to `db` and the model, each root checked.
fn commit_checked(db: &mut StateDb, model: &mut Model, seed: u64, blocks: u64, ctx: &str) {
    for _ in 0..blocks {
        let number = model.head() + 1;
        let changes = random_block(seed, number, KEYS, 300);
        let info = db.commit(&changes).unwrap_or_else(|e| panic!("{ctx}: block {number}: {e}"));
        model.commit(&changes);
        assert_eq!(info.root, model_root(model.state(), &TrieId::Main), "{ctx}: block {number}");
        let storage = db.trie_root(&STORAGE_A).unwrap();
        assert_eq!(storage, model_root(model.state(), &STORAGE_A), "{ctx}: block {number}");
    }
}

/// The resident trie is complete, a few levels deep, and has its filter.
fn assert_filtered(db: &StateDb, ctx: &str) {
    let r = db.stats().resident;
    assert!(r.complete && r.depth_limit <= 4 && r.deep_filter_bytes > 0, "{ctx}: {r:?}");
}

#[test]
fn commits_below_a_filtered_resident_trie_match_the_model() {
    let seed = test_seed("commits_below_a_filtered_resident_trie_match_the_model");
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config();
    config.cache.resident_bytes = 96 << 10;
    let mut model = Model::new(config.layers.history_depth);
    let mut db = open(dir.path(), &config);
    // The state grows past the budget under commits: the limit drops during an apply.
    commit_checked(&mut db, &mut model, seed, 40, "growing");
    assert_filtered(&db, "growing");
    db.close().unwrap();
    // Reopened: the fill's scan starts without a limit and drops it on the way.
    let mut db = open(dir.path(), &config);
    commit_checked(&mut db, &mut model, seed, 10, "reopened");
    assert_filtered(&db, "reopened");
    // A revert empties the resident trie; the refill starts below the limit it had.
    db.revert(3).unwrap();
    model.revert(3);
    commit_checked(&mut db, &mut model, seed ^ 1, 10, "after a revert");
    assert_filtered(&db, "after a revert");
    let deep = db.verify_deep().unwrap();
    assert!(deep.ok(), "{deep:?}");
}
