//! The same state gives the same bytes whatever the thread count, whether blocks commit
//! meanwhile or not; a golden manifest id pins the format.

use std::sync::atomic::AtomicU64;

use checkpoint::{BoundaryRule, CheckpointDir, CreateOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, TrieId};

use crate::common::*;

fn all_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for sub in ["chunks", "checkpoints"] {
        let mut stack = vec![dir.join(sub)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn thread_counts_give_identical_bytes() {
    let state = eth_state(21, 3000, 40, 200);
    let tmp = tempfile::tempdir().unwrap();
    let db = load(&tmp.path().join("db"), &state);
    let mut reference = None;
    for threads in [1, 2, 3, 8] {
        let out = CheckpointDir::new(tmp.path().join(format!("t{threads}")));
        let opts =
            CreateOptions { rule: BoundaryRule { target_entries: 64, max_bytes: 8192 }, threads };
        let created = create(&db, &out, &opts);
        assert!(created.manifest.chunks.len() > 50, "{} chunks", created.manifest.chunks.len());
        let files = all_files(out.root());
        match &reference {
            None => reference = Some((created.id, files)),
            Some((id, f)) => {
                assert_eq!(created.id, *id, "{threads} threads");
                assert!(f == &files, "{threads} threads wrote other bytes");
            }
        }
    }
}

#[test]
fn golden_manifest_id() {
    let state = eth_state(42, 1000, 10, 50);
    let tmp = tempfile::tempdir().unwrap();
    let db = load(&tmp.path().join("db"), &state);
    let out = CheckpointDir::new(tmp.path().join("out"));
    let created = create(
        &db,
        &out,
        &CreateOptions { rule: BoundaryRule { target_entries: 128, max_bytes: 16384 }, threads: 2 },
    );
    // Changing this id means changing the chunk or manifest format, the boundary rule or
    // the proofs: every existing checkpoint would stop matching.
    assert_eq!(
        hex::encode(created.id.0),
        "7f653c0e66159800ac57ffd81f08a778da355175923c31e947a72a80e3e0d04b"
    );
    // The manifest before code lists were added to version 3 is this one without its
    // empty code list (three zero totals and no code chunks): the chunks are unchanged.
    let bytes = out.manifest_bytes(&created.id).unwrap().unwrap();
    let (before, code_list) = bytes.split_at(bytes.len() - 25);
    assert_eq!(code_list, [0u8; 25]);
    assert_eq!(
        hex::encode(trie::keccak256(before).0),
        "0e32cbb9488f284919b8c82a6a708711bdc6af696c21363dcd3363e5f6478f77"
    );
}

fn blocks(state: &State, n: usize, seed: u64) -> Vec<ChangeSet> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let keys: Vec<Vec<u8>> = state[&TrieId::Main].keys().cloned().collect();
    (0..n)
        .map(|_| {
            let mut c = ChangeSet::new();
            let m = c.entry(TrieId::Main).or_default();
            for _ in 0..50 {
                let k = if rng.gen_bool(0.5) {
                    keys[rng.gen_range(0..keys.len())].clone()
                } else {
                    rng.gen::<[u8; 32]>().to_vec()
                };
                m.insert(k, Some(rng.gen::<[u8; 32]>().to_vec()));
            }
            c
        })
        .collect()
}

#[test]
fn created_while_committing_equals_created_offline() {
    let state = eth_state(31, 2000, 0, 1);
    let changes = blocks(&state, 40, 5);
    let tmp = tempfile::tempdir().unwrap();
    let mut db = load(&tmp.path().join("live"), &state);
    for c in &changes[..10] {
        db.commit(c).unwrap();
    }
    db.flush().unwrap();
    let handle = db.read_handle().unwrap();
    let pinned = handle.persisted().unwrap();
    assert_eq!(pinned.head().0, 10);
    let out = CheckpointDir::new(tmp.path().join("live-ckpt"));
    let opts = small_chunks(2);
    let live = std::thread::scope(|s| {
        let committer = s.spawn(|| {
            for c in &changes[10..] {
                db.commit(c).unwrap();
            }
            db.flush().unwrap();
        });
        let created = checkpoint::create(&pinned, &opts, &out, &AtomicU64::new(0)).unwrap();
        committer.join().unwrap();
        created
    });
    assert_eq!(live.manifest.block, 10);
    let mut offline = load(&tmp.path().join("offline"), &state);
    for c in &changes[..10] {
        offline.commit(c).unwrap();
    }
    let out2 = CheckpointDir::new(tmp.path().join("offline-ckpt"));
    let created = create(&offline, &out2, &opts);
    assert_eq!(created.id, live.id);
    assert_eq!(all_files(out.root()), all_files(out2.root()));
}
