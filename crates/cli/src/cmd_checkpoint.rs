//! `arbor checkpoint create|verify|serve|push|list|restore`: verifiable chunked
//! checkpoints (the `checkpoint` crate). Create and restore show progress; every command
//! ends with a summary (`--json` for machines); restore stops cleanly on Ctrl-C or SIGTERM
//! and resumes when run again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use checkpoint::{
    BoundaryRule, CheckpointDir, CreateOptions, FetchOptions, RestoreOptions, SourceOptions,
    Trusted,
};
use clap::{Args, Subcommand};
use state::H256;

use crate::db_args::{open_or_create_with, open_reading, DbArgs};
use crate::limits;

/// `arbor checkpoint …`.
#[derive(Debug, Args)]
pub(crate) struct CheckpointArgs {
    #[command(subcommand)]
    command: CheckpointCommand,
}

#[derive(Debug, Subcommand)]
enum CheckpointCommand {
    /// Cut the database's persisted state into verifiable chunks and a manifest.
    Create(CreateArgs),
    /// Verify a whole checkpoint against a trusted block and root, without a database.
    Verify(VerifyArgs),
    /// Serve a checkpoint directory over HTTP until Ctrl-C.
    Serve(ServeArgs),
    /// Upload a checkpoint to an S3-compatible bucket (chunks first, the manifest last).
    Push(PushArgs),
    /// List the checkpoints a source offers.
    List(ListArgs),
    /// Restore a checkpoint from untrusted sources into an empty database (resumable).
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
struct CreateArgs {
    #[command(flatten)]
    db: DbArgs,
    /// The checkpoint directory (created if absent; chunks already there are kept).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Worker threads; 1 to 256 (the bytes do not depend on it).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = limits::usize_in(1, checkpoint::THREADS_MAX))]
    threads: usize,
    /// Expected entries per chunk; 1 to 16,777,216.
    #[arg(long, value_name = "N", default_value_t = 8192, value_parser = limits::u64_in(1, u64::from(BoundaryRule::TARGET_ENTRIES_MAX)))]
    target_entries: u64,
    /// Entry bytes after which a chunk is cut; 4096 to 16,777,216 (units allowed: 4MiB). A
    /// larger entry (values go up to 16 MiB) gets a chunk of its own.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20, value_parser = limits::size_in(u64::from(BoundaryRule::MAX_BYTES_MIN), u64::from(BoundaryRule::MAX_BYTES_MAX)))]
    max_chunk_bytes: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// The trusted input of verify and restore.
#[derive(Debug, Args)]
struct TrustedArgs {
    /// The trusted block number.
    #[arg(long, value_name = "N")]
    block: u64,
    /// The trusted state root at that block (32 bytes hex).
    #[arg(long, value_name = "0x…", value_parser = crate::input::parse_h256)]
    root: H256,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// Where the checkpoint is: a directory, http://… or s3://bucket[/prefix].
    #[arg(long, value_name = "URL")]
    source: String,
    #[command(flatten)]
    trusted: TrustedArgs,
    /// Per-request timeout in milliseconds; 1 to 3,600,000.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = limits::u64_in(1, 3_600_000))]
    timeout_ms: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The checkpoint directory.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Address to listen on (an IP socket address).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8600")]
    listen: std::net::SocketAddr,
    /// Handler threads; 1 to 64.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = limits::usize_in(1, 64))]
    threads: usize,
    /// Print a JSON line when listening ({"url", "dir"}) and one when stopped
    /// ({"requests"}) instead of the text lines.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct PushArgs {
    /// The checkpoint directory.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The checkpoint id (64 hex digits) [default: the newest in the directory].
    #[arg(long, value_name = "ID", value_parser = crate::input::parse_h256)]
    id: Option<H256>,
    /// The bucket: s3://bucket[/prefix] (endpoint and credentials from AWS_* variables).
    #[arg(long, value_name = "URL")]
    to: String,
    /// Per-request timeout in milliseconds; 1 to 3,600,000.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = limits::u64_in(1, 3_600_000))]
    timeout_ms: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// A directory, http://… or s3://bucket[/prefix].
    #[arg(long, value_name = "URL")]
    source: String,
    /// Per-request timeout in milliseconds; 1 to 3,600,000.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = limits::u64_in(1, 3_600_000))]
    timeout_ms: u64,
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RestoreArgs {
    #[command(flatten)]
    db: DbArgs,
    #[command(flatten)]
    trusted: TrustedArgs,
    /// A source (repeat for several): a directory, http://… or s3://bucket[/prefix]; 1 to 64.
    #[arg(long = "source", value_name = "URL", required = true, num_args = 1)]
    sources: Vec<String>,
    /// Write the report (what every source served, which were excluded and why) as JSON.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Chunks fetched and verified at once; 1 to 64.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = limits::usize_in(1, checkpoint::WORKERS_MAX))]
    workers: usize,
    /// Per-chunk timeout in milliseconds; 1 to 3,600,000.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = limits::u64_in(1, 3_600_000))]
    timeout_ms: u64,
    /// Where chunks wait for their accounts [default: restore-staging inside the database
    /// directory].
    #[arg(long, value_name = "DIR")]
    staging: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// Whether `path` (existing or not) is `dir` or lies under it, however spelled: its
/// nearest existing ancestor is resolved and compared with the resolved `dir`.
fn inside(path: &Path, dir: &Path) -> bool {
    let (Ok(dir), Ok(path)) = (std::fs::canonicalize(dir), std::path::absolute(path)) else {
        return false;
    };
    let existing = path.ancestors().find_map(|p| std::fs::canonicalize(p).ok());
    existing.is_some_and(|p| p.starts_with(&dir))
}

/// Most sources a restore takes.
const SOURCES_MAX: usize = 64;

/// Open `--source addr`: an address of no supported kind is a usage error.
fn open_source(
    addr: &str,
    opts: &checkpoint::SourceOptions,
) -> Result<Box<dyn checkpoint::Source>> {
    checkpoint::open_source(addr, opts).map_err(|e| match e {
        checkpoint::SourceError::Url(_) => crate::usage(format!("--source {addr}: {e}")),
        e => anyhow::Error::new(e).context(format!("--source {addr}")),
    })
}

/// Run `arbor checkpoint …`.
pub(crate) fn run(args: &CheckpointArgs) -> Result<ExitCode> {
    match &args.command {
        CheckpointCommand::Create(a) => create(a),
        CheckpointCommand::Verify(a) => verify(a),
        CheckpointCommand::Serve(a) => serve(a),
        CheckpointCommand::Push(a) => push(a),
        CheckpointCommand::List(a) => list(a),
        CheckpointCommand::Restore(a) => restore(a),
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?)
}

#[derive(serde::Serialize)]
struct CreateSummary {
    id: String,
    block: u64,
    root: String,
    chunks: usize,
    chunks_written: usize,
    entries: u64,
    /// Contract codes, in `code_chunks` of the `chunks`.
    codes: u64,
    code_chunks: usize,
    chunk_bytes: u64,
    flat_bytes: u64,
    threads: usize,
    elapsed_s: f64,
    dir: String,
}

fn create(a: &CreateArgs) -> Result<ExitCode> {
    let db = open_reading(&a.db)?;
    if inside(&a.out, &a.db.db) {
        return Err(crate::usage(format!(
            "--out {} is inside the database {}; name a directory outside it",
            a.out.display(),
            a.db.db.display()
        )));
    }
    let handle = db.read_handle()?;
    let state = handle.persisted()?;
    let opts = CreateOptions {
        rule: BoundaryRule {
            target_entries: u32::try_from(a.target_entries).unwrap_or(u32::MAX),
            max_bytes: u32::try_from(a.max_chunk_bytes).unwrap_or(u32::MAX),
        },
        threads: a.threads,
    };
    let out = CheckpointDir::new(&a.out);
    let done = AtomicU64::new(0);
    // RocksDB's estimate of the flat entries: the ETA is as good as it is.
    let estimate = crate::progress::flat_entries_estimate(&db);
    let pb = crate::progress::counter(!a.json, Some(estimate), "creating", "entries");
    let created = crate::progress::polled(
        &pb,
        || done.load(Ordering::Relaxed),
        || checkpoint::create(&state, &opts, &out, &done),
    )?;
    pb.finish_and_clear();
    let m = &created.manifest;
    let summary = CreateSummary {
        id: hex::encode(created.id.0),
        block: m.block,
        root: format!("{}", m.root),
        chunks: m.chunk_count(),
        chunks_written: created.chunks_written,
        entries: m.entries,
        codes: m.code.entries,
        code_chunks: m.code.chunks.len(),
        chunk_bytes: m.chunk_bytes + m.code.chunk_bytes,
        flat_bytes: m.flat_bytes,
        threads: a.threads,
        elapsed_s: created.elapsed.as_secs_f64(),
        dir: a.out.display().to_string(),
    };
    if a.json {
        print_json(&summary)?;
    } else {
        outln!("checkpoint {}", summary.id)?;
        outln!(
            "  block {} root {}\n  {} chunks ({} new), {} entries, {} codes, {} ({} of flat state)\n  {:.2} s with {} threads, in {}",
            summary.block,
            summary.root,
            summary.chunks,
            summary.chunks_written,
            summary.entries,
            summary.codes,
            crate::output::human_bytes(summary.chunk_bytes),
            crate::output::human_bytes(summary.flat_bytes),
            summary.elapsed_s,
            summary.threads,
            summary.dir
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn source_opts(timeout_ms: u64) -> SourceOptions {
    SourceOptions { timeout: Duration::from_millis(timeout_ms) }
}

fn verify(a: &VerifyArgs) -> Result<ExitCode> {
    let source = open_source(&a.source, &source_opts(a.timeout_ms))?;
    let trusted = Trusted { block: a.trusted.block, root: a.trusted.root };
    let sources = [source];
    let mut reports = vec![checkpoint::SourceReport::default()];
    // No handler: Ctrl-C ends the command at once, as during the verification.
    let stop = std::sync::atomic::AtomicBool::new(false);
    // The manifests a restore would consider from this source (the same bounds and
    // checks), in its order.
    let candidates = match checkpoint::find_manifests(trusted, &sources, &stop, &mut reports) {
        Ok(found) => found,
        // The source was asked and answered: a negative verdict on it.
        Err(checkpoint::FetchError::NoCheckpoint { refused, .. }) => {
            return Err(crate::rejected(&anyhow::anyhow!(
                "{} offers no checkpoint of block {} with root {}{refused}",
                a.source,
                trusted.block,
                trusted.root,
            )));
        }
        // It could not be read, or the run was stopped: could not run.
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    let [source] = sources;
    let t0 = Instant::now();
    let (id, result) = verify_candidates(source.as_ref(), &candidates, trusted, a.json)?;
    let elapsed_s = t0.elapsed().as_secs_f64();
    match result {
        Ok(s) => {
            if a.json {
                print_json(&serde_json::json!({
                    "valid": true,
                    "reason": null,
                    "checkpoint": hex::encode(id.0),
                    "layout": s.layout,
                    "block": s.block,
                    "root": s.root,
                    "chunks": s.chunks,
                    "entries": s.entries,
                    "storage_tries": s.storage_tries,
                    "codes": s.codes,
                    "bytes": s.bytes,
                    "elapsed_s": elapsed_s,
                }))?;
            } else {
                outln!(
                    "valid {} block {} root {}: {} chunks, {} entries, {} storage tries, {} codes, {} in {:.2} s",
                    hex::encode(id.0),
                    s.block,
                    s.root,
                    s.chunks,
                    s.entries,
                    s.storage_tries,
                    s.codes,
                    crate::output::human_bytes(s.bytes),
                    elapsed_s
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if a.json => {
            print_json(&serde_json::json!({
                "valid": false,
                "reason": e.to_string(),
                "checkpoint": hex::encode(id.0),
                "block": trusted.block,
                "root": trusted.root.to_string(),
                "elapsed_s": elapsed_s,
            }))?;
            Ok(crate::negative())
        }
        Err(e) => {
            outln!("invalid {}: {e}", hex::encode(id.0))?;
            Ok(crate::negative())
        }
    }
}

/// Candidate manifests `verify` checks at most: one that verifies is found behind forged
/// ones (which tie with it, one source giving each one vote, and may sort first).
const VERIFY_CANDIDATES_MAX: usize = 16;

/// Verify the candidates in order until one is valid: that one's id and summary, else the
/// first candidate's id and failure. A source that stops answering ends it (exit 3).
fn verify_candidates(
    source: &dyn checkpoint::Source,
    candidates: &[checkpoint::OfferedManifest],
    trusted: Trusted,
    json: bool,
) -> Result<(H256, Result<checkpoint::VerifySummary, checkpoint::VerifyError>)> {
    let mut first_failure = None;
    for c in candidates.iter().take(VERIFY_CANDIDATES_MAX) {
        let chunks = checkpoint::Manifest::decode(&c.bytes)?.chunk_count() as u64;
        let pb = crate::progress::counter(!json, Some(chunks), "verifying", "chunks");
        // The bytes the choice fetched and checked: not asked for again.
        let result = checkpoint::verify_manifest(source, &c.id, &c.bytes, trusted, &|n| {
            pb.set_position(n as u64)
        });
        pb.finish_and_clear();
        match result {
            Ok(s) => return Ok((c.id, Ok(s))),
            // A source that stops answering says nothing about the checkpoint: exit 3.
            Err(e @ checkpoint::VerifyError::Source { .. }) if unreachable(&e) => {
                return Err(
                    anyhow::Error::new(e).context(format!("cannot verify {}", hex::encode(c.id.0)))
                );
            }
            Err(e) => {
                first_failure.get_or_insert((c.id, e));
            }
        }
    }
    let (id, e) = first_failure.expect("find_manifests returns at least one candidate");
    Ok((id, Err(e)))
}

/// Whether a verification failed because the source could not be read (timeout, I/O, a
/// server error) rather than because what it served is wrong or missing.
fn unreachable(e: &checkpoint::VerifyError) -> bool {
    match e {
        checkpoint::VerifyError::Source { source, .. } => source.is_unreachable(),
        _ => false,
    }
}

fn serve(a: &ServeArgs) -> Result<ExitCode> {
    if !a.dir.is_dir() {
        bail!("{} is not a directory", a.dir.display());
    }
    let stop = crate::signals::stop_flag()?;
    let listen = a.listen.to_string();
    let server = checkpoint::HttpServer::start(CheckpointDir::new(&a.dir), &listen, a.threads)?;
    let url = format!("http://{}", server.addr());
    if a.json {
        outln!("{}", serde_json::json!({ "url": url, "dir": a.dir.display().to_string() }))?;
    } else {
        outln!("serving {} on {url}", a.dir.display())?;
    }
    // Scripts wait for that line: it must not sit in a pipe's buffer.
    std::io::Write::flush(&mut std::io::stdout()).map_err(crate::stdout_failed)?;
    while !stop.load(Ordering::SeqCst) && !server.failed() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let n = server.requests();
    let failed = server.failed();
    server.shutdown();
    if failed {
        // The listener is gone (say, out of file descriptors): a server that accepts
        // nothing must not look alive to its supervisor.
        anyhow::bail!("the listener on {url} failed after {n} requests; stopped");
    }
    if a.json {
        outln!("{}", serde_json::json!({ "requests": n }))?;
    } else {
        errln!("stopped after {n} requests");
    }
    Ok(ExitCode::SUCCESS)
}

fn push(a: &PushArgs) -> Result<ExitCode> {
    let Some(rest) = a.to.strip_prefix("s3://") else {
        return Err(crate::usage(format!("--to {:?}: expected s3://bucket[/prefix]", a.to)));
    };
    let dir = CheckpointDir::new(&a.dir);
    let id = match a.id {
        Some(id) => id,
        None => match dir.list()?.last() {
            Some((id, _)) => *id,
            None => bail!("{} holds no checkpoint", a.dir.display()),
        },
    };
    let store =
        checkpoint::S3Store::from_env(rest, Duration::from_millis(a.timeout_ms)).map_err(|e| {
            match e {
                checkpoint::SourceError::Url(_) => crate::usage(format!("--to {}: {e}", a.to)),
                e => anyhow::Error::new(e).context(format!("--to {}", a.to)),
            }
        })?;
    let pb = crate::progress::counter(!a.json, None, "pushing", "chunks");
    let t0 = Instant::now();
    let report = store.push(&dir, &id, &|n| pb.set_position(n as u64))?;
    pb.finish_and_clear();
    if a.json {
        print_json(&report)?;
    } else {
        outln!(
            "pushed {} to {}: {} of {} chunks uploaded, manifest {}, {} in {:.2} s",
            hex::encode(id.0),
            a.to,
            report.uploaded,
            report.chunks,
            if report.manifest_uploaded { "uploaded" } else { "already there" },
            crate::output::human_bytes(report.uploaded_bytes),
            t0.elapsed().as_secs_f64()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn list(a: &ListArgs) -> Result<ExitCode> {
    let source = open_source(&a.source, &source_opts(a.timeout_ms))?;
    let mut out = Vec::new();
    for id in source.ids().with_context(|| format!("cannot list {}", a.source))? {
        let m = source
            .manifest(&id)
            .ok()
            .filter(|b| trie::keccak256(b) == id)
            .and_then(|b| checkpoint::Manifest::decode(&b).ok());
        match m {
            Some(m) => out.push(checkpoint::Listed::new(&id, &m)),
            None => errln!("warning: manifest {id} is unreadable or damaged; skipped"),
        }
    }
    out.sort_by_key(|l| l.block);
    if a.json {
        print_json(&out)?;
    } else if out.is_empty() {
        outln!("no checkpoints")?;
    } else {
        for l in &out {
            outln!(
                "{} block {} root {} {} chunks {} codes {} {} {}",
                l.id,
                l.block,
                l.root,
                l.chunks,
                l.codes,
                crate::output::human_bytes(l.bytes),
                l.layout,
                l.chunk_hash
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn restore(a: &RestoreArgs) -> Result<ExitCode> {
    if a.sources.len() > SOURCES_MAX {
        return Err(crate::usage(format!("at most {SOURCES_MAX} --source flags")));
    }
    if let Some(r) = &a.report {
        crate::output::check(&[crate::output::Output { flag: "--report", path: r }], true)?;
    }
    let opts = source_opts(a.timeout_ms);
    let sources = a.sources.iter().map(|s| open_source(s, &opts)).collect::<Result<Vec<_>>>()?;
    let trusted = Trusted { block: a.trusted.block, root: a.trusted.root };
    // Read before the handler is installed, so that Ctrl-C still ends a read that blocks.
    let config = crate::db_args::load_config(a.db.config.as_deref())?;
    let stop = crate::signals::stop_flag()?;
    let (mut db, candidates) = open_for_restore(&a.db, config, trusted, &sources, &stop)?;
    let staging = match &a.staging {
        Some(dir) => RestoreOptions::new(dir),
        None => RestoreOptions::in_database(&a.db.db),
    };
    // The chunk count is known once the manifest is: the length is set from the progress.
    let pb = crate::progress::counter(!a.json, Some(0), "restoring", "chunks");
    let t0 = Instant::now();
    let fetch = FetchOptions { workers: a.workers, ..FetchOptions::default() };
    let progress = |p: checkpoint::FetchProgress| {
        pb.set_length(p.total as u64);
        pb.set_position(p.restored as u64);
        let rate = p.bytes as f64 / t0.elapsed().as_secs_f64().max(1e-9);
        pb.set_message(format!("· {}/s", crate::output::human_bytes(rate as u64)));
    };
    let (report, result) = match candidates {
        Some(c) => c.restore(&mut db, &staging, &fetch, &stop, &progress),
        // `restore_from_sources` finds the database restored before it asks a source.
        None => checkpoint::restore_from_sources(
            &mut db, trusted, &sources, &staging, &fetch, &stop, &progress,
        ),
    };
    pb.finish_and_clear();
    if let Some(path) = &a.report {
        let bytes = serde_json::to_vec_pretty(&report)?;
        std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if a.json {
        print_json(&report)?;
    } else if report.outcome != checkpoint::ALREADY_RESTORED {
        print_restore(&report)?;
    }
    let head = (db.head_number(), db.head_root());
    db.close().context("cannot close the database")?;
    restore_exit(a.json, &report, result, head)
}

/// The database to restore into, and the checkpoints the sources offer (`None`: a completed
/// restore run again, which asks no source). An existing database keeps its layout (a
/// checkpoint of another one is refused); a new one is created in the layout of the
/// checkpoint the restore takes, so the sources are asked for their manifests first.
fn open_for_restore<'s>(
    args: &DbArgs,
    config: store::StoreConfig,
    trusted: Trusted,
    sources: &'s [Box<dyn checkpoint::Source>],
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(store::StateDb, Option<checkpoint::Candidates<'s>>)> {
    let dir = &args.db;
    if dir.join("CURRENT").is_file() && !store::creation_unfinished(dir) {
        let db = open_or_create_with(args, config, None)?;
        if checkpoint::already_restored(&db, trusted, sources).is_some() {
            return Ok((db, None));
        }
        let candidates = checkpoint::find_candidates(trusted, sources, stop);
        return Ok((db, Some(candidates)));
    }
    let candidates = checkpoint::find_candidates(trusted, sources, stop);
    Ok((open_or_create_with(args, config, candidates.layout())?, Some(candidates)))
}

/// The exit of a restore that ended with `result` at `head`: its last line, or the error in
/// its class.
fn restore_exit(
    json: bool,
    report: &checkpoint::RestoreReport,
    result: Result<Trusted, checkpoint::FetchError>,
    head: (u64, H256),
) -> Result<ExitCode> {
    match result {
        Ok(t) => {
            let already = report.outcome == checkpoint::ALREADY_RESTORED;
            if !json && already {
                outln!("already restored: block {} root {}; nothing to do", t.block, t.root)?;
            } else if !json {
                outln!("restored block {} root {} (head {} {})", t.block, t.root, head.0, head.1)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        // Every source answered and none offers the trusted checkpoint: a negative verdict
        // on them (as `checkpoint verify`); one that could not be read is `Unreachable`.
        Err(e @ checkpoint::FetchError::NoCheckpoint { .. }) => {
            Err(crate::rejected(&anyhow::Error::new(e)))
        }
        // Every checkpoint tried proved bad and was abandoned (the database is left empty,
        // for a restore from other sources): a verdict on what the sources offer.
        Err(e @ checkpoint::FetchError::BadCheckpoint { .. }) => {
            Err(crate::rejected(&anyhow::Error::new(e)))
        }
        // The database holds tries of another layout than every checkpoint offered: the
        // command line named the wrong database (as opening it with another layout is).
        Err(e @ checkpoint::FetchError::Restore(checkpoint::RestoreError::Layout { .. })) => {
            Err(crate::usage(e.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

fn print_restore(r: &checkpoint::RestoreReport) -> Result<()> {
    outln!(
        "checkpoint {} block {}: {} chunks, {} already restored, {} fetched ({}), {} entries written, {:.2} s: {}",
        if r.checkpoint.is_empty() { "-" } else { &r.checkpoint },
        r.block,
        r.chunks,
        r.resumed_chunks,
        r.fetched_chunks,
        crate::output::human_bytes(r.fetched_bytes),
        r.entries_restored,
        r.elapsed_s,
        r.outcome
    )?;
    for a in &r.abandoned {
        outln!("  abandoned checkpoint {a}")?;
    }
    for s in &r.sources {
        outln!(
            "  {}: {} chunks served, {} bad, {} timeouts, {} errors{}{}{}",
            s.source,
            s.chunks_served,
            s.bad_chunks,
            s.timeouts,
            s.errors,
            s.excluded.as_ref().map(|e| format!(" — excluded: {e}")).unwrap_or_default(),
            match s.readmitted {
                0 => String::new(),
                n => format!(" (admitted again {n}x)"),
            },
            match s.bad_checkpoints.as_slice() {
                [] => String::new(),
                ids => format!(" — offered bad checkpoint {}", ids.join(", ")),
            }
        )?;
    }
    Ok(())
}
