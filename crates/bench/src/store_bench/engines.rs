//! The engines of `arbor bench store`: each one bulk-loads the workload's initial keys,
//! commits its blocks (each commit timed alone; generating a block is not timed), flushes
//! (timed: sustained throughput counts every block until it is durable), compacts and
//! measures its files. See [`crate::store_bench`] for what each engine stands for.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};
use state::TrieId;
use store::{StateDb, StoreConfig, StoreStats};

use crate::common::plain_db::{column_sst_bytes, dir_bytes, PlainDb};
use crate::common::rss::{io_write_bytes, peak_rss_bytes, reset_peak_rss};
use crate::common::timing::{percentile_sorted, ratio, sorted};
use crate::common::workload::{
    LastWrites, LiveKeys, Workload, WORKLOAD_KEY_BYTES, WORKLOAD_VALUE_BYTES,
};
use crate::store_bench::nomt::NomtEngine;
use crate::store_bench::report::{CacheReport, EngineReport, PhaseReport, RSS_OVER_BUDGET_TARGET};

/// How the Arbor engine learns the old values of a block's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArborMode {
    /// From the caller, as an executor that read them has them
    /// (`StateDb::commit_with_prior`, values from [`LastWrites`]).
    Prior,
    /// Read by the store itself (`StateDb::commit`: batched MultiGets).
    Read,
}

/// What the Arbor engine reports beside its engine report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ArborExtras {
    pub(crate) caches: CacheReport,
    pub(crate) keys_final: u64,
    pub(crate) root: String,
}

/// An engine's outcome: its report and, for Arbor, its caches, key count and root.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EngineOutcome {
    pub(crate) report: EngineReport,
    pub(crate) arbor: Option<ArborExtras>,
}

/// One engine of the benchmark after its bulk load: it commits blocks in rounds, then
/// finishes (flush, compaction, measurements).
pub(crate) trait Engine {
    /// Commit blocks `from..=to`, the next ones in order (each commit timed alone).
    fn blocks(&mut self, from: u64, to: u64) -> Result<()>;
    /// Flush (timed), compact and measure.
    fn finish(self: Box<Self>) -> Result<EngineOutcome>;
}

/// What every engine keeps of its bulk load and its process's measurements.
struct Started {
    bulk_keys: u64,
    bulk_seconds: f64,
    peak_rss_reset: bool,
    rss: RssPhases,
    commit_seconds: Vec<f64>,
    writes: u64,
}

impl Started {
    /// After a bulk load of `bulk_keys` that began at `start`.
    fn after_bulk(bulk_keys: u64, start: Instant, peak_rss_reset: bool) -> Started {
        Started {
            bulk_keys,
            bulk_seconds: start.elapsed().as_secs_f64(),
            peak_rss_reset,
            rss: RssPhases::start_blocks(),
            commit_seconds: Vec::new(),
            writes: 0,
        }
    }

    /// The engine report of the block phase (blocks, flush, peaks and disk writes so far).
    fn report(&self, blocks: u64, hashes: u64, bytes_written: u64, flush: f64) -> EngineReport {
        let phase = BlockPhase {
            commit_seconds: self.commit_seconds.clone(),
            writes: self.writes,
            hashes,
            bytes_written,
            flush_seconds: flush,
        };
        let mut report = phase.engine_report(blocks, self.bulk_keys, self.bulk_seconds);
        report.peak_rss_blocks_bytes = self.rss.blocks_peak();
        report.disk_bytes_per_block = self.rss.disk_per_block(blocks);
        report.peak_rss_reset = self.peak_rss_reset;
        report
    }
}

/// Arbor: bulk-loaded, committing blocks with its old values given (`Prior`) or read.
pub(crate) struct ArborEngine {
    db: StateDb,
    config: StoreConfig,
    workload: Workload,
    dir: PathBuf,
    mode: ArborMode,
    started: Started,
    live: LiveKeys,
    last: LastWrites,
    timings: Vec<store::CommitTimings>,
    hashes: u64,
    leaf_scans: u64,
}

impl ArborEngine {
    /// Open a new store at `dir` and bulk-load the workload's initial keys; `tick` hears
    /// the entries loaded so far.
    pub(crate) fn start(
        config: &StoreConfig,
        workload: &Workload,
        dir: &Path,
        mode: ArborMode,
        tick: &dyn Fn(u64),
    ) -> Result<ArborEngine> {
        let peak_rss_reset = reset_peak_rss();
        let mut db = StateDb::open(dir, config.clone()).context("cannot open the Arbor store")?;
        let start = Instant::now();
        let mut load = db.begin_bulk_load("bench store").context("Arbor bulk load refused")?;
        for (k, v) in ticking(workload, tick) {
            load.put(&TrieId::Main, &k, &v).context("Arbor bulk load failed")?;
        }
        let bulk_keys = load.finish().context("Arbor bulk load failed")?.entries;
        Ok(ArborEngine {
            db,
            config: config.clone(),
            workload: workload.clone(),
            dir: dir.to_path_buf(),
            mode,
            started: Started::after_bulk(bulk_keys, start, peak_rss_reset),
            live: LiveKeys::initial(workload.keys_initial),
            last: LastWrites::default(),
            timings: Vec::new(),
            hashes: 0,
            leaf_scans: 0,
        })
    }
}

