//! The options and the report of [`crate::history_bench`]: plain data, serialisable to
//! JSON, rendered for people by [`HistoryBenchReport::render`] and as a page by
//! [`HistoryBenchReport::html`].

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;
use store::{RecentStats, StoreConfig};

use crate::common::machine::MachineInfo;
use crate::common::text::thousands;
use crate::common::timing::{percentile_sorted, ratio, sorted};

/// Largest acceptable latency at the deepest block / latency at the head (p50), for `get`
/// and for `prove` (issue 33).
pub(crate) const READ_RATIO_TARGET: f64 = 3.0;
/// Least acceptable commit blocks/s with the window / without it (issue 33: no worse than
/// 10% below).
pub(crate) const THROUGHPUT_RATIO_TARGET: f64 = 0.9;

/// Options of [`crate::history_bench`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryBenchOpts {
    /// Initial keys (`M`), bulk-loaded into both databases.
    pub keys: u64,
    /// Blocks committed to both databases (`N`, more than `recent_blocks`): the first
    /// `recent_blocks` fill the window, the rest measure the commits with it full.
    pub blocks: u64,
    /// Blocks then committed to the windowed database alone while a reader samples.
    pub read_blocks: u64,
    /// Operations per block (`K`).
    pub updates_per_block: u64,
    /// Workload seed (the reader's random choices derive from it too).
    pub seed: u64,
    /// The window of the windowed database (`history.recent_blocks`); the depths read
    /// are 0, 1, half of it and one less than it.
    pub recent_blocks: u64,
    /// The windowed database's `history.recent_bytes`.
    pub recent_bytes: u64,
    /// Reader rounds at most per committed block (a round: a view, a `get` and a `prove`
    /// at every depth, and a `get` on the read handle at the head).
    pub reads_per_block: u64,
    /// Directory under which the temporary databases are created (default: the system's).
    pub dir: Option<PathBuf>,
}

impl Default for HistoryBenchOpts {
    fn default() -> Self {
        HistoryBenchOpts {
            keys: 1_000_000,
            blocks: 400,
            read_blocks: 200,
            updates_per_block: 10_000,
            seed: 1,
            recent_blocks: 128,
            recent_bytes: 4 << 30,
            reads_per_block: 50,
            dir: None,
        }
    }
}

impl HistoryBenchOpts {
    /// The depths below the head the reader reads at: 0, 1, K/2 and K - 1 (K =
    /// `recent_blocks`, at least 2), ascending and distinct.
    pub fn depths(&self) -> Vec<u64> {
        let k = self.recent_blocks.max(2);
        let mut d = vec![0, 1, k / 2, k - 1];
        d.dedup();
        d
    }
}

/// Everything one `history_bench` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryBenchReport {
    /// Machine and build.
    pub machine: MachineInfo,
    /// 1-minute load average when the run started (other work on the machine).
    pub load_average_start: f64,
    /// 1-minute load average when the run ended (includes this run's own threads).
    pub load_average_end: f64,
    /// The options used.
    pub options: HistoryBenchOpts,
    /// The windowed database's configuration (the other one differs only in
    /// `history.recent_blocks` = 0).
    pub config: StoreConfig,
    /// Live keys after the last block (tracked from the workload).
    pub keys_final: u64,
    /// The windowed database's head root after the last block.
    pub root: String,
    /// True when `verify` recomputed the same root from flat state.
    pub root_verified: bool,
    /// Peak RSS of the process over the run (both databases), bytes; 0 if unknown.
    pub peak_rss_bytes: u64,
    /// The bulk loads of the initial keys.
    pub bulk: BulkReport,
    /// Commit throughput with and without the window.
    pub commits: CommitReport,
    /// The window's size (`StateDb::stats().recent`).
    pub window: WindowReport,
    /// Reads and proofs at each depth with commits running.
    pub reads: ReadReport,
    /// The figures against their targets.
    pub targets: TargetReport,
}

