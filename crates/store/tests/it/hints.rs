//! Leaf hints: after a reopen, the resident trie's fill hints the leaves already on disk,
//! so deletions that collapse branches find their sibling leaves without scanning `flat`;
//! and hints change no root (the same blocks with and without room for them).

use std::collections::BTreeMap;

use store::ChangeSet;
use trie::TrieId;

use crate::common::{apply, indexed_key, model_root, open, small_config, State};

const KEYS: u32 = 4000;

fn insert_all() -> ChangeSet {
    let main: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
        (0..KEYS).map(|i| (indexed_key(i), Some(vec![i as u8; 40]))).collect();
    ChangeSet::from([(TrieId::Main, main)])
}

fn delete_every(step: u32) -> ChangeSet {
    let main = (0..KEYS).step_by(step as usize).map(|i| (indexed_key(i), None)).collect();
    ChangeSet::from([(TrieId::Main, main)])
}

#[test]
fn reopened_store_finds_collapsed_siblings_through_hints() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config();
    config.cache.resident_bytes = 64 << 20;
    let mut state = State::new();
    {
        let mut db = open(dir.path(), &config);
        let changes = insert_all();
        db.commit(&changes).unwrap();
        apply(&mut state, &changes);
        db.flush().unwrap();
    }
    let mut db = open(dir.path(), &config);
    let changes = delete_every(3);
    let info = db.commit(&changes).unwrap();
    apply(&mut state, &changes);
    assert_eq!(info.root, model_root(&state, &TrieId::Main));
    assert!(info.leaf_hints > 0, "no sibling found through a hint: {info:?}");
    assert!(
        info.leaf_hints > 10 * info.leaf_scans,
        "hints {} against scans {}",
        info.leaf_hints,
        info.leaf_scans
    );
    assert!(db.stats().resident.leaf_hints > 0);
    // Commits keep the hints they place: another round of deletions uses them too.
    let changes = delete_every(5);
    let info = db.commit(&changes).unwrap();
    apply(&mut state, &changes);
    assert_eq!(info.root, model_root(&state, &TrieId::Main));
    assert!(info.leaf_hints > 0);
}

#[test]
fn hints_change_no_root() {
    // Without resident budget for hints, every collapse scans; with it, the same blocks
    // give the same roots.
    let run = |resident_bytes: u64| {
        let dir = tempfile::tempdir().unwrap();
        let mut config = small_config();
        config.cache.resident_bytes = resident_bytes;
        let mut db = open(dir.path(), &config);
        db.commit(&insert_all()).unwrap();
        // Rewrite every third key (its leaf's hint goes stale, replaced by a new one), then
        // delete its neighbours.
        let rewrite: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            (0..KEYS).step_by(3).map(|i| (indexed_key(i), Some(vec![0xee; 40]))).collect();
        db.commit(&ChangeSet::from([(TrieId::Main, rewrite)])).unwrap();
        let info = db.commit(&delete_every(2)).unwrap();
        (info.root, info.leaf_hints)
    };
    let (with_hints, hinted) = run(64 << 20);
    let (without, none) = run(0);
    assert_eq!(with_hints, without);
    assert!(hinted > 0);
    assert_eq!(none, 0);
}
