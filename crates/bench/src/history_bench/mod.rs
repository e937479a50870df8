//! `arbor bench history` (issue 33): reads and proofs at recent blocks while blocks commit,
//! and what keeping the recent window costs the commits.
//!
//! Two Arbor databases bulk-load the same initial keys of the block [`crate::common::workload`]
//! (as `bench store` loads them): one keeps the recent window (`history.recent_blocks` = K,
//! `history.recent_bytes` from the options), the other none (`recent_blocks` = 0); their
//! configurations are otherwise the same (`layers.history_depth` raised to K if lower).
//!
//! 1. **Commits.** Blocks 1..=N go to both databases, block by block, the first of the two
//!    alternating, each commit timed alone and given its old values by the caller
//!    (`commit_with_prior`, as `bench store`'s Arbor engine); both roots must agree after
//!    every block. Blocks 1..=K fill the window; throughput is compared over blocks
//!    K+1..=N, the window full (every commit also drops its oldest block), as blocks / the
//!    sum of their commit times. Both databases' background writers run throughout; no
//!    final flush is counted, since the window writes nothing to disk. The database without
//!    the window is then closed.
//! 2. **Reads.** R more blocks go to the windowed database alone while a reader thread on a
//!    `ReadHandle` runs, after each commit, up to `reads_per_block` rounds. A round visits
//!    every depth d of [`HistoryBenchOpts::depths`] (which goes first is random) and at each
//!    takes one sample: `at(head - d)`, then `get` of a random key, then `prove` of
//!    another, each timed alone (`get` and `prove` exclude the view's creation, which has
//!    its own figure); keys are uniform over the workload's index range at that block
//!    (present or not: `get` is also reported split by outcome, and by whether the key's
//!    value at the head differs, read untimed: about whether the window's old values or the
//!    head's state answered). A round ends with a
//!    `ReadHandle::get` at the head, the baseline without a view. `head` is the last block
//!    the committer returned from, so a view may be one block deeper than its depth (a
//!    commit published and not yet returned), never shallower; a sample whose block leaves
//!    the window before it is read (two commits during it) is counted, not timed. The last
//!    block's rounds run after the last commit, so that every depth has samples.
//!
//! Checks, outside the timings; any failure fails the benchmark: every 4th sample per depth
//! verifies its proof against the view's root (`verify_proof::<EthLayout>`), the proven
//! value equal to the view's `get` of that key; every view root so checked equals the root
//! the commit of its block returned; the final root is recomputed from flat state.
//!
//! Cost: two databases' caches in one process, plus the window (at most the byte bound).

pub(crate) mod report;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use indicatif::ProgressBar;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, StateReader, TrieId, H256};
use store::{AtError, ReadHandle, RecentStats, StateDb, StoreConfig};
use trie::{verify_proof, EthLayout};

use crate::common::machine::MachineInfo;
use crate::common::progress::bar;
use crate::common::rss::{load_average, peak_rss_bytes};
use crate::common::timing::ratio;
use crate::common::workload::{LastWrites, LiveKeys, Workload};
use crate::history_bench::report::{
    BulkReport, CommitReport, CommitSeries, DepthReport, HistoryBenchOpts, HistoryBenchReport,
    LatencyReport, ReadReport, TargetReport, WindowReport,
};

/// Every how many samples of a depth one is checked (proof verified, root compared).
const CHECK_EVERY: usize = 4;
/// Mixed into the seed of the reader's choices (the workload's seed alone names its blocks).
const READER_SEED_TAG: u64 = 0x6869_7374_6f72_7921;
/// The longest the reader sleeps waiting for a block (the committer also wakes it).
const READER_PARK: Duration = Duration::from_millis(10);

