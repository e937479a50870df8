//! NOMT as a comparison engine of `arbor bench store`: the same 32-byte keys, 100-byte
//! values and blocks as the Arbor store, committed to a NOMT 1.0.x database
//! (<https://github.com/thrumdev/nomt>), as alloy-trie is compared in `arbor bench trie`.
//!
//! **What the root commits to.** NOMT's root is not comparable with Arbor's: NOMT keeps a
//! *binary* Merkle-Patricia trie (one bit per level, no extension nodes, leaves hold the key
//! path and the value's hash) hashed with BLAKE3 ([`Blake3Hasher`], NOMT's own default and
//! the hasher of its `benchtop`), where Arbor keeps Ethereum's hexary trie of RLP nodes
//! hashed with keccak-256. Keys are used as NOMT key paths as they are (they are already
//! secure-trie hashes, uniform as NOMT expects).
//!
//! **One block** ([`NomtEngine::commit_block`]) is one NOMT session and one commit, as NOMT's
//! `benchtop` writes: every key of the block is announced with `warm_up` and
//! `preserve_prior_value` (which starts NOMT's own background read of the old value for the
//! rollback log, over io_uring), then `finish` with every key as a `Write` (deletions are
//! writes of no value) computes the new root on `commit_concurrency` threads, and `commit`
//! writes it out. The old values are read, as undo parity requires, by NOMT itself: they
//! are recorded in its rollback log, and [`NomtEngine::revert`] undoes a block.
//!
//! **Durability.** A NOMT commit is synchronous and durable when it returns: the Bitbox
//! write-ahead log, the Beatree files, the rollback log and the meta page are fsync'd on
//! every commit. Arbor's commit returns before its background writer persists the layer,
//! and only `flush` syncs; so NOMT pays its fsyncs inside every timed commit and
//! [`NomtEngine::flush`] has nothing to do. (NOMT's overlays, which delay commits to disk,
//! are not used: this is NOMT's direct, default commit path.)
//!
//! **Options**, and why:
//! - `commit_concurrency` = the caller's thread count (the machine's cores);
//! - rollback on, `max_rollback_log_len` = the caller's block count of undo;
//! - the hash table (Bitbox, NOMT's page store, which does not grow while open) is sized
//!   at creation from the most keys the run will hold (`keys_expected`): the expected
//!   count of stored pages for twice that many keys, over an occupancy target of 0.6
//!   (NOMT's docs: "performance likely degrades beyond 0.9", commits fail near 1.0). A
//!   page holds six levels of the binary trie, and NOMT stores only pages whose subtree
//!   holds at least 20 leaves (smaller ones are rebuilt from the values when needed), so
//!   uniform keys fill whole levels: 4,161 pages (levels 0–2, 16 MiB) from about 150k to
//!   2M keys, then level 3 fills between about 3M and 8M keys (266k pages, 1 GiB). The
//!   table file is preallocated (NOMT's default) and counts in full in
//!   [`NomtEngine::dir_bytes`]: 27 MiB for 1M expected keys, 1.7 GiB for 10M
//!   ([`NomtEngine::hashtable_utilization`] says how much of it is live). NOMT's default
//!   of 64,000 buckets would be 250 MiB whatever the size, and too small past about 3M keys;
//! - memory: the caller's cache budget split evenly between NOMT's page cache (Merkle
//!   pages) and leaf cache (Beatree value leaves), plus the two permanently cached upper
//!   page levels (≈16 MiB, NOMT's default; a third level would cost 1 GiB), prepopulated
//!   at open for predictable worst-case commits (as `benchtop` does);
//! - three io_uring instances (`io_workers`, NOMT's and `benchtop`'s default); merkle
//!   warm-up off (NOMT's default: the block is known whole when the session begins, so
//!   there is no execution for a warm-up to overlap, and NOMT documents that enabling it
//!   "can pessimize performance");
//! - a fixed Bitbox seed, so that two runs lay pages out alike.
//!
//! **Bulk load** sorts the initial state in memory (~132 bytes a key) and writes it in
//! sessions of [`BULK_SESSION_KEYS`] sorted keys, with the rollback log off (no one rolls
//! back a genesis import; the database is reopened with rollback on afterwards): sorted
//! sessions write each Merkle page about once, where sessions of random keys would rewrite
//! nearly every bottom page in every session. Arbor's bulk load likewise builds its trie
//! bottom-up from sorted flat state.
//!
//! **Cost** of a block: NOMT rewrites, in 4 KiB pages, every Beatree leaf holding a key of
//! the block and every stored Merkle page on the keys' paths (those twice: write-ahead log,
//! then table), and reads the leaves for the old values. NOMT offers no count of bytes
//! written per commit; a process-wide counter (`/proc/self/io` `write_bytes`, which does
//! see NOMT's io_uring writes) around the commit measures it.
//!
//! Linux only in practice: NOMT's I/O is io_uring (kernel ≥ 6.0, `IORING_SETUP_SINGLE_ISSUER`)
//! with `O_DIRECT` on every file (buffered on tmpfs), and has no other backend on Linux.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, ensure, Context, Result};
use nomt::hasher::Blake3Hasher;
use nomt::trie::KeyPath;
#[cfg(test)]
use nomt::HashTableUtilization;
use nomt::{IoUringPermission, KeyReadWrite, Nomt, Options, SessionParams};

