//! The engines of `arbor bench store` as worker processes, so that their rounds of blocks
//! can interleave without running at the same time.
//!
//! The driver starts one worker per engine (the same executable, `arbor bench
//! store-worker --spec FILE`): each one bulk-loads its database and waits. The driver then
//! hands out the blocks in rounds, engine after engine; a worker runs only during its own
//! rounds: between them it is stopped (SIGSTOP), background threads included, so no
//! engine's compactions or writer run during another engine's timed blocks, while slow
//! drifts of the machine (other tenants, clock, thermal state) fall on every engine alike.
//! Each worker measures its own peak RSS and disk writes (per process), and finishes
//! (flush, compaction, report) when told.
//!
//! Protocol: the driver writes lines to the worker's stdin, `blocks FROM TO` and `finish`;
//! the worker answers on stdout with `progress N` lines during its bulk load, then `ready`,
//! `done` after each round, and its [`EngineOutcome`] as one JSON line at the end. A
//! worker whose driver dies is killed with it (`PR_SET_PDEATHSIG`).

use std::io::{BufRead, BufReader, Lines, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, ensure, Context, Result};
use indicatif::ProgressBar;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use store::StoreConfig;

use crate::common::workload::Workload;
use crate::store_bench::engines::{
    ArborEngine, ArborMode, Engine, EngineOutcome, NomtRun, PlainEngine, PlainMode,
};

/// The engines a worker can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EngineKind {
    /// Arbor given each block's old values.
    Arbor,
    /// Arbor reading them itself.
    ArborReading,
    /// Plain RocksDB with undo records.
    PlainUndo,
    /// Plain RocksDB, new values only.
    Blind,
    /// NOMT.
    Nomt,
}

impl EngineKind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            EngineKind::Arbor => "arbor",
            EngineKind::ArborReading => "arbor (reads)",
            EngineKind::PlainUndo => "plain+undo",
            EngineKind::Blind => "blind",
            EngineKind::Nomt => "nomt",
        }
    }
}

/// What a worker runs: written by the driver to a file the worker reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkerSpec {
    pub(crate) engine: EngineKind,
    /// The engine's database directory (new).
    pub(crate) dir: PathBuf,
    pub(crate) keys: u64,
    pub(crate) blocks: u64,
    pub(crate) updates_per_block: u64,
    pub(crate) seed: u64,
    pub(crate) config: StoreConfig,
}

/// The most of each count a spec may ask for: the bounds of `arbor bench store`'s flags,
/// given by the program that defines them.
#[derive(Debug, Clone, Copy)]
pub struct WorkerBounds {
    /// Initial keys (`--keys`).
    pub keys_max: u64,
    /// Blocks (`--blocks`), at least 1.
    pub blocks_max: u64,
    /// Operations per block (`--updates-per-block`), at least 1.
    pub updates_per_block_max: u64,
}

impl WorkerSpec {
    fn check(&self, bounds: &WorkerBounds) -> Result<()> {
        let WorkerBounds { keys_max, blocks_max, updates_per_block_max } = *bounds;
        ensure!(self.keys <= keys_max, "keys {} is over {keys_max}", self.keys);
        ensure!((1..=blocks_max).contains(&self.blocks), "blocks must be 1 to {blocks_max}");
        ensure!(
            (1..=updates_per_block_max).contains(&self.updates_per_block),
            "updates per block must be 1 to {updates_per_block_max}"
        );
        self.config.validate().context("invalid store config in the spec")?;
        Ok(())
    }
}

/// The worker process's main: run the engine of the spec at `spec_path` (within `bounds`)
/// as the driver says on stdin (see the module docs).
pub fn store_worker(spec_path: &Path, bounds: &WorkerBounds) -> Result<()> {
    // A worker left behind by a driver that died would hold its database (and, stopped,
    // never exit).
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .context("cannot tie the worker to its driver")?;
    let bytes = std::fs::read(spec_path)
        .with_context(|| format!("cannot read the worker spec {}", spec_path.display()))?;
    let spec: WorkerSpec = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a worker spec", spec_path.display()))?;
    spec.check(bounds)?;
    let workload = Workload::new(spec.seed, spec.keys, spec.updates_per_block);
    // Progress is best effort; a closed stdout ends the worker at its next answer.
    let tick = |n: u64| {
        let _ = writeln!(std::io::stdout(), "progress {n}");
    };
    let mut engine = start(&spec, &workload, &tick)?;
    answer("ready")?;
    let mut stdin = std::io::stdin().lock();
    let mut next = 1;
    while let Some(line) = command(&mut stdin)? {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["blocks", from, to] => {
                let (from, to): (u64, u64) = (from.parse()?, to.parse()?);
                let in_order = from == next && from <= to && to <= spec.blocks;
                ensure!(in_order, "blocks {from}..={to} out of order");
                engine.blocks(from, to)?;
                next = to + 1;
                answer("done")?;
            }
            ["finish"] => return answer(&serde_json::to_string(&engine.finish()?)?),
            _ => bail!("unknown worker command {line:?}"),
        }
    }
    bail!("the driver left before the worker finished")
}

/// The longest command line a worker reads.
const COMMAND_BYTES_MAX: u64 = 256;