/// Run the history benchmark (see the module docs) on top of `config` (its `[history]`
/// section replaced by the options); `progress` draws bars on stderr.
///
/// Fails if the two databases' roots differ, a proof does not verify, a view's root is not
/// its block's, or the final root does not verify from flat state.
pub fn history_bench(
    opts: &HistoryBenchOpts,
    config: &StoreConfig,
    progress: bool,
) -> Result<HistoryBenchReport> {
    check_opts(opts)?;
    let (with_config, without_config) = configs(opts, config)?;
    let machine = MachineInfo::detect();
    let load_average_start = load_average();
    let workload = Workload::new(opts.seed, opts.keys, opts.updates_per_block);
    let base = bench_dir(opts)?;
    let open = |name: &str, config: &StoreConfig| {
        StateDb::open(&base.path().join(name), config.clone())
            .with_context(|| format!("cannot open the {name} database"))
    };
    let mut with = open("with-window", &with_config)?;
    let mut without = open("without-window", &without_config)?;
    let bulk = bulk_load_both(&mut with, &mut without, &workload, progress)?;

    let mut blocks = Blocks::new(&workload, with.head_root());
    let pb = bar(progress, opts.blocks, "blocks: both databases");
    let (with_s, without_s) = blocks.commit_both(&mut with, &mut without, opts.blocks, &pb)?;
    pb.finish();
    without.close().context("closing the database without the window failed")?;
    let after_commits = with.stats().recent;

    let pb = bar(progress, opts.read_blocks, "blocks: reader running");
    let (reading_s, samples) = read_phase(&mut with, &mut blocks, opts, &pb)?;
    pb.finish();
    let after_reads = with.stats().recent;
    let roots_checked = check_roots(&samples.roots, &blocks.roots)?;

    let pb = bar(progress, 1, "checking: verify");
    let root = verify(&with)?;
    with.close().context("closing the windowed database failed")?;
    pb.finish();

    let k = opts.recent_blocks as usize;
    let commits = CommitReport {
        fill_with_window: CommitSeries::of(&with_s[..k]),
        fill_without_window: CommitSeries::of(&without_s[..k]),
        with_window: CommitSeries::of(&with_s[k..]),
        without_window: CommitSeries::of(&without_s[k..]),
        with_window_reading: CommitSeries::of(&reading_s),
    };
    let window = window_report(opts, after_commits, after_reads);
    let reads = samples.report(&opts.depths(), roots_checked)?;
    let targets = TargetReport::of(&commits, &reads.depths);
    Ok(HistoryBenchReport {
        machine,
        load_average_start,
        load_average_end: load_average(),
        options: opts.clone(),
        config: with_config,
        keys_final: blocks.live.count(),
        root: root.to_string(),
        root_verified: true,
        peak_rss_bytes: peak_rss_bytes().unwrap_or(0),
        bulk,
        commits,
        window,
        reads,
        targets,
    })
}

/// The window after the commits and after the reads.
fn window_report(
    opts: &HistoryBenchOpts,
    commits: RecentStats,
    reads: RecentStats,
) -> WindowReport {
    let full =
        [&commits, &reads].iter().all(|s| s.blocks == opts.recent_blocks && s.shrunk_blocks == 0);
    WindowReport {
        after_commits: commits,
        after_reads: reads,
        bytes_per_block: ratio(reads.bytes as f64, reads.blocks as f64),
        full,
    }
}

/// Refuse options the run cannot measure.
fn check_opts(opts: &HistoryBenchOpts) -> Result<()> {
    ensure!(opts.keys > 0, "nothing to read: no initial keys");
    ensure!(opts.recent_blocks >= 2, "the window must hold 2 blocks at least");
    ensure!(
        opts.blocks > opts.recent_blocks,
        "{} blocks to both databases do not fill a window of {} and measure it full: give more",
        opts.blocks,
        opts.recent_blocks
    );
    ensure!(opts.read_blocks > 0, "no blocks to read during");
    ensure!(opts.reads_per_block > 0, "no reads per block");
    ensure!(opts.updates_per_block > 0, "empty blocks");
    Ok(())
}

/// The windowed database's configuration and the other's: `config` with its `[history]`
/// section from the options, and no window.
fn configs(opts: &HistoryBenchOpts, config: &StoreConfig) -> Result<(StoreConfig, StoreConfig)> {
    let mut with = config.clone();
    with.history.recent_blocks = opts.recent_blocks;
    with.history.recent_bytes = opts.recent_bytes;
    with.layers.history_depth = with.layers.history_depth.max(opts.recent_blocks);
    let mut without = with.clone();
    without.history.recent_blocks = 0;
    with.validate().context("invalid store config (with the window)")?;
    without.validate().context("invalid store config (without the window)")?;
    ensure!(
        with.recent_blocks() == opts.recent_blocks,
        "the configuration keeps {} recent blocks, not {}",
        with.recent_blocks(),
        opts.recent_blocks
    );
    Ok((with, without))
}

/// The run's temporary directory (under `--dir` when given).
fn bench_dir(opts: &HistoryBenchOpts) -> Result<tempfile::TempDir> {
    crate::common::temp::temp_dir("arbor-bench-history-", opts.dir.as_deref())
}

