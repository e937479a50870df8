//! Size limits: a state holding values of the store's largest size checkpoints, verifies
//! and restores from every kind of source, while a body past the hard chunk bound is still
//! refused before it is read whole.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use checkpoint::{
    open_source, restore_from_sources, verify_checkpoint, BoundaryRule, CheckpointDir,
    CreateOptions, FetchOptions, HttpServer, RestoreOptions, S3Store, SourceOptions, Trusted,
    CHUNK_BYTES_MAX, VALUE_BYTES_MAX,
};
use state::{ChangeSet, TrieId};
use trie::LayoutName;

use crate::common::*;

/// A database (committed through the ordinary commit path) whose main trie holds two
/// values of the largest size between small keys: one chunk then proves both the big
/// leaf before it and its own big leaf.
fn big_values(dir: &std::path::Path, layout: LayoutName) -> store::StateDb {
    let mut c = config();
    c.layout = Some(layout);
    let mut db = store::StateDb::open(dir, c).unwrap();
    let mut changes = ChangeSet::new();
    let main = changes.entry(TrieId::Main).or_default();
    main.insert(b"big".to_vec(), Some(vec![0x5a; VALUE_BYTES_MAX]));
    main.insert(b"big2".to_vec(), Some(vec![0xa5; VALUE_BYTES_MAX]));
    for k in [&b"a"[..], b"bia", b"bigger", b"c", b"zz"] {
        main.insert(k.to_vec(), Some([k, b"-value"].concat()));
    }
    db.commit(&changes).unwrap();
    db
}

/// Ethereum's leaves hold their values inline, as Substrate V0's leaves and branches do
/// (V1 hashes values of 33 bytes and more into value nodes, which proofs leave out).
#[test]
fn values_of_the_largest_size_checkpoint_verify_and_restore() {
    for layout in [LayoutName::Ethereum, LayoutName::SubstrateV0] {
        largest_values_round_trip(layout);
    }
}

fn largest_values_round_trip(layout: LayoutName) {
    let tmp = tempfile::tempdir().unwrap();
    let src = big_values(&tmp.path().join("src"), layout);
    let trusted = Trusted { block: src.head_number(), root: src.head_root() };
    // The default rule and the largest `max_bytes` the rule takes.
    for (i, max_bytes) in
        [BoundaryRule::default().max_bytes, BoundaryRule::MAX_BYTES_MAX].into_iter().enumerate()
    {
        let out_dir = tmp.path().join(format!("ckpt{i}"));
        let out = CheckpointDir::new(&out_dir).without_sync();
        let opts =
            CreateOptions { rule: BoundaryRule { target_entries: 4, max_bytes }, threads: 2 };
        let created = create(&src, &out, &opts);
        let m = &created.manifest;
        let largest = m.chunks.iter().map(|c| c.len).max().unwrap();
        assert!(largest > 2 * VALUE_BYTES_MAX as u64, "{largest}: the big leaves in a proof");
        assert!(largest <= CHUNK_BYTES_MAX);
        let alone = m.chunks.iter().filter(|c| c.first == c.last && c.first.ends_with(b"big"));
        assert_eq!(alone.count(), 1, "the big entry in a chunk of its own");

        // Verified from a directory and over HTTP.
        let server = HttpServer::start(CheckpointDir::new(&out_dir), "127.0.0.1:0", 2).unwrap();
        let url = format!("http://{}", server.addr());
        for addr in [out_dir.to_str().unwrap(), url.as_str()] {
            let source = open_source(addr, &SourceOptions::default()).unwrap();
            let summary = verify_checkpoint(source.as_ref(), &created.id, trusted, &|_| {})
                .unwrap_or_else(|e| panic!("{addr}: {e}"));
            assert_eq!(summary.entries, 7);
        }

        // Pushed to an S3-compatible bucket (when the test server runs) and verified there.
        let mut addrs = vec![url.clone()];
        if let Some(bucket) = crate::sources::s3_bucket() {
            let prefix = format!("big{i}-{}-{}", std::process::id(), crate::sources::rand_suffix());
            let bucket = format!("{bucket}/{prefix}");
            let s3 = S3Store::from_env(&bucket, Duration::from_secs(60)).unwrap();
            s3.push(&out, &created.id, &|_| {}).unwrap();
            let source = open_source(&format!("s3://{bucket}"), &SourceOptions::default()).unwrap();
            verify_checkpoint(source.as_ref(), &created.id, trusted, &|_| {}).unwrap();
            addrs = vec![format!("s3://{bucket}")];
        }

        // Restored (over HTTP, or from S3) to the same root and state.
        let dst_dir = tmp.path().join(format!("dst{i}"));
        let mut c = config();
        c.layout = Some(layout);
        let mut dst = store::StateDb::open(&dst_dir, c).unwrap();
        let sources = vec![open_source(&addrs[0], &SourceOptions::default()).unwrap()];
        let (report, outcome) = restore_in_place(&mut dst, &dst_dir, trusted, &sources);
        outcome.unwrap_or_else(|e| panic!("{e}: {report:#?}"));
        assert_eq!((dst.head_number(), dst.head_root()), (trusted.block, trusted.root));
        assert_eq!(dump(&dst), dump(&src));
        assert!(dst.verify().unwrap().ok());
        server.shutdown();
    }
}

