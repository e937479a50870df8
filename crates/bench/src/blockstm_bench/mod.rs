//! `arbor bench blockstm`: Block-STM against the sequential executor on the Cosmos SDK
//! benchmark's workloads (seed 4: `bench_test.go` / `mock_block.go`) and one of ours.
//!
//! State: an in-memory ordered map holding the stores `acc`, `bank` and 26 unused stores
//! `"0"`…`"25"` (keys are `store ‖ "/" ‖ key`); accounts `account00000`…; nonce keys
//! `acc/nonce<name>` and balance keys `bank/<name>`, 8-byte big-endian values. Every
//! account starts with nonce 0 and a balance of 10^12 (the Go mock starts from empty stores
//! and skips the debit when funds are short; funding keeps every transfer a real one).
//!
//! Each transaction first verifies a secp256k1 ECDSA signature (SHA-256) over its own
//! 1,024-byte random message, signed before timing; only the first incarnation verifies
//! (a per-transaction cache). Then: read nonce, write nonce + 1, read it back; a transfer
//! also reads both balances, debits the sender if funds suffice, credits the receiver and
//! writes both. Workloads: `random-10000/100`, `no-conflict-10000`, `worst-case-10000`,
//! `iterate-10000/100` (each transaction also scans the `acc` store from its sender's
//! nonce key, forward or in reverse, takes the sixth key and, if present, makes an extra
//! transfer from that account), and `hot-fee-10000` (no-conflict transfers that also pay a
//! fee into one collector and bump a block counter, both through deltas), and
//! `chain-transfers`: a block of the chain runtime's keep-alive transfers (through
//! `chain::block_txs`) read from a compacted RocksDB store of 10,000 accounts (no signature
//! check: the runtime has none). `--no-sig` drops the signature check.
//!
//! Every round runs the sequential executor, each worker count (with one worker also
//! Block-STM forced, to show the engine's own cost; with more, also the partitioned
//! executor forced, to show its own speed) and two sequential blocks at once on
//! two threads (what the machine gives two independent threads); every parallel result is
//! checked against the sequential one.
//!
//! Each worker count runs through one [`AdaptiveExecutor`] kept across its blocks, as a
//! node keeps it: its cost model picks the sequential executor, Block-STM or the
//! partitioned executor per block and a parallel block may switch to sequential execution
//! midway. With more than one worker it first runs [`WARMUP_BLOCKS`] untimed blocks (the
//! model measures the sequential executor on the first, Block-STM on the next two and the
//! partitioned executor on the ones after, two at the waves it settles on); each row then
//! reports which executor ran its timed blocks and why. The forced partitioned rows run
//! through an adaptive executor pinned to it, warmed up alike, so that its waves of chunks
//! adapt to the workload as the model's would (`part×4`: four waves).

mod html;
pub(crate) mod report;
mod workload;

use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use chain::{
    block_txs, default_author, funded_accounts, genesis as chain_genesis, paired_transfers,
    BlockContext, ChainReceipt, Outcome, TransferKind, EXISTENTIAL_DEPOSIT,
};
use exec::{
    execute_parallel_with, execute_sequential, AdaptiveExecutor, BlockOutput, Counters, Mode,
    ParallelOptions, Run, Transaction,
};
use k256::ecdsa::signature::Signer;
use k256::ecdsa::{Signature, SigningKey};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{StateReader, TrieId};
use store::{StateDb, StoreConfig};

use crate::blockstm_bench::report::{
    mode_counts, BlockStmReport, BlockStmRow, Estimate, WARMUP_BLOCKS,
};
use crate::blockstm_bench::workload::{genesis, make_txs, workloads, Sig, Workload};
use crate::common::machine::MachineInfo;
use crate::common::timing::{median_sorted, ratio, sorted};

/// Options of `arbor bench blockstm`.
#[derive(Debug, Clone)]
pub struct BlockStmOpts {
    /// Worker counts to run.
    pub workers: Vec<usize>,
    /// Skip the signature check.
    pub no_sig: bool,
    /// Timed runs per workload and worker count.
    pub runs: usize,
    /// Transactions per block.
    pub txs: usize,
    /// Run only the workloads whose name contains one of these (empty: all).
    pub only: Vec<String>,
}

impl Default for BlockStmOpts {
    fn default() -> Self {
        Self { workers: vec![1, 2, 4, 8], no_sig: false, runs: 5, txs: 10_000, only: Vec::new() }
    }
}