use crate::common::plain_db::dir_bytes;

/// Bytes of a NOMT key path (and of every key this engine accepts).
pub(crate) const KEY_BYTES: usize = 32;

/// Keys per bulk-load session (after sorting). Larger sessions amortize the per-commit
/// fsyncs; each dirty Merkle page of a session is held in memory (4 KiB) until it commits.
pub(crate) const BULK_SESSION_KEYS: usize = 1 << 18;

/// Occupancy the hash table is sized for (see the module docs).
const OCCUPANCY_TARGET: f64 = 0.6;

/// Fewest hash-table buckets created (16 MiB of table), so that tiny databases keep slack.
const BUCKETS_MIN: u32 = 4096;

/// io_uring instances (NOMT's default).
const IO_WORKERS: usize = 3;

/// Upper page levels kept permanently cached (NOMT's default: ≈16 MiB).
const UPPER_LEVELS_CACHED: usize = 2;

/// The Bitbox hash seed: fixed, so that runs are reproducible.
const BITBOX_SEED: [u8; 16] = *b"arbor-bench-nomt";

/// Levels of the binary trie held by one Merkle page.
const PAGE_LEVELS: i32 = 6;

/// NOMT's `PAGE_ELISION_THRESHOLD` (private in 1.0.5): a page is stored only if the
/// subtree under it holds at least this many leaves.
const ELISION_LEAVES: u32 = 20;

/// A NOMT database driven like the Arbor store (see the module docs).
pub(crate) struct NomtEngine {
    /// `None` only if a reopen failed (every call then fails).
    nomt: Option<Nomt<Blake3Hasher>>,
    settings: Settings,
}

/// What [`NomtEngine::open`] chose; kept to reopen the database.
#[derive(Debug, Clone)]
struct Settings {
    dir: PathBuf,
    threads: usize,
    rollback_blocks: u32,
    buckets: u32,
    page_cache_mib: usize,
    leaf_cache_mib: usize,
}

impl Settings {
    fn options(&self, rollback: bool) -> Options {
        let mut o = Options::new();
        o.path(&self.dir);
        o.commit_concurrency(self.threads);
        o.io_workers(IO_WORKERS);
        o.hashtable_buckets(self.buckets);
        o.bitbox_seed(BITBOX_SEED);
        o.rollback(rollback);
        o.max_rollback_log_len(self.rollback_blocks);
        o.page_cache_size(self.page_cache_mib);
        o.leaf_cache_size(self.leaf_cache_mib);
        o.page_cache_upper_levels(UPPER_LEVELS_CACHED);
        o.prepopulate_page_cache(true);
        o
    }
}

