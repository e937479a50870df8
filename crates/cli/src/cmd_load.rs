//! `arbor load`: commit deterministic random blocks ([`bench::workload`]) to a database.
//!
//! An empty database first receives the workload's `--keys` initial keys by bulk load
//! (printed as block `0 <root>`). Blocks then continue from the head: block `b` is the
//! workload's block `b`, which depends only on `(seed, b)`, so the same flags give the
//! same root whether the blocks are loaded in one run or in several. Every commit prints
//! `<number> <root>` on stdout (only the last with `--quiet`; none with `--json`, which
//! prints the summary as one JSON object instead); long runs draw a progress bar on stderr
//! and every run ends with a summary line on stderr.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bench::workload::Workload;
use clap::Args;
use indicatif::ProgressBar;
use state::H256;
use store::{CommitInfo, StateDb};

use crate::auto_checkpoint::AutoCheckpoint;
use crate::db_args::{open_for_load, DbArgs};
use crate::limits;
use crate::metrics::Endpoint;

/// Runs with more blocks than this draw a progress bar.
const PROGRESS_BLOCKS_MIN: u64 = 50;
/// Bulk loads with more keys than this draw a progress bar.
const PROGRESS_KEYS_MIN: u64 = 50_000;

/// Arguments of `arbor load`.
#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Blocks to commit after the head; 1 to 1,000,000.
    #[arg(long, value_name = "N", value_parser = limits::u64_in(1, limits::BLOCKS_MAX))]
    blocks: u64,
    /// Operations per block (80% updates, 20% deletions of random keys); 1 to 1,000,000.
    #[arg(
        long,
        value_name = "K",
        value_parser = limits::u64_in(1, limits::UPDATES_PER_BLOCK_MAX)
    )]
    updates_per_block: u64,
    /// Seed of the workload (any 64-bit unsigned integer); use the same seed (and --keys,
    /// --updates-per-block) to continue.
    #[arg(long, value_name = "S")]
    seed: u64,
    /// Keys created by bulk load when the database is empty; 1 to 100,000,000.
    #[arg(
        long,
        value_name = "M",
        default_value_t = 100_000,
        value_parser = limits::u64_in(1, limits::STORE_KEYS_MAX)
    )]
    keys: u64,
    /// Print only the last `<number> <root>` line.
    #[arg(long)]
    quiet: bool,
    /// Serve Prometheus metrics on ADDR (e.g. 127.0.0.1:9100) while committing.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Print the summary as JSON on stdout instead of the per-block lines.
    #[arg(long)]
    json: bool,
    /// Trie layout of a new database (ethereum, substrate-v0, substrate-v1) [default:
    /// ethereum]; an existing database must have it (it records its layout).
    #[arg(long, value_name = "LAYOUT", value_parser = crate::layout_arg::parser())]
    layout: Option<trie::LayoutName>,
}

/// Where the per-block lines go: stdout, around the progress bar when both are on a terminal.
struct Lines<'a> {
    out: std::io::BufWriter<std::io::StdoutLock<'a>>,
    tty: bool,
    quiet: bool,
}

impl Lines<'_> {
    fn emit(&mut self, pb: &ProgressBar, number: u64, root: &H256) -> Result<()> {
        if self.quiet {
            return Ok(());
        }
        if self.tty {
            let out = &mut self.out;
            pb.suspend(|| writeln!(out, "{number} {root}").and_then(|()| out.flush()))?;
        } else {
            writeln!(self.out, "{number} {root}")?;
        }
        Ok(())
    }
}