/// Reads the allocator's running totals (allocations, bytes); the binary installs it.
pub type AllocCounter = fn() -> (u64, u64);

/// The names of the workloads (`--only` selects those containing one of its entries).
pub fn blockstm_workload_names() -> Vec<&'static str> {
    workloads(1).iter().map(|w| w.name).chain([CHAIN_TRANSFERS]).collect()
}

/// Run the benchmark; `allocs` reads the binary's allocation counters.
pub fn blockstm_bench(
    opts: &BlockStmOpts,
    allocs: AllocCounter,
    progress: bool,
) -> Result<BlockStmReport> {
    ensure!(opts.runs >= 1, "--runs must be at least 1");
    ensure!(opts.txs >= 1, "the block needs transactions");
    let selected =
        |name: &str| opts.only.is_empty() || opts.only.iter().any(|o| name.contains(o.as_str()));
    let loads: Vec<Workload> =
        workloads(opts.txs).into_iter().filter(|w| selected(w.name)).collect();
    let run_chain = selected(CHAIN_TRANSFERS);
    ensure!(!loads.is_empty() || run_chain, "no workload matches --only {:?}", opts.only);
    let blocks = loads.len() + usize::from(run_chain);
    let warmups = blocks * opts.workers.iter().filter(|&&w| w > 1).count() * WARMUP_BLOCKS;
    let total = (blocks * (2 * opts.workers.len() + 2) * opts.runs + warmups) as u64;
    let pb = crate::common::progress::bar(progress, total, "executing blocks");
    let mut rng = ChaCha8Rng::seed_from_u64(44);
    // One key, message and signature per transaction slot, made before any timing.
    let sigs: Vec<Option<Arc<Sig>>> = (0..opts.txs)
        .map(|_| {
            (!opts.no_sig).then(|| {
                let sk = SigningKey::random(&mut rng);
                let mut msg = vec![0u8; 1024];
                rng.fill_bytes(&mut msg);
                let sig: Signature = sk.sign(&msg);
                Arc::new(Sig { key: *sk.verifying_key(), sig, msg })
            })
        })
        .collect();
    let variants: Vec<(usize, Engine)> = opts
        .workers
        .iter()
        .flat_map(|&w| {
            let forced = if w == 1 { Engine::Stm } else { Engine::Partitioned };
            [(w, Engine::Adaptive), (w, forced)]
        })
        .collect();
    let mut rows = Vec::new();
    let mut ceilings = Vec::new();
    for w in &loads {
        let storage = genesis(w.accounts);
        let m = Measure { name: w.name, runs: opts.runs, variants: &variants, allocs, pb: &pb };
        let (mut r, ceiling) = m.run(&storage, || make_txs(w, &sigs))?;
        rows.append(&mut r);
        ceilings.push((w.name, ceiling));
    }
    if run_chain {
        let m = Measure {
            name: CHAIN_TRANSFERS,
            runs: opts.runs,
            variants: &variants,
            allocs,
            pb: &pb,
        };
        let (mut r, ceiling) = chain_transfers(&m, opts.txs)?;
        rows.append(&mut r);
        ceilings.push((CHAIN_TRANSFERS, ceiling));
    }
    pb.finish_and_clear();
    Ok(BlockStmReport {
        machine: MachineInfo::detect(),
        signatures: !opts.no_sig,
        txs: opts.txs,
        runs: opts.runs,
        rows,
        ceilings,
    })
}

const CHAIN_TRANSFERS: &str = "chain-transfers";
/// Funded accounts of the chain-transfers state (plus the block author).
const CHAIN_ACCOUNTS: u64 = 10_000;