#[test]
fn a_value_past_the_store_limit_is_a_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let mut db = open(&tmp.path().join("src"));
    let mut changes = ChangeSet::new();
    changes
        .entry(TrieId::Main)
        .or_default()
        .insert(b"k".to_vec(), Some(vec![1; VALUE_BYTES_MAX + 1]));
    db.commit(&changes).unwrap();
    db.flush().unwrap();
    let handle = db.read_handle().unwrap();
    let state = handle.persisted().unwrap();
    let out = CheckpointDir::new(tmp.path().join("ckpt")).without_sync();
    let e = checkpoint::create(&state, &CreateOptions::default(), &out, &Default::default())
        .unwrap_err();
    assert!(
        matches!(e, checkpoint::CreateError::EntryTooLarge { bytes, .. } if bytes == VALUE_BYTES_MAX as u64 + 1),
        "{e}"
    );
}

/// A chunk served longer than the manifest says (a byte appended, or another, larger
/// chunk copied over its name) proves its source bad like a digest mismatch: with an
/// honest second source the restore completes, and that source alone makes the checkpoint
/// proven bad (abandoned, the database left empty) at once, not a source failure that a
/// rerun retries forever.
#[test]
fn a_chunk_longer_than_the_manifest_says_blames_its_source() {
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &eth_state(61, 150, 10, 20));
    let good = tmp.path().join("good");
    let created = create(&src, &CheckpointDir::new(&good).without_sync(), &small_chunks(2));
    let trusted = Trusted { block: 0, root: src.head_root() };
    let chunks = &created.manifest.chunks;
    let k = chunks.len() / 2;
    let chunk_file =
        |dir: &std::path::Path, i: usize| dir.join(checkpoint::chunk_path(&chunks[i].digest));
    let longer = (0..chunks.len()).max_by_key(|i| chunks[*i].len).unwrap();
    assert!(chunks[longer].len > chunks[k].len, "chunks of one length");
    for (name, damage) in [("appended", 0), ("foreign", 1)] {
        let bad = tmp.path().join(name);
        test_support::copy_tree(&good, &bad);
        if damage == 0 {
            let mut bytes = std::fs::read(chunk_file(&bad, k)).unwrap();
            bytes.push(0);
            std::fs::write(chunk_file(&bad, k), bytes).unwrap();
        } else {
            std::fs::copy(chunk_file(&good, longer), chunk_file(&bad, k)).unwrap();
        }
        let open_dir = |d: &std::path::Path| {
            open_source(d.to_str().unwrap(), &SourceOptions::default()).unwrap()
        };
        let restore = |db: &mut store::StateDb, sources: &[Box<dyn checkpoint::Source>]| {
            restore_from_sources(
                db,
                trusted,
                sources,
                &RestoreOptions::new(tmp.path().join(format!("staging-{name}"))),
                &FetchOptions::default(),
                &AtomicBool::new(false),
                &|_| {},
            )
        };

        // With an honest source beside it (first, so that it is asked for chunk k too).
        let mut dst = open(&tmp.path().join(format!("dst-{name}")));
        let (report, outcome) = restore(&mut dst, &[open_dir(&bad), open_dir(&good)]);
        outcome.unwrap_or_else(|e| panic!("{name}: {e}: {report:#?}"));
        assert_eq!(dst.head_root(), trusted.root);
        let blamed = &report.sources[0];
        assert_eq!(blamed.bad_chunks, 1, "{name}: {report:#?}");
        let why = blamed.excluded.as_deref().unwrap_or_default();
        assert!(why.contains(&format!("larger than chunk {k}")), "{name}: {why}");
        assert_eq!(report.sources[1].bad_chunks, 0, "{name}: {report:#?}");

        // Alone: the checkpoint is proven bad at once and abandoned.
        let mut dst = open(&tmp.path().join(format!("alone-{name}")));
        let t0 = std::time::Instant::now();
        let (report, outcome) = restore(&mut dst, &[open_dir(&bad)]);
        let e = outcome.unwrap_err();
        assert!(matches!(e, checkpoint::FetchError::BadCheckpoint { .. }), "{name}: {e}");
        assert!(e.to_string().contains(&format!("chunk {k}")), "{name}: {e}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{name}: {:?}", t0.elapsed());
        assert_eq!(report.abandoned.len(), 1, "{name}: {report:#?}");
        assert!(dst.unfinished_bulk_load().is_none(), "{name}: left unfinished");
        assert!(dst.is_empty().unwrap(), "{name}: not left empty");
    }
}

