//! `arbor gen-chain` (a genesis and random transfer blocks carrying their post-state roots)
//! and `arbor import` (the import road: `chain::import`, resumable, stopping at a block
//! boundary on Ctrl-C or SIGTERM).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use std::sync::atomic::AtomicBool;

use chain::{
    ChainFileError, ChainHeader, ChainParams, ChainReader, ImportConfig, ImportError, ImportStats,
    Imported,
};
use clap::Args;
use state::TrieId;
use store::StateDb;

use crate::auto_checkpoint::AutoCheckpoint;
use crate::cmd_eth_chain::{gen_eth_chain, EthChainParams};
use crate::db_args::{open_for_load, DbArgs};
use crate::limits;

/// Arguments of `arbor gen-chain`.
#[derive(Debug, Args)]
pub(crate) struct GenChainArgs {
    /// Funded genesis accounts; 2 to 10,000,000 (with --evm at most 2,000,000; default
    /// 1,000).
    #[arg(long, value_name = "N", value_parser = limits::u64_in(2, limits::CHAIN_ACCOUNTS_MAX), required_unless_present = "evm")]
    accounts: Option<u64>,
    /// Blocks after genesis; 1 to 100,000 (with --evm default 100).
    #[arg(long, value_name = "K", value_parser = limits::u64_in(1, limits::CHAIN_BLOCKS_MAX), required_unless_present = "evm")]
    blocks: Option<u64>,
    /// Transfers per block of a transfer chain; 1 to 100,000.
    #[arg(long, value_name = "T", value_parser = limits::u64_in(1, limits::CHAIN_TRANSFERS_MAX), required_unless_present = "evm", conflicts_with = "evm")]
    transfers: Option<u64>,
    /// Write a chain of real Ethereum blocks instead (Shanghai; ETH and ERC-20 transfers,
    /// deployments, self-destructs): --out names a directory, which gets `genesis.json`
    /// (geth's format) and `blocks.rlp` (concatenated RLP blocks, as `geth export` writes).
    #[arg(long)]
    evm: bool,
    /// Transactions per block of an Ethereum chain (--evm), after the block's first call;
    /// 1 to 10,000 [default: 100].
    #[arg(long, value_name = "N", value_parser = limits::u64_in(1, limits::EVM_CHAIN_TXS_MAX), requires = "evm")]
    txs_per_block: Option<u64>,
    /// Seed of the random transfers (any 64-bit unsigned integer).
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// The chain file to write (must not exist unless --force); with --evm, the directory
    /// to write its two files into (created if missing).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Overwrite an existing output file.
    #[arg(long)]
    force: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Arguments of `arbor import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    #[command(flatten)]
    pub(crate) db: DbArgs,
    /// The chain file: an Arbor chain file (`arbor gen-chain`), or a file of concatenated
    /// RLP Ethereum blocks (`geth export`, `arbor gen-chain --evm`), told apart by its
    /// first bytes.
    #[arg(long, value_name = "FILE")]
    pub(crate) chain: PathBuf,
    /// The geth genesis file (its `config` and `alloc`) of a chain of RLP Ethereum blocks.
    #[arg(long, value_name = "GENESIS.json")]
    pub(crate) genesis: Option<PathBuf>,
    /// Execute and commit one block after the other instead of overlapping them.
    #[arg(long)]
    no_pipeline: bool,
    /// Block-STM workers per block; 1 to 64 [default: cores - 1 pipelined, else cores];
    /// an Ethereum chain (RLP) executes in order, on one.
    #[arg(long, value_name = "W", value_parser = limits::usize_in(1, 64))]
    pub(crate) exec_workers: Option<usize>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Serve Prometheus metrics on ADDR (e.g. 127.0.0.1:9100) while importing.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<std::net::SocketAddr>,
}

/// Run `arbor gen-chain`.
pub(crate) fn gen_chain(args: &GenChainArgs) -> Result<ExitCode> {
    if args.evm {
        let params = EthChainParams {
            accounts: args.accounts.unwrap_or(1_000),
            blocks: args.blocks.unwrap_or(100),
            txs_per_block: args.txs_per_block.unwrap_or(100),
            seed: args.seed,
        };
        return gen_eth_chain(&args.out, &params, args.force, args.json);
    }
    // clap requires the three without --evm.
    let (Some(accounts), Some(blocks), Some(transfers)) =
        (args.accounts, args.blocks, args.transfers)
    else {
        return Err(crate::usage("a transfer chain needs --accounts, --blocks and --transfers"));
    };
    // An existing file (without --force), a directory or a missing directory: usage errors.
    let out = crate::output::Output { flag: "--out", path: &args.out };
    let target = crate::output::check(&[out], args.force)?.remove(0);
    let tmp = tempfile::Builder::new().prefix("arbor-gen-chain-").tempdir()?;
    let mut db = StateDb::open(tmp.path(), store::StoreConfig::default())?;
    // Staged under a fresh name beside the output (created exclusively), then moved.
    let dir = target.parent().unwrap_or(Path::new("/"));
    let staged = tempfile::Builder::new()
        .prefix(".arbor-gen-chain-")
        .suffix(".partial")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    let mut w = BufWriter::new(staged.as_file());
    let params = ChainParams { accounts, blocks, transfers, seed: args.seed };
    let pb = crate::progress::counter(!args.json, Some(blocks), "generating", "blocks");
    let start = Instant::now();
    let mut wrote_header = false;
    let mut txs = 0u64;
    let header = chain::generate(&mut db, &params, &mut |h: &ChainHeader, b| {
        if !wrote_header {
            chain::write_header(&mut w, h)?;
            wrote_header = true;
        }
        txs += b.transfers.len() as u64;
        pb.inc(1);
        chain::write_block(&mut w, &b)
    })
    .context("cannot generate the chain")?;
    if !wrote_header {
        chain::write_header(&mut w, &header)?;
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    crate::output::place(out, staged, &target, args.force)?;
    pb.finish_and_clear();
    let (head, root) = (db.head_number(), db.head_root());
    db.close()?;
    if args.json {
        let v = serde_json::json!({
            "path": args.out.display().to_string(),
            "accounts": accounts,
            "genesis_root": header.genesis_root.to_string(),
            "blocks": blocks,
            "transactions": txs,
            "block": head,
            "root": root.to_string(),
            "elapsed_s": start.elapsed().as_secs_f64(),
        });
        outln!("{v}")?;
    }
    errln!(
        "wrote {}: genesis of {} accounts ({}), {} blocks, {txs} transfers in {:.2} s; head {head} {root}",
        args.out.display(),
        accounts,
        header.genesis_root,
        blocks,
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Open a chain file: a header that does not decode is a negative verdict (exit 1).
fn open_chain(path: &Path) -> Result<ChainReader<File>> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    ChainReader::new(f).map_err(|e| {
        let invalid = !matches!(e, ChainFileError::Io(_));
        let e = anyhow::Error::new(e).context(format!("cannot read {}", path.display()));
        if invalid {
            crate::rejected(&e)
        } else {
            e
        }
    })
}

/// Whether an import error is a verdict on the chain (exit 1) rather than a failure to
/// run: an invalid or undecodable block, another chain's blocks.
fn rejects_chain(e: &ImportError) -> bool {
    match e {
        ImportError::Invalid { .. }
        | ImportError::OtherChain { .. }
        | ImportError::HeadPastChain { .. } => true,
        ImportError::Source(e) => !matches!(e, ChainFileError::Io(_)),
        _ => false,
    }
}

/// The bulk-load label of a chain's genesis.
fn chain_label(header: &ChainHeader) -> String {
    format!("chain genesis {}", header.genesis_root)
}

/// An empty database gets the chain's genesis (checked against the header's root; the
/// entries `checked`, if the caller has them); one at block 0 must hold that genesis.
fn init_genesis(
    db: &mut StateDb,
    header: &ChainHeader,
    checked: Option<Vec<(Vec<u8>, Vec<u8>)>>,
) -> Result<()> {
    if db.unfinished_bulk_load().is_some() || db.is_empty()? {
        let entries = match checked {
            Some(entries) => entries,
            None => checked_genesis(header)?,
        };
        let entries = entries.into_iter().map(|(k, v)| (TrieId::Main, k, v));
        let label = chain_label(header);
        db.bulk_load(&label, entries).context("cannot load the chain's genesis")?;
    }
    if db.head_number() == 0 && db.head_root() != header.genesis_root {
        return Err(crate::rejected(&anyhow::anyhow!(
            "the database's genesis root {} is not the chain's {}: it holds another chain",
            db.head_root(),
            header.genesis_root
        )));
    }
    Ok(())
}

/// The chain's genesis entries, sorted, once their root is the header's: a damaged or
/// forged header is refused before anything is written to the database.
fn checked_genesis(header: &ChainHeader) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut entries = header.genesis_entries();
    entries.sort_unstable();
    let (root, _) = trie::parallel_root::<trie::EthLayout, _, _>(&entries)
        .context("cannot compute the chain's genesis root")?;
    if root != header.genesis_root {
        return Err(crate::rejected(&anyhow::anyhow!(
            "the chain file's genesis ({} accounts) has root {root}, not the {} its header \
             names: the file is damaged or forged; nothing was written",
            header.accounts,
            header.genesis_root
        )));
    }
    Ok(entries)
}

/// The workers `--exec-workers` asks for, or the default for the mode.
fn exec_workers(requested: Option<usize>, pipelined: bool) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Pipelined, the committer keeps a core: the library's default.
    requested.unwrap_or(if pipelined { ImportConfig::default().exec_workers } else { cores })
}

/// `arbor import` of an Arbor chain file.
pub(crate) fn import_arbor(args: &ImportArgs, stop: &AtomicBool) -> Result<ExitCode> {
    let chain = open_chain(&args.chain)?;
    let listener = crate::metrics::bind(args.metrics.as_ref())?;
    // A database to create: a forged header is refused before anything is written.
    let dir = &args.db.db;
    let exists = dir.join("CURRENT").is_file() && !store::creation_unfinished(dir);
    let genesis = if exists { None } else { Some(checked_genesis(chain.header())?) };
    let mut db = open_for_load(&args.db, None, &chain_label(chain.header()))?;
    init_genesis(&mut db, chain.header(), genesis)?;
    run_import(args, db, listener, stop, Workers::Flag, |db, config, stop, on_block| {
        chain::import(db, chain, config, stop, on_block)
    })
}

/// How many execution workers an import's executor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workers {
    /// As `--exec-workers` asks, or the mode's default (the transfer runtime).
    Flag,
    /// One: the executor runs a block's transactions in order (the EVM).
    One,
}

impl Workers {
    /// The count for `--exec-workers`'s `requested` value in the mode.
    fn count(self, requested: Option<usize>, pipelined: bool) -> usize {
        match self {
            Workers::Flag => exec_workers(requested, pipelined),
            Workers::One => 1,
        }
    }
}

/// Run `road` on `db` (its genesis in place) as `arbor import` does: progress, metrics,
/// automatic checkpoints, the summary, the exit code.
pub(crate) fn run_import(
    args: &ImportArgs,
    mut db: StateDb,
    listener: Option<crate::metrics::Listener>,
    stop: &AtomicBool,
    workers: Workers,
    road: impl FnOnce(
        &mut StateDb,
        &ImportConfig,
        &AtomicBool,
        &mut dyn FnMut(Imported),
    ) -> (ImportStats, Result<(), ImportError>),
) -> Result<ExitCode> {
    let pipelined = !args.no_pipeline;
    let config = ImportConfig {
        pipelined,
        exec_workers: workers.count(args.exec_workers, pipelined),
        queue_blocks: 1,
    };
    // The chain file does not say how many blocks it holds: a rate, no ETA.
    let pb = crate::progress::counter(!args.json, None, "importing", "blocks");
    let first = db.head_number();
    let cpu0 = bench::cpu_seconds().unwrap_or(0.0);
    let start = Instant::now();
    let mut txs = 0u64;
    let mut auto = AutoCheckpoint::new(&args.db.db, db.config());
    let handle = db.read_handle()?;
    let mut auto_error = None;
    let endpoint = match listener {
        Some(l) => Some(crate::metrics::serve(l, handle.clone())?),
        None => None,
    };
    let (stats, result) = road(&mut db, &config, stop, &mut |b| {
        if let Some(e) = &endpoint {
            e.counters.block(b.number, b.transactions as u64, b.commit);
        }
        tracing::debug!(
            block = b.number,
            transactions = b.transactions,
            commit_ms = b.commit.as_secs_f64() * 1e3,
            "imported"
        );
        if let Some(a) = auto.as_mut().filter(|a| a.due(b.number)) {
            if let Err(e) = a.start(handle.clone()) {
                auto_error.get_or_insert(e);
            }
        }
        txs += b.transactions as u64;
        pb.set_position(b.number.saturating_sub(first));
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        pb.set_message(format!("· head {} · {:.0} tx/s", b.number, txs as f64 / secs));
    });
    pb.finish_and_clear();
    // The first failure is the one reported; the summary is printed whatever happened.
    let mut failure = match result {
        Ok(()) => None,
        Err(e) if rejects_chain(&e) => Some(crate::rejected(&anyhow::Error::new(e))),
        Err(e) => Some(anyhow::Error::new(e).context("import failed")),
    };
    if let Some(Err(e)) = auto.as_mut().map(|a| a.finish_running()) {
        failure.get_or_insert(e);
    }
    if let Some(e) = auto_error {
        failure.get_or_insert(e.context("automatic checkpoint failed"));
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = bench::cpu_seconds().unwrap_or(0.0) - cpu0;
    let (head, root) = (db.head_number(), db.head_root());
    if let Err(e) = db.close() {
        failure.get_or_insert(anyhow::Error::new(e).context("cannot close the database"));
    }
    let error = failure.as_ref().map(crate::error_line);
    report(args, &config, &stats, (seconds, cpu), (head, &root), error.as_deref())?;
    match failure {
        None => Ok(ExitCode::SUCCESS),
        Some(e) => Err(e),
    }
}

/// The summary on stdout: the JSON document (`error`: the failure's line, or null), or
/// the text line. A failure's `error:` line follows on stderr.
fn report(
    args: &ImportArgs,
    config: &ImportConfig,
    stats: &ImportStats,
    (seconds, cpu): (f64, f64),
    (head, root): (u64, &state::H256),
    error: Option<&str>,
) -> Result<()> {
    let per = |n: u64| if seconds > 0.0 { n as f64 / seconds } else { 0.0 };
    if args.json {
        let v = serde_json::json!({
            "blocks": stats.blocks,
            "transactions": stats.transactions,
            "skipped": stats.skipped,
            "elapsed_s": seconds,
            "cpu_s": cpu,
            "peak_rss_bytes": bench::peak_rss_bytes(),
            "blocks_per_s": per(stats.blocks),
            "transactions_per_s": per(stats.transactions),
            "gas_used": stats.gas_used,
            "mgas_per_s": per(stats.gas_used) / 1e6,
            "exec_s": stats.exec.as_secs_f64(),
            "commit_s": stats.commit.as_secs_f64(),
            "stalled_s": stats.stalled.as_secs_f64(),
            "flush_s": stats.flush.as_secs_f64(),
            "pipelined": config.pipelined,
            "exec_workers": config.exec_workers,
            "stopped": stats.stopped,
            "block": head,
            "root": root.to_string(),
            "error": error,
        });
        outln!("{v}")?;
    } else {
        outln!(
            "imported {} blocks ({} transactions, {} skipped) in {seconds:.2} s: {:.1} blocks/s, {:.0} tx/s; \
             execute {:.2} s, commit {:.2} s, stalled {:.2} s, flush {:.2} s; {}head {head} {root}",
            stats.blocks,
            stats.transactions,
            stats.skipped,
            per(stats.blocks),
            per(stats.transactions),
            stats.exec.as_secs_f64(),
            stats.commit.as_secs_f64(),
            stats.stalled.as_secs_f64(),
            stats.flush.as_secs_f64(),
            if stats.stopped { "stopped by signal; " } else { "" },
        )?;
    }
    std::io::stdout().flush().map_err(crate::stdout_failed)
}