/// A block of the chain runtime's keep-alive transfers (block-start hook first) executed
/// against a RocksDB store of 10,000 funded accounts, compacted before timing.
fn chain_transfers(m: &Measure<'_>, txs: usize) -> Result<(Vec<BlockStmRow>, f64)> {
    let tmp = tempfile::Builder::new()
        .prefix("arbor-blockstm-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let mut db = StateDb::open(tmp.path(), StoreConfig::default())?;
    let balance = EXISTENTIAL_DEPOSIT * 1_000;
    let ids = funded_accounts(CHAIN_ACCOUNTS);
    let genesis = chain_genesis(&ids, balance).into_iter().map(|(k, v)| (TrieId::Main, k, v));
    db.bulk_load("bench blockstm chain genesis", genesis)?;
    db.compact()?;
    let ctx = BlockContext { number: 1, author: default_author() };
    let transfers =
        paired_transfers(CHAIN_ACCOUNTS, 0, txs as u64, TransferKind::KeepAlive, balance);
    let check = execute_sequential(&block_txs(ctx, &transfers), &db)?;
    let moved = check.outputs.iter().filter(|r| **r == ChainReceipt::Applied(Outcome::Transferred));
    ensure!(moved.count() == txs, "chain-transfers: not every transfer went through");
    let out = m.run(&db, || block_txs(ctx, &transfers))?;
    Ok(out)
}

/// One workload's measurement: every round runs the sequential executor, then each
/// variant (workers, forced engine), then two sequential blocks at once, so that host
/// noise hits all of them alike; speed-ups are the median of the per-round ratios.
struct Measure<'a> {
    name: &'static str,
    runs: usize,
    variants: &'a [(usize, Engine)],
    allocs: AllocCounter,
    pb: &'a indicatif::ProgressBar,
}

/// One timed run.
#[derive(Clone, Copy)]
struct Sample {
    ms: f64,
    allocations: u64,
    bytes: u64,
    counters: Counters,
    run: Run,
}

/// What a variant runs: the adaptive executor, or one executor forced on every block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Adaptive,
    /// Block-STM, even on one worker.
    Stm,
    /// The partitioned executor.
    Partitioned,
}

/// What runs a variant's blocks: an adaptive executor kept across the blocks (the
/// partitioned executor's one pinned, so that it adapts its waves as the model's would),
/// or Block-STM forced on every block.
enum Executor {
    Adaptive(AdaptiveExecutor),
    Forced(usize),
}

impl Executor {
    fn new((workers, engine): (usize, Engine)) -> Self {
        match engine {
            Engine::Adaptive => Executor::Adaptive(AdaptiveExecutor::new(workers)),
            Engine::Stm => Executor::Forced(workers),
            Engine::Partitioned => {
                Executor::Adaptive(AdaptiveExecutor::pinned(workers, Mode::Partitioned))
            }
        }
    }

    fn execute<T: Transaction, S: StateReader + Sync>(
        &mut self,
        txs: &[T],
        storage: &S,
    ) -> Result<BlockOutput<T::Output>> {
        Ok(match self {
            Executor::Adaptive(e) => e.execute(txs, storage)?,
            Executor::Forced(workers) => {
                let options = ParallelOptions { always_parallel: true, ..Default::default() };
                execute_parallel_with(txs, storage, *workers, options)?
            }
        })
    }

    fn estimate(&self) -> Option<Estimate> {
        let Executor::Adaptive(e) = self else { return None };
        let e = e.estimates();
        Some(Estimate {
            sequential_ns_per_tx: e.sequential_ns_per_tx,
            parallel_ns_per_tx: e.parallel_ns_per_tx,
            partitioned_ns_per_tx: e.partitioned_ns_per_tx,
        })
    }
}

