//! The engines of `arbor bench evm` as worker processes (`arbor bench evm-worker --spec
//! FILE`, the protocol of [`crate::common::worker`]): each loads the genesis into its
//! engine, then runs the blocks the driver hands it, reading each block from its
//! workload's file before the block's timing starts. Blocks are numbered across the
//! workloads (`1..=blocks` the first workload's, and so on); after a workload's last block
//! the worker makes its blocks durable (timed: a workload's sustained figures count every
//! block until it is on disk) and reads the workload's peak RSS (reset when it began). At
//! the end it computes its state root from scratch and reports everything as one JSON
//! line ([`EvmOutcome`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use evm::generate::{sender_count, World};
use serde::{Deserialize, Serialize};
use store::StoreConfig;

use crate::common::rss::{peak_rss_bytes, reset_peak_rss};
use crate::common::worker::{serve, start_worker, tick, Rounds};
use crate::evm_bench::blocks::{BlockReader, Workload};
use crate::evm_bench::contracts::Contracts;
use crate::evm_bench::engines::{
    ArborEngine, BlockRecord, EngineKind, EvmEngine, FinalState, MemoryEngine, PlainEngine,
};
use crate::evm_bench::genesis::bench_genesis;

/// What a worker runs: written by the driver to a file the worker reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EvmWorkerSpec {
    pub(crate) engine: EngineKind,
    /// The engine's database directory (new; unused by the memory engine).
    pub(crate) dir: PathBuf,
    pub(crate) seed: u64,
    pub(crate) accounts: u64,
    /// The senders' addresses, 20 bytes each, in order.
    pub(crate) senders_file: PathBuf,
    pub(crate) gas_limit: u64,
    /// Blocks per workload.
    pub(crate) blocks: u64,
    /// The workloads in order, each with its block file.
    pub(crate) workloads: Vec<(Workload, PathBuf)>,
    pub(crate) config: StoreConfig,
}

/// The most of each number a spec may ask for: the bounds of `arbor bench evm`'s flags,
/// given by the program that defines them.
#[derive(Debug, Clone, Copy)]
pub struct EvmWorkerBounds {
    /// Accounts (`--accounts`), at least [`crate::evm_bench::ACCOUNTS_MIN`].
    pub accounts_max: u64,
    /// Blocks per workload (`--blocks`), at least 1.
    pub blocks_max: u64,
    /// The least block gas limit (`--gas-limit`).
    pub gas_limit_min: u64,
    /// The greatest block gas limit.
    pub gas_limit_max: u64,
}

impl EvmWorkerSpec {
    fn check(&self, bounds: &EvmWorkerBounds) -> Result<()> {
        let min = crate::evm_bench::ACCOUNTS_MIN;
        ensure!(
            (min..=bounds.accounts_max).contains(&self.accounts),
            "accounts must be {min} to {}",
            bounds.accounts_max
        );
        ensure!(
            (1..=bounds.blocks_max).contains(&self.blocks),
            "blocks must be 1 to {}",
            bounds.blocks_max
        );
        let gas = bounds.gas_limit_min..=bounds.gas_limit_max;
        ensure!(gas.contains(&self.gas_limit), "gas limit must be in {gas:?}");
        ensure!(
            !self.workloads.is_empty() && self.workloads.len() <= Workload::ALL.len(),
            "bad workloads"
        );
        self.config.validate().context("invalid store config in the spec")?;
        Ok(())
    }

    /// Every block of the run.
    fn last_block(&self) -> u64 {
        self.blocks * self.workloads.len() as u64
    }
}

/// One workload's run in one engine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkloadRun {
    pub(crate) workload: Workload,
    pub(crate) blocks: Vec<BlockRecord>,
    /// The flush after its last block.
    pub(crate) flush_s: f64,
    /// Peak RSS of the process during the workload (0 where it could not be reset).
    pub(crate) peak_rss_bytes: u64,
}

/// A worker's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EvmOutcome {
    pub(crate) engine: EngineKind,
    /// Loading the genesis (building it included).
    pub(crate) load_s: f64,
    /// Peak RSS while loading.
    pub(crate) peak_rss_load_bytes: u64,
    pub(crate) workloads: Vec<WorkloadRun>,
    pub(crate) final_state: FinalState,
}

