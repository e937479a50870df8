//! The engines of `arbor bench store`: each one bulk-loads the workload's initial keys,
//! commits its blocks (each commit timed alone; generating a block is not timed), flushes
//! (timed: sustained throughput counts every block until it is durable), compacts and
//! measures its files. See [`crate::store_bench`] for what each engine stands for.

use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use indicatif::ProgressBar;
use store::{StateDb, StoreConfig, StoreStats};
use trie::TrieId;

use crate::nomt_engine::NomtEngine;
use crate::opts::StoreBenchOpts;
use crate::plain_db::{column_sst_bytes, dir_bytes, PlainDb};
use crate::progress::bar;
use crate::rss::{io_write_bytes, peak_rss_bytes, reset_peak_rss};
use crate::store_report::{CacheReport, EngineReport, PhaseReport, RSS_OVER_BUDGET_TARGET};
use crate::timing::{percentile_sorted, ratio, sorted};
use crate::workload::{LastWrites, LiveKeys, Workload};

/// How the Arbor engine learns the old values of a block's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArborMode {
    /// From the caller, as an executor that read them has them
    /// (`StateDb::commit_with_prior`, values from [`LastWrites`]).
    Prior,
    /// Read by the store itself (`StateDb::commit`: batched MultiGets).
    Read,
}

impl ArborMode {
    fn label(self) -> &'static str {
        match self {
            ArborMode::Prior => "arbor",
            ArborMode::Read => "arbor (reads)",
        }
    }
}

/// What the Arbor engine reports beside its engine report.
pub(crate) struct ArborRun {
    pub(crate) report: EngineReport,
    pub(crate) caches: CacheReport,
    pub(crate) keys_final: u64,
    pub(crate) root: String,
}

/// Per-block timings and counts of one engine's block phase.
pub(crate) struct BlockPhase {
    pub(crate) commit_seconds: Vec<f64>,
    pub(crate) writes: u64,
    pub(crate) hashes: u64,
    /// Bytes of the write batches (keys, values, framing).
    pub(crate) bytes_written: u64,
    pub(crate) flush_seconds: f64,
}

impl BlockPhase {
    pub(crate) fn engine_report(
        &self,
        blocks: u64,
        bulk_keys: u64,
        bulk_seconds: f64,
    ) -> EngineReport {
        let commit_total: f64 = self.commit_seconds.iter().sum();
        let total = commit_total + self.flush_seconds;
        let s = sorted(&self.commit_seconds);
        EngineReport {
            bulk_keys,
            bulk_seconds,
            blocks,
            writes: self.writes,
            hashes_per_block_mean: ratio(self.hashes as f64, blocks as f64),
            bytes_written_per_block: ratio(self.bytes_written as f64, blocks as f64),
            leaf_scans_per_block_mean: 0.0,
            disk_bytes_per_block: 0.0,
            commit_seconds: commit_total,
            flush_seconds: self.flush_seconds,
            total_seconds: total,
            blocks_per_second: ratio(blocks as f64, total),
            writes_per_second: ratio(self.writes as f64, total),
            commit_ms_p50: percentile_sorted(&s, 50.0) * 1e3,
            commit_ms_p99: percentile_sorted(&s, 99.0) * 1e3,
            commit_ms_max: s.last().copied().unwrap_or(0.0) * 1e3,
            commit_ms_series: crate::html::downsample(
                &self.commit_seconds.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
                crate::store_report::COMMIT_SERIES_POINTS,
            ),
            compact_seconds: 0.0,
            end_to_end_seconds: 0.0,
            sst_bytes: 0,
            column_sst_bytes: Default::default(),
            dir_bytes: 0,
            sst_bytes_per_key: 0.0,
            peak_rss_bytes: 0,
            peak_rss_blocks_bytes: 0,
            peak_rss_reset: false,
            phases: None,
        }
    }
}