/// Bulk-load the workload's initial keys into both databases, which must reach one root.
fn bulk_load_both(
    with: &mut StateDb,
    without: &mut StateDb,
    workload: &Workload,
    progress: bool,
) -> Result<BulkReport> {
    let (keys, with_window_seconds) = bulk_load(with, workload, "with window", progress)?;
    let (_, without_window_seconds) = bulk_load(without, workload, "without window", progress)?;
    let (a, b) = (with.head_root(), without.head_root());
    ensure!(a == b, "the bulk loads reached roots {a} and {b}");
    Ok(BulkReport { keys, with_window_seconds, without_window_seconds })
}

/// Bulk-load the workload's initial keys (flat writes, then the bottom-up node rebuild);
/// returns the keys and the seconds.
fn bulk_load(
    db: &mut StateDb,
    workload: &Workload,
    label: &str,
    progress: bool,
) -> Result<(u64, f64)> {
    let pb = bar(progress, workload.keys_initial, format!("{label}: bulk load"));
    let start = Instant::now();
    let mut load = db.begin_bulk_load("bench history").context("Arbor bulk load refused")?;
    for (i, (k, v)) in workload.initial_entries().enumerate() {
        if i.is_multiple_of(65_536) {
            pb.set_position(i as u64);
        }
        load.put(&TrieId::Main, &k, &v).context("Arbor bulk load failed")?;
    }
    pb.set_message(format!("{label}: bulk load, node rebuild"));
    let keys = load.finish().context("Arbor bulk load failed")?.entries;
    let seconds = start.elapsed().as_secs_f64();
    pb.finish();
    Ok((keys, seconds))
}

/// The workload's blocks as the committer makes them: each block's old values from
/// `last`, the live keys counted, and `roots[b]` the root block `b`'s commit returned.
struct Blocks<'w> {
    workload: &'w Workload,
    last: LastWrites,
    live: LiveKeys,
    roots: Vec<H256>,
}

impl<'w> Blocks<'w> {
    /// Before block 1, at the bulk load's root.
    fn new(workload: &'w Workload, root: H256) -> Blocks<'w> {
        let live = LiveKeys::initial(workload.keys_initial);
        Blocks { workload, last: LastWrites::default(), live, roots: vec![root] }
    }

    /// The next block: its number, changes and old values (not timed).
    fn next(&mut self) -> (u64, ChangeSet, ChangeSet) {
        let b = self.roots.len() as u64;
        let ops = self.workload.block_ops(b);
        let prior = self.last.prior_set(self.workload, &ops);
        self.last.apply(b, &ops);
        self.live.apply(&ops);
        (b, self.workload.change_set_of(&ops), prior)
    }

    /// Commit the next `n` blocks to both databases in turn (the windowed one first on odd
    /// blocks); returns each database's commit seconds.
    fn commit_both(
        &mut self,
        with: &mut StateDb,
        without: &mut StateDb,
        n: u64,
        pb: &ProgressBar,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let (mut with_s, mut without_s) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let (b, changes, prior) = self.next();
            let ((tw, rw), (tz, rz)) = if b % 2 == 1 {
                let w = commit(with, b, &changes, &prior)?;
                (w, commit(without, b, &changes, &prior)?)
            } else {
                let z = commit(without, b, &changes, &prior)?;
                (commit(with, b, &changes, &prior)?, z)
            };
            ensure!(rw == rz, "block {b}: root {rw} with the window, {rz} without");
            self.roots.push(rw);
            with_s.push(tw);
            without_s.push(tz);
            pb.inc(1);
        }
        Ok((with_s, without_s))
    }
}

/// Commit block `b` to `db`, timed alone; returns the seconds and the root.
fn commit(db: &mut StateDb, b: u64, changes: &ChangeSet, prior: &ChangeSet) -> Result<(f64, H256)> {
    let start = Instant::now();
    let info = db
        .commit_with_prior(changes, prior)
        .with_context(|| format!("commit of block {b} failed"))?;
    let seconds = start.elapsed().as_secs_f64();
    ensure!(info.number == b, "committed block {b} as number {}", info.number);
    Ok((seconds, info.root))
}

