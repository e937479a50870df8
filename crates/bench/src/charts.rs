//! The HTML pages of the trie, store, PoV and Block-STM benchmarks (`--html FILE`): the
//! figures each report is read for, with the machine and the targets on the page.

use trie::LayoutName;

use crate::blockstm_bench::BlockStmReport;
use crate::html::{figure_page, machine_line, Bar, Chart, Figure, LineChart};
use crate::pov_bench::PovBenchReport;
use crate::report::{RootReference, TrieBenchReport};
use crate::store_report::StoreBenchReport;

fn bar(label: impl Into<String>, value: f64) -> Bar {
    Bar { label: label.into(), value }
}

fn bars(title: String, unit: &str, bars: Vec<Bar>, target: Option<f64>) -> Figure {
    Figure::Bars(Chart { title, unit: unit.into(), bars, target })
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "not met"
    }
}

impl StoreBenchReport {
    /// Commit latency over the blocks per engine, sustained blocks/s, and Arbor's ratios
    /// against their targets.
    pub fn html(&self) -> String {
        let engines = self.columns();
        let latency = Figure::Lines(LineChart {
            title: format!(
                "Commit latency over {} blocks of {} operations (target: Arbor p50 <= {} ms)",
                self.options.blocks,
                self.options.updates_per_block,
                self.ratios.commit_p50_target_ms
            ),
            x_label: "block".into(),
            unit: "ms".into(),
            series: engines
                .iter()
                .map(|(n, e)| (n.to_string(), e.commit_ms_series.clone()))
                .collect(),
            target: Some(self.ratios.commit_p50_target_ms),
        });
        let p50 = bars(
            "Commit p50 and p99".into(),
            "ms",
            engines
                .iter()
                .flat_map(|(n, e)| {
                    [
                        bar(format!("{n} p50"), e.commit_ms_p50),
                        bar(format!("{n} p99"), e.commit_ms_p99),
                    ]
                })
                .collect(),
            None,
        );
        let sustained = bars(
            "Sustained blocks/s (blocks + final flush)".into(),
            "blocks/s",
            engines.iter().map(|(n, e)| bar(*n, e.blocks_per_second)).collect(),
            None,
        );
        let r = &self.ratios;
        let overhead = bars(
            format!(
                "Arbor / blind RocksDB: {:.2}x, target <= {}x ({})",
                r.merkle_overhead,
                r.merkle_overhead_target,
                verdict(r.merkle_overhead_met)
            ),
            "x",
            vec![bar("blocks + flush", r.merkle_overhead)],
            Some(r.merkle_overhead_target),
        );
        let undo = bars(
            format!(
                "Arbor / plain+undo: {:.2}x, target <= {}x ({})",
                r.over_undo,
                r.over_undo_target,
                verdict(r.over_undo_met)
            ),
            "x",
            vec![bar("blocks + flush", r.over_undo)],
            Some(r.over_undo_target),
        );
        let notes = vec![format!(
            "{} initial keys, {} blocks of {} operations, seed {}; final root {} ({})",
            self.options.keys,
            self.options.blocks,
            self.options.updates_per_block,
            self.options.seed,
            self.root,
            if self.root_verified { "verified from flat state" } else { "VERIFY FAILED" }
        )];
        figure_page(
            "arbor bench store",
            &machine_line(&self.machine),
            &notes,
            &[latency, p50, sustained, overhead, undo],
        )
    }
}

impl TrieBenchReport {
    /// Full-root times (Arbor serial and parallel and the reference engine: alloy-trie and
    /// the keccak bound in Ethereum's layout, trie-db in Substrate's) and the
    /// reference/Arbor ratios against parity.
    pub fn html(&self) -> String {
        let r = &self.root;
        let mut time_bars = vec![
            bar("arbor serial", r.arbor_serial.seconds_median),
            bar(
                format!("arbor parallel ({} threads)", r.parallel_threads),
                r.arbor_parallel.seconds_median,
            ),
        ];
        let (engine, time_bar, ratio_bars) = reference_bars(&r.reference);
        time_bars.push(time_bar);
        if let Some(b) = &self.bound {
            time_bars.push(bar("keccak bound (serial)", b.bound.seconds_median));
        }
        let layout = match self.options.layout {
            LayoutName::Ethereum => String::new(),
            other => format!(" in {other}"),
        };
        let times = bars(
            format!(
                "Full root of {} keys{layout}: median of {} runs",
                self.input.keys, self.options.runs
            ),
            "s",
            time_bars,
            None,
        );
        let labels = ["serial", "parallel", "serial, fastest runs", "parallel, fastest runs"];
        let ratios = bars(
            format!("{engine} time / Arbor time (> 1: Arbor faster; line: parity)"),
            "x",
            labels.iter().zip(ratio_bars).map(|(l, v)| bar(*l, v)).collect(),
            Some(1.0),
        );
        let i = &self.incremental;
        let incremental = bars(
            format!("Incremental: {} writes + root() per round", i.updates_per_round),
            "µs",
            vec![
                bar("round p50", i.round_us_p50),
                bar("round p99", i.round_us_p99),
                bar("root() p50", i.root_us_p50),
                bar("root() p99", i.root_us_p99),
            ],
            None,
        );
        let mut notes = vec![format!("root {} (serial, parallel and {engine} agree)", r.root)];
        if let Some(o) = r.oracle() {
            notes.push(format!(
                "layout {}; oracle: {}, Blake2-256 by blake2b_simd; no keccak bound in \
                 Substrate's layouts",
                self.options.layout, o.oracle_engine
            ));
        }
        figure_page(
            "arbor bench trie",
            &machine_line(&self.machine),
            &notes,
            &[times, ratios, incremental],
        )
    }
}