/// Arbor: bulk load, blocks, flush, caches, compaction.
pub(crate) fn run_arbor(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    workload: &Workload,
    dir: &Path,
    mode: ArborMode,
    progress: bool,
) -> Result<ArborRun> {
    let label = mode.label();
    let peak_rss_reset = reset_peak_rss();
    let mut db = StateDb::open(dir, config.clone()).context("cannot open the Arbor store")?;
    let pb = bar(progress, opts.keys, format!("{label}: bulk load"));
    let start = Instant::now();
    let mut load = db.begin_bulk_load("bench store").context("Arbor bulk load refused")?;
    for (i, (k, v)) in workload.initial_entries().enumerate() {
        tick(&pb, i);
        load.put(&TrieId::Main, &k, &v).context("Arbor bulk load failed")?;
    }
    pb.set_message(format!("{label}: bulk load, node rebuild"));
    let bulk_keys = load.finish().context("Arbor bulk load failed")?.entries;
    let bulk_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let rss = RssPhases::start_blocks();

    let pb = bar(progress, opts.blocks, format!("{label}: blocks"));
    let blocks = ArborBlocks::commit(&mut db, opts, workload, mode, &pb)?;
    pb.finish();
    let ArborBlocks { commit_seconds, writes, hashes, leaf_scans, timings, flush_seconds, live } =
        blocks;
    let peak_rss_blocks_bytes = rss.blocks_peak();
    let disk_bytes_per_block = rss.disk_per_block(opts.blocks);
    let bytes_written = db.stats().bytes_written;
    let phase = BlockPhase { commit_seconds, writes, hashes, bytes_written, flush_seconds };
    let mut report = phase.engine_report(opts.blocks, bulk_keys, bulk_seconds);
    report.peak_rss_blocks_bytes = peak_rss_blocks_bytes;
    report.disk_bytes_per_block = disk_bytes_per_block;
    report.phases = Some(PhaseReport::of(&timings));
    report.leaf_scans_per_block_mean = ratio(leaf_scans as f64, opts.blocks as f64);
    let stats = db.stats();
    let root = db.head_root();

    let pb = bar(progress, 1, format!("{label}: compaction"));
    let start = Instant::now();
    db.compact().context("Arbor compaction failed")?;
    report.compact_seconds = start.elapsed().as_secs_f64();
    report.end_to_end_seconds = report.total_seconds + report.compact_seconds;
    report.sst_bytes = db.stats().sst_bytes;
    report.peak_rss_bytes = rss.whole_peak();
    report.peak_rss_reset = peak_rss_reset;
    db.close().context("Arbor close failed")?;
    report.column_sst_bytes = column_sst_bytes(dir)?;
    report.dir_bytes = dir_bytes(dir)?;
    pb.finish();

    let caches = cache_report(&stats, config, report.peak_rss_blocks_bytes);
    Ok(ArborRun { report, caches, keys_final: live.count(), root: root.to_string() })
}

/// Arbor's block phase: every block committed (each commit timed alone), then the flush
/// (timed).
struct ArborBlocks {
    commit_seconds: Vec<f64>,
    writes: u64,
    hashes: u64,
    leaf_scans: u64,
    timings: Vec<store::CommitTimings>,
    flush_seconds: f64,
    /// The live keys after the last block.
    live: LiveKeys,
}

impl ArborBlocks {
    /// Commit the workload's blocks to `db` (the old values given by the caller or read
    /// by the store, as `mode` says) and flush; `pb` counts the blocks.
    fn commit(
        db: &mut StateDb,
        opts: &StoreBenchOpts,
        workload: &Workload,
        mode: ArborMode,
        pb: &ProgressBar,
    ) -> Result<ArborBlocks> {
        let mut live = LiveKeys::initial(opts.keys);
        let mut last = LastWrites::default();
        let mut commit_seconds = Vec::with_capacity(opts.blocks as usize);
        let mut timings = Vec::with_capacity(opts.blocks as usize);
        let (mut writes, mut hashes, mut leaf_scans) = (0, 0, 0);
        for b in 1..=opts.blocks {
            let ops = workload.block_ops(b);
            live.apply(&ops);
            let changes = workload.change_set_of(&ops);
            let prior = (mode == ArborMode::Prior).then(|| last.prior_set(workload, &ops));
            last.apply(b, &ops);
            writes += changes.values().map(|m| m.len() as u64).sum::<u64>();
            let start = Instant::now();
            let info = match &prior {
                Some(prior) => db.commit_with_prior(&changes, prior),
                None => db.commit(&changes),
            }
            .with_context(|| format!("Arbor commit of block {b} failed"))?;
            commit_seconds.push(start.elapsed().as_secs_f64());
            ensure!(info.number == b, "Arbor committed block {} as number {}", b, info.number);
            hashes += info.hashes;
            leaf_scans += info.leaf_scans;
            timings.push(info.timings);
            pb.inc(1);
        }
        let start = Instant::now();
        db.flush().context("Arbor flush failed")?;
        let flush_seconds = start.elapsed().as_secs_f64();
        Ok(ArborBlocks { commit_seconds, writes, hashes, leaf_scans, timings, flush_seconds, live })
    }
}