/// Commit the read blocks to `with` while a reader samples (see the module docs); returns
/// the commit seconds and the reader's samples.
fn read_phase(
    with: &mut StateDb,
    blocks: &mut Blocks<'_>,
    opts: &HistoryBenchOpts,
    pb: &ProgressBar,
) -> Result<(Vec<f64>, ReaderSamples)> {
    let head = AtomicU64::new(with.head_number());
    let stop = AtomicBool::new(false);
    let reader = Reader {
        handle: with.read_handle().context("no read handle")?,
        workload: blocks.workload,
        depths: opts.depths(),
        head: &head,
        stop: &stop,
        rounds_per_block: opts.reads_per_block,
        seed: opts.seed ^ READER_SEED_TAG,
    };
    std::thread::scope(|s| {
        let thread = s.spawn(move || reader.run());
        let committed = commit_reading(with, blocks, opts.read_blocks, &head, thread.thread(), pb);
        stop.store(true, Ordering::Release);
        thread.thread().unpark();
        let samples = thread.join().map_err(|_| anyhow!("the reader thread panicked"))?;
        let samples = samples.context("the reader failed")?;
        Ok((committed?, samples))
    })
}

/// The committer's side of the read phase: `n` blocks, `head` moved and the reader woken
/// after each (stops early if the reader has stopped: its error is the one to report).
fn commit_reading(
    with: &mut StateDb,
    blocks: &mut Blocks<'_>,
    n: u64,
    head: &AtomicU64,
    reader: &Thread,
    pb: &ProgressBar,
) -> Result<Vec<f64>> {
    let mut seconds = Vec::new();
    for _ in 0..n {
        let (b, changes, prior) = blocks.next();
        let (t, root) = commit(with, b, &changes, &prior)?;
        blocks.roots.push(root);
        head.store(b, Ordering::Release);
        reader.unpark();
        seconds.push(t);
        pb.inc(1);
    }
    Ok(seconds)
}

/// Every view root the reader checked equals the root its block's commit returned; returns
/// how many blocks were checked.
fn check_roots(seen: &BTreeMap<u64, H256>, committed: &[H256]) -> Result<u64> {
    for (b, root) in seen {
        let want = usize::try_from(*b).ok().and_then(|i| committed.get(i));
        ensure!(want == Some(root), "a view of block {b} has root {root}, its commit {want:?}");
    }
    Ok(seen.len() as u64)
}

/// Flush `db` and recompute its root from flat state; returns the root.
fn verify(db: &StateDb) -> Result<H256> {
    db.flush().context("flush failed")?;
    let report = db.verify().context("verify failed")?;
    if !report.ok() {
        bail!(
            "root mismatch at block {}: stored {}, recomputed {}",
            report.number,
            report.stored_root,
            report.computed_root
        );
    }
    Ok(db.head_root())
}

/// The reader thread (see the module docs).
struct Reader<'a> {
    handle: ReadHandle,
    workload: &'a Workload,
    depths: Vec<u64>,
    /// The last block the committer returned from.
    head: &'a AtomicU64,
    /// Set after the last commit.
    stop: &'a AtomicBool,
    rounds_per_block: u64,
    seed: u64,
}

/// One depth's samples: latencies in microseconds, counts.
#[derive(Default)]
struct DepthSamples {
    at: Vec<f64>,
    get: Vec<f64>,
    get_present: Vec<f64>,
    get_absent: Vec<f64>,
    get_changed: Vec<f64>,
    get_unchanged: Vec<f64>,
    prove: Vec<f64>,
    proof_nodes: u64,
    proof_bytes: u64,
    verified: u64,
    left_window: u64,
}

impl DepthSamples {
    fn push(&mut self, s: &Sample) {
        self.at.push(s.at_us);
        self.get.push(s.get_us);
        match s.present {
            true => self.get_present.push(s.get_us),
            false => self.get_absent.push(s.get_us),
        }
        self.prove.push(s.prove_us);
        self.proof_nodes += s.proof.len() as u64;
        self.proof_bytes += s.proof.iter().map(|n| n.len() as u64).sum::<u64>();
        match s.get_changed {
            true => self.get_changed.push(s.get_us),
            false => self.get_unchanged.push(s.get_us),
        }
    }

    fn report(&self, depth: u64) -> DepthReport {
        let proofs = self.prove.len() as f64;
        DepthReport {
            depth,
            at: LatencyReport::of(&self.at),
            get: LatencyReport::of(&self.get),
            get_present: LatencyReport::of(&self.get_present),
            get_absent: LatencyReport::of(&self.get_absent),
            get_changed: LatencyReport::of(&self.get_changed),
            get_unchanged: LatencyReport::of(&self.get_unchanged),
            prove: LatencyReport::of(&self.prove),
            proof_nodes_mean: ratio(self.proof_nodes as f64, proofs),
            proof_bytes_mean: ratio(self.proof_bytes as f64, proofs),
            proofs_verified: self.verified,
            left_window: self.left_window,
        }
    }
}