/// Both databases' bulk loads.
#[derive(Debug, Clone, Serialize)]
pub struct BulkReport {
    /// Initial keys each database received.
    pub keys: u64,
    /// The windowed database's bulk load, seconds.
    pub with_window_seconds: f64,
    /// The other database's bulk load, seconds.
    pub without_window_seconds: f64,
}

/// One database's commits over a run of blocks, each commit timed alone.
#[derive(Debug, Clone, Serialize)]
pub struct CommitSeries {
    /// Blocks committed.
    pub blocks: u64,
    /// Sum of the commit times, seconds.
    pub seconds: f64,
    /// `blocks / seconds`.
    pub blocks_per_second: f64,
    /// Median commit, milliseconds.
    pub commit_ms_p50: f64,
    /// 99th percentile commit, milliseconds.
    pub commit_ms_p99: f64,
    /// Slowest commit, milliseconds.
    pub commit_ms_max: f64,
}

impl CommitSeries {
    /// The series of these commit times (seconds).
    pub(crate) fn of(seconds: &[f64]) -> CommitSeries {
        let s = sorted(seconds);
        let total: f64 = seconds.iter().sum();
        CommitSeries {
            blocks: seconds.len() as u64,
            seconds: total,
            blocks_per_second: ratio(seconds.len() as f64, total),
            commit_ms_p50: percentile_sorted(&s, 50.0) * 1e3,
            commit_ms_p99: percentile_sorted(&s, 99.0) * 1e3,
            commit_ms_max: s.last().copied().unwrap_or(0.0) * 1e3,
        }
    }
}

/// Commits of the same blocks to both databases, interleaved block by block.
#[derive(Debug, Clone, Serialize)]
pub struct CommitReport {
    /// The windowed database, blocks 1..=recent_blocks (the window filling).
    pub fill_with_window: CommitSeries,
    /// The other database, the same blocks.
    pub fill_without_window: CommitSeries,
    /// The windowed database, blocks recent_blocks+1..=blocks (the window full: each
    /// commit also drops its oldest block).
    pub with_window: CommitSeries,
    /// The other database, the same blocks.
    pub without_window: CommitSeries,
    /// The windowed database alone, the read blocks, with the reader running.
    pub with_window_reading: CommitSeries,
}

/// The window of the windowed database.
#[derive(Debug, Clone, Serialize)]
pub struct WindowReport {
    /// After the blocks committed to both databases.
    pub after_commits: RecentStats,
    /// After the read blocks.
    pub after_reads: RecentStats,
    /// `after_reads.bytes / after_reads.blocks`: the memory one block of this workload
    /// costs (old values, old nodes, index).
    pub bytes_per_block: f64,
    /// True when the window held `recent_blocks` blocks at both points and the byte bound
    /// dropped none (else reads deep in the window read reverse diffs back from disk).
    pub full: bool,
}

/// Latencies of one operation, microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    /// Operations timed.
    pub samples: u64,
    /// Median.
    pub us_p50: f64,
    /// 99th percentile.
    pub us_p99: f64,
    /// Slowest.
    pub us_max: f64,
}

impl LatencyReport {
    /// The report of these latencies (microseconds).
    pub(crate) fn of(us: &[f64]) -> LatencyReport {
        let s = sorted(us);
        LatencyReport {
            samples: us.len() as u64,
            us_p50: percentile_sorted(&s, 50.0),
            us_p99: percentile_sorted(&s, 99.0),
            us_max: s.last().copied().unwrap_or(0.0),
        }
    }
}