/// Arbor's caches after the blocks, and its peak RSS during them against the cache budget.
fn cache_report(
    stats: &StoreStats,
    config: &StoreConfig,
    peak_rss_blocks_bytes: u64,
) -> CacheReport {
    let budget_bytes = config.cache_budget_bytes();
    let peak_rss_over_budget = ratio(peak_rss_blocks_bytes as f64, budget_bytes as f64);
    CacheReport {
        node: stats.node_cache,
        node_hit_rate: stats.node_cache.hit_rate(),
        flat: stats.flat_cache,
        flat_hit_rate: stats.flat_cache.hit_rate(),
        resident: stats.resident,
        commit_waits: stats.commit_waits,
        node_buffer_peak_bytes: stats.peak_node_buffer_bytes,
        node_write_backs: stats.node_write_backs,
        budget_bytes,
        peak_rss_over_budget,
        rss_target_met: peak_rss_over_budget <= RSS_OVER_BUDGET_TARGET,
    }
}

/// How a plain RocksDB baseline writes a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlainMode {
    /// The new values only.
    Blind,
    /// Old values read, then new values plus a history record.
    Undo,
}

impl PlainMode {
    fn label(self) -> &'static str {
        match self {
            PlainMode::Blind => "blind",
            PlainMode::Undo => "plain+undo",
        }
    }
}

/// Plain RocksDB: the same keys, values and blocks, no Merkle work.
pub(crate) fn run_plain(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    workload: &Workload,
    dir: &Path,
    mode: PlainMode,
    progress: bool,
) -> Result<EngineReport> {
    let label = mode.label();
    let peak_rss_reset = reset_peak_rss();
    let db = PlainDb::open(dir, config)?;
    let pb = bar(progress, opts.keys, format!("{label}: bulk load"));
    let start = Instant::now();
    let entries = workload.initial_entries().enumerate().map(|(i, kv)| {
        tick(&pb, i);
        kv
    });
    let bulk_keys = db.bulk_load(entries).with_context(|| format!("{label} bulk load failed"))?;
    let bulk_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let rss = RssPhases::start_blocks();

    let pb = bar(progress, opts.blocks, format!("{label}: blocks"));
    let mut commit_seconds = Vec::with_capacity(opts.blocks as usize);
    let (mut writes, mut bytes_written) = (0, 0);
    for b in 1..=opts.blocks {
        let changes = workload.block_changes(b);
        writes += changes.len() as u64;
        let start = Instant::now();
        bytes_written += match mode {
            PlainMode::Blind => db.write_block(&changes),
            PlainMode::Undo => db.write_block_with_undo(b, &changes),
        }
        .with_context(|| format!("{label} write of block {b} failed"))?;
        commit_seconds.push(start.elapsed().as_secs_f64());
        pb.inc(1);
    }
    let start = Instant::now();
    db.flush().with_context(|| format!("{label} flush failed"))?;
    let flush_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let peak_rss_blocks_bytes = rss.blocks_peak();
    let phase = BlockPhase { commit_seconds, writes, hashes: 0, bytes_written, flush_seconds };
    let mut report = phase.engine_report(opts.blocks, bulk_keys, bulk_seconds);
    report.peak_rss_blocks_bytes = peak_rss_blocks_bytes;
    report.disk_bytes_per_block = rss.disk_per_block(opts.blocks);

    let pb = bar(progress, 1, format!("{label}: compaction"));
    let start = Instant::now();
    db.compact().with_context(|| format!("{label} compaction failed"))?;
    report.compact_seconds = start.elapsed().as_secs_f64();
    report.end_to_end_seconds = report.total_seconds + report.compact_seconds;
    report.sst_bytes = db.sst_bytes()?;
    report.peak_rss_bytes = rss.whole_peak();
    report.peak_rss_reset = peak_rss_reset;
    drop(db);
    report.column_sst_bytes = column_sst_bytes(dir)?;
    report.dir_bytes = dir_bytes(dir)?;
    pb.finish();
    Ok(report)
}