/// Everything the reader measured.
struct ReaderSamples {
    rounds: u64,
    /// In the order of [`HistoryBenchOpts::depths`].
    depths: Vec<DepthSamples>,
    head_handle_get: Vec<f64>,
    /// The root of every checked view, by block.
    roots: BTreeMap<u64, H256>,
}

impl ReaderSamples {
    /// The report; fails if a depth has no sample.
    fn report(&self, depths: &[u64], roots_checked: u64) -> Result<ReadReport> {
        for (d, s) in depths.iter().zip(&self.depths) {
            ensure!(!s.get.is_empty(), "the reader took no sample at depth {d}");
        }
        Ok(ReadReport {
            rounds: self.rounds,
            depths: depths.iter().zip(&self.depths).map(|(d, s)| s.report(*d)).collect(),
            get_head_handle: LatencyReport::of(&self.head_handle_get),
            roots_checked,
        })
    }
}

/// One sample at one depth: latencies (microseconds) and what the checks need.
struct Sample {
    at_us: f64,
    get_us: f64,
    present: bool,
    prove_us: f64,
    proof: Vec<Vec<u8>>,
    root: H256,
    /// The proven key's value as the view reads it (untimed), when the sample is checked.
    proven: Option<Option<Vec<u8>>>,
    /// Whether the `get` key's value at the head differs (read untimed, after the sample).
    get_changed: bool,
}