/// Reads and proofs at one depth below the head.
#[derive(Debug, Clone, Serialize)]
pub struct DepthReport {
    /// Blocks below the head (the view may be one deeper: see the module docs of
    /// [`crate::history_bench`]).
    pub depth: u64,
    /// `ReadHandle::at(head - depth)`: creating the view.
    pub at: LatencyReport,
    /// `BlockView::get` of a random key of the workload's index range at that block
    /// (existing or not); the view's creation excluded.
    pub get: LatencyReport,
    /// The same, the keys that existed at that block.
    pub get_present: LatencyReport,
    /// The same, the keys that did not.
    pub get_absent: LatencyReport,
    /// The same, the keys whose value at the head differs (read untimed after the
    /// sample): about the `get`s the window's old values answered (a later block changed
    /// the key).
    pub get_changed: LatencyReport,
    /// The same, the keys whose value at the head is the same: about the `get`s the
    /// head's state answered, as most would on a chain where few keys change per block.
    pub get_unchanged: LatencyReport,
    /// `BlockView::prove` of another random key; the view's creation excluded.
    pub prove: LatencyReport,
    /// Mean nodes per proof.
    pub proof_nodes_mean: f64,
    /// Mean bytes per proof.
    pub proof_bytes_mean: f64,
    /// Proofs verified against the block's root (outside the timings).
    pub proofs_verified: u64,
    /// Samples not taken because their block left the window first (two commits while
    /// the sample ran).
    pub left_window: u64,
}

/// The reader's samples.
#[derive(Debug, Clone, Serialize)]
pub struct ReadReport {
    /// Rounds the reader completed (each visits every depth).
    pub rounds: u64,
    /// Per depth, shallowest first.
    pub depths: Vec<DepthReport>,
    /// `ReadHandle::get` at the head, without a view: the baseline of depth 0's `get`.
    pub get_head_handle: LatencyReport,
    /// Distinct blocks whose view root was checked against the root their commit returned.
    pub roots_checked: u64,
}

/// The figures.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// `get` p50 at the deepest depth / at the head.
    pub get_ratio_p50: f64,
    /// `get` p99 at the deepest depth / at the head (no target).
    pub get_ratio_p99: f64,
    /// `prove` p50 at the deepest depth / at the head.
    pub prove_ratio_p50: f64,
    /// `prove` p99 at the deepest depth / at the head (no target).
    pub prove_ratio_p99: f64,
    /// Largest acceptable p50 ratio.
    pub read_ratio_target: f64,
    /// `get_ratio_p50 <= read_ratio_target`.
    pub get_met: bool,
    /// `prove_ratio_p50 <= read_ratio_target`.
    pub prove_met: bool,
    /// Commit blocks/s with the window / without it (the window full).
    pub throughput_ratio: f64,
    /// Least acceptable throughput ratio.
    pub throughput_ratio_target: f64,
    /// `throughput_ratio >= throughput_ratio_target`.
    pub throughput_met: bool,
}

