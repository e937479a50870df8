//! The report of [`crate::store_bench`]: plain data, serialisable to JSON, rendered for
//! people by [`StoreBenchReport::render`].

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};
use store::StoreConfig;
use store::{CacheStats, ResidentStats};

use crate::common::machine::MachineInfo;
use crate::common::text::thousands;
use crate::store_bench::catch_up::CatchUpReport;
use crate::store_bench::opts::StoreBenchOpts;

/// Largest acceptable Arbor time / blind plain RocksDB time for the same blocks (blocks
/// and final flush: sustained throughput) up to 1M keys (issue 31, "commit at scale").
pub(crate) const MERKLE_OVERHEAD_TARGET: f64 = 3.5;
/// The same from 10M keys on.
pub(crate) const MERKLE_OVERHEAD_TARGET_10M: f64 = 5.0;
/// Largest acceptable Arbor time / plain+undo time (the same reads of old values, the same
/// history record, without the Merkle work).
pub(crate) const OVER_UNDO_TARGET: f64 = 1.25;
/// Points of `EngineReport::commit_ms_series` at most.
pub(crate) const COMMIT_SERIES_POINTS: usize = 1000;
/// Largest acceptable median commit, milliseconds (1M keys, 10,000 changes per block).
pub(crate) const COMMIT_P50_TARGET_MS: f64 = 40.0;
/// Largest acceptable Arbor database size / plain RocksDB database size.
pub(crate) const SIZE_RATIO_TARGET: f64 = 1.5;
/// Largest acceptable peak RSS / configured cache budget.
pub(crate) const RSS_OVER_BUDGET_TARGET: f64 = 1.25;

/// Everything one `store_bench` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct StoreBenchReport {
    /// Machine and build.
    pub machine: MachineInfo,
    /// 1-minute load average when the run started (other work on the machine).
    pub load_average_start: f64,
    /// 1-minute load average when the run ended (includes this run's own threads).
    pub load_average_end: f64,
    /// The options used.
    pub options: StoreBenchOpts,
    /// The store configuration (the baseline uses its `[rocksdb]` part).
    pub config: StoreConfig,
    /// Live keys after the last block (tracked from the workload).
    pub keys_final: u64,
    /// Arbor's head root after the last block.
    pub root: String,
    /// True when `verify` recomputed the same root from flat state.
    pub root_verified: bool,
    /// Sampled keys whose Arbor and plain values were compared (all equal).
    pub values_cross_checked: u64,
    /// The Arbor store, given each block's old values by the caller (as from an executor).
    pub arbor: EngineReport,
    /// The Arbor store reading each block's old values itself (if run).
    pub arbor_reading: Option<EngineReport>,
    /// Plain RocksDB reading the old values and writing a history record (undo parity).
    pub plain_undo: EngineReport,
    /// Plain RocksDB writing the new values only (blind).
    pub plain: EngineReport,
    /// NOMT on the same blocks (if run): a binary Merkle trie hashed with BLAKE3, so its
    /// root is not comparable with Arbor's; each of its commits is durable on return.
    pub nomt: Option<EngineReport>,
    /// Arbor's caches and back-pressure.
    pub arbor_caches: CacheReport,
    /// Arbor's catch-up after a close with the node buffer at its maximum lag (measured
    /// after the checks, on more blocks of the same workload).
    pub arbor_catch_up: CatchUpReport,
    /// Arbor / plain ratios and the targets.
    pub ratios: RatioReport,
}