fn micros(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

impl Reader<'_> {
    /// Rounds until stopped: at most `rounds_per_block` per head, the last head's included.
    fn run(self) -> Result<ReaderSamples> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut s = ReaderSamples {
            rounds: 0,
            depths: self.depths.iter().map(|_| DepthSamples::default()).collect(),
            head_handle_get: Vec::new(),
            roots: BTreeMap::new(),
        };
        let (mut seen, mut done) = (u64::MAX, 0);
        loop {
            let h = self.head.load(Ordering::Acquire);
            if h != seen {
                (seen, done) = (h, 0);
            }
            if done >= self.rounds_per_block {
                if self.stop.load(Ordering::Acquire) {
                    return Ok(s);
                }
                std::thread::park_timeout(READER_PARK);
                continue;
            }
            self.round(&mut rng, &mut s)?;
            done += 1;
        }
    }

    /// One sample at every depth (which goes first is random), then a head read without a view.
    fn round(&self, rng: &mut ChaCha8Rng, s: &mut ReaderSamples) -> Result<()> {
        let k = self.depths.len();
        let first = rng.gen_range(0..k);
        for j in 0..k {
            self.sample((first + j) % k, rng, s)?;
        }
        let h = self.head.load(Ordering::Acquire);
        let key = self.workload.key(rng.gen_range(0..self.workload.index_range(h).max(1)));
        let start = Instant::now();
        StateReader::get(&self.handle, &TrieId::Main, &key).context("head read failed")?;
        s.head_handle_get.push(micros(start));
        s.rounds += 1;
        Ok(())
    }

    /// One sample at depth `self.depths[i]`, checked every [`CHECK_EVERY`] samples.
    fn sample(&self, i: usize, rng: &mut ChaCha8Rng, s: &mut ReaderSamples) -> Result<()> {
        let depth = self.depths[i];
        let h = self.head.load(Ordering::Acquire);
        let Some(b) = h.checked_sub(depth) else { return Ok(()) };
        let range = self.workload.index_range(b).max(1);
        let get_key = self.workload.key(rng.gen_range(0..range));
        let prove_key = self.workload.key(rng.gen_range(0..range));
        let d = &mut s.depths[i];
        let check = d.get.len().is_multiple_of(CHECK_EVERY);
        let sample = match self.timed(b, &get_key, &prove_key, check) {
            Ok(sample) => sample,
            Err(AtError::Outside { .. }) => {
                d.left_window += 1;
                return Ok(());
            }
            Err(e) => {
                let context = format!("read at block {b} (head {h}, depth {depth}) failed");
                return Err(anyhow::Error::new(e).context(context));
            }
        };
        d.push(&sample);
        let Some(value) = &sample.proven else { return Ok(()) };
        let key = crate::common::text::hex(&prove_key);
        let root = sample.root;
        let proven = verify_proof::<EthLayout>(&root, &prove_key, &sample.proof).map_err(|e| {
            anyhow!(
                "the proof of 0x{key} at block {b} does not verify against its root {root}: {e}"
            )
        })?;
        ensure!(
            proven == *value,
            "the proof of 0x{key} at block {b} shows {:?}, the view reads {:?}",
            proven.as_deref().map(crate::common::text::hex),
            value.as_deref().map(crate::common::text::hex)
        );
        d.verified += 1;
        if let Some(other) = s.roots.insert(b, root) {
            ensure!(other == root, "two views of block {b} have roots {other} and {root}");
        }
        Ok(())
    }

    /// The timed part of a sample: the view, `get`, `prove`; then, untimed, the `get` key's
    /// value at the head and, if `check`, the proven key's value through the view.
    fn timed(
        &self,
        b: u64,
        get_key: &[u8],
        prove_key: &[u8],
        check: bool,
    ) -> Result<Sample, AtError> {
        let start = Instant::now();
        let view = self.handle.at(b)?;
        let at_us = micros(start);
        let start = Instant::now();
        let value = view.get(&TrieId::Main, get_key)?;
        let get_us = micros(start);
        let start = Instant::now();
        let proof = view.prove(TrieId::Main, prove_key)?;
        let prove_us = micros(start);
        let get_changed = StateReader::get(&self.handle, &TrieId::Main, get_key)? != value;
        let proven = match check {
            true => Some(view.get(&TrieId::Main, prove_key)?),
            false => None,
        };
        let present = value.is_some();
        let root = view.root();
        Ok(Sample { at_us, get_us, present, prove_us, proof, root, proven, get_changed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_end_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let opts = HistoryBenchOpts {
            keys: 2_000,
            blocks: 12,
            read_blocks: 6,
            updates_per_block: 100,
            seed: 5,
            recent_blocks: 8,
            recent_bytes: 64 << 20,
            reads_per_block: 3,
            dir: Some(dir.path().to_path_buf()),
        };
        let report = history_bench(&opts, &StoreConfig::default(), false).unwrap();
        assert!(report.root_verified);
        assert_eq!(report.bulk.keys, 2_000);
        assert!((1_800..2_200).contains(&report.keys_final), "{}", report.keys_final);
        let c = &report.commits;
        assert_eq!((c.fill_with_window.blocks, c.fill_without_window.blocks), (8, 8));
        assert_eq!((c.with_window.blocks, c.without_window.blocks), (4, 4));
        assert_eq!(c.with_window_reading.blocks, 6);
        assert!(c.with_window.blocks_per_second > 0.0 && c.without_window.blocks_per_second > 0.0);
        // The window holds its 8 blocks, their old nodes included, within the byte bound.
        let w = &report.window;
        assert!(w.full, "{w:?}");
        assert_eq!((w.after_reads.blocks, w.after_reads.oldest_block), (8, 18 - 8));
        assert_eq!(w.after_reads.provable_block, w.after_reads.oldest_block);
        assert!(w.bytes_per_block > 0.0);
        let r = &report.reads;
        assert_eq!(r.depths.iter().map(|d| d.depth).collect::<Vec<_>>(), vec![0, 1, 4, 7]);
        // The last block's rounds at least, each sampling every depth once.
        assert!(r.rounds >= 3, "{}", r.rounds);
        assert_eq!(r.get_head_handle.samples, r.rounds);
        for d in &r.depths {
            assert_eq!(d.get.samples + d.left_window, r.rounds, "depth {}", d.depth);
            assert_eq!(d.at.samples, d.get.samples);
            assert_eq!(d.prove.samples, d.get.samples);
            assert_eq!(d.get_present.samples + d.get_absent.samples, d.get.samples);
            assert!(d.proofs_verified >= 1, "depth {}", d.depth);
            assert!(d.proof_nodes_mean >= 1.0 && d.get.us_p50 > 0.0 && d.prove.us_p50 > 0.0);
            assert_eq!(d.get_changed.samples + d.get_unchanged.samples, d.get.samples);
        }
        assert!(r.roots_checked >= 1);
        let t = &report.targets;
        assert!(t.get_ratio_p50 > 0.0 && t.prove_ratio_p50 > 0.0 && t.throughput_ratio > 0.0);
        assert_eq!(t.get_met, t.get_ratio_p50 <= 3.0);
        let text = report.render();
        assert!(text.contains("head-7") && text.contains("with/without"), "{text}");
        assert!(report.html().contains("arbor bench history"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["options"]["recent_blocks"], 8);
        assert_eq!(json["window"]["after_reads"]["blocks"], 8);
        assert!(json["reads"]["depths"][3]["prove"]["us_p50"].as_f64().unwrap() > 0.0);
        // The temporary databases are gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
