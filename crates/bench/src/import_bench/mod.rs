//! `arbor bench import`: the import road pipelined against unpipelined, on the same blocks,
//! each run an `arbor import` process on a fresh copy of one genesis database, rounds
//! interleaved.

pub(crate) mod report;

use std::io::Write;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use chain::{Block, ChainHeader, ChainParams};
use state::TrieId;
use store::{StateDb, StoreConfig};

use crate::common::timing::{median_sorted, ratio, sorted};
use crate::import_bench::report::{ImportBenchReport, ImportRow};

/// What `arbor bench import` measures.
#[derive(Debug, Clone)]
pub struct ImportBenchOpts {
    /// Genesis accounts.
    pub accounts: u64,
    /// Blocks.
    pub blocks: u64,
    /// Transfers per block.
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

/// Run the benchmark: every import is its own `program import` process (the `arbor`
/// binary), on a fresh copy of the genesis database, so that each run's peak RSS and CPU
/// time are its own. `tick` is called once per run.
pub fn import_bench(
    opts: &ImportBenchOpts,
    program: &Path,
    tick: &dyn Fn(),
) -> Result<ImportBenchReport> {
    let tmp = tempfile::Builder::new().prefix("arbor-bench-import-").tempdir()?;
    let chain_file = tmp.path().join("bench.chain");
    let (header, blocks) = generate(&tmp.path().join("gen"), opts, &chain_file)?;
    let genesis = tmp.path().join("genesis");
    {
        let mut db = StateDb::open(&genesis, StoreConfig::default())?;
        let entries = header.genesis_entries().into_iter().map(|(k, v)| (TrieId::Main, k, v));
        db.bulk_load(&format!("chain genesis {}", header.genesis_root), entries)?;
        db.compact()?;
        db.close()?;
    }
    let variants: Vec<(bool, usize)> =
        opts.workers.iter().flat_map(|&w| [(false, w), (true, w)]).collect();
    let mut samples: Vec<Vec<Sample>> = variants.iter().map(|_| Vec::new()).collect();
    let last_root = blocks.last().map_or(header.genesis_root, |b| b.state_root);
    for _ in 0..opts.runs {
        for (i, &(pipelined, workers)) in variants.iter().enumerate() {
            let run = tmp.path().join("run");
            copy_dir(&genesis, &run)?;
            let s = import_once(program, &run, &chain_file, pipelined, workers, last_root)?;
            std::fs::remove_dir_all(&run)?;
            samples[i].push(s);
            tick();
        }
    }
    let transactions = blocks.iter().map(|b| b.transfers.len() as u64).sum();
    let rows = rows(&variants, &samples, opts.blocks, transactions);
    Ok(ImportBenchReport {
        accounts: opts.accounts,
        blocks: opts.blocks,
        transactions,
        runs: opts.runs,
        rows,
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
    chain_file: &Path,
    pipelined: bool,
    workers: usize,
    last_root: state::H256,
) -> Result<Sample> {
    let mut cmd = std::process::Command::new(program);
    cmd.arg("import").arg("--db").arg(dir).arg("--chain").arg(chain_file).arg("--json");
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
        v["root"].as_str() == Some(last_root.to_string().as_str()),
        "the import ended at another root than the chain"
    );
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
            let peak = s.iter().map(|x| x.rss).max().unwrap_or(0);
            let rss_ratio =
                base.map(|b| ratio(peak as f64, b.iter().map(|x| x.rss).max().unwrap_or(0) as f64));
            let secs = med(s.iter().map(|x| x.secs).collect());
            ImportRow {
                pipelined,
                exec_workers,
                blocks_per_s: blocks as f64 / secs,
                transactions_per_s: transactions as f64 / secs,
                exec_s: med(s.iter().map(|x| x.exec).collect()),
                commit_s: med(s.iter().map(|x| x.commit).collect()),
                stalled_s: med(s.iter().map(|x| x.stalled).collect()),
                flush_s: med(s.iter().map(|x| x.flush).collect()),
                peak_rss_bytes: peak,
                cores_busy: med(s.iter().map(|x| x.cpu / x.secs.max(1e-9)).collect()),
                speedup,
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