/// One engine's run: bulk load, blocks, flush, compaction, size and memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineReport {
    /// Initial keys written by the bulk load.
    pub bulk_keys: u64,
    /// Bulk load (for Arbor: flat writes plus the bottom-up node rebuild), seconds.
    pub bulk_seconds: f64,
    /// Blocks committed.
    pub blocks: u64,
    /// Distinct key writes (puts and deletes) over all blocks.
    pub writes: u64,
    /// Mean keccak calls per commit (Arbor's `CommitInfo::hashes`; 0 for the baselines).
    pub hashes_per_block_mean: f64,
    /// Mean bytes the engine's worker process wrote to storage per block during the blocks
    /// and the final flush (`/proc/self/io`: WAL, memtable flushes and compaction
    /// included); 0 if unknown.
    pub disk_bytes_per_block: f64,
    /// Mean leaves Arbor read by a flat scan per commit (`CommitInfo::leaf_scans`).
    pub leaf_scans_per_block_mean: f64,
    /// Mean bytes of write batches per block (Arbor: what its writer wrote, groups of
    /// blocks counted once).
    pub bytes_written_per_block: f64,
    /// Sum of the per-block commit (Arbor) or batch write (plain) times, seconds.
    pub commit_seconds: f64,
    /// Final flush (Arbor: wait for the writer, flush the memtables, sync the WAL; plain:
    /// sync the WAL), seconds.
    pub flush_seconds: f64,
    /// `commit_seconds + flush_seconds`.
    pub total_seconds: f64,
    /// Blocks per second of `total_seconds`.
    pub blocks_per_second: f64,
    /// Writes per second of `total_seconds`.
    pub writes_per_second: f64,
    /// Median per-block commit latency, milliseconds.
    pub commit_ms_p50: f64,
    /// 99th percentile per-block commit latency, milliseconds.
    pub commit_ms_p99: f64,
    /// Slowest commit, milliseconds.
    pub commit_ms_max: f64,
    /// Commit latency over the run, ms: `[block, ms]` points, at most
    /// 1,000 (longer runs average consecutive blocks into one point,
    /// placed at the last of them).
    pub commit_ms_series: Vec<(f64, f64)>,
    /// Full compaction after the run, seconds.
    pub compact_seconds: f64,
    /// `total_seconds + compact_seconds`: the writes with the compaction work they owe.
    pub end_to_end_seconds: f64,
    /// Live SST bytes after compaction.
    pub sst_bytes: u64,
    /// SST bytes per column family after compaction.
    pub column_sst_bytes: BTreeMap<String, u64>,
    /// Every file in the database directory (SSTs, WAL, manifest, logs) after compaction.
    pub dir_bytes: u64,
    /// `sst_bytes / keys_final`.
    pub sst_bytes_per_key: f64,
    /// Peak RSS of the engine's worker process (`VmHWM`), bytes; 0 if unknown.
    pub peak_rss_bytes: u64,
    /// Peak RSS from the end of the bulk load to the end of the final flush (the block
    /// run), bytes; 0 if unknown or if the kernel does not let the peak be reset.
    pub peak_rss_blocks_bytes: u64,
    /// True when the peak was reset before this phase (so it is this phase's own).
    pub peak_rss_reset: bool,
    /// Median time per commit phase (Arbor only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhaseReport>,
}

impl EngineReport {
    /// SST bytes of every column family but `history` (the state without reverse diffs).
    pub fn state_sst_bytes(&self) -> u64 {
        self.column_sst_bytes.iter().filter(|(c, _)| c.as_str() != "history").map(|(_, b)| b).sum()
    }
}

/// Median milliseconds per block of each commit phase (see `store::CommitTimings`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Batched reads of the old values.
    pub read_old_values_ms_p50: f64,
    /// Applying the changes to the trie.
    pub trie_updates_ms_p50: f64,
    /// Assembling the layer (node writes sorted, reverse diff).
    pub assemble_ms_p50: f64,
    /// Publishing the layer (including back-pressure waits).
    pub publish_ms_p50: f64,
}

impl PhaseReport {
    /// Medians over the blocks' timings.
    pub fn of(timings: &[store::CommitTimings]) -> PhaseReport {
        let p50 = |f: fn(&store::CommitTimings) -> std::time::Duration| {
            let v: Vec<f64> = timings.iter().map(|t| f(t).as_secs_f64() * 1e3).collect();
            crate::common::timing::percentile_sorted(&crate::common::timing::sorted(&v), 50.0)
        };
        PhaseReport {
            read_old_values_ms_p50: p50(|t| t.read_old_values),
            trie_updates_ms_p50: p50(|t| t.trie_updates),
            assemble_ms_p50: p50(|t| t.assemble),
            publish_ms_p50: p50(|t| t.publish),
        }
    }
}

/// Arbor's node and flat caches after the blocks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheReport {
    /// Node cache counters.
    pub node: CacheStats,
    /// Node cache hit rate.
    pub node_hit_rate: f64,
    /// Flat-value cache counters.
    pub flat: CacheStats,
    /// Flat-value cache hit rate.
    pub flat_hit_rate: f64,
    /// The resident trie's counters.
    pub resident: ResidentStats,
    /// Commits that waited for the background writer (back-pressure).
    pub commit_waits: u64,
    /// The most bytes the node buffer held (trie nodes written back behind the block).
    pub node_buffer_peak_bytes: u64,
    /// Node write-backs during the blocks and the final flush.
    pub node_write_backs: u64,
    /// `config.cache_budget_bytes()`: block cache + memtables + node and flat caches + resident trie + unpersisted layers.
    pub budget_bytes: u64,
    /// Arbor's peak RSS during the block run / budget.
    pub peak_rss_over_budget: f64,
    /// Peak RSS within budget + 25%.
    pub rss_target_met: bool,
}

