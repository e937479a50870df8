//! Engines as worker processes, so that their rounds of blocks interleave without running
//! at the same time (`arbor bench store` and `arbor bench evm`).
//!
//! The driver starts one worker per engine (the same executable, `arbor bench
//! <command> --spec FILE`, the spec a JSON file the driver wrote): each one loads its
//! engine's initial state and waits. The driver then hands out the blocks in rounds
//! ([`run_rounds`]), engine after engine, the order reversed every other round; a worker
//! runs only during its own rounds: between them it is stopped (SIGSTOP), background
//! threads included, so no engine's compactions or writer run during another engine's
//! timed blocks, while slow drifts of the machine (other tenants, clock, thermal state)
//! fall on every engine alike. Each worker measures its own peak RSS and disk writes (per
//! process), and finishes (flush, report) when told.
//!
//! Protocol: the driver writes lines to the worker's stdin, `blocks FROM TO` and `finish`;
//! the worker answers on stdout with `progress N` lines during its load ([`tick`]), then
//! `ready`, `done` after each round, and its outcome as one JSON line at the end
//! ([`serve`] runs a worker's side over a [`Rounds`]). Blocks come in order, each once. A
//! worker whose driver dies is killed with it (`PR_SET_PDEATHSIG`); one whose driver
//! drops its handle ([`Worker`]) is killed.

use std::io::{BufRead, BufReader, Lines, Read, Write};
use std::ops::RangeInclusive;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, ensure, Context, Result};
use indicatif::ProgressBar;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The longest command line a worker reads.
const COMMAND_BYTES_MAX: u64 = 256;

/// A worker's engine, as [`serve`] drives it.
pub(crate) trait Rounds {
    /// Run blocks `from..=to` (in order after the previous round's).
    fn blocks(&mut self, from: u64, to: u64) -> Result<()>;
    /// Finish (flush, final checks) and give the outcome as one JSON line.
    fn finish(self: Box<Self>) -> Result<String>;
}

/// A worker's first step: tie the process to its driver and read its spec.
pub(crate) fn start_worker<T: DeserializeOwned>(spec_path: &Path) -> Result<T> {
    // A worker left behind by a driver that died would hold its database (and, stopped,
    // never exit).
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .context("cannot tie the worker to its driver")?;
    let bytes = std::fs::read(spec_path)
        .with_context(|| format!("cannot read the worker spec {}", spec_path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a worker spec", spec_path.display()))
}

/// Tell the driver how far the load got (best effort: a closed stdout ends the worker at
/// its next answer).
pub(crate) fn tick(n: u64) {
    let _ = writeln!(std::io::stdout(), "progress {n}");
}

/// The worker's side of the protocol once its engine is loaded: `ready`, then blocks
/// `1..=last` in rounds as the driver says, then the outcome.
pub(crate) fn serve(mut rounds: Box<dyn Rounds>, last: u64) -> Result<()> {
    answer("ready")?;
    let mut stdin = std::io::stdin().lock();
    let mut next = 1;
    while let Some(line) = command(&mut stdin)? {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["blocks", from, to] => {
                let (from, to): (u64, u64) = (from.parse()?, to.parse()?);
                let in_order = from == next && from <= to && to <= last;
                ensure!(in_order, "blocks {from}..={to} out of order");
                rounds.blocks(from, to)?;
                next = to + 1;
                answer("done")?;
            }
            ["finish"] => return answer(&rounds.finish()?),
            _ => bail!("unknown worker command {line:?}"),
        }
    }
    bail!("the driver left before the worker finished")
}

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

/// How the driver starts a worker: the executable, its `bench` subcommand, and where the
/// spec goes.
pub(crate) struct Launch<'a> {
    pub(crate) exe: &'a Path,
    /// `store-worker`, `evm-worker`.
    pub(crate) command: &'a str,
    pub(crate) spec_path: &'a Path,
}