/// The driver's next command line (`None` at the end of stdin), bounded in length.
fn command(stdin: &mut impl BufRead) -> Result<Option<String>> {
    let mut line = Vec::new();
    stdin
        .take(COMMAND_BYTES_MAX)
        .read_until(b'\n', &mut line)
        .context("cannot read the driver's command")?;
    match line.pop() {
        None => Ok(None),
        Some(b'\n') => Ok(Some(String::from_utf8_lossy(&line).into_owned())),
        Some(_) if line.len() + 1 == COMMAND_BYTES_MAX as usize => {
            bail!("a worker command longer than {COMMAND_BYTES_MAX} bytes")
        }
        Some(_) => bail!("the driver left in the middle of a command"),
    }
}

/// Write one answer line to the driver.
fn answer(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).context("the driver stopped listening")
}

/// Open and bulk-load the spec's engine.
fn start(spec: &WorkerSpec, workload: &Workload, tick: &dyn Fn(u64)) -> Result<Box<dyn Engine>> {
    let (config, dir) = (&spec.config, spec.dir.as_path());
    Ok(match spec.engine {
        EngineKind::Arbor => {
            Box::new(ArborEngine::start(config, workload, dir, ArborMode::Prior, tick)?)
        }
        EngineKind::ArborReading => {
            Box::new(ArborEngine::start(config, workload, dir, ArborMode::Read, tick)?)
        }
        EngineKind::PlainUndo => {
            Box::new(PlainEngine::start(config, workload, dir, PlainMode::Undo, tick)?)
        }
        EngineKind::Blind => {
            Box::new(PlainEngine::start(config, workload, dir, PlainMode::Blind, tick)?)
        }
        EngineKind::Nomt => Box::new(NomtRun::start(config, workload, dir, spec.blocks, tick)?),
    })
}

/// The driver's handle on one worker; dropping it kills the worker.
pub(crate) struct Worker {
    pub(crate) kind: EngineKind,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    /// Start the worker of `spec` (written to `spec_path`) with `exe` and wait for its bulk
    /// load, which `pb` follows; the worker is stopped when this returns.
    pub(crate) fn start(
        exe: &Path,
        spec: &WorkerSpec,
        spec_path: &Path,
        pb: &ProgressBar,
    ) -> Result<Worker> {
        std::fs::write(spec_path, serde_json::to_vec(spec)?)
            .with_context(|| format!("cannot write {}", spec_path.display()))?;
        let mut child = Command::new(exe)
            .args(["bench", "store-worker", "--spec"])
            .arg(spec_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start a worker ({})", exe.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("a worker has no pipes");
        };
        let lines = BufReader::new(stdout).lines();
        let mut worker = Worker { kind: spec.engine, child, stdin, lines };
        worker.expect("ready", pb)?;
        worker.signal(Signal::SIGSTOP)?;
        Ok(worker)
    }

    /// Run blocks `from..=to` (the worker runs only meanwhile).
    pub(crate) fn blocks(&mut self, from: u64, to: u64) -> Result<()> {
        self.signal(Signal::SIGCONT)?;
        self.send(&format!("blocks {from} {to}"))?;
        self.expect("done", &ProgressBar::hidden())?;
        self.signal(Signal::SIGSTOP)
    }

    /// Flush, compact and report; the worker then exits.
    pub(crate) fn finish(mut self) -> Result<EngineOutcome> {
        self.signal(Signal::SIGCONT)?;
        self.send("finish")?;
        let line = self.line(&ProgressBar::hidden())?;
        let outcome = serde_json::from_str(&line)
            .with_context(|| format!("{} worker sent an unreadable report", self.kind.label()))?;
        let status = self.child.wait()?;
        ensure!(status.success(), "{} worker exited with {status}", self.kind.label());
        Ok(outcome)
    }

    fn signal(&self, signal: Signal) -> Result<()> {
        let pid = i32::try_from(self.child.id()).context("worker pid out of range")?;
        kill(Pid::from_raw(pid), signal)
            .with_context(|| format!("cannot signal the {} worker", self.kind.label()))
    }

    fn send(&mut self, command: &str) -> Result<()> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .with_context(|| format!("the {} worker stopped listening", self.kind.label()))
    }

    /// Wait for `want` (progress lines move `pb`).
    fn expect(&mut self, want: &str, pb: &ProgressBar) -> Result<()> {
        let line = self.line(pb)?;
        ensure!(line == want, "{} worker said {line:?}, not {want:?}", self.kind.label());
        Ok(())
    }

    /// The next line that is not progress; the worker's error when it ended instead.
    fn line(&mut self, pb: &ProgressBar) -> Result<String> {
        loop {
            match self.lines.next() {
                Some(Ok(line)) => match line.strip_prefix("progress ") {
                    Some(n) => pb.set_position(n.parse().unwrap_or(0)),
                    None => return Ok(line),
                },
                Some(Err(e)) => return Err(e.into()),
                None => return Err(self.failure()),
            }
        }
    }

    /// What a worker that ended early said on stderr (read to its end before the wait,
    /// so that a worker blocked on a full stderr pipe cannot hang the driver).
    fn failure(&mut self) -> anyhow::Error {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
        let said = err.trim().trim_start_matches("error: ");
        anyhow::anyhow!("the {} worker failed ({status}): {said}", self.kind.label())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SIGKILL ends a stopped worker too; one that already exited is only reaped.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