/// NOMT: the same keys, values and blocks, committed to its binary BLAKE3 trie (see
/// [`crate::nomt_engine`]): `commit_concurrency` = cores, rollback on (undo parity).
pub(crate) fn run_nomt(
    opts: &StoreBenchOpts,
    config: &StoreConfig,
    workload: &Workload,
    dir: &Path,
    progress: bool,
) -> Result<EngineReport> {
    let peak_rss_reset = reset_peak_rss();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let keys_expected = workload.index_range(opts.blocks);
    let budget = config.cache_budget_bytes();
    let mut db = NomtEngine::open(dir, threads, NOMT_ROLLBACK_BLOCKS, keys_expected, budget)?;
    let pb = bar(progress, opts.keys, "nomt: bulk load");
    let start = Instant::now();
    let bulk_keys = db.bulk_load(workload.initial_entries()).context("NOMT bulk load failed")?;
    let bulk_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    let rss = RssPhases::start_blocks();
    let pb = bar(progress, opts.blocks, "nomt: blocks");
    let mut commit_seconds = Vec::with_capacity(opts.blocks as usize);
    let mut writes = 0;
    let mut last = LastWrites::default();
    for b in 1..=opts.blocks {
        let ops = workload.block_ops(b);
        last.apply(b, &ops);
        let changes = workload.changes_of(&ops);
        writes += changes.len() as u64;
        let start = Instant::now();
        db.commit_block(&changes).with_context(|| format!("NOMT commit of block {b} failed"))?;
        commit_seconds.push(start.elapsed().as_secs_f64());
        pb.inc(1);
    }
    let start = Instant::now();
    db.flush().context("NOMT flush failed")?;
    let flush_seconds = start.elapsed().as_secs_f64();
    pb.finish();
    check_nomt(&db, workload, &last, opts)?;
    let phase = BlockPhase { commit_seconds, writes, hashes: 0, bytes_written: 0, flush_seconds };
    let mut report = phase.engine_report(opts.blocks, bulk_keys, bulk_seconds);
    report.peak_rss_blocks_bytes = rss.blocks_peak();
    report.disk_bytes_per_block = rss.disk_per_block(opts.blocks);
    report.end_to_end_seconds = report.total_seconds;
    report.dir_bytes = db.dir_bytes()?;
    report.sst_bytes = report.dir_bytes;
    report.peak_rss_bytes = rss.whole_peak();
    report.peak_rss_reset = peak_rss_reset;
    Ok(report)
}

/// Every 997th key index below the final range holds in NOMT what the workload wrote last.
fn check_nomt(
    db: &NomtEngine,
    workload: &Workload,
    last: &LastWrites,
    opts: &StoreBenchOpts,
) -> Result<()> {
    for i in (0..workload.index_range(opts.blocks)).step_by(997) {
        let want = last.value(workload, i).map(|v| v.to_vec());
        let got = db.get(&workload.key(i))?;
        ensure!(got == want, "NOMT holds another value for key index {i}");
    }
    Ok(())
}

/// Blocks of undo NOMT keeps (as the store's default history depth).
const NOMT_ROLLBACK_BLOCKS: u32 = 128;

/// Peak RSS of an engine's phase, split at the start of its blocks: the peak so far is
/// kept, then reset so that the block run's own peak can be read.
struct RssPhases {
    bulk_peak: u64,
    reset: bool,
    /// Storage writes of the process when the blocks began.
    disk_start: Option<u64>,
}

impl RssPhases {
    fn start_blocks() -> RssPhases {
        let bulk_peak = peak_rss_bytes().unwrap_or(0);
        RssPhases { bulk_peak, reset: reset_peak_rss(), disk_start: io_write_bytes() }
    }

    /// Bytes written to storage since the blocks began, per block (0 when unknown).
    fn disk_per_block(&self, blocks: u64) -> f64 {
        match (self.disk_start, io_write_bytes()) {
            (Some(a), Some(b)) => ratio(b.saturating_sub(a) as f64, blocks as f64),
            _ => 0.0,
        }
    }

    /// The block run's peak (0 when the peak could not be reset).
    fn blocks_peak(&self) -> u64 {
        if self.reset {
            peak_rss_bytes().unwrap_or(0)
        } else {
            0
        }
    }

    /// The whole phase's peak.
    fn whole_peak(&self) -> u64 {
        self.bulk_peak.max(peak_rss_bytes().unwrap_or(0))
    }
}

/// Advance a bulk-load bar every 65,536 entries (cheap enough to call per entry).
fn tick(pb: &ProgressBar, i: usize) {
    if i.is_multiple_of(65_536) {
        pb.set_position(i as u64);
    }
}