/// The driver's handle on one worker; dropping it kills the worker.
pub(crate) struct Worker<K> {
    /// The engine it runs.
    pub(crate) kind: K,
    label: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl<K> Worker<K> {
    /// Write `spec`, start the worker as `launch` says and wait for its load, which `pb`
    /// follows; the worker is stopped when this returns.
    pub(crate) fn start(
        launch: &Launch<'_>,
        kind: K,
        label: &'static str,
        spec: &impl Serialize,
        pb: &ProgressBar,
    ) -> Result<Worker<K>> {
        let spec_path = launch.spec_path;
        std::fs::write(spec_path, serde_json::to_vec(spec)?)
            .with_context(|| format!("cannot write {}", spec_path.display()))?;
        let mut child = Command::new(launch.exe)
            .args(["bench", launch.command, "--spec"])
            .arg(spec_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start a worker ({})", launch.exe.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("a worker has no pipes");
        };
        let lines = BufReader::new(stdout).lines();
        let mut worker = Worker { kind, label, child, stdin, lines };
        worker.expect("ready", pb)?;
        worker.signal(Signal::SIGSTOP)?;
        Ok(worker)
    }

    /// The engine's name in messages.
    pub(crate) fn label(&self) -> &'static str {
        self.label
    }

    /// Run blocks `from..=to` (the worker runs only meanwhile).
    pub(crate) fn blocks(&mut self, from: u64, to: u64) -> Result<()> {
        self.signal(Signal::SIGCONT)?;
        self.send(&format!("blocks {from} {to}"))?;
        self.expect("done", &ProgressBar::hidden())?;
        self.signal(Signal::SIGSTOP)
    }

    /// Finish (the worker flushes and reports, then exits): its outcome.
    pub(crate) fn finish<T: DeserializeOwned>(mut self) -> Result<T> {
        self.signal(Signal::SIGCONT)?;
        self.send("finish")?;
        let line = self.line(&ProgressBar::hidden())?;
        let outcome = serde_json::from_str(&line)
            .with_context(|| format!("{} worker sent an unreadable report", self.label))?;
        let status = self.child.wait()?;
        ensure!(status.success(), "{} worker exited with {status}", self.label);
        Ok(outcome)
    }

    fn signal(&self, signal: Signal) -> Result<()> {
        let pid = i32::try_from(self.child.id()).context("worker pid out of range")?;
        kill(Pid::from_raw(pid), signal)
            .with_context(|| format!("cannot signal the {} worker", self.label))
    }

    fn send(&mut self, command: &str) -> Result<()> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .with_context(|| format!("the {} worker stopped listening", self.label))
    }

    /// Wait for `want` (progress lines move `pb`).
    fn expect(&mut self, want: &str, pb: &ProgressBar) -> Result<()> {
        let line = self.line(pb)?;
        ensure!(line == want, "{} worker said {line:?}, not {want:?}", self.label);
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
        anyhow::anyhow!("the {} worker failed ({status}): {said}", self.label)
    }
}

impl<K> Drop for Worker<K> {
    fn drop(&mut self) {
        // SIGKILL ends a stopped worker too; one that already exited is only reaped.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `blocks` on every worker in `rounds` interleaved rounds (fewer when there are fewer
/// blocks; see the module docs); `pb` advances by each worker's blocks, its message says
/// `phase` and the engine running.
pub(crate) fn run_rounds<K>(
    workers: &mut [Worker<K>],
    blocks: RangeInclusive<u64>,
    rounds: u64,
    pb: &ProgressBar,
    phase: &str,
) -> Result<()> {
    let (first, last) = (*blocks.start(), *blocks.end());
    let count = (last + 1).saturating_sub(first);
    let per_round = count.div_ceil(rounds.max(1)).max(1);
    let mut from = first;
    let mut round = 0;
    while from <= last {
        let to = (from + per_round - 1).min(last);
        for i in 0..workers.len() {
            let i = if round % 2 == 0 { i } else { workers.len() - 1 - i };
            pb.set_message(format!("{phase} ({})", workers[i].label));
            workers[i].blocks(from, to)?;
            pb.inc(to - from + 1);
        }
        from = to + 1;
        round += 1;
    }
    Ok(())
}