impl NomtEngine {
    /// Open (create) a NOMT database in `dir`: `commit_concurrency` = `threads`, rollback on
    /// with at least `rollback_blocks` blocks of undo, a hash table sized for `keys_expected`
    /// live keys (the most the run will hold) and caches within `cache_bytes` (see the
    /// module docs for every option and why).
    pub(crate) fn open(
        dir: &Path,
        threads: usize,
        rollback_blocks: u32,
        keys_expected: u64,
        cache_bytes: u64,
    ) -> Result<NomtEngine> {
        ensure!(threads > 0, "NOMT needs at least one commit thread");
        ensure!(rollback_blocks > 0, "NOMT's rollback log needs room for at least one block");
        let cache_mib = usize::try_from(cache_bytes >> 20).unwrap_or(usize::MAX);
        let settings = Settings {
            dir: dir.to_path_buf(),
            threads,
            rollback_blocks,
            buckets: buckets_for(keys_expected),
            page_cache_mib: (cache_mib / 2).max(1),
            leaf_cache_mib: (cache_mib / 2).max(1),
        };
        let nomt = open_nomt(&settings, true)?;
        Ok(NomtEngine { nomt: Some(nomt), settings })
    }

    /// Insert the initial state: sorted in memory, then written in sessions of
    /// [`BULK_SESSION_KEYS`] keys with the rollback log off (see the module docs). A key
    /// given twice keeps its last value. Returns the distinct keys written.
    pub(crate) fn bulk_load(
        &mut self,
        entries: impl Iterator<Item = ([u8; KEY_BYTES], [u8; 100])>,
    ) -> Result<u64> {
        let mut sorted: Vec<([u8; KEY_BYTES], [u8; 100])> = entries.collect();
        // Reversed, then stably sorted: of equal keys the last given comes first and stays.
        sorted.reverse();
        sorted.sort_by_key(|e| e.0);
        sorted.dedup_by(|later, first| later.0 == first.0);

        self.reopen(false)?;
        let written = self.write_sorted(&sorted);
        // Reopen with rollback on whatever happened, so that a failed load is not hidden
        // behind a database left without its rollback log.
        let reopened = self.reopen(true);
        written?;
        reopened?;
        Ok(sorted.len() as u64)
    }

    /// Write sorted, distinct entries in sessions of [`BULK_SESSION_KEYS`] keys.
    fn write_sorted(&self, sorted: &[([u8; KEY_BYTES], [u8; 100])]) -> Result<()> {
        let nomt = self.db()?;
        for chunk in sorted.chunks(BULK_SESSION_KEYS) {
            let session = nomt.begin_session(SessionParams::default());
            let actuals =
                chunk.iter().map(|(k, v)| (*k, KeyReadWrite::Write(Some(v.to_vec())))).collect();
            let finished = session.finish(actuals).context("NOMT bulk session failed")?;
            finished.commit(nomt).context("NOMT bulk commit failed")?;
        }
        Ok(())
    }

    /// One block as one session and one durable commit (see the module docs): every put
    /// (`Some`) and delete (`None`) is a NOMT write, and NOMT reads each old value for its
    /// rollback log. Returns the new root (NOMT's binary BLAKE3 trie, not Arbor's).
    ///
    /// Fails if a key is not 32 bytes, or if NOMT fails (it then poisons itself: every
    /// later commit fails too).
    pub(crate) fn commit_block(
        &mut self,
        changes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    ) -> Result<[u8; 32]> {
        let nomt = self.db()?;
        let session = nomt.begin_session(SessionParams::default());
        // Invariant: a BTreeMap of 32-byte keys iterates in key-path order without
        // duplicates, which is what `finish` requires.
        let mut actuals = Vec::with_capacity(changes.len());
        for (key, value) in changes {
            let path = key_path(key)?;
            session.warm_up(path);
            session.preserve_prior_value(path);
            actuals.push((path, KeyReadWrite::Write(value.clone())));
        }
        let finished = session.finish(actuals).context("NOMT session failed")?;
        let root = finished.root().into_inner();
        finished.commit(nomt).context("NOMT commit failed")?;
        Ok(root)
    }