/// Run `arbor load`.
pub(crate) fn run(args: &LoadArgs) -> Result<ExitCode> {
    let listener = crate::metrics::bind(args.metrics.as_ref())?;
    let workload = Workload::new(args.seed, args.keys, args.updates_per_block);
    let mut db = open_for_load(&args.db, args.layout, &workload_label(&workload))?;
    let stdout = std::io::stdout();
    let mut lines = Lines {
        tty: stdout.is_terminal(),
        out: std::io::BufWriter::new(stdout.lock()),
        quiet: args.quiet || args.json,
    };
    // An empty database gets the initial keys; one holding an unfinished bulk load gets
    // them again, if it was this workload's (the store checks the label).
    let bulk_seconds = if db.unfinished_bulk_load().is_some() || db.is_empty()? {
        let start = Instant::now();
        bulk_load(&mut db, &workload, !args.json)?;
        lines.emit(&ProgressBar::hidden(), 0, &db.head_root())?;
        Some(start.elapsed().as_secs_f64())
    } else {
        None
    };
    let (first, last) = block_span(db.head_number(), args.blocks)?;
    let show = args.blocks > PROGRESS_BLOCKS_MIN && !args.json;
    let pb = crate::progress::counter(show, Some(args.blocks), "committing", "blocks");
    let mut auto = AutoCheckpoint::new(&args.db.db, db.config());
    // From here on Ctrl-C or SIGTERM ends the run at a block boundary, with the summary (a
    // signal during the bulk phase above still ends the process: that load resumes).
    let stop = crate::signals::stop_flag()?;
    let endpoint = match listener {
        Some(l) => Some(crate::metrics::serve(l, db.read_handle()?)?),
        None => None,
    };
    let mut committed = 0u64;
    let start = Instant::now();
    for b in first..=last {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let info = commit_block(&mut db, &workload, b, endpoint.as_ref())?;
        lines.emit(&pb, info.number, &info.root)?;
        pb.inc(1);
        committed += 1;
        if let Some(a) = auto.as_mut().filter(|a| a.due(info.number)) {
            // Flushed first, so that the checkpoint is of exactly this block.
            db.flush().context("cannot flush the database")?;
            a.start(db.read_handle()?)?;
        }
    }
    db.flush().context("cannot flush the database")?;
    if let Some(a) = auto.as_mut() {
        a.finish_running()?;
    }
    let seconds = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let (number, root) = (db.head_number(), db.head_root());
    db.close().context("cannot close the database")?;
    if args.quiet && !args.json {
        lines.quiet = false;
        lines.emit(&pb, number, &root)?;
    }
    lines.out.flush()?;
    let stopped = committed < args.blocks;
    tracing::info!(blocks = committed, stopped, head = number, root = %root, "load done");
    let summary = Summary { bulk_seconds, committed, stopped, seconds, number, root };
    summary.print_line(args);
    if args.json {
        summary.print_json(args)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Commit the workload's block `b`, counted on the metrics endpoint, if any.
fn commit_block(
    db: &mut StateDb,
    workload: &Workload,
    b: u64,
    endpoint: Option<&Endpoint>,
) -> Result<CommitInfo> {
    let changes = workload.change_set(b);
    let t0 = Instant::now();
    let info = db.commit(&changes).with_context(|| format!("cannot commit block {b}"))?;
    let n: usize = changes.values().map(|m| m.len()).sum();
    if let Some(e) = endpoint {
        e.counters.block(info.number, n as u64, t0.elapsed());
    }
    tracing::debug!(block = info.number, root = %info.root, changes = n, commit_ms = t0.elapsed().as_secs_f64() * 1e3, "committed");
    Ok(info)
}

/// The numbers of the `blocks` blocks after `head`, first and last (`blocks` ≥ 1); an
/// error when they would pass the largest block number.
fn block_span(head: u64, blocks: u64) -> Result<(u64, u64)> {
    match (head.checked_add(1), head.checked_add(blocks)) {
        (Some(first), Some(last)) => Ok((first, last)),
        _ => bail!(
            "cannot commit {blocks} blocks after head block {head}: block numbers end at {}",
            u64::MAX
        ),
    }
}

/// The bulk-load label of a workload's initial state (it depends on the seed and the
/// key count only).
fn workload_label(workload: &Workload) -> String {
    format!("load --seed {} --keys {}", workload.seed, workload.keys_initial)
}

/// The workload's initial keys, then the bottom-up node rebuild (crash-safe: see
/// `StateDb::begin_bulk_load`).
fn bulk_load(db: &mut StateDb, workload: &Workload, show: bool) -> Result<()> {
    let show = show && workload.keys_initial > PROGRESS_KEYS_MIN;
    let pb = crate::progress::counter(show, Some(workload.keys_initial), "bulk loading", "keys");
    let mut load = db.begin_bulk_load(&workload_label(workload)).context("bulk load refused")?;
    for (i, (k, v)) in workload.initial_entries().enumerate() {
        if i.is_multiple_of(65_536) {
            pb.set_position(i as u64);
        }
        load.put(&state::TrieId::Main, &k, &v).context("bulk load failed")?;
    }
    pb.set_message("rebuilding nodes");
    load.finish().context("bulk load failed")?;
    pb.finish_and_clear();
    Ok(())
}

/// What a run did, for its summary.
struct Summary {
    /// The bulk load's time, when this run loaded the initial keys.
    bulk_seconds: Option<f64>,
    /// Blocks committed.
    committed: u64,
    /// Whether a signal ended the run early.
    stopped: bool,
    /// Time of the blocks (commits and the final flush).
    seconds: f64,
    /// The head.
    number: u64,
    root: H256,
}

impl Summary {
    fn per_second(&self, n: f64) -> f64 {
        if self.seconds > 0.0 {
            n / self.seconds
        } else {
            0.0
        }
    }

    /// The summary line on stderr.
    fn print_line(&self, args: &LoadArgs) {
        let Summary { committed, seconds, number, root, .. } = self;
        let mut line = String::new();
        if let Some(s) = self.bulk_seconds {
            line.push_str(&format!("bulk-loaded {} keys in {s:.2} s; ", args.keys));
        }
        if self.stopped {
            line.push_str("stopped by signal; ");
        }
        line.push_str(&format!(
            "committed {committed} blocks in {seconds:.2} s ({:.1} blocks/s, {:.0} updates/s); head {number} {root}",
            self.per_second(*committed as f64),
            self.per_second(committed.saturating_mul(args.updates_per_block) as f64),
        ));
        errln!("{line}");
    }

    /// The summary as one JSON object on stdout (`--json`).
    fn print_json(&self, args: &LoadArgs) -> Result<()> {
        let updates = self.committed.saturating_mul(args.updates_per_block);
        let v = serde_json::json!({
            "block": self.number,
            "root": self.root.to_string(),
            "blocks": self.committed,
            "updates": updates,
            "bulk_loaded_keys": self.bulk_seconds.map(|_| args.keys),
            "bulk_s": self.bulk_seconds,
            "elapsed_s": self.seconds,
            "blocks_per_s": self.per_second(self.committed as f64),
            "updates_per_s": self.per_second(updates as f64),
            "stopped": self.stopped,
        });
        outln!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_numbers_never_wrap() {
        assert_eq!(block_span(0, 3).ok(), Some((1, 3)));
        assert_eq!(block_span(u64::MAX - 2, 2).ok(), Some((u64::MAX - 1, u64::MAX)));
        assert!(block_span(u64::MAX - 2, 3).is_err());
        assert!(block_span(u64::MAX, 1).is_err());
    }
}
