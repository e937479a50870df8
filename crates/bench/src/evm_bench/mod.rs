//! `arbor bench evm`: blocks of real contract calls executed by revm and committed by
//! Arbor, beside the same blocks over revm's in-memory database (no commitment) and over
//! plain RocksDB with undo records (no trie).
//!
//! The run, in order:
//! 1. The genesis ([`genesis`]): `--accounts` accounts (the first 65,536 keyed senders),
//!    the ERC-20 token of `testdata/evm-bench` holding a balance for each ([`contracts`]),
//!    the storage-heavy contract with as many slots.
//! 2. The blocks ([`blocks`]), made and signed once, before any timing, `--blocks` per
//!    workload (value transfers, ERC-20 transfers, storage-heavy calls), each filled to
//!    `--gas-limit` by its transactions' gas limits; written to files.
//! 3. One worker process per engine ([`engines`], [`worker`]) loads the genesis (timed
//!    apart): Arbor by a bulk load (the tries and the code), plain RocksDB by a bulk
//!    load ([`plain`]), the in-memory database by inserts.
//! 4. Each workload's blocks in interleaved rounds (a twentieth of them per round, engine
//!    after engine, the order reversed every other round; a worker is stopped outside its
//!    rounds, see [`crate::common::worker`]). Per block each engine times recovering the
//!    senders ([`tx`], inside the measured time), executing ([`execute`]) and committing;
//!    after a workload's last block, its flush.
//! 5. The checks: every engine's blocks used the same gas and held the same transactions;
//!    Arbor's `verify` rebuilt its roots from `flat`; and the roots of the in-memory and
//!    plain states, each built from scratch from the whole state, equal Arbor's head root.
//!    Any mismatch fails the run: a fast wrong root cannot pass.
//!
//! The report ([`report`], [`html`]) gives per workload Arbor's sustained Mgas/s and tx/s,
//! its commit share, commit latency and peak RSS, and its time over the plain and
//! in-memory runs.

mod blocks;
mod contracts;
mod engines;
mod execute;
mod genesis;
mod html;
pub(crate) mod opts;
mod plain;
pub(crate) mod report;
#[cfg(test)]
mod tests;
mod tx;
pub(crate) mod worker;

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use evm::generate::{sender_keys, World};
use store::StoreConfig;

use crate::common::machine::MachineInfo;
use crate::common::progress::bar;
use crate::common::rss::load_average;
use crate::common::temp::temp_dir;
use crate::common::worker::{run_rounds, Launch, Worker};
use crate::evm_bench::blocks::{write_blocks, Generator, Workload};
use crate::evm_bench::contracts::Contracts;
use crate::evm_bench::engines::EngineKind;
use crate::evm_bench::opts::EvmBenchOpts;
use crate::evm_bench::report::{EvmBenchReport, EvmLoadReport, EvmRoots, EvmWorkloadReport};
use crate::evm_bench::worker::{EvmOutcome, EvmWorkerSpec};

/// The fewest accounts a run takes (the storage-heavy calls rewrite four consecutive
/// genesis slots).
pub const ACCOUNTS_MIN: u64 = 16;
/// Rounds per workload: its blocks come in this many rounds (fewer when it has fewer
/// blocks).
const ROUNDS: u64 = 20;

/// Run the EVM benchmark (see the module docs); `progress` draws bars on stderr.
pub fn evm_bench(
    opts: &EvmBenchOpts,
    config: &StoreConfig,
    progress: bool,
) -> Result<EvmBenchReport> {
    ensure!(opts.accounts >= ACCOUNTS_MIN, "at least {ACCOUNTS_MIN} accounts");
    ensure!(opts.blocks >= 1, "at least one block per workload");
    config.validate().context("invalid store config")?;
    ensure!(
        config.layout.is_none_or(|l| l == trie::LayoutName::Ethereum),
        "the account model needs the ethereum layout, not {:?}",
        config.layout
    );
    let machine = MachineInfo::detect();
    let load_average_start = load_average();
    let contracts = Contracts::load()?;
    let base = temp_dir("arbor-bench-evm-", opts.dir.as_deref())?;
    let (senders, workloads) = make_blocks(opts, base.path(), progress)?;
    let spec = |engine: EngineKind| EvmWorkerSpec {
        engine,
        dir: base.path().join(engine.label().replace('+', "-")),
        seed: opts.seed,
        accounts: opts.accounts,
        senders_file: base.path().join("senders"),
        gas_limit: opts.gas_limit,
        blocks: opts.blocks,
        workloads: workloads.clone(),
        config: config.clone(),
    };
    let mut workers = start_workers(opts, base.path(), &spec, progress)?;
    let pb = bar(progress, opts.blocks * 3 * workers.len() as u64, "blocks, engines interleaved");
    for (i, (workload, _)) in workloads.iter().enumerate() {
        let first = i as u64 * opts.blocks + 1;
        let phase = format!("{}, engines interleaved", workload.name());
        run_rounds(&mut workers, first..=first + opts.blocks - 1, ROUNDS, &pb, &phase)?;
    }
    pb.finish();
    let mut outcomes = Vec::new();
    for worker in workers {
        let pb = bar(progress, 1, format!("{}: final state root", worker.label()));
        outcomes.push(worker.finish::<EvmOutcome>()?);
        pb.finish();
    }
    let (workloads, roots, load) = check(&outcomes)?;
    Ok(EvmBenchReport {
        machine,
        load_average_start,
        load_average_end: load_average(),
        options: opts.clone(),
        senders,
        compiler: contracts.token.compiler,
        workloads,
        roots,
        load,
    })
}