/// Arbor / baseline ratios.
#[derive(Debug, Clone, Serialize)]
pub struct RatioReport {
    /// Blocks + flush: Arbor total seconds / blind total seconds (the Merkle overhead over
    /// the physical floor, in sustained throughput).
    pub merkle_overhead: f64,
    /// Target for `merkle_overhead`.
    pub merkle_overhead_target: f64,
    /// `merkle_overhead <= merkle_overhead_target`.
    pub merkle_overhead_met: bool,
    /// Blocks + flush: Arbor total seconds / plain+undo total seconds.
    pub over_undo: f64,
    /// Target for `over_undo`.
    pub over_undo_target: f64,
    /// `over_undo <= over_undo_target`.
    pub over_undo_met: bool,
    /// Arbor blocks/s / NOMT blocks/s on the same blocks (goal ≥ 1.0), if NOMT ran.
    pub over_nomt: Option<f64>,
    /// Target for Arbor's median commit, milliseconds.
    pub commit_p50_target_ms: f64,
    /// Arbor's median commit within the target.
    pub commit_p50_met: bool,
    /// Blocks + flush + full compaction: Arbor / plain.
    pub merkle_overhead_with_compaction: f64,
    /// Bulk load: Arbor seconds / plain seconds.
    pub bulk_time: f64,
    /// Whole database (every column family, reverse diffs included): Arbor SST bytes /
    /// plain SST bytes.
    pub size: f64,
    /// State only (`flat` + `nodes` + `meta`, without the `history` of reverse diffs):
    /// Arbor SST bytes / plain SST bytes.
    pub size_state: f64,
    /// Target for the size ratios.
    pub size_target: f64,
    /// `size <= size_target`.
    pub size_met: bool,
    /// `size_state <= size_target`.
    pub size_state_met: bool,
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

impl StoreBenchReport {
    /// A few lines for people; the JSON form carries every field.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let (m, o) = (&self.machine, &self.options);
        let _ = writeln!(
            out,
            "arbor bench store: {} initial keys (32-byte keys, 100-byte values), {} blocks of {} \
             operations (80% updates, 20% deletes), seed {}",
            thousands(o.keys),
            thousands(o.blocks),
            thousands(o.updates_per_block),
            o.seed
        );
        let _ = writeln!(
            out,
            "machine: {}, {} logical cores; {}, opt-level {}, {}",
            m.cpu_model, m.logical_cores, m.rustc, m.opt_level, m.target
        );
        if m.opt_level != "3" {
            let _ =
                writeln!(out, "WARNING: not an optimised build; numbers are not representative");
        }
        let _ = writeln!(
            out,
            "final state: {} keys, {} root {} ({}), {} sampled values equal in both databases",
            thousands(self.keys_final),
            self.config.layout.unwrap_or_default(),
            self.root,
            if self.root_verified { "verified from flat state" } else { "VERIFY FAILED" },
            thousands(self.values_cross_checked)
        );
        let _ = writeln!(
            out,
            "durability: every engine's blocks are durable at the final flush; Arbor writes its \
             block groups without RocksDB's WAL (memtables flushed atomically), plain+undo and \
             blind with it (RocksDB's default), NOMT syncs every commit"
        );
        out.push('\n');
        out.push_str(&crate::common::table::text(&self.table()));
        self.render_memory(&mut out);
        self.render_targets(&mut out);
        out
    }

    /// The engines as table columns: Arbor (given old values), Arbor reading them (if
    /// run), plain+undo, blind.
    pub(crate) fn columns(&self) -> Vec<(&'static str, &EngineReport)> {
        let mut c = vec![("arbor", &self.arbor)];
        if let Some(r) = &self.arbor_reading {
            c.push(("arbor (reads)", r));
        }
        c.push(("plain+undo", &self.plain_undo));
        c.push(("blind", &self.plain));
        if let Some(n) = &self.nomt {
            c.push(("nomt", n));
        }
        c
    }

    /// One row per figure, one column per engine, and Arbor's ratio to blind RocksDB.
    fn table(&self) -> comfy_table::Table {
        let mut rows = EngineRows::new(self.columns());
        self.time_rows(&mut rows);
        self.size_rows(&mut rows);
        rows.table
    }

