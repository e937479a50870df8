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

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use chain::{
    block_txs, default_author, funded_accounts, genesis as chain_genesis, paired_transfers,
    BlockContext, ChainReceipt, Outcome, TransferKind, EXISTENTIAL_DEPOSIT,
};
use exec::{
    execute_parallel_with, execute_sequential, AdaptiveExecutor, BlockOutput, Counters, Mode,
    ParallelOptions, Reason, Run, Stop, SwitchReason, Transaction, View,
};
use k256::ecdsa::signature::{Signer, Verifier};
use k256::ecdsa::{Signature, SigningKey, VerifyingKey};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use state::{StateReader, TrieId};
use store::{StateDb, StoreConfig};

use crate::machine::MachineInfo;
use crate::timing::{median_sorted, ratio, sorted};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Transfer,
    Iterate { reverse: bool },
    HotFee,
}

struct Sig {
    key: VerifyingKey,
    sig: Signature,
    msg: Vec<u8>,
}

/// One Cosmos-style transaction.
struct CosmosTx {
    from: u32,
    to: u32,
    kind: Kind,
    sig: Option<Arc<Sig>>,
    verified: OnceLock<bool>,
}

#[derive(Debug, Clone, PartialEq)]
enum Receipt {
    Ok,
    BadSignature,
}

const BALANCE: u64 = 1_000_000_000_000;
const FEE: u64 = 10;

// Account names are `account{i:05}`; each key is formatted in one allocation (formatting
// the name first and then the key took two, 6 of the ~53 allocations of an `iterate`
// transaction).

fn nonce_key(i: u32) -> Vec<u8> {
    format!("acc/nonceaccount{i:05}").into_bytes()
}

fn balance_key(i: u32) -> Vec<u8> {
    format!("bank/account{i:05}").into_bytes()
}

fn read_u64(v: &mut dyn View, key: &[u8]) -> Result<u64, Stop> {
    Ok(v.get(key)?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map_or(0, u64::from_be_bytes))
}

fn noop(v: &mut dyn View, who: u32) -> Result<(), Stop> {
    let k = nonce_key(who);
    let n = read_u64(v, &k)?;
    v.set(&k, (n + 1).to_be_bytes().to_vec());
    read_u64(v, &k)?;
    Ok(())
}

fn transfer(v: &mut dyn View, from: u32, to: u32, amount: u64) -> Result<(), Stop> {
    let (fk, tk) = (balance_key(from), balance_key(to));
    let fb = read_u64(v, &fk)?;
    let tb = read_u64(v, &tk)?;
    if fb >= amount {
        v.set(&fk, (fb - amount).to_be_bytes().to_vec());
        // Read again: the receiver may be the sender.
        let tb = if from == to { fb - amount } else { tb };
        v.set(&tk, (tb + amount).to_be_bytes().to_vec());
    }
    Ok(())
}

impl Transaction for CosmosTx {
    type Output = Receipt;

    fn execute(&self, v: &mut dyn View) -> Result<Receipt, Stop> {
        if let Some(s) = &self.sig {
            let ok = *self.verified.get_or_init(|| s.key.verify(&s.msg, &s.sig).is_ok());
            if !ok {
                return Ok(Receipt::BadSignature);
            }
        }
        noop(v, self.from)?;
        transfer(v, self.from, self.to, 1)?;
        match self.kind {
            Kind::Transfer => {}
            Kind::Iterate { reverse } => {
                let entries = v.scan(&nonce_key(self.from), reverse, 6)?;
                let prefix = b"acc/nonce";
                if let Some((k, _)) = entries.get(5).filter(|(k, _)| k.starts_with(prefix)) {
                    let other = std::str::from_utf8(&k[prefix.len() + 7..])
                        .ok()
                        .and_then(|s| s.parse::<u32>().ok());
                    if let Some(other) = other {
                        transfer(v, other, self.to, 1)?;
                    }
                }
            }
            Kind::HotFee => {
                let k = balance_key(self.from);
                let b = read_u64(v, &k)?;
                v.set(&k, b.saturating_sub(FEE).to_be_bytes().to_vec());
                v.add_delta(b"bank/feecollector", FEE as i64)?;
                v.add_delta(b"acc/blocktxcount", 1)?;
            }
        }
        Ok(Receipt::Ok)
    }
}

/// A workload: its name and its transactions' (from, to, kind).
struct Workload {
    name: &'static str,
    accounts: u32,
    txs: Vec<(u32, u32, Kind)>,
}