    /// Make everything durable: nothing to do, since every NOMT commit is synced before it
    /// returns (see the module docs). Fails only if the database was lost by a failed reopen.
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.db().map(|_| ())
    }

    /// The value of `key` (32 bytes) in the last committed state.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let path = key_path(key)?;
        let session = self.db()?.begin_session(SessionParams::default());
        session.read(path).context("NOMT read failed")
    }

    #[cfg(test)]
    /// The root of the last committed state (all zeros when empty).
    pub(crate) fn root(&self) -> Result<[u8; 32]> {
        Ok(self.db()?.root().into_inner())
    }

    #[cfg(test)]
    /// Undo the last `blocks` committed blocks from NOMT's rollback log; returns the root
    /// after. Fails, changing nothing, if the log holds fewer blocks.
    pub(crate) fn revert(&mut self, blocks: usize) -> Result<[u8; 32]> {
        let nomt = self.db()?;
        nomt.rollback(blocks).with_context(|| format!("NOMT cannot roll back {blocks} blocks"))?;
        Ok(nomt.root().into_inner())
    }

    /// Bytes of every file under the database directory (the preallocated hash table in
    /// full: see the module docs).
    pub(crate) fn dir_bytes(&self) -> Result<u64> {
        dir_bytes(&self.settings.dir)
    }

    #[cfg(test)]
    /// Occupied and total buckets of the hash table (each bucket one 4 KiB Merkle page).
    pub(crate) fn hashtable_utilization(&self) -> Result<HashTableUtilization> {
        Ok(self.db()?.hash_table_utilization())
    }

    fn db(&self) -> Result<&Nomt<Blake3Hasher>> {
        self.nomt.as_ref().ok_or_else(|| anyhow!("the NOMT database was closed by a failed reopen"))
    }

    /// Close the database and open it again, with or without the rollback log.
    fn reopen(&mut self, rollback: bool) -> Result<()> {
        // Dropping NOMT joins its I/O workers and releases the directory lock.
        self.nomt = None;
        self.nomt = Some(open_nomt(&self.settings, rollback)?);
        Ok(())
    }
}

fn open_nomt(settings: &Settings, rollback: bool) -> Result<Nomt<Blake3Hasher>> {
    Nomt::open(settings.options(rollback)).with_context(|| {
        let io_uring = match nomt::check_iou_permissions() {
            IoUringPermission::Allowed => "allowed",
            IoUringPermission::Denied => "denied (EPERM)",
            IoUringPermission::NotSupported => "not supported (NOMT needs Linux >= 6.0)",
        };
        format!(
            "cannot open NOMT at {} (rollback {}; io_uring, NOMT's only I/O on Linux: {io_uring})",
            settings.dir.display(),
            if rollback { "on" } else { "off" },
        )
    })
}

/// A 32-byte key as a NOMT key path.
fn key_path(key: &[u8]) -> Result<KeyPath> {
    KeyPath::try_from(key)
        .map_err(|_| anyhow!("NOMT keys are {KEY_BYTES} bytes, got one of {} bytes", key.len()))
}

/// Hash-table buckets for `keys` live keys: the expected stored pages for twice as many
/// keys (a margin: the page count jumps where a level starts to be stored) over the
/// occupancy target.
fn buckets_for(keys: u64) -> u32 {
    let buckets = (pages_expected(keys.saturating_mul(2)) / OCCUPANCY_TARGET).ceil();
    if buckets >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (buckets as u32).max(BUCKETS_MIN)
    }
}