impl Engine for ArborEngine {
    fn blocks(&mut self, from: u64, to: u64) -> Result<()> {
        for b in from..=to {
            let ops = self.workload.block_ops(b);
            self.live.apply(&ops);
            let changes = self.workload.change_set_of(&ops);
            let prior =
                (self.mode == ArborMode::Prior).then(|| self.last.prior_set(&self.workload, &ops));
            self.last.apply(b, &ops);
            self.started.writes += changes.values().map(|m| m.len() as u64).sum::<u64>();
            let start = Instant::now();
            let info = match &prior {
                Some(prior) => self.db.commit_with_prior(&changes, prior),
                None => self.db.commit(&changes),
            }
            .with_context(|| format!("Arbor commit of block {b} failed"))?;
            self.started.commit_seconds.push(start.elapsed().as_secs_f64());
            ensure!(info.number == b, "Arbor committed block {} as number {}", b, info.number);
            self.hashes += info.hashes;
            self.leaf_scans += info.leaf_scans;
            self.timings.push(info.timings);
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<EngineOutcome> {
        let ArborEngine { db, config, dir, started, live, timings, hashes, leaf_scans, .. } = *self;
        let blocks = started.commit_seconds.len() as u64;
        let start = Instant::now();
        db.flush().context("Arbor flush failed")?;
        let flush_seconds = start.elapsed().as_secs_f64();
        let stats = db.stats();
        let mut report = started.report(blocks, hashes, stats.bytes_written, flush_seconds);
        report.phases = Some(PhaseReport::of(&timings));
        report.leaf_scans_per_block_mean = ratio(leaf_scans as f64, blocks as f64);
        let root = db.head_root();
        let start = Instant::now();
        db.compact().context("Arbor compaction failed")?;
        report.compact_seconds = start.elapsed().as_secs_f64();
        report.end_to_end_seconds = report.total_seconds + report.compact_seconds;
        report.sst_bytes = db.stats().sst_bytes;
        report.peak_rss_bytes = started.rss.whole_peak();
        db.close().context("Arbor close failed")?;
        report.column_sst_bytes = column_sst_bytes(&dir)?;
        report.dir_bytes = dir_bytes(&dir)?;
        let caches = cache_report(&stats, &config, report.peak_rss_blocks_bytes);
        let arbor = ArborExtras { caches, keys_final: live.count(), root: root.to_string() };
        Ok(EngineOutcome { report, arbor: Some(arbor) })
    }
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
            commit_ms_series: crate::common::html::downsample(
                &self.commit_seconds.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
                crate::store_bench::report::COMMIT_SERIES_POINTS,
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
pub(crate) struct PlainEngine {
    db: PlainDb,
    workload: Workload,
    dir: PathBuf,
    mode: PlainMode,
    started: Started,
    bytes_written: u64,
}

impl PlainEngine {
    /// Open a new database at `dir` and bulk-load the workload's initial keys.
    pub(crate) fn start(
        config: &StoreConfig,
        workload: &Workload,
        dir: &Path,
        mode: PlainMode,
        tick: &dyn Fn(u64),
    ) -> Result<PlainEngine> {
        let label = mode.label();
        let peak_rss_reset = reset_peak_rss();
        let db = PlainDb::open(dir, config)?;
        let start = Instant::now();
        let bulk_keys = db
            .bulk_load(ticking(workload, tick))
            .with_context(|| format!("{label} bulk load failed"))?;
        Ok(PlainEngine {
            db,
            workload: workload.clone(),
            dir: dir.to_path_buf(),
            mode,
            started: Started::after_bulk(bulk_keys, start, peak_rss_reset),
            bytes_written: 0,
        })
    }
}

impl Engine for PlainEngine {
    fn blocks(&mut self, from: u64, to: u64) -> Result<()> {
        let label = self.mode.label();
        for b in from..=to {
            let changes = self.workload.block_changes(b);
            self.started.writes += changes.len() as u64;
            let start = Instant::now();
            self.bytes_written += match self.mode {
                PlainMode::Blind => self.db.write_block(&changes),
                PlainMode::Undo => self.db.write_block_with_undo(b, &changes),
            }
            .with_context(|| format!("{label} write of block {b} failed"))?;
            self.started.commit_seconds.push(start.elapsed().as_secs_f64());
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<EngineOutcome> {
        let PlainEngine { db, dir, mode, started, bytes_written, .. } = *self;
        let label = mode.label();
        let blocks = started.commit_seconds.len() as u64;
        let start = Instant::now();
        db.flush().with_context(|| format!("{label} flush failed"))?;
        let flush_seconds = start.elapsed().as_secs_f64();
        let mut report = started.report(blocks, 0, bytes_written, flush_seconds);
        let start = Instant::now();
        db.compact().with_context(|| format!("{label} compaction failed"))?;
        report.compact_seconds = start.elapsed().as_secs_f64();
        report.end_to_end_seconds = report.total_seconds + report.compact_seconds;
        report.sst_bytes = db.sst_bytes()?;
        report.peak_rss_bytes = started.rss.whole_peak();
        drop(db);
        report.column_sst_bytes = column_sst_bytes(&dir)?;
        report.dir_bytes = dir_bytes(&dir)?;
        Ok(EngineOutcome { report, arbor: None })
    }
}

/// NOMT: the same keys, values and blocks, committed to its binary BLAKE3 trie (see
/// [`crate::store_bench::nomt`]): `commit_concurrency` = cores, rollback on (undo parity).
pub(crate) struct NomtRun {
    db: NomtEngine,
    workload: Workload,
    started: Started,
    last: LastWrites,
    /// The blocks the run commits in all (the final key range).
    blocks: u64,
}

impl NomtRun {
    /// Open a new NOMT database at `dir` sized for `blocks` blocks and bulk-load the
    /// workload's initial keys.
    pub(crate) fn start(
        config: &StoreConfig,
        workload: &Workload,
        dir: &Path,
        blocks: u64,
        tick: &dyn Fn(u64),
    ) -> Result<NomtRun> {
        let peak_rss_reset = reset_peak_rss();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let keys_expected = workload.index_range(blocks);
        let budget = config.cache_budget_bytes();
        let mut db = NomtEngine::open(dir, threads, NOMT_ROLLBACK_BLOCKS, keys_expected, budget)?;
        let start = Instant::now();
        let bulk_keys = db.bulk_load(ticking(workload, tick)).context("NOMT bulk load failed")?;
        Ok(NomtRun {
            db,
            workload: workload.clone(),
            started: Started::after_bulk(bulk_keys, start, peak_rss_reset),
            last: LastWrites::default(),
            blocks,
        })
    }
}

impl Engine for NomtRun {
    fn blocks(&mut self, from: u64, to: u64) -> Result<()> {
        for b in from..=to {
            let ops = self.workload.block_ops(b);
            self.last.apply(b, &ops);
            let changes = self.workload.changes_of(&ops);
            self.started.writes += changes.len() as u64;
            let start = Instant::now();
            self.db
                .commit_block(&changes)
                .with_context(|| format!("NOMT commit of block {b} failed"))?;
            self.started.commit_seconds.push(start.elapsed().as_secs_f64());
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<EngineOutcome> {
        let NomtRun { mut db, workload, started, last, blocks } = *self;
        let committed = started.commit_seconds.len() as u64;
        ensure!(committed == blocks, "NOMT committed {committed} of {blocks} blocks");
        let start = Instant::now();
        db.flush().context("NOMT flush failed")?;
        let flush_seconds = start.elapsed().as_secs_f64();
        check_nomt(&db, &workload, &last, blocks)?;
        let mut report = started.report(blocks, 0, 0, flush_seconds);
        report.end_to_end_seconds = report.total_seconds;
        report.dir_bytes = db.dir_bytes()?;
        report.sst_bytes = report.dir_bytes;
        report.peak_rss_bytes = started.rss.whole_peak();
        Ok(EngineOutcome { report, arbor: None })
    }
}

/// Every 997th key index below the final range holds in NOMT what the workload wrote last.
fn check_nomt(db: &NomtEngine, workload: &Workload, last: &LastWrites, blocks: u64) -> Result<()> {
    for i in (0..workload.index_range(blocks)).step_by(997) {
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

/// The workload's initial entries, telling `tick` how many came before every 65,536th.
fn ticking<'a>(
    workload: &'a Workload,
    tick: &'a dyn Fn(u64),
) -> impl Iterator<Item = ([u8; WORKLOAD_KEY_BYTES], [u8; WORKLOAD_VALUE_BYTES])> + 'a {
    workload.initial_entries().enumerate().map(move |(i, kv)| {
        if i.is_multiple_of(65_536) {
            tick(i as u64);
        }
        kv
    })
}
