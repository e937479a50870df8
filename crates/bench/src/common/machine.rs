//! What machine and build produced a report.

use serde::Serialize;

/// The machine and build a report was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MachineInfo {
    /// CPU model name from `/proc/cpuinfo` ("unknown" elsewhere).
    pub cpu_model: String,
    /// Logical cores available to this process.
    pub logical_cores: usize,
    /// Threads in the rayon pool used by the parallel builder.
    pub rayon_threads: usize,
    /// `rustc --version` of the compiler that built this crate.
    pub rustc: String,
    /// Optimisation level of this crate's build ("3" for release).
    pub opt_level: String,
    /// Target OS and architecture.
    pub target: String,
}

impl MachineInfo {
    /// Information about the current machine and build.
    pub(crate) fn detect() -> MachineInfo {
        MachineInfo {
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".to_string()),
            logical_cores: std::thread::available_parallelism().map_or(1, usize::from),
            rayon_threads: rayon::current_num_threads(),
            rustc: env!("ARBOR_BENCH_RUSTC_VERSION").to_string(),
            opt_level: env!("ARBOR_BENCH_OPT_LEVEL").to_string(),
            target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
        }
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "model name")
        .map(|(_, v)| v.trim().to_string())
}
