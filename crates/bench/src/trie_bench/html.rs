//! The HTML page of `arbor bench trie` (`--html FILE`): full-root times against the
//! reference engine, their ratios against parity, and the incremental rounds.

use trie::LayoutName;

use crate::common::html::{bar, bars, figure_page, machine_line, Bar};
use crate::trie_bench::report::{RootReference, TrieBenchReport};

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
