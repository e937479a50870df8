//! Restore equals source: same flat state, same root, same storage roots; chunks in any
//! order; a partial restore resumed; the restored database commits like the source.

use proptest::prelude::*;
use state::TrieId;

use crate::common::*;

fn check_round_trip(state: &State, threads: usize, order_seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), state);
    let out = checkpoint::CheckpointDir::new(tmp.path().join("ckpt"));
    let created = create(&src, &out, &small_chunks(threads));
    let mut dst = open(&tmp.path().join("dst"));
    let order = shuffled(created.manifest.chunks.len(), order_seed);
    let t = restore(&mut dst, &out, &created, &order, &tmp.path().join("staging"));
    assert_eq!((t.block, t.root), (0, src.head_root()));
    assert_eq!(dst.head_root(), src.head_root());
    assert_eq!(dump(&dst), dump(&src));
    assert_eq!(roots(&dst, state), roots(&src, state));
    let report = dst.verify().unwrap();
    assert!(report.ok(), "{report:?}");
    // The restored nodes serve commits exactly as the source's do.
    let mut changes = state::ChangeSet::new();
    for (t, kv) in state {
        let m = changes.entry(*t).or_default();
        for (i, (k, v)) in kv.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
            let nv = if i % 2 == 0 { None } else { Some([v.as_slice(), b"x"].concat()) };
            m.insert(k.clone(), nv);
        }
    }
    let mut src = src;
    let a = src.commit(&changes).unwrap();
    let b = dst.commit(&changes).unwrap();
    assert_eq!(a.root, b.root);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(12)))]

    #[test]
    fn restore_equals_source(seed in any::<u64>(), accounts in 0usize..300, with_storage in 0usize..20, slots in 1usize..80, threads in 1usize..4, order in any::<u64>()) {
        let state = eth_state(seed, accounts, with_storage.min(accounts), slots);
        check_round_trip(&state, threads, order);
    }
}

#[test]
fn empty_state() {
    check_round_trip(&State::new(), 2, 1);
}

#[test]
fn one_account() {
    check_round_trip(&eth_state(3, 1, 0, 1), 1, 1);
    check_round_trip(&eth_state(4, 1, 1, 5), 1, 1);
}

#[test]
fn one_trie_over_many_chunks_and_many_storage_tries() {
    check_round_trip(&eth_state(5, 2000, 0, 1), 3, 7);
    check_round_trip(&eth_state(6, 300, 300, 4), 2, 8);
    check_round_trip(&eth_state(7, 50, 3, 600), 2, 9);
}

#[test]
fn partial_restore_then_resume() {
    let state = eth_state(11, 500, 30, 60);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let out = checkpoint::CheckpointDir::new(tmp.path().join("ckpt"));
    let created = create(&src, &out, &small_chunks(2));
    let n = created.manifest.chunks.len();
    assert!(n > 10, "{n} chunks");
    let order = shuffled(n, 3);
    let trusted = checkpoint::Trusted { block: 0, root: src.head_root() };
    let manifest = out.manifest_bytes(&created.id).unwrap().unwrap();
    let staging = tmp.path().join("staging");
    let dst_dir = tmp.path().join("dst");
    {
        let mut dst = open(&dst_dir);
        let r = checkpoint::Restorer::begin(
            &mut dst,
            trusted,
            &manifest,
            &checkpoint::RestoreOptions::new(&staging),
        )
        .unwrap();
        for &i in &order[..n / 2] {
            r.offer(i, &out.chunk(&created.manifest.chunks[i].digest).unwrap().unwrap()).unwrap();
        }
        // Dropped without finishing: the database is marked unfinished.
    }
    let mut dst = open(&dst_dir);
    assert!(dst.unfinished_bulk_load().is_some());
    assert!(dst.get(&TrieId::Main, &[0; 32]).is_err(), "reads refused while restoring");
    let r = checkpoint::Restorer::begin(
        &mut dst,
        trusted,
        &manifest,
        &checkpoint::RestoreOptions::new(&staging),
    )
    .unwrap();
    let restored_before = r.restored();
    assert!(restored_before > 0);
    let missing = r.missing();
    assert!(missing.len() < n);
    for i in missing {
        r.offer(i, &out.chunk(&created.manifest.chunks[i].digest).unwrap().unwrap()).unwrap();
        r.retry_staged().unwrap();
    }
    while r.retry_staged().unwrap() > 0 {}
    r.finish().unwrap();
    assert_eq!(dump(&dst), dump(&src));
    assert!(dst.verify().unwrap().ok());
}