    /// The rows of time: bulk load, blocks, commits and their phases, hashing.
    fn time_rows(&self, rows: &mut EngineRows<'_>) {
        let (a, p, r) = (&self.arbor, &self.plain, &self.ratios);
        let bulk = over(a.bulk_seconds, p.bulk_seconds);
        rows.row("bulk load", rows.each(|e| secs(e.bulk_seconds)), bulk);
        rows.row("blocks (commits)", rows.each(|e| secs(e.commit_seconds)), None);
        rows.row("final flush", rows.each(|e| secs(e.flush_seconds)), None);
        let total = Some(r.merkle_overhead);
        rows.row("blocks + flush", rows.each(|e| secs(e.total_seconds)), total);
        let blocks_per_s = rows.each(|e| format!("{:.1}", e.blocks_per_second));
        rows.row("blocks/s (sustained)", blocks_per_s, None);
        rows.row("writes/s", rows.each(|e| format!("{:.0}", e.writes_per_second)), None);
        let p50 = over(a.commit_ms_p50, p.commit_ms_p50);
        rows.row("commit p50", rows.each(|e| ms(e.commit_ms_p50)), p50);
        rows.row("commit p99", rows.each(|e| ms(e.commit_ms_p99)), None);
        if let Some(ph) = &a.phases {
            for (name, v) in [
                ("  read old values p50", ph.read_old_values_ms_p50),
                ("  trie update pass p50", ph.trie_updates_ms_p50),
                ("  assemble layer p50", ph.assemble_ms_p50),
                ("  publish layer p50", ph.publish_ms_p50),
            ] {
                rows.row(name, rows.first(ms(v)), None);
            }
        }
        let hashes = rows.first(format!("{:.0}", a.hashes_per_block_mean));
        rows.row("arbor keccak calls/block", hashes, None);
        let leaf_scans = rows.first(format!("{:.0}", a.leaf_scans_per_block_mean));
        rows.row("arbor leaf scans/block", leaf_scans, None);
    }

    /// The rows of bytes (written, on disk, in memory) and of compaction.
    fn size_rows(&self, rows: &mut EngineRows<'_>) {
        let (a, p, r) = (&self.arbor, &self.plain, &self.ratios);
        let written = over(a.bytes_written_per_block, p.bytes_written_per_block);
        let batch = rows.each(|e| mib(e.bytes_written_per_block as u64));
        rows.row("batch bytes/block", batch, written);
        let disk = over(a.disk_bytes_per_block, p.disk_bytes_per_block);
        let disk_written = rows.each(|e| mib(e.disk_bytes_per_block as u64));
        rows.row("disk bytes written/block", disk_written, disk);
        rows.row("compaction", rows.each(|e| secs(e.compact_seconds)), None);
        let end_to_end = Some(r.merkle_overhead_with_compaction);
        let all = rows.each(|e| secs(e.end_to_end_seconds));
        rows.row("blocks + flush + compaction", all, end_to_end);
        rows.row("sst bytes", rows.each(|e| mib(e.sst_bytes)), Some(r.size));
        let mut state = rows.first(mib(a.state_sst_bytes()));
        if let Some(i) = rows.columns.iter().position(|(name, _)| *name == "blind") {
            state[i] = mib(p.sst_bytes);
        }
        rows.row("  state (without history)", state, Some(r.size_state));
        for (cf, bytes) in a.column_sst_bytes.iter().filter(|(_, b)| **b > 0) {
            rows.row(&format!("    {cf}"), rows.first(mib(*bytes)), None);
        }
        let per_key = rows.each(|e| format!("{:.1}", e.sst_bytes_per_key));
        rows.row("sst bytes per key", per_key, None);
        let dir = over(a.dir_bytes as f64, p.dir_bytes as f64);
        rows.row("directory bytes", rows.each(|e| mib(e.dir_bytes)), dir);
        rows.row("peak RSS (whole phase)", rows.each(|e| mib(e.peak_rss_bytes)), None);
        rows.row("peak RSS (blocks)", rows.each(|e| mib(e.peak_rss_blocks_bytes)), None);
    }