/// The senders' addresses from their file.
pub(crate) fn read_senders(path: &Path, accounts: u64) -> Result<Vec<eth::Address>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let want = sender_count(accounts) as usize;
    ensure!(
        bytes.len() == want * 20,
        "the senders file holds {} bytes, not {}",
        bytes.len(),
        want * 20
    );
    Ok(bytes.chunks_exact(20).map(|c| <[u8; 20]>::try_from(c).unwrap_or([0; 20])).collect())
}

/// The worker process's main: run the engine of the spec at `spec_path` (within `bounds`)
/// as the driver says on stdin.
pub fn evm_worker(spec_path: &Path, bounds: &EvmWorkerBounds) -> Result<()> {
    let spec: EvmWorkerSpec = start_worker(spec_path)?;
    spec.check(bounds)?;
    let start = Instant::now();
    let senders = read_senders(&spec.senders_file, spec.accounts)?;
    let world = World { seed: spec.seed, accounts: spec.accounts, senders };
    let genesis = bench_genesis(&world, &Contracts::load()?)?;
    let engine: Box<dyn EvmEngine> = match spec.engine {
        EngineKind::Arbor => Box::new(ArborEngine::load(&spec.dir, &spec.config, &genesis, &tick)?),
        EngineKind::Memory => Box::new(MemoryEngine::load(&genesis, &tick)?),
        EngineKind::PlainUndo => {
            Box::new(PlainEngine::load(&spec.dir, &spec.config, &genesis, &tick)?)
        }
    };
    drop(genesis);
    let load_s = start.elapsed().as_secs_f64();
    let last = spec.last_block();
    let run = EvmRounds {
        engine,
        load_s,
        peak_rss_load_bytes: peak_rss_bytes().unwrap_or(0),
        spec,
        reader: None,
        runs: Vec::new(),
        rss_reset: false,
    };
    serve(Box::new(run), last)
}

/// A worker's engine and what it measured so far.
struct EvmRounds {
    engine: Box<dyn EvmEngine>,
    spec: EvmWorkerSpec,
    load_s: f64,
    peak_rss_load_bytes: u64,
    /// The current workload's block file.
    reader: Option<BlockReader>,
    runs: Vec<WorkloadRun>,
    rss_reset: bool,
}

impl EvmRounds {
    /// Block `number`: its workload's file opened at the workload's first block, the block
    /// read (not timed), executed and committed, and the workload closed (flush, peak RSS)
    /// at its last.
    fn block(&mut self, number: u64) -> Result<()> {
        let blocks = self.spec.blocks;
        let index = ((number - 1) / blocks) as usize;
        let (workload, path) =
            self.spec.workloads.get(index).context("block out of range")?.clone();
        if (number - 1).is_multiple_of(blocks) {
            self.reader = Some(BlockReader::open(&path, self.spec.gas_limit)?);
            self.rss_reset = reset_peak_rss();
            let run = WorkloadRun { workload, blocks: Vec::new(), flush_s: 0.0, peak_rss_bytes: 0 };
            self.runs.push(run);
        }
        let reader = self.reader.as_mut().context("no block file open")?;
        let txs = reader.next_block()?;
        let record = self.engine.block(number, self.spec.gas_limit, &txs)?;
        let run = self.runs.last_mut().context("no workload run")?;
        run.blocks.push(record);
        if number.is_multiple_of(blocks) {
            let start = Instant::now();
            self.engine.flush()?;
            run.flush_s = start.elapsed().as_secs_f64();
            run.peak_rss_bytes = if self.rss_reset { peak_rss_bytes().unwrap_or(0) } else { 0 };
            self.reader = None;
        }
        Ok(())
    }
}

impl Rounds for EvmRounds {
    fn blocks(&mut self, from: u64, to: u64) -> Result<()> {
        (from..=to).try_for_each(|n| self.block(n))
    }

    fn finish(self: Box<Self>) -> Result<String> {
        let EvmRounds { engine, spec, load_s, peak_rss_load_bytes, runs, .. } = *self;
        let final_state = engine.final_state()?;
        let outcome = EvmOutcome {
            engine: spec.engine,
            load_s,
            peak_rss_load_bytes,
            workloads: runs,
            final_state,
        };
        Ok(serde_json::to_string(&outcome)?)
    }
}