impl Measure<'_> {
    fn timed<O>(&self, f: impl FnOnce() -> Result<O>) -> Result<(f64, u64, u64, O)> {
        let (a0, b0) = (self.allocs)();
        let start = Instant::now();
        let out = f()?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let (a1, b1) = (self.allocs)();
        self.pb.inc(1);
        Ok((ms, a1 - a0, b1 - b0, out))
    }

    /// One variant's block, timed and checked against the sequential result.
    fn block<T: Transaction, S: StateReader + Sync>(
        &self,
        executor: &mut Executor,
        txs: &[T],
        storage: &S,
        reference: &BlockOutput<T::Output>,
    ) -> Result<Sample> {
        let (ms, allocations, bytes, out) = self.timed(|| executor.execute(txs, storage))?;
        ensure!(
            out.writes == reference.writes && out.outputs == reference.outputs,
            "{} ({:?}) differs from the sequential result",
            self.name,
            out.run
        );
        Ok(Sample { ms, allocations, bytes, counters: out.counters, run: out.run })
    }

    /// Two sequential blocks at once on two threads: the throughput over one block's
    /// (`ms`), the machine's own ceiling.
    fn ceiling<T, S>(
        &self,
        make: &(impl Fn() -> Vec<T> + Sync),
        storage: &S,
        ms: f64,
    ) -> Result<f64>
    where
        T: Transaction,
        S: StateReader + Sync,
    {
        let (a, b) = (make(), make());
        let (both, ..) = self.timed(|| {
            std::thread::scope(|s| {
                let other = s.spawn(|| execute_sequential(&b, storage).map(|o| o.outputs.len()));
                let mine = execute_sequential(&a, storage)?.outputs.len();
                ensure!(
                    matches!(other.join(), Ok(Ok(n)) if n == mine),
                    "{}: a sequential run failed",
                    self.name
                );
                Ok(())
            })
        })?;
        Ok(ratio(2.0 * ms, both))
    }

    /// The rows (sequential first, `workers` 0) and the two-blocks-at-once throughput
    /// ceiling.
    fn run<T, S>(
        &self,
        storage: &S,
        make: impl Fn() -> Vec<T> + Sync,
    ) -> Result<(Vec<BlockStmRow>, f64)>
    where
        T: Transaction,
        S: StateReader + Sync,
    {
        let reference = execute_sequential(&make(), storage)?;
        let mut executors: Vec<Executor> =
            self.variants.iter().copied().map(Executor::new).collect();
        // One worker always runs sequentially: nothing to learn.
        for executor in
            executors.iter_mut().filter(|e| matches!(e, Executor::Adaptive(a) if a.workers() > 1))
        {
            for _ in 0..WARMUP_BLOCKS {
                self.block(executor, &make(), storage, &reference)?;
            }
        }
        let mut seq: Vec<Sample> = Vec::new();
        let mut var: Vec<Vec<Sample>> = vec![Vec::new(); self.variants.len()];
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); self.variants.len()];
        let mut ceiling = Vec::new();
        for _ in 0..self.runs {
            let txs = make();
            let (ms, allocations, bytes, out) =
                self.timed(|| Ok(execute_sequential(&txs, storage)?))?;
            ensure!(out.writes == reference.writes, "{}: sequential runs differ", self.name);
            seq.push(Sample { ms, allocations, bytes, counters: out.counters, run: out.run });
            for (i, executor) in executors.iter_mut().enumerate() {
                let sample = self.block(executor, &make(), storage, &reference)?;
                ratios[i].push(ratio(ms, sample.ms));
                var[i].push(sample);
            }
            ceiling.push(self.ceiling(&make, storage, ms)?);
        }
        let n = reference.outputs.len().max(1) as f64;
        let seq_ms = median_sorted(&sorted(&seq.iter().map(|s| s.ms).collect::<Vec<_>>()));
        let row = Row { name: self.name, n, seq_ms };
        let mut rows = vec![row.build((0, Engine::Adaptive), &mut seq, 1.0, None)];
        for (i, &variant) in self.variants.iter().enumerate() {
            let speedup = median_sorted(&sorted(&ratios[i]));
            rows.push(row.build(variant, &mut var[i], speedup, executors[i].estimate()));
        }
        Ok((rows, median_sorted(&sorted(&ceiling))))
    }
}

/// What every row of a workload shares.
struct Row {
    name: &'static str,
    /// Transactions per block.
    n: f64,
    /// The sequential executor's median, ms.
    seq_ms: f64,
}

impl Row {
    /// A row from its samples (the median run's figures, every run's mode).
    fn build(
        &self,
        (workers, engine): (usize, Engine),
        samples: &mut [Sample],
        speedup: f64,
        estimates: Option<Estimate>,
    ) -> BlockStmRow {
        let runs: Vec<Run> = samples.iter().map(|s| s.run).collect();
        samples.sort_by(|x, y| x.ms.total_cmp(&y.ms));
        let s = samples[samples.len() / 2];
        BlockStmRow {
            workload: self.name,
            workers,
            forced_engine: engine == Engine::Stm,
            forced_partitioned: engine == Engine::Partitioned,
            median_ms: s.ms,
            tps: ratio(self.n, s.ms / 1e3),
            speedup,
            over_sequential_us_per_tx: (s.ms - self.seq_ms) * 1e3 / self.n,
            allocations: s.allocations,
            bytes: s.bytes,
            reexecutions_per_tx: s.counters.reexecutions as f64 / self.n,
            validations_per_tx: s.counters.validations as f64 / self.n,
            modes: mode_counts(&runs),
            switch_points: runs.iter().filter_map(|r| r.switch.map(|s| s.at)).collect(),
            estimates,
        }
    }
}