fn workloads(n: usize) -> Vec<Workload> {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let random = |rng: &mut ChaCha8Rng, kind: &dyn Fn(&mut ChaCha8Rng) -> Kind| {
        (0..n).map(|_| (rng.gen_range(0..100), rng.gen_range(0..100), kind(rng))).collect()
    };
    let n32 = n as u32;
    vec![
        Workload {
            name: "random-10000/100",
            accounts: 100,
            txs: random(&mut rng, &|_| Kind::Transfer),
        },
        Workload {
            name: "no-conflict-10000",
            accounts: n32,
            txs: (0..n32).map(|i| (i, i, Kind::Transfer)).collect(),
        },
        Workload {
            name: "worst-case-10000",
            accounts: 1,
            txs: (0..n).map(|_| (0, 0, Kind::Transfer)).collect(),
        },
        Workload {
            name: "iterate-10000/100",
            accounts: 100,
            txs: random(&mut rng, &|r| Kind::Iterate { reverse: r.gen_bool(0.5) }),
        },
        Workload {
            name: "hot-fee-10000",
            accounts: n32,
            txs: (0..n32).map(|i| (i, i, Kind::HotFee)).collect(),
        },
    ]
}

fn genesis(accounts: u32) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    (0..accounts)
        .flat_map(|i| {
            [
                (nonce_key(i), 0u64.to_be_bytes().to_vec()),
                (balance_key(i), BALANCE.to_be_bytes().to_vec()),
            ]
        })
        .collect()
}

/// One workload at one worker count.
#[derive(Debug, Clone, Serialize)]
pub struct BlockStmRow {
    /// Workload.
    pub workload: &'static str,
    /// Workers (0: the sequential executor).
    pub workers: usize,
    /// Block-STM ran even with one worker (where the executor would fall back to
    /// sequential execution): the engine's own overhead.
    pub forced_engine: bool,
    /// The partitioned executor ran every block (more than one worker): its own speed,
    /// whatever the adaptive executor picks.
    pub forced_partitioned: bool,
    /// Median block time, ms.
    pub median_ms: f64,
    /// Transactions per second at the median.
    pub tps: f64,
    /// Speed-up over the sequential executor: the median of the per-round ratios.
    pub speedup: f64,
    /// (this median - sequential median) / transactions, in µs: with `forced_engine`, the
    /// engine's own cost per transaction.
    pub over_sequential_us_per_tx: f64,
    /// Allocations per block (median run).
    pub allocations: u64,
    /// Bytes allocated per block (median run).
    pub bytes: u64,
    /// Re-executions per transaction.
    pub reexecutions_per_tx: f64,
    /// Validations per transaction.
    pub validations_per_tx: f64,
    /// How the timed blocks ran: per executor, reason and switch, how many blocks.
    pub modes: Vec<ModeCount>,
    /// Where the timed blocks that switched to sequential execution did (the first
    /// transaction the sequential executor ran).
    pub switch_points: Vec<usize>,
    /// The adaptive executor's cost model after the last block (none for the sequential
    /// executor and forced Block-STM).
    pub estimates: Option<Estimate>,
}

/// Blocks that ran one way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModeCount {
    /// `seq`, `par` (Block-STM) or `part` (partitioned), why, and for a switched block
    /// `→seq` and why.
    pub mode: String,
    /// How many timed blocks.
    pub blocks: usize,
}

/// The cost model's estimates, ns per transaction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The sequential executor's.
    pub sequential_ns_per_tx: Option<f64>,
    /// Block-STM's.
    pub parallel_ns_per_tx: Option<f64>,
    /// The partitioned executor's.
    pub partitioned_ns_per_tx: Option<f64>,
}

/// Untimed blocks each adaptive executor runs before the timed ones: the model's first
/// measurements (the sequential executor once, Block-STM twice, the partitioned executor
/// twice, and up to three blocks more while the partitioned executor's waves grow).
pub(crate) const WARMUP_BLOCKS: usize = 8;

/// A short name of how a block ran, e.g. `par (probe) →seq (slower)`.
fn mode_label(run: &Run) -> String {
    let mode = |m: Mode| match m {
        Mode::Sequential => "seq",
        Mode::Partitioned => "part",
        _ => "par",
    };
    let reason = match run.reason {
        Reason::Requested => "requested",
        Reason::OneWorker => "one worker",
        Reason::SmallBlock => "small block",
        Reason::NoModel => "no model",
        Reason::Unmeasured => "unmeasured",
        Reason::Faster => "faster",
        Reason::Probe => "probe",
        _ => "other",
    };
    let label = match run.mode {
        Mode::Partitioned if run.waves > 1 => format!("part×{} ({reason})", run.waves),
        m => format!("{} ({reason})", mode(m)),
    };
    match run.switch.map(|s| s.reason) {
        None => label,
        Some(SwitchReason::Reexecutions) => format!("{label} →seq (re-executions)"),
        Some(SwitchReason::Slower) => format!("{label} →seq (slower)"),
        Some(SwitchReason::Conflict) => format!("{label} →seq (conflict)"),
        Some(_) => format!("{label} →seq (requested)"),
    }
}

