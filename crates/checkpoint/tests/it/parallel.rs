//! Stress: one checkpoint of a state with many storage tries, cut into tiny chunks, restored
//! many times with several workers from a source that serves main-trie chunks late.
//! Storage chunks fetched before their accounts' chunks wait in staging, and every worker
//! that applies a chunk retries the staged ones, so several workers retry the same staged
//! chunks at once (a race over the staging files failed 1–5 restores in 10 with
//! "staging …: No such file or directory").

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use checkpoint::{
    open_source, restore_from_sources, BoundaryRule, CheckpointDir, CreateOptions, FetchOptions,
    RestoreOptions, Source, SourceError, SourceOptions, Trusted, STAGING_DIR_NAME,
};
use state::{TrieId, H256};

use crate::common::*;

/// Restores of the checkpoint: `ARBOR_RESTORE_RUNS` (default 50).
fn runs() -> usize {
    std::env::var("ARBOR_RESTORE_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(50)
}

/// A directory source that serves main-trie chunks `delay` late: the workers fetch the
/// storage chunks meanwhile and stage them, and the workers whose main-trie chunks then
/// apply retry them at about the same moment.
struct SlowMain {
    inner: Box<dyn Source>,
    main: BTreeSet<H256>,
    delay: Duration,
}

impl Source for SlowMain {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn ids(&self) -> Result<Vec<H256>, SourceError> {
        self.inner.ids()
    }
    fn manifest(&self, id: &H256) -> Result<Vec<u8>, SourceError> {
        self.inner.manifest(id)
    }
    fn chunk(&self, digest: &H256, max: u64) -> Result<Vec<u8>, SourceError> {
        if self.main.contains(digest) {
            std::thread::sleep(self.delay);
        }
        self.inner.chunk(digest, max)
    }
}

#[test]
fn parallel_restores_with_staged_storage_chunks() {
    let t0 = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    // Every account has storage: a few main-trie chunks, many storage chunks.
    let state = eth_state(0x57e55, 24, 24, 16);
    let src = load(&tmp.path().join("src"), &state);
    let out = CheckpointDir::new(tmp.path().join("checkpoint"));
    let rule = BoundaryRule { target_entries: 5, max_bytes: 4096 };
    let created = create(&src, &out, &CreateOptions { rule, threads: 2 });
    let chunks = &created.manifest.chunks;
    let main: BTreeSet<H256> = chunks
        .iter()
        .filter(|c| matches!(TrieId::split(&c.first), Some((TrieId::Main, _))))
        .map(|c| c.digest)
        .collect();
    let storage_chunks = chunks.len() - main.len();
    assert!(
        main.len() >= 3 && storage_chunks >= 30,
        "{} chunks, {} main",
        chunks.len(),
        main.len()
    );
    let trusted = Trusted { block: created.manifest.block, root: created.manifest.root };
    assert_eq!(trusted.root, src.head_root());
    let dir_source = out.root().to_str().unwrap().to_owned();
    let slow = SlowMain {
        inner: open_source(&dir_source, &SourceOptions::default()).unwrap(),
        main,
        delay: Duration::from_millis(15),
    };
    let sources: Vec<Box<dyn Source>> = vec![Box::new(slow)];
    let mut staged = 0;
    for run in 0..runs() {
        let dir = tmp.path().join(format!("dst-{run}"));
        let mut db = open(&dir);
        let workers = 4 + run % 5;
        let (report, outcome) = restore_from_sources(
            &mut db,
            trusted,
            &sources,
            &RestoreOptions::in_database(&dir),
            &FetchOptions { workers, ..FetchOptions::default() },
            &AtomicBool::new(false),
            &|_| {},
        );
        let ctx = format!("run {run}, {workers} workers");
        let restored = outcome.unwrap_or_else(|e| panic!("{ctx}: {e}\n{report:#?}"));
        assert_eq!(restored, trusted, "{ctx}");
        assert_eq!((db.head_number(), db.head_root()), (trusted.block, trusted.root), "{ctx}");
        assert!(db.unfinished_bulk_load().is_none(), "{ctx}: left unfinished");
        assert!(!dir.join(STAGING_DIR_NAME).exists(), "{ctx}: staging left behind");
        if run == 0 {
            assert_eq!(dump(&db), dump(&src), "{ctx}");
            assert_eq!(roots(&db, &state), roots(&src, &state), "{ctx}");
        }
        // Every entry written once, those of staged chunks included.
        let entries: u64 = chunks.iter().map(|c| c.entries).sum();
        assert_eq!(report.entries_restored, entries, "{ctx}");
        staged += report.staged_chunks;
        db.close().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!(
        "{} restores of {} chunks ({storage_chunks} of storage): {staged} chunks staged, {:?}",
        runs(),
        chunks.len(),
        t0.elapsed()
    );
    // The race needs many staged chunks.
    assert!(staged as usize >= runs() * 4, "too few chunks staged to exercise the race");
}