#[test]
fn a_non_empty_database_is_refused() {
    let state = eth_state(12, 50, 2, 5);
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &state);
    let out = checkpoint::CheckpointDir::new(tmp.path().join("ckpt"));
    let created = create(&src, &out, &small_chunks(1));
    let mut other = load(&tmp.path().join("other"), &eth_state(13, 5, 0, 1));
    let trusted = checkpoint::Trusted { block: 0, root: src.head_root() };
    let manifest = out.manifest_bytes(&created.id).unwrap().unwrap();
    let r = checkpoint::Restorer::begin(
        &mut other,
        trusted,
        &manifest,
        &checkpoint::RestoreOptions::new(tmp.path().join("s")),
    );
    assert!(
        matches!(r, Err(checkpoint::RestoreError::Store(store::BulkError::NotEmpty { .. }))),
        "{:?}",
        r.err()
    );
}

/// A checkpoint of a database whose trie nodes lag its head (closed with the node buffer
/// unwritten), taken through a read-only handle that caught them up in memory: the pinned
/// state proves its chunks with the caught-up nodes, and the restore reaches the head's
/// root and state.
#[test]
fn a_checkpoint_of_lagging_nodes_through_a_read_only_handle_restores_the_head() {
    let tmp = tempfile::tempdir().unwrap();
    let state = eth_state(41, 250, 12, 40);
    let src_dir = tmp.path().join("src");
    let mut src = load(&src_dir, &state);
    // Blocks that change accounts without storage (a storage trie's root stays bound to
    // its account's value).
    let has_storage = |k: &[u8]| {
        state::H256::from_slice(k).is_some_and(|h| state.contains_key(&TrieId::Storage(h)))
    };
    for b in 0..6u8 {
        let mut changes = state::ChangeSet::new();
        let m = changes.entry(TrieId::Main).or_default();
        let accounts = state[&TrieId::Main].iter().filter(|(k, _)| !has_storage(k));
        for (i, (k, v)) in accounts.enumerate().filter(|(i, _)| i % 4 == usize::from(b) % 4) {
            let nv = if i % 5 == 0 { None } else { Some([v.as_slice(), &[b]].concat()) };
            m.insert(k.clone(), nv);
        }
        src.commit(&changes).unwrap();
    }
    let (head, root) = (src.head_number(), src.head_root());
    src.close_with_nodes_behind().unwrap();
    let ro = store::StateDb::open_read_only(&src_dir, config()).unwrap();
    assert_eq!((ro.head_number(), ro.head_root()), (head, root));
    assert!(ro.stats().catch_up.is_some(), "the nodes did not lag: {:?}", ro.stats().nodes_at);
    let out = checkpoint::CheckpointDir::new(tmp.path().join("ckpt"));
    let created = create(&ro, &out, &small_chunks(2));
    assert_eq!((created.manifest.block, created.manifest.root), (head, root));
    let mut dst = open(&tmp.path().join("dst"));
    let order = shuffled(created.manifest.chunks.len(), 5);
    let t = restore(&mut dst, &out, &created, &order, &tmp.path().join("staging"));
    assert_eq!((t.block, t.root), (head, root));
    assert_eq!(dump(&dst), dump(&ro));
    let report = dst.verify().unwrap();
    assert!(report.ok(), "{report:?}");
}