/// The reference engine of the full-root phase: its name, its time bar and its time over
/// Arbor's (serial, parallel, and the same of the fastest runs).
fn reference_bars(reference: &RootReference) -> (&'static str, Bar, [f64; 4]) {
    match reference {
        RootReference::Alloy(a) => (
            "alloy-trie",
            bar("alloy-trie HashBuilder", a.alloy.seconds_median),
            [
                a.alloy_over_serial,
                a.alloy_over_parallel,
                a.alloy_over_serial_fastest,
                a.alloy_over_parallel_fastest,
            ],
        ),
        RootReference::Oracle(o) => (
            "trie-db",
            bar("trie-db (oracle)", o.oracle.seconds_median),
            [
                o.oracle_over_serial,
                o.oracle_over_parallel,
                o.oracle_over_serial_fastest,
                o.oracle_over_parallel_fastest,
            ],
        ),
    }
}

impl PovBenchReport {
    /// Per workload: the per-transaction exact proof size (c/b) and exact root (d/b)
    /// ratios against their targets, and the time of each mode.
    pub fn html(&self) -> String {
        let mut figures = Vec::new();
        for w in &self.workloads {
            let name = format!("{} × transfer_{}", w.transactions, w.kind.replace('-', "_"));
            figures.push(bars(
                format!(
                    "{name}: exact proof size per tx c/b {:.3} (target <= {}), exact root per tx d/b {:.3} (target <= {})",
                    w.c_over_b, self.proof_size_target, w.d_over_b, self.root_target
                ),
                "x",
                vec![bar("c/b (proof size)", w.c_over_b), bar("d/b (root)", w.d_over_b)],
                Some(self.root_target),
            ));
            figures.push(bars(
                format!("{name}: median block production time per mode"),
                "ms",
                w.modes
                    .iter()
                    .map(|m| bar(format!("({}) {}", m.mode, m.label), m.median_ms))
                    .collect(),
                None,
            ));
        }
        let notes = vec![format!(
            "layout {}, {} funded accounts in {}, median of {} runs per mode; c/b target <= {} ({}), d/b target <= {} ({}) — the line on each ratio chart is the d/b target",
            self.layout,
            self.accounts,
            self.state_label(),
            self.runs,
            self.proof_size_target,
            verdict(self.proof_size_met),
            self.root_target,
            verdict(self.root_met)
        )];
        figure_page("arbor bench pov", &machine_line(&self.machine), &notes, &figures)
    }
}

impl BlockStmReport {
    /// Per workload: the speed-up over the sequential executor per worker count, with the
    /// machine's two-thread ceiling as the line.
    pub fn html(&self) -> String {
        let figures: Vec<Figure> = self
            .ceilings
            .iter()
            .map(|(name, ceiling)| {
                let rows = self.rows.iter().filter(|r| r.workload == *name && r.workers > 0);
                bars(
                    format!("{name}: speed-up over sequential (line: two sequential blocks on two threads, {ceiling:.2}x)"),
                    "x",
                    rows.map(|r| {
                        let label = if r.forced_engine {
                            "1 worker (Block-STM forced)".to_string()
                        } else if r.forced_partitioned {
                            format!("{} workers (partitioned forced)", r.workers)
                        } else {
                            format!("{} workers", r.workers)
                        };
                        bar(label, r.speedup)
                    })
                    .collect(),
                    Some(*ceiling),
                )
            })
            .collect();
        let notes = vec![format!(
            "{} transactions per block, signatures {}, median of {} runs",
            self.txs,
            if self.signatures { "verified" } else { "off" },
            self.runs
        )];
        figure_page("arbor bench blockstm", &machine_line(&self.machine), &notes, &figures)
    }
}

#[cfg(test)]
mod tests {
    use crate::html::LineChart;

    #[test]
    fn line_chart_of_no_points_is_still_an_svg() {
        let c = LineChart {
            title: "t".into(),
            x_label: "block".into(),
            unit: "ms".into(),
            series: vec![],
            target: None,
        };
        let s = crate::html::line_svg(&c);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
    }
}