/// Blocks per label, in order of first appearance.
fn mode_counts(runs: &[Run]) -> Vec<ModeCount> {
    let mut counts: Vec<ModeCount> = Vec::new();
    for run in runs {
        let mode = mode_label(run);
        match counts.iter_mut().find(|c| c.mode == mode) {
            Some(c) => c.blocks += 1,
            None => counts.push(ModeCount { mode, blocks: 1 }),
        }
    }
    counts
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct BlockStmReport {
    /// The machine.
    pub machine: MachineInfo,
    /// Signatures verified.
    pub signatures: bool,
    /// Transactions per block.
    pub txs: usize,
    /// Timed runs per row.
    pub runs: usize,
    /// Rows: per workload the sequential executor (`workers` 0) then each variant.
    pub rows: Vec<BlockStmRow>,
    /// Per workload, the throughput of two sequential blocks run at once on two threads
    /// over one (median of the rounds): what this machine gives two independent threads
    /// on that workload, the ceiling for a 2-worker speed-up.
    pub ceilings: Vec<(&'static str, f64)>,
}

fn make_txs(w: &Workload, sigs: &[Option<Arc<Sig>>]) -> Vec<CosmosTx> {
    w.txs
        .iter()
        .zip(sigs)
        .map(|(&(from, to, kind), sig)| CosmosTx {
            from,
            to,
            kind,
            sig: sig.clone(),
            verified: OnceLock::new(),
        })
        .collect()
}

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
    let pb = crate::progress::bar(progress, total, "executing blocks");
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

impl BlockStmReport {
    /// The human-readable table.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "arbor bench blockstm: {} transactions per block, signatures {}, median of {} runs ({} cores)",
            self.txs,
            if self.signatures { "verified" } else { "off (--no-sig)" },
            self.runs,
            self.machine.logical_cores
        );
        let mut t = crate::table::table(&[
            "workload",
            "workers",
            "ms/block",
            "tx/s",
            "speedup",
            "+µs/tx",
            "allocs",
            "bytes",
            "reexec",
            "valid",
            "blocks ran as",
        ]);
        for (name, ceiling) in &self.ceilings {
            for r in self.rows.iter().filter(|r| r.workload == *name) {
                let workers = match (r.workers, r.forced_engine, r.forced_partitioned) {
                    (0, ..) => "seq".to_string(),
                    (_, true, _) => "1 (stm)".to_string(),
                    (w, _, true) => format!("{w} (part)"),
                    (w, ..) => w.to_string(),
                };
                t.add_row(vec![
                    if r.workers == 0 { name.to_string() } else { String::new() },
                    workers,
                    format!("{:.1}", r.median_ms),
                    format!("{:.0}", r.tps),
                    format!("{:.2}", r.speedup),
                    format!("{:.2}", r.over_sequential_us_per_tx),
                    r.allocations.to_string(),
                    r.bytes.to_string(),
                    format!("{:.3}", r.reexecutions_per_tx),
                    format!("{:.3}", r.validations_per_tx),
                    r.modes
                        .iter()
                        .map(|m| format!("{}× {}", m.blocks, m.mode))
                        .collect::<Vec<_>>()
                        .join(", "),
                ]);
            }
            // The ceiling: two sequential blocks at once on two threads.
            t.add_row(vec![
                String::new(),
                "ceiling".to_string(),
                String::new(),
                String::new(),
                format!("{ceiling:.2}"),
            ]);
        }
        out.push_str(&crate::table::text(&t));
        let _ = writeln!(
            out,
            "(1 worker runs the sequential fallback; \"1 (stm)\" forces Block-STM on one worker: \
             its time over the sequential executor's is the engine's own overhead; \"N (part)\" \
             forces the partitioned executor; \"ceiling\": two sequential blocks at once on two \
             threads over one block's throughput; \"blocks ran as\": the executor the adaptive \
             executor picked per timed block (seq, par = Block-STM, part = partitioned) and why, \
             \"→seq\" a switch to sequential execution midway, after {WARMUP_BLOCKS} untimed \
             blocks per worker count above 1)"
        );
        self.render_iterate_allocations(&mut out);
        out
    }

    /// The allocations per block of the `iterate` workload, per row, in millions.
    fn render_iterate_allocations(&self, out: &mut String) {
        use std::fmt::Write;
        let rows: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.workload.starts_with("iterate"))
            .map(|r| {
                let who = match (r.workers, r.forced_engine, r.forced_partitioned) {
                    (0, ..) => "seq".to_string(),
                    (_, true, _) => "1 (stm)".to_string(),
                    (w, _, true) => format!("{w} (part)"),
                    (1, ..) => "1 worker".to_string(),
                    (w, ..) => format!("{w} workers"),
                };
                let per_10k = r.allocations as f64 * 10_000.0 / self.txs as f64 / 1e6;
                format!("{who} {per_10k:.2}M")
            })
            .collect();
        if !rows.is_empty() {
            let _ = writeln!(
                out,
                "iterate allocations per 10,000 transactions (median run): {}",
                rows.join(", ")
            );
        }
    }
}