/// A completed restore run again succeeds at once without asking any source (a kill after
/// the last batch left nothing to resume); a database at another block or root, or an
/// empty one, is not taken for restored.
#[test]
fn a_completed_restore_run_again_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let src = load(&tmp.path().join("src"), &eth_state(62, 60, 4, 10));
    let dir = tmp.path().join("ckpt");
    let created = create(&src, &CheckpointDir::new(&dir).without_sync(), &small_chunks(2));
    let trusted = Trusted { block: 0, root: src.head_root() };
    let dst_dir = tmp.path().join("dst");
    let mut dst = open(&dst_dir);
    let order: Vec<usize> = (0..created.manifest.chunks.len()).collect();
    let t = restore(&mut dst, &CheckpointDir::new(&dir), &created, &order, &dst_dir.join("s"));
    assert_eq!(t, trusted);
    // A source that serves nothing (nothing listens there): the rerun must not need it.
    let sources = vec![open_source("http://127.0.0.1:9", &SourceOptions::default()).unwrap()];
    let (report, outcome) = restore_in_place(&mut dst, &dst_dir, trusted, &sources);
    assert_eq!(outcome.unwrap(), trusted);
    assert_eq!(report.outcome, checkpoint::ALREADY_RESTORED);
    assert_eq!((report.block, report.fetched_chunks, report.sources[0].errors), (0, 0, 0));
    assert_eq!(dump(&dst), dump(&src));

    // Another root at that block: refused as before.
    let other = Trusted { block: 0, root: state::H256([7; 32]) };
    assert!(checkpoint::already_restored(&dst, other, &sources).is_none());
    let other_block = Trusted { block: 1, root: trusted.root };
    assert!(checkpoint::already_restored(&dst, other_block, &sources).is_none());
    // An empty database at the empty root is filled as usual, not taken for restored.
    let empty = open(&tmp.path().join("empty"));
    let empty_root = Trusted { block: 0, root: empty.head_root() };
    assert!(checkpoint::already_restored(&empty, empty_root, &sources).is_none());
}

/// Restore `trusted` from `sources` into `db` at `dir`, staging in the database, with the
/// default fetch options and no stop.
fn restore_in_place(
    db: &mut store::StateDb,
    dir: &std::path::Path,
    trusted: Trusted,
    sources: &[Box<dyn checkpoint::Source>],
) -> (checkpoint::RestoreReport, Result<Trusted, checkpoint::FetchError>) {
    let staging = RestoreOptions::in_database(dir);
    let stop = AtomicBool::new(false);
    restore_from_sources(db, trusted, sources, &staging, &FetchOptions::default(), &stop, &|_| {})
}
