//! `arbor bench import`: the import road pipelined against unpipelined, on the same blocks,
//! each run an `arbor import` process on a fresh copy of one genesis database, rounds
//! interleaved. The executor is a choice ([`Executor`]): the transfer runtime on a chain of
//! `chain::generate` (a chain file carrying its genesis, the genesis database bulk-loaded
//! here), or the EVM on a chain of real Ethereum blocks from
//! `evm::generate::ChainGenerator` (a geth genesis file and an RLP block file, the genesis
//! database made by `arbor init --genesis`, which stores its header, and every run an
//! `arbor import --genesis`). The rows are the same for both; the EVM's add Mgas/s.

pub(crate) mod report;

use std::io::Write;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use chain::{Block, ChainHeader, ChainParams};
use evm::generate::{ChainGenerator, ChainSpec};
use state::TrieId;
use store::{StateDb, StoreConfig};

use crate::common::timing::{median_sorted, ratio, sorted};
use crate::import_bench::report::{ImportBenchReport, ImportRow};

/// Which executor the imported chain runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Executor {
    /// Arbor's transfer runtime (`arbor gen-chain` chains).
    Transfer,
    /// The EVM (`arbor gen-chain --evm` chains).
    Evm,
}

/// What `arbor bench import` measures.
#[derive(Debug, Clone)]
pub struct ImportBenchOpts {
    /// The executor the chain runs on.
    pub executor: Executor,
    /// Genesis accounts.
    pub accounts: u64,
    /// Blocks.
    pub blocks: u64,
    /// Transfers per block (transactions per block of an EVM chain).
    pub transfers: u64,
    /// Seed of the chain.
    pub seed: u64,
    /// Rounds (each runs every variant once).
    pub runs: usize,
    /// Execution worker counts to measure.
    pub workers: Vec<usize>,
}

struct Sample {
    secs: f64,
    cpu: f64,
    exec: f64,
    commit: f64,
    stalled: f64,
    flush: f64,
    rss: u64,
}

/// The chain every run imports and the genesis database each run copies.
struct Prepared {
    /// The arguments naming the chain (`--chain FILE`, and `--genesis FILE` for the EVM).
    chain_args: Vec<std::ffi::OsString>,
    /// The root every run must end at.
    last_root: state::H256,
    /// Transactions in all blocks.
    transactions: u64,
    /// Gas the blocks used (EVM chains only).
    gas_used: Option<u64>,
}

/// Run the benchmark: every import is its own `program import` process (the `arbor`
/// binary), on a fresh copy of the genesis database, so that each run's peak RSS and CPU
/// time are its own. `tick` is called once per run.
pub fn import_bench(
    opts: &ImportBenchOpts,
    program: &Path,
    tick: &dyn Fn(),
) -> Result<ImportBenchReport> {
    let tmp = tempfile::Builder::new().prefix("arbor-bench-import-").tempdir()?;
    let genesis = tmp.path().join("genesis");
    let prepared = match opts.executor {
        Executor::Transfer => prepare_transfer(tmp.path(), opts, &genesis)?,
        Executor::Evm => prepare_evm(tmp.path(), opts, program, &genesis)?,
    };
    let variants: Vec<(bool, usize)> =
        opts.workers.iter().flat_map(|&w| [(false, w), (true, w)]).collect();
    let mut samples: Vec<Vec<Sample>> = variants.iter().map(|_| Vec::new()).collect();
    for _ in 0..opts.runs {
        for (i, &(pipelined, workers)) in variants.iter().enumerate() {
            let run = tmp.path().join("run");
            copy_dir(&genesis, &run)?;
            let s = import_once(program, &run, &prepared, pipelined, workers)?;
            std::fs::remove_dir_all(&run)?;
            samples[i].push(s);
            tick();
        }
    }
    let rows = rows(&variants, &samples, opts.blocks, prepared.transactions, prepared.gas_used);
    Ok(ImportBenchReport {
        accounts: opts.accounts,
        blocks: opts.blocks,
        transactions: prepared.transactions,
        gas_used: prepared.gas_used,
        runs: opts.runs,
        rows,
    })
}

/// A transfer chain file under `dir` and its genesis bulk-loaded at `genesis`.
fn prepare_transfer(dir: &Path, opts: &ImportBenchOpts, genesis: &Path) -> Result<Prepared> {
    let chain_file = dir.join("bench.chain");
    let (header, blocks) = generate(&dir.join("gen"), opts, &chain_file)?;
    let mut db = StateDb::open(genesis, StoreConfig::default())?;
    let entries = header.genesis_entries().into_iter().map(|(k, v)| (TrieId::Main, k, v));
    db.bulk_load(&format!("chain genesis {}", header.genesis_root), entries)?;
    db.compact()?;
    db.close()?;
    Ok(Prepared {
        chain_args: vec!["--chain".into(), chain_file.into_os_string()],
        last_root: blocks.last().map_or(header.genesis_root, |b| b.state_root),
        transactions: blocks.iter().map(|b| b.transfers.len() as u64).sum(),
        gas_used: None,
    })
}