    fn render_memory(&self, out: &mut String) {
        let c = &self.arbor_caches;
        let _ = writeln!(
            out,
            "\narbor caches: node hit rate {:.1}% ({} hits, {} misses, {} evictions, {} of {}), \
             flat hit rate {:.1}% ({} hits, {} misses, {} evictions); resident trie {} nodes, \
             {} of {}, depth limit {}, {} hits, {} misses; {} commits waited for the writer",
            c.node_hit_rate * 100.0,
            thousands(c.node.hits),
            thousands(c.node.misses),
            thousands(c.node.evictions),
            mib(c.node.bytes),
            mib(c.node.bytes_max),
            c.flat_hit_rate * 100.0,
            thousands(c.flat.hits),
            thousands(c.flat.misses),
            thousands(c.flat.evictions),
            thousands(c.resident.entries),
            mib(c.resident.bytes),
            mib(c.resident.bytes_max),
            c.resident.depth_limit,
            thousands(c.resident.hits),
            thousands(c.resident.misses),
            c.commit_waits
        );
        let _ = writeln!(
            out,
            "memory: arbor peak RSS during the blocks {} vs configured budget {} (block cache + \
             memtables + node and flat caches + resident trie + unpersisted layers + node \
             buffer): {:.2}x{}",
            mib(self.arbor.peak_rss_blocks_bytes),
            mib(c.budget_bytes),
            c.peak_rss_over_budget,
            if self.plain.peak_rss_reset { "" } else { " (plain peak not separable)" }
        );
        let u = &self.arbor_catch_up;
        let _ = writeln!(
            out,
            "nodes behind the block: buffer bound {}, peak {}, {} write-backs during the blocks; \
             catch-up after a close at maximum lag ({} blocks behind, {} buffered, {} blocks \
             committed to fill it, {} write-backs): {} keys in {:.2} s (whole open {:.2} s)",
            mib(u.buffer_bound_bytes),
            mib(c.node_buffer_peak_bytes),
            c.node_write_backs,
            u.lag_blocks,
            mib(u.buffer_bytes),
            u.blocks_committed,
            u.write_backs,
            thousands(u.keys),
            u.catch_up_seconds,
            u.open_seconds
        );
    }

    fn render_targets(&self, out: &mut String) {
        let r = &self.ratios;
        let _ = writeln!(
            out,
            "\ntargets: commit p50 {:.1} ms <= {:.0}: {}; Arbor/blind {:.2}x <= {:.1}: {}; \
             Arbor/plain+undo {:.2}x <= {:.2}: {}; size {:.2}x (state only {:.2}x) <= {:.1}: {} \
             ({}); peak RSS {:.2}x budget <= {:.2}: {}{}",
            self.arbor.commit_ms_p50,
            r.commit_p50_target_ms,
            met(r.commit_p50_met),
            r.merkle_overhead,
            r.merkle_overhead_target,
            met(r.merkle_overhead_met),
            r.over_undo,
            r.over_undo_target,
            met(r.over_undo_met),
            r.size,
            r.size_state,
            r.size_target,
            met(r.size_met),
            met(r.size_state_met),
            self.arbor_caches.peak_rss_over_budget,
            RSS_OVER_BUDGET_TARGET,
            met(self.arbor_caches.rss_target_met),
            r.over_nomt.map_or(String::new(), |x| format!(
                "; Arbor blocks/s over NOMT's {x:.2}x >= 1.0: {} (NOMT: binary BLAKE3 trie, \
                 every commit durable)",
                met(x >= 1.0)
            ))
        );
    }
}

/// The engines table being filled: per row a figure's name, one cell per engine column,
/// and Arbor's ratio to blind RocksDB (empty when there is none).
struct EngineRows<'a> {
    table: comfy_table::Table,
    columns: Vec<(&'static str, &'a EngineReport)>,
}

impl<'a> EngineRows<'a> {
    fn new(columns: Vec<(&'static str, &'a EngineReport)>) -> Self {
        let mut header = vec![""];
        header.extend(columns.iter().map(|(name, _)| *name));
        header.push("arbor/blind");
        EngineRows { table: crate::common::table::table(&header), columns }
    }

    fn row(&mut self, name: &str, cells: Vec<String>, ratio: Option<f64>) {
        let mut line = vec![name.to_string()];
        line.extend(cells);
        line.push(ratio.map_or(String::new(), |r| format!("{r:.2}x")));
        self.table.add_row(line);
    }

    /// `f` of every engine.
    fn each(&self, f: impl Fn(&EngineReport) -> String) -> Vec<String> {
        self.columns.iter().map(|(_, e)| f(e)).collect()
    }

    /// `v` in the first (Arbor's) column, the others empty.
    fn first(&self, v: String) -> Vec<String> {
        let mut cells = vec![String::new(); self.columns.len()];
        cells[0] = v;
        cells
    }
}

/// `x / y`, or `None` when `y` is not positive.
fn over(x: f64, y: f64) -> Option<f64> {
    (y > 0.0).then(|| x / y)
}

fn secs(s: f64) -> String {
    format!("{s:.3} s")
}

fn ms(v: f64) -> String {
    format!("{v:.2} ms")
}
