//! The report of `arbor bench checkpoint`: creation against a plain scan, verified
//! restores, their ratios against the targets; serialisable to JSON, rendered as text and
//! an HTML page.

use serde::Serialize;

use crate::common::timing::{median_sorted, sorted, Timing};

/// A measured ratio against its target.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Median of the per-round ratios.
    pub ratio: f64,
    /// The bound.
    pub target: f64,
    /// `ratio <= target`.
    pub met: bool,
}

impl Target {
    pub(crate) fn new(samples: &[f64], target: f64) -> Target {
        let ratio = median_sorted(&sorted(samples));
        Target { ratio, target, met: ratio <= target }
    }
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointBenchReport {
    /// Entries (flat keys).
    pub entries: u64,
    /// Accounts.
    pub accounts: u64,
    /// Storage tries.
    pub storage_tries: u64,
    /// Key and value bytes of the flat state.
    pub flat_bytes: u64,
    /// Bytes of all chunks.
    pub checkpoint_bytes: u64,
    /// Chunks.
    pub chunks: usize,
    /// Creation threads.
    pub threads: usize,
    /// Single-threaded scan of `flat` (keys and values), seconds.
    pub scan: Timing,
    /// Checkpoint creation with `threads` threads (chunks fsynced), seconds.
    pub create: Timing,
    /// The manifest's chunk hash (BLAKE3 since format 3) over every chunk's bytes on one thread, seconds: with the scan,
    /// the work no creation can skip.
    pub digest: Timing,
    /// (scan + digest) / threads over the scan: the creation/scan ratio of a perfectly
    /// parallel creation that only reads `flat` and hashes its chunks (median per round).
    pub create_floor_vs_scan: f64,
    /// Plain bulk load of the same entries plus the bottom-up rebuild, seconds.
    pub bulk_load: Timing,
    /// Verified restore from the local checkpoint directory, seconds.
    pub restore_local: Timing,
    /// Verified restore from three local HTTP servers, seconds.
    pub restore_http3: Timing,
    /// create / scan (target ≤ 1.2).
    pub create_vs_scan: Target,
    /// restore_local / bulk_load (target ≤ 1.5).
    pub restore_vs_bulk_load: Target,
    /// restore_http3 / restore_local (target ≤ 1.2).
    pub http3_vs_local: Target,
    /// checkpoint_bytes / flat_bytes (target ≤ 1.3).
    pub bytes_vs_flat: Target,
    /// Rounds.
    pub runs: usize,
    /// Restore progress of the last round from the local directory: `[seconds, chunks
    /// restored]` points (at most 500).
    pub restore_local_progress: Vec<(f64, f64)>,
    /// The same from three HTTP sources.
    pub restore_http3_progress: Vec<(f64, f64)>,
}

impl CheckpointBenchReport {
    /// Chunks restored over time in the last round, local and from three HTTP sources.
    fn progress_figure(&self) -> crate::common::html::Figure {
        crate::common::html::Figure::Lines(crate::common::html::LineChart {
            title: format!("Restore progress of the last round ({} chunks)", self.chunks),
            x_label: "seconds".into(),
            unit: "chunks".into(),
            series: vec![
                ("local directory".into(), self.restore_local_progress.clone()),
                ("3 HTTP sources".into(), self.restore_http3_progress.clone()),
            ],
            target: None,
        })
    }

    /// The timed measurements with their labels, in report order.
    fn timings(&self) -> [(String, &Timing); 6] {
        [
            ("scan of flat (1 thread)".into(), &self.scan),
            (format!("create ({} threads)", self.threads), &self.create),
            ("chunk hash (1 thread)".into(), &self.digest),
            ("bulk load + rebuild".into(), &self.bulk_load),
            ("restore, local".into(), &self.restore_local),
            ("restore, 3 HTTP sources".into(), &self.restore_http3),
        ]
    }

    /// The ratios with their labels, in report order.
    fn ratios(&self) -> [(&'static str, &Target); 4] {
        [
            ("create / scan", &self.create_vs_scan),
            ("restore / bulk load", &self.restore_vs_bulk_load),
            ("3 HTTP / local restore", &self.http3_vs_local),
            ("checkpoint / flat bytes", &self.bytes_vs_flat),
        ]
    }

    /// What was measured: the state and the checkpoint of it.
    fn state_line(&self) -> String {
        format!(
            "{} entries ({} accounts, {} storage tries), flat {:.1} MiB, checkpoint {:.1} MiB in {} chunks",
            self.entries,
            self.accounts,
            self.storage_tries,
            self.flat_bytes as f64 / 1048576.0,
            self.checkpoint_bytes as f64 / 1048576.0,
            self.chunks,
        )
    }

    /// The human-readable table.
    pub fn render(&self) -> String {
        let mut s = format!("checkpoint: {}, {} rounds (medians)\n", self.state_line(), self.runs);
        let mut t = crate::common::table::table(&["phase", "median s", "min s", "max s"]);
        for (name, x) in self.timings() {
            t.add_row(vec![
                name.to_string(),
                format!("{:.3}", x.seconds_median),
                format!("{:.3}", x.seconds_min),
                format!("{:.3}", x.seconds_max),
            ]);
        }
        s.push_str(&crate::common::table::text(&t));
        let mut t = crate::common::table::table(&["ratio", "measured", "target", "verdict"]);
        for (name, r) in self.ratios() {
            t.add_row(vec![
                name.to_string(),
                format!("{:.2}x", r.ratio),
                format!("<= {:.1}x", r.target),
                if r.met { "met" } else { "NOT met" }.to_string(),
            ]);
        }
        s.push_str(&crate::common::table::text(&t));
        s.push_str(&format!(
            "  (floor of create / scan: (scan + hash of the chunks) / {} threads = {:.2}x)\n",
            self.threads, self.create_floor_vs_scan
        ));
        s
    }
}

impl CheckpointBenchReport {
    /// The report as an HTML page with SVG charts (times, and each ratio against its target).
    pub fn html(&self) -> String {
        use crate::common::html::{Bar, Chart};
        let bar = |label: &str, value: f64| Bar { label: label.to_string(), value };
        let times = Chart {
            title: format!("Medians over {} rounds", self.runs),
            unit: "s".into(),
            bars: self.timings().into_iter().map(|(n, t)| bar(&n, t.seconds_median)).collect(),
            target: None,
        };
        let ratio = |title: &str, t: &Target| Chart {
            title: format!(
                "{title}: {:.2}x, target <= {:.1}x ({})",
                t.ratio,
                t.target,
                if t.met { "met" } else { "not met" }
            ),
            unit: "x".into(),
            bars: vec![bar("measured", t.ratio)],
            target: Some(t.target),
        };
        let machine =
            crate::common::html::machine_line(&crate::common::machine::MachineInfo::detect());
        let notes = vec![format!(
            "{}; floor of create/scan (scan + chunk hash)/threads = {:.2}x",
            self.state_line(),
            self.create_floor_vs_scan
        )];
        crate::common::html::figure_page(
            "arbor bench checkpoint",
            &machine,
            &notes,
            &std::iter::once(times)
                .chain(self.ratios().into_iter().map(|(n, t)| ratio(n, t)))
                .map(crate::common::html::Figure::Bars)
                .chain(std::iter::once(self.progress_figure()))
                .collect::<Vec<_>>(),
        )
    }
}