/// An EVM chain (geth genesis and RLP blocks) under `dir`, its genesis database made at
/// `genesis` by `program init --genesis`.
fn prepare_evm(
    dir: &Path,
    opts: &ImportBenchOpts,
    program: &Path,
    genesis: &Path,
) -> Result<Prepared> {
    let spec =
        ChainSpec { seed: opts.seed, accounts: opts.accounts, txs_per_block: opts.transfers };
    let mut generator = ChainGenerator::new(&spec).context("cannot make the EVM genesis")?;
    let genesis_file = dir.join("genesis.json");
    std::fs::write(&genesis_file, serde_json::to_vec(generator.genesis_json())?)?;
    let chain_file = dir.join("blocks.rlp");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&chain_file)?);
    let (mut transactions, mut gas) = (0u64, 0u64);
    let mut last_root = state::H256(generator.head().state_root.0);
    for _ in 0..opts.blocks {
        let block = generator.next_block().context("cannot generate the EVM chain")?;
        w.write_all(&block.rlp)?;
        transactions += block.transactions;
        gas += block.gas_used;
        last_root = block.state_root;
    }
    w.flush()?;
    drop(generator);
    let mut cmd = std::process::Command::new(program);
    cmd.arg("init").arg("--db").arg(genesis).arg("--genesis").arg(&genesis_file);
    let out = cmd.stdout(std::process::Stdio::null()).output().context("cannot run init")?;
    ensure!(
        out.status.success(),
        "init of the EVM genesis failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(Prepared {
        chain_args: vec![
            "--chain".into(),
            chain_file.into_os_string(),
            "--genesis".into(),
            genesis_file.into_os_string(),
        ],
        last_root,
        transactions,
        gas_used: Some(gas),
    })
}

fn generate(
    dir: &Path,
    opts: &ImportBenchOpts,
    chain_file: &Path,
) -> Result<(ChainHeader, Vec<Block>)> {
    let mut db = StateDb::open(dir, StoreConfig::default())?;
    let params = ChainParams {
        accounts: opts.accounts,
        blocks: opts.blocks,
        transfers: opts.transfers,
        seed: opts.seed,
    };
    let mut blocks = Vec::new();
    let header = chain::generate(&mut db, &params, &mut |_, b| {
        blocks.push(b);
        Ok(())
    })
    .context("cannot generate the chain")?;
    db.close()?;
    let mut w = std::io::BufWriter::new(std::fs::File::create(chain_file)?);
    chain::write_header(&mut w, &header)?;
    for b in &blocks {
        chain::write_block(&mut w, b)?;
    }
    w.flush()?;
    Ok((header, blocks))
}

fn import_once(
    program: &Path,
    dir: &Path,
    prepared: &Prepared,
    pipelined: bool,
    workers: usize,
) -> Result<Sample> {
    let mut cmd = std::process::Command::new(program);
    cmd.arg("import").arg("--db").arg(dir).args(&prepared.chain_args).arg("--json");
    cmd.arg("--exec-workers").arg(workers.to_string());
    if !pipelined {
        cmd.arg("--no-pipeline");
    }
    let out =
        cmd.stderr(std::process::Stdio::null()).output().context("cannot run the importer")?;
    ensure!(out.status.success(), "the import run failed ({})", out.status);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("the import printed no JSON report")?;
    let f = |name: &str| v[name].as_f64().with_context(|| format!("no {name} in the report"));
    ensure!(
        v["root"].as_str() == Some(prepared.last_root.to_string().as_str()),
        "the import ended at another root than the chain"
    );
    if let Some(gas) = prepared.gas_used {
        ensure!(v["gas_used"].as_u64() == Some(gas), "the import used other gas than the chain");
    }
    Ok(Sample {
        secs: f("elapsed_s")?,
        cpu: f("cpu_s")?,
        exec: f("exec_s")?,
        commit: f("commit_s")?,
        stalled: f("stalled_s")?,
        flush: f("flush_s")?,
        rss: f("peak_rss_bytes")? as u64,
    })
}

fn rows(
    variants: &[(bool, usize)],
    samples: &[Vec<Sample>],
    blocks: u64,
    transactions: u64,
    gas_used: Option<u64>,
) -> Vec<ImportRow> {
    let med = |v: Vec<f64>| median_sorted(&sorted(&v));
    variants
        .iter()
        .zip(samples)
        .enumerate()
        .map(|(i, (&(pipelined, exec_workers), s))| {
            let base = (pipelined && i > 0).then(|| &samples[i - 1]);
            let speedup =
                base.map(|b| med(b.iter().zip(s).map(|(u, p)| ratio(u.secs, p.secs)).collect()));
            // The most overlapping the stages can give: the cores over the cores the
            // unpipelined run kept busy (its CPU time spread over all of them).
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            let bound_of = |u: &Sample| cores / (u.cpu / u.secs.max(1e-9)).max(1e-9);
            let bound = base.map(|b| med(b.iter().map(bound_of).collect()));
            let of_bound = base.map(|b| {
                let each = b.iter().zip(s).map(|(u, p)| ratio(u.secs, p.secs) / bound_of(u));
                med(each.collect())
            });
            let peak = s.iter().map(|x| x.rss).max().unwrap_or(0);
            let rss_ratio =
                base.map(|b| ratio(peak as f64, b.iter().map(|x| x.rss).max().unwrap_or(0) as f64));
            let secs = med(s.iter().map(|x| x.secs).collect());
            ImportRow {
                pipelined,
                exec_workers,
                blocks_per_s: blocks as f64 / secs,
                transactions_per_s: transactions as f64 / secs,
                mgas_per_s: gas_used.map(|gas| gas as f64 / 1e6 / secs),
                exec_s: med(s.iter().map(|x| x.exec).collect()),
                commit_s: med(s.iter().map(|x| x.commit).collect()),
                stalled_s: med(s.iter().map(|x| x.stalled).collect()),
                flush_s: med(s.iter().map(|x| x.flush).collect()),
                peak_rss_bytes: peak,
                cores_busy: med(s.iter().map(|x| x.cpu / x.secs.max(1e-9)).collect()),
                speedup,
                bound,
                of_bound,
                rss_ratio,
            }
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}
