//! The report of `arbor bench import`: per mode (pipelined or not) and worker count, the
//! medians of the rounds; serialisable to JSON, rendered as a table and an HTML page.

use serde::Serialize;

/// One variant's medians.
#[derive(Debug, Clone, Serialize)]
pub struct ImportRow {
    /// Execute and commit overlapped.
    pub pipelined: bool,
    /// Block-STM workers.
    pub exec_workers: usize,
    /// Blocks per second (median).
    pub blocks_per_s: f64,
    /// Transactions per second (median).
    pub transactions_per_s: f64,
    /// Million gas per second (median; EVM chains only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mgas_per_s: Option<f64>,
    /// Seconds executing (median).
    pub exec_s: f64,
    /// Seconds committing (median).
    pub commit_s: f64,
    /// Seconds the executor waited on a full queue (median).
    pub stalled_s: f64,
    /// Seconds of the final flush (median).
    pub flush_s: f64,
    /// Peak resident memory of the run, bytes (largest over rounds).
    pub peak_rss_bytes: u64,
    /// Cores busy on average (process CPU time over wall time, median): how much of the
    /// machine the run used.
    pub cores_busy: f64,
    /// Pipelined only: median per-round ratio of its blocks/s to the unpipelined run with
    /// the same workers.
    pub speedup: Option<f64>,
    /// Pipelined only: the speed-up the unpipelined run's busy cores allow, the cores over
    /// its cores busy (median over rounds).
    pub bound: Option<f64>,
    /// Pipelined only: median per-round share of that bound the speed-up reached (target
    /// 0.9).
    pub of_bound: Option<f64>,
    /// Pipelined only: its peak RSS over the unpipelined one's.
    pub rss_ratio: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct ImportBenchReport {
    /// Genesis accounts.
    pub accounts: u64,
    /// Blocks.
    pub blocks: u64,
    /// Transactions in all blocks.
    pub transactions: u64,
    /// Gas the blocks used (EVM chains only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gas_used: Option<u64>,
    /// Rounds.
    pub runs: usize,
    /// The rows.
    pub rows: Vec<ImportRow>,
}

impl ImportBenchReport {
    /// The human summary: a line, then a row per mode and worker count.
    pub fn render(&self) -> String {
        let gas = self.gas_used.map_or(String::new(), |g| format!(", {g} gas (EVM)"));
        let mut out = format!(
            "import: {} accounts, {} blocks, {} transactions{gas}, {} rounds (medians)\n",
            self.accounts, self.blocks, self.transactions, self.runs
        );
        let mut t = crate::common::table::table(&[
            "mode",
            "workers",
            "blocks/s",
            "tx/s",
            "Mgas/s",
            "exec s",
            "commit s",
            "stalled s",
            "flush s",
            "cores busy",
            "peak RSS MiB",
            "speed-up",
            "bound",
            "of bound",
            "RSS ratio",
        ]);
        let times = |x: Option<f64>| x.map_or("-".to_string(), |s| format!("{s:.2}x"));
        for r in &self.rows {
            t.add_row(vec![
                if r.pipelined { "pipelined" } else { "unpipelined" }.to_string(),
                r.exec_workers.to_string(),
                format!("{:.1}", r.blocks_per_s),
                format!("{:.0}", r.transactions_per_s),
                r.mgas_per_s.map_or("-".to_string(), |m| format!("{m:.1}")),
                format!("{:.2}", r.exec_s),
                format!("{:.2}", r.commit_s),
                format!("{:.2}", r.stalled_s),
                format!("{:.2}", r.flush_s),
                format!("{:.2}", r.cores_busy),
                format!("{:.0}", r.peak_rss_bytes as f64 / (1u64 << 20) as f64),
                times(r.speedup),
                times(r.bound),
                r.of_bound.map_or("-".to_string(), |x| format!("{:.0}%", 100.0 * x)),
                times(r.rss_ratio),
            ]);
        }
        out.push_str(&crate::common::table::text(&t));
        out
    }

    /// The report as an HTML page with SVG charts: blocks/s per mode and worker count,
    /// the pipelined speed-ups against their target (1.25x) and against their bound (0.9
    /// of it), and the RSS ratios (1.15x).
    pub fn html(&self) -> String {
        use crate::common::html::{page, Bar, Chart};
        let name = |r: &ImportRow| {
            format!("{} {}w", if r.pipelined { "pipelined" } else { "unpipelined" }, r.exec_workers)
        };
        let rate = Chart {
            title: format!("Blocks per second (medians over {} rounds)", self.runs),
            unit: "blocks/s".into(),
            bars: self.rows.iter().map(|r| Bar { label: name(r), value: r.blocks_per_s }).collect(),
            target: None,
        };
        let pipelined: Vec<&ImportRow> = self.rows.iter().filter(|r| r.pipelined).collect();
        let ratios = |title: &str, target: f64, value: fn(&ImportRow) -> Option<f64>| Chart {
            title: title.into(),
            unit: "x".into(),
            bars: pipelined
                .iter()
                .map(|r| Bar { label: name(r), value: value(r).unwrap_or(f64::NAN) })
                .collect(),
            target: Some(target),
        };
        let speedup =
            ratios("Pipelined speed-up over unpipelined, same workers", 1.25, |r| r.speedup);
        let of_bound = ratios(
            "Pipelined speed-up as a share of its bound (cores over the unpipelined run's busy cores)",
            0.9,
            |r| r.of_bound,
        );
        let rss = ratios("Peak RSS, pipelined over unpipelined", 1.15, |r| r.rss_ratio);
        let machine =
            crate::common::html::machine_line(&crate::common::machine::MachineInfo::detect());
        let notes = vec![format!(
            "{} accounts, {} blocks, {} transactions",
            self.accounts, self.blocks, self.transactions
        )];
        page("arbor bench import", &machine, &notes, &[rate, speedup, of_bound, rss])
    }
}