impl TargetReport {
    /// The targets of these commits and depths (deepest last).
    pub(crate) fn of(commits: &CommitReport, depths: &[DepthReport]) -> TargetReport {
        let (head, deep) = (depths.first(), depths.last());
        let over = |f: fn(&DepthReport) -> f64| match (head, deep) {
            (Some(h), Some(d)) => ratio(f(d), f(h)),
            _ => 0.0,
        };
        let get_ratio_p50 = over(|d| d.get.us_p50);
        let prove_ratio_p50 = over(|d| d.prove.us_p50);
        let throughput_ratio =
            ratio(commits.with_window.blocks_per_second, commits.without_window.blocks_per_second);
        TargetReport {
            get_ratio_p50,
            get_ratio_p99: over(|d| d.get.us_p99),
            prove_ratio_p50,
            prove_ratio_p99: over(|d| d.prove.us_p99),
            read_ratio_target: READ_RATIO_TARGET,
            get_met: get_ratio_p50 <= READ_RATIO_TARGET,
            prove_met: prove_ratio_p50 <= READ_RATIO_TARGET,
            throughput_ratio,
            throughput_ratio_target: THROUGHPUT_RATIO_TARGET,
            throughput_met: throughput_ratio >= THROUGHPUT_RATIO_TARGET,
        }
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

fn us(v: f64) -> String {
    match v < 10.0 {
        true => format!("{v:.2} us"),
        false => format!("{v:.1} us"),
    }
}

impl HistoryBenchReport {
    /// A few lines and tables for people; the JSON form carries every field.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_header(&mut out);
        out.push('\n');
        self.render_commits(&mut out);
        self.render_window(&mut out);
        out.push('\n');
        self.render_reads(&mut out);
        out.push('\n');
        self.render_targets(&mut out);
        out
    }

    fn render_header(&self, out: &mut String) {
        let (m, o) = (&self.machine, &self.options);
        let _ = writeln!(
            out,
            "arbor bench history: {} initial keys (32-byte keys, 100-byte values), {} blocks \
             to both databases then {} with reads, {} operations per block (80% updates, 20% \
             deletes), seed {}",
            thousands(o.keys),
            thousands(o.blocks),
            thousands(o.read_blocks),
            thousands(o.updates_per_block),
            o.seed
        );
        let _ = writeln!(
            out,
            "machine: {}, {} logical cores; {}, opt-level {}, {}; load average {:.2} at the \
             start, {:.2} at the end",
            m.cpu_model,
            m.logical_cores,
            m.rustc,
            m.opt_level,
            m.target,
            self.load_average_start,
            self.load_average_end
        );
        if m.opt_level != "3" {
            let _ =
                writeln!(out, "WARNING: not an optimised build; numbers are not representative");
        }
        let _ = writeln!(
            out,
            "window: history.recent_blocks = {}, history.recent_bytes = {}; the other database \
             keeps none (recent_blocks = 0), same configuration otherwise",
            o.recent_blocks,
            mib(o.recent_bytes as f64)
        );
        let _ = writeln!(
            out,
            "final state: {} keys, root {} ({}); every block's root equal in both databases; \
             {} view roots equal to their commit's; peak RSS {}",
            thousands(self.keys_final),
            self.root,
            if self.root_verified { "verified from flat state" } else { "VERIFY FAILED" },
            thousands(self.reads.roots_checked),
            mib(self.peak_rss_bytes as f64)
        );
    }

    fn render_commits(&self, out: &mut String) {
        let (c, o) = (&self.commits, &self.options);
        let _ = writeln!(
            out,
            "commits: each timed alone, old values given (commit_with_prior); the same block to \
             both databases in turn, the first alternating; blocks/s = blocks / sum of commit \
             times"
        );
        let mut t = crate::common::table::table(&["", "with window", "without", "with/without"]);
        let k = o.recent_blocks;
        let rows = [
            (format!("blocks 1-{k} (window filling)"), &c.fill_with_window, &c.fill_without_window),
            (
                format!("blocks {}-{} (window full)", k + 1, o.blocks),
                &c.with_window,
                &c.without_window,
            ),
        ];
        for (name, a, b) in rows {
            let r = ratio(a.blocks_per_second, b.blocks_per_second);
            let bps = |s: &CommitSeries| format!("{:.1}", s.blocks_per_second);
            t.add_row(vec![format!("{name} blocks/s"), bps(a), bps(b), format!("{r:.2}x")]);
            for (q, f) in [
                ("p50", (|s: &CommitSeries| s.commit_ms_p50) as fn(&CommitSeries) -> f64),
                ("p99", |s| s.commit_ms_p99),
                ("max", |s| s.commit_ms_max),
            ] {
                let (x, y) = (f(a), f(b));
                let ms = |v: f64| format!("{v:.2} ms");
                t.add_row(vec![
                    format!("  commit {q}"),
                    ms(x),
                    ms(y),
                    format!("{:.2}x", ratio(x, y)),
                ]);
            }
        }
        let r = &c.with_window_reading;
        let first = o.blocks + 1;
        let last = o.blocks + o.read_blocks;
        t.add_row(vec![
            format!("blocks {first}-{last} (reader running) blocks/s"),
            format!("{:.1}", r.blocks_per_second),
            String::new(),
            String::new(),
        ]);
        for (q, v) in [("p50", r.commit_ms_p50), ("p99", r.commit_ms_p99), ("max", r.commit_ms_max)]
        {
            t.add_row(vec![
                format!("  commit {q}"),
                format!("{v:.2} ms"),
                String::new(),
                String::new(),
            ]);
        }
        out.push_str(&crate::common::table::text(&t));
    }

    fn render_window(&self, out: &mut String) {
        let w = &self.window;
        for (when, s) in
            [("after the commits", &w.after_commits), ("after the reads", &w.after_reads)]
        {
            let _ = writeln!(
                out,
                "window {when}: {} blocks, {} of {} ({} per block), readable from block {}, \
                 provable from block {}, {} blocks dropped by the byte bound",
                s.blocks,
                mib(s.bytes as f64),
                mib(s.limit_bytes as f64),
                mib(ratio(s.bytes as f64, s.blocks as f64)),
                s.oldest_block,
                s.provable_block,
                s.shrunk_blocks
            );
        }
        if !w.full {
            let _ = writeln!(
                out,
                "WARNING: the window did not hold {} blocks (raise --recent-bytes): reads deep \
                 in it read reverse diffs back from disk",
                self.options.recent_blocks
            );
        }
    }

    fn render_reads(&self, out: &mut String) {
        let r = &self.reads;
        let _ = writeln!(
            out,
            "reads at head - d on a ReadHandle while blocks commit: {} rounds (at most {} after \
             each commit; a random depth goes first); get and prove exclude at() (its \
             own row); keys uniform over the workload's index range at the block; a get at a \
             block answers from the window's old values when a later block changed the key \
             (\"changed since\": its value at the head differs), else from the head's state",
            thousands(r.rounds),
            self.options.reads_per_block
        );
        let mut header = vec![String::new()];
        header.extend(r.depths.iter().map(|d| match d.depth {
            0 => "head".to_string(),
            d => format!("head-{d}"),
        }));
        header.push("deepest/head".into());
        let mut t = crate::common::table::table(&header);
        type Pick = fn(&DepthReport) -> &LatencyReport;
        let ops: [(&str, Pick); 7] = [
            ("at()", |d| &d.at),
            ("get", |d| &d.get),
            ("get (existing)", |d| &d.get_present),
            ("get (absent)", |d| &d.get_absent),
            ("get (changed since)", |d| &d.get_changed),
            ("get (unchanged since)", |d| &d.get_unchanged),
            ("prove", |d| &d.prove),
        ];
        for (name, pick) in ops {
            for (q, f) in [
                ("p50", (|l: &LatencyReport| l.us_p50) as fn(&LatencyReport) -> f64),
                ("p99", |l| l.us_p99),
            ] {
                let mut row = vec![format!("{name} {q}")];
                row.extend(r.depths.iter().map(|d| us(f(pick(d)))));
                row.push(deepest_over_head(&r.depths, |d| f(pick(d))));
                t.add_row(row);
            }
        }
        let mut extra = |name: &str, f: &dyn Fn(&DepthReport) -> String| {
            let mut row = vec![name.to_string()];
            row.extend(r.depths.iter().map(f));
            row.push(String::new());
            t.add_row(row);
        };
        let share = |d: &DepthReport| ratio(d.get_changed.samples as f64, d.get.samples as f64);
        extra("get keys changed since", &|d| format!("{:.0}%", share(d) * 100.0));
        extra("proof nodes (mean)", &|d| format!("{:.1}", d.proof_nodes_mean));
        extra("proof bytes (mean)", &|d| format!("{:.0}", d.proof_bytes_mean));
        extra("samples", &|d| thousands(d.get.samples));
        extra("proofs verified", &|d| thousands(d.proofs_verified));
        extra("left the window", &|d| thousands(d.left_window));
        out.push_str(&crate::common::table::text(&t));
        let h = &r.get_head_handle;
        let _ = writeln!(
            out,
            "ReadHandle::get at the head, without a view: p50 {}, p99 {} ({} samples)",
            us(h.us_p50),
            us(h.us_p99),
            thousands(h.samples)
        );
    }

    fn render_targets(&self, out: &mut String) {
        let (g, deepest) = (&self.targets, self.reads.depths.last().map_or(0, |d| d.depth));
        let mut t = crate::common::table::table(&["target", "measured", "bound", "verdict"]);
        let read = |name: &str, p50: f64, p99: f64, ok: bool| {
            vec![
                format!("{name} p50 at head-{deepest} / at head (p99: {p99:.2}x)"),
                format!("{p50:.2}x"),
                format!("<= {:.1}x", g.read_ratio_target),
                met(ok).to_string(),
            ]
        };
        t.add_row(read("get", g.get_ratio_p50, g.get_ratio_p99, g.get_met));
        t.add_row(read("prove", g.prove_ratio_p50, g.prove_ratio_p99, g.prove_met));
        t.add_row(vec![
            "commit blocks/s with window / without (window full)".to_string(),
            format!("{:.2}x", g.throughput_ratio),
            format!(">= {:.2}x", g.throughput_ratio_target),
            met(g.throughput_met).to_string(),
        ]);
        out.push_str(&crate::common::table::text(&t));
        if self.options.keys < 1_000_000 {
            let _ =
                writeln!(out, "(the issue's figures are for 1,000,000 keys; this run has fewer)");
        }
    }

    /// p50 latencies per depth, and the three ratios against their targets.
    pub fn html(&self) -> String {
        use crate::common::html::{figure_page, machine_line, Bar, Chart, Figure};
        let bar = |label: String, value: f64| Bar { label, value };
        let bars = |title: String, unit: &str, bars: Vec<Bar>, target: Option<f64>| {
            Figure::Bars(Chart { title, unit: unit.into(), bars, target })
        };
        let depth_bars = |f: fn(&DepthReport) -> f64| {
            self.reads.depths.iter().map(|d| bar(format!("head-{}", d.depth), f(d))).collect()
        };
        let g = &self.targets;
        let verdict = |ok: bool| if ok { "met" } else { "not met" };
        let figures = vec![
            bars("get p50 by depth".into(), "us", depth_bars(|d| d.get.us_p50), None),
            bars("prove p50 by depth".into(), "us", depth_bars(|d| d.prove.us_p50), None),
            bars(
                format!(
                    "Deepest / head p50: target <= {:.1}x (get {}, prove {})",
                    g.read_ratio_target,
                    verdict(g.get_met),
                    verdict(g.prove_met)
                ),
                "x",
                vec![bar("get".into(), g.get_ratio_p50), bar("prove".into(), g.prove_ratio_p50)],
                Some(g.read_ratio_target),
            ),
            bars(
                format!(
                    "Commit blocks/s with window / without: target >= {:.2}x ({})",
                    g.throughput_ratio_target,
                    verdict(g.throughput_met)
                ),
                "x",
                vec![bar("with / without".into(), g.throughput_ratio)],
                Some(g.throughput_ratio_target),
            ),
        ];
        let w = &self.window.after_reads;
        let notes = vec![format!(
            "{} keys, {} operations per block; window {} blocks, {} ({} per block)",
            thousands(self.options.keys),
            thousands(self.options.updates_per_block),
            w.blocks,
            mib(w.bytes as f64),
            mib(self.window.bytes_per_block)
        )];
        figure_page("arbor bench history", &machine_line(&self.machine), &notes, &figures)
    }
}

/// `f` at the deepest depth / at the head, as `1.23x` (empty without two depths).
fn deepest_over_head(depths: &[DepthReport], f: impl Fn(&DepthReport) -> f64) -> String {
    match (depths.first(), depths.last()) {
        (Some(h), Some(d)) if depths.len() > 1 => format!("{:.2}x", ratio(f(d), f(h))),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_follow_the_window() {
        let o = |k| HistoryBenchOpts { recent_blocks: k, ..HistoryBenchOpts::default() };
        assert_eq!(o(128).depths(), vec![0, 1, 64, 127]);
        assert_eq!(o(8).depths(), vec![0, 1, 4, 7]);
        assert_eq!(o(2).depths(), vec![0, 1]);
        assert_eq!(o(3).depths(), vec![0, 1, 2]);
    }
}