/// Expected stored Merkle pages of a binary trie over `keys` uniform keys. The root page
/// holds depths 1..=6; a page of level `l ≥ 1` holds depths `6l+1 ..= 6l+6` under one
/// `6l`-bit prefix, and NOMT stores it only if the subtree under that prefix holds at least
/// `PAGE_ELISION_THRESHOLD` (20) leaves; smaller subtrees are rebuilt from the values when
/// needed. With `λ = keys / 64^l`, level `l` stores `64^l · P(Poisson(λ) ≥ 20)` pages.
fn pages_expected(keys: u64) -> f64 {
    let n = keys as f64;
    let mut pages = 1.0;
    for level in 1..=(256 / PAGE_LEVELS) {
        let prefixes = 2f64.powi(PAGE_LEVELS * level);
        let lambda = n / prefixes;
        let level_pages = prefixes * poisson_tail(lambda, ELISION_LEAVES);
        pages += level_pages;
        if lambda < 1.0 && level_pages < 1.0 {
            break;
        }
    }
    pages
}

/// `P(X ≥ k)` for `X ~ Poisson(λ)`: summed upwards from `k` when `λ < k` (no cancellation
/// for tiny tails), else one minus the lower terms.
fn poisson_tail(lambda: f64, k: u32) -> f64 {
    // The term of `k`: e^-λ λ^k / k!, built up in steps to stay in range.
    let mut term = (-lambda).exp();
    for i in 1..=k {
        term *= lambda / f64::from(i);
    }
    if lambda < f64::from(k) {
        let (mut sum, mut i) = (0.0, k);
        while term > sum * 1e-17 && term > 0.0 {
            sum += term;
            i += 1;
            term *= lambda / f64::from(i);
        }
        sum
    } else {
        let mut below = 0.0;
        let mut t = (-lambda).exp();
        for i in 0..k {
            below += t;
            t *= lambda / f64::from(i + 1);
        }
        (1.0 - below).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const SEED: u64 = 12;
    const KEYS_INITIAL: usize = 3_000;
    const BLOCKS: usize = 4;

    type Block = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

    fn initial(rng: &mut ChaCha8Rng) -> Vec<([u8; 32], [u8; 100])> {
        (0..KEYS_INITIAL).map(|_| (rng.gen(), std::array::from_fn(|_| rng.gen()))).collect()
    }

    /// Updates of live keys, new keys, deletions of live keys and of absent keys.
    fn block(rng: &mut ChaCha8Rng, live: &Model) -> Block {
        let keys: Vec<[u8; 32]> = live.keys().copied().collect();
        let mut changes = Block::new();
        for _ in 0..300 {
            let k = keys[rng.gen_range(0..keys.len())];
            changes.insert(k.to_vec(), Some((0..100).map(|_| rng.gen()).collect()));
        }
        for _ in 0..100 {
            let k: [u8; 32] = rng.gen();
            changes.insert(k.to_vec(), Some(vec![rng.gen(); 100]));
        }
        for _ in 0..100 {
            changes.insert(keys[rng.gen_range(0..keys.len())].to_vec(), None);
        }
        for _ in 0..20 {
            changes.insert(rng.gen::<[u8; 32]>().to_vec(), None);
        }
        changes
    }

    fn apply(live: &mut Model, changes: &Block) {
        for (k, v) in changes {
            let k: [u8; 32] = k.as_slice().try_into().unwrap();
            match v {
                Some(v) => live.insert(k, v.clone()),
                None => live.remove(&k),
            };
        }
    }

    fn check_state(db: &NomtEngine, live: &Model, deleted: &BTreeMap<[u8; 32], ()>) {
        for (k, v) in live {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "seed {SEED}: value of {k:?}");
        }
        for k in deleted.keys().filter(|k| !live.contains_key(*k)) {
            assert_eq!(db.get(k).unwrap(), None, "seed {SEED}: deleted key {k:?} is present");
        }
    }

    fn open(dir: &Path) -> NomtEngine {
        NomtEngine::open(dir, 2, 8, (KEYS_INITIAL + BLOCKS * 100) as u64, 64 << 20).unwrap()
    }

    type Model = BTreeMap<[u8; 32], Vec<u8>>;

    /// Loads and commits the seeded workload into a fresh database, checking every value
    /// after each block; returns the roots and the model states (after the bulk load, then
    /// after each block) and the blocks.
    fn run(db: &mut NomtEngine) -> (Vec<[u8; 32]>, Vec<Model>, Vec<Block>) {
        let mut rng = ChaCha8Rng::seed_from_u64(SEED);
        let entries = initial(&mut rng);
        let mut live: Model = entries.iter().map(|(k, v)| (*k, v.to_vec())).collect();
        assert_eq!(db.bulk_load(entries.into_iter()).unwrap(), KEYS_INITIAL as u64);
        let mut roots = vec![db.root().unwrap()];
        let mut states = vec![live.clone()];
        let mut blocks = Vec::new();
        let mut deleted = BTreeMap::new();
        for _ in 0..BLOCKS {
            let changes = block(&mut rng, &live);
            apply(&mut live, &changes);
            for k in changes.iter().filter(|(_, v)| v.is_none()).map(|(k, _)| k) {
                deleted.insert(k.as_slice().try_into().unwrap(), ());
            }
            let root = db.commit_block(&changes).unwrap();
            assert_ne!(Some(&root), roots.last(), "seed {SEED}: a block left the root as it was");
            assert_eq!(root, db.root().unwrap());
            check_state(db, &live, &deleted);
            roots.push(root);
            states.push(live.clone());
            blocks.push(changes);
        }
        db.flush().unwrap();
        (roots, states, blocks)
    }

    #[test]
    fn nomt_reads_back_roots_agree_and_revert_undoes() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = open(&tmp.path().join("a"));
        assert_eq!(a.root().unwrap(), [0; 32], "an empty NOMT trie has the zero root");
        let (roots_a, states, blocks) = run(&mut a);
        let mut b = open(&tmp.path().join("b"));
        let (roots_b, _, _) = run(&mut b);
        assert_eq!(roots_a, roots_b, "seed {SEED}: same blocks, different roots");
        assert!(a.dir_bytes().unwrap() > 0);
        let ht = a.hashtable_utilization().unwrap();
        assert!(ht.occupied > 0 && ht.occupancy_rate() < 0.9, "seed {SEED}: {ht:?}");

        // Undo parity: the rollback log restores the previous block's root and values.
        assert_eq!(a.revert(1).unwrap(), roots_a[BLOCKS - 1], "seed {SEED}: root after revert");
        let before = &states[BLOCKS - 1];
        for k in blocks[BLOCKS - 1].keys() {
            let expected = before.get(k.as_slice()).cloned();
            assert_eq!(a.get(k).unwrap(), expected, "seed {SEED}: {k:?} after revert");
        }
        assert!(a.revert(BLOCKS + 1).is_err(), "the log holds only {BLOCKS} blocks");
    }

    #[test]
    fn nomt_rejects_keys_that_are_not_32_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let mut db = open(tmp.path());
        let changes = Block::from([(vec![1; 20], Some(vec![1]))]);
        assert!(db.commit_block(&changes).is_err());
        assert!(db.get(&[0; 33]).is_err());
        assert_eq!(db.root().unwrap(), [0; 32]);
    }

    #[test]
    fn nomt_page_estimate_is_plausible() {
        // Measured with NOMT 1.0.5: 200k keys store 4,161 pages (levels 0 to 2 in full).
        let pages = pages_expected(200_000);
        assert!((4_150.0..4_170.0).contains(&pages), "{pages}");
        // 10M keys store level 3 (262,144 pages) almost in full.
        let pages = pages_expected(10_000_000);
        assert!((265_000.0..267_000.0).contains(&pages), "{pages}");
        assert_eq!(buckets_for(0), BUCKETS_MIN);
        assert!(buckets_for(1_000_000) < 10_000, "{}", buckets_for(1_000_000));
        assert!(buckets_for(10_000_000) > 440_000, "{}", buckets_for(10_000_000));
        let tail = poisson_tail(0.01, 20);
        assert!(tail > 0.0 && tail < 1e-50, "{tail}");
        assert!((poisson_tail(1000.0, 20) - 1.0).abs() < 1e-12);
    }
}