/// Derive the senders, write them and every workload's blocks under `base`: the sender
/// count and each workload with its block file.
fn make_blocks(
    opts: &EvmBenchOpts,
    base: &Path,
    progress: bool,
) -> Result<(u64, Vec<(Workload, PathBuf)>)> {
    let keys = sender_keys(opts.seed, opts.accounts);
    let world = World::new(opts.seed, opts.accounts, &keys);
    let senders: Vec<u8> = world.senders.iter().flatten().copied().collect();
    std::fs::write(base.join("senders"), senders).context("cannot write the senders")?;
    let mut generator = Generator::new(&world, &keys, opts.gas_limit);
    let pb = bar(progress, opts.blocks * Workload::ALL.len() as u64, "signing blocks");
    let mut files = Vec::new();
    for workload in Workload::ALL {
        let path = base.join(format!("{}.blocks", workload.name()));
        write_blocks(&mut generator, workload, opts.blocks, &path, &|| pb.inc(1))?;
        files.push((workload, path));
    }
    pb.finish();
    Ok((keys.len() as u64, files))
}

/// Start a worker per engine (each loads the genesis, one after the other, then waits).
fn start_workers(
    opts: &EvmBenchOpts,
    base: &Path,
    spec: &dyn Fn(EngineKind) -> EvmWorkerSpec,
    progress: bool,
) -> Result<Vec<Worker<EngineKind>>> {
    let exe = match &opts.worker {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().context("cannot find this executable for the workers")?,
    };
    let mut workers = Vec::new();
    for kind in EngineKind::ALL {
        let spec_path = base.join(format!("{}.json", kind.label().replace('+', "-")));
        let launch = Launch { exe: &exe, command: "evm-worker", spec_path: &spec_path };
        // The accounts, a token balance and a slot of the storage-heavy contract for each,
        // the two contracts and the token's supply.
        let entries = 3 * opts.accounts + 3;
        let pb = bar(progress, entries, format!("{}: genesis", kind.label()));
        workers.push(Worker::start(&launch, kind, kind.label(), &spec(kind), &pb)?);
        pb.finish();
    }
    Ok(workers)
}

/// Check the engines against each other (the same blocks, the same final root, Arbor
/// verified) and build the per-workload reports.
fn check(outcomes: &[EvmOutcome]) -> Result<(Vec<EvmWorkloadReport>, EvmRoots, EvmLoadReport)> {
    let by = |kind: EngineKind| {
        outcomes
            .iter()
            .find(|o| o.engine == kind)
            .with_context(|| format!("no {} run", kind.label()))
    };
    let (arbor, memory, plain) =
        (by(EngineKind::Arbor)?, by(EngineKind::Memory)?, by(EngineKind::PlainUndo)?);
    ensure!(
        memory.workloads.len() == arbor.workloads.len()
            && plain.workloads.len() == arbor.workloads.len(),
        "the engines ran different workloads"
    );
    let mut workloads = Vec::new();
    for ((a, m), p) in arbor.workloads.iter().zip(&memory.workloads).zip(&plain.workloads) {
        for other in [m, p] {
            ensure!(other.workload == a.workload, "the engines ran different workloads");
            let same = a.blocks.len() == other.blocks.len()
                && a.blocks
                    .iter()
                    .zip(&other.blocks)
                    .all(|(x, y)| (x.gas, x.txs) == (y.gas, y.txs));
            ensure!(same, "{}: the engines' blocks used different gas", a.workload.name());
        }
        workloads.push(EvmWorkloadReport::of(a.workload.name(), a, m, p));
    }
    let head = arbor.final_state.head_root.clone().context("Arbor reported no head root")?;
    let verified = arbor.final_state.verified == Some(true) && arbor.final_state.root == head;
    ensure!(verified, "Arbor's verify failed: head {head}, rebuilt {}", arbor.final_state.root);
    let (m, p) = (&memory.final_state.root, &plain.final_state.root);
    ensure!(*m == head, "the in-memory state's root {m} is not Arbor's {head}");
    ensure!(*p == head, "the plain state's root {p} is not Arbor's {head}");
    let roots = EvmRoots {
        arbor_head: head,
        arbor_verified: verified,
        memory: m.clone(),
        plain_undo: p.clone(),
        agree: true,
    };
    let load = EvmLoadReport {
        load_s: [arbor.load_s, memory.load_s, plain.load_s],
        peak_rss_bytes: [
            arbor.peak_rss_load_bytes,
            memory.peak_rss_load_bytes,
            plain.peak_rss_load_bytes,
        ],
    };
    Ok((workloads, roots, load))
}
