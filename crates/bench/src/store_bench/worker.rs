//! The engines of `arbor bench store` as worker processes (`arbor bench store-worker
//! --spec FILE`, the protocol of [`crate::common::worker`]), so that their rounds of blocks
//! can interleave without running at the same time: each bulk-loads its database, commits
//! the blocks the driver hands it, and finishes (flush, compaction, report as one JSON
//! line, an [`crate::store_bench::engines::EngineOutcome`]) when told.

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};
use store::StoreConfig;

use crate::common::worker::{serve, start_worker, tick, Rounds};
use crate::common::workload::Workload;
use crate::store_bench::engines::{
    ArborEngine, ArborMode, Engine, NomtRun, PlainEngine, PlainMode,
};

/// The engines a worker can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EngineKind {
    /// Arbor given each block's old values.
    Arbor,
    /// Arbor reading them itself.
    ArborReading,
    /// Plain RocksDB with undo records.
    PlainUndo,
    /// Plain RocksDB, new values only.
    Blind,
    /// NOMT.
    Nomt,
}

impl EngineKind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            EngineKind::Arbor => "arbor",
            EngineKind::ArborReading => "arbor (reads)",
            EngineKind::PlainUndo => "plain+undo",
            EngineKind::Blind => "blind",
            EngineKind::Nomt => "nomt",
        }
    }
}

/// What a worker runs: written by the driver to a file the worker reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkerSpec {
    pub(crate) engine: EngineKind,
    /// The engine's database directory (new).
    pub(crate) dir: PathBuf,
    pub(crate) keys: u64,
    pub(crate) blocks: u64,
    pub(crate) updates_per_block: u64,
    pub(crate) seed: u64,
    pub(crate) config: StoreConfig,
}

/// The most of each count a spec may ask for: the bounds of `arbor bench store`'s flags,
/// given by the program that defines them.
#[derive(Debug, Clone, Copy)]
pub struct WorkerBounds {
    /// Initial keys (`--keys`).
    pub keys_max: u64,
    /// Blocks (`--blocks`), at least 1.
    pub blocks_max: u64,
    /// Operations per block (`--updates-per-block`), at least 1.
    pub updates_per_block_max: u64,
}

impl WorkerSpec {
    fn check(&self, bounds: &WorkerBounds) -> Result<()> {
        let WorkerBounds { keys_max, blocks_max, updates_per_block_max } = *bounds;
        ensure!(self.keys <= keys_max, "keys {} is over {keys_max}", self.keys);
        ensure!((1..=blocks_max).contains(&self.blocks), "blocks must be 1 to {blocks_max}");
        ensure!(
            (1..=updates_per_block_max).contains(&self.updates_per_block),
            "updates per block must be 1 to {updates_per_block_max}"
        );
        self.config.validate().context("invalid store config in the spec")?;
        Ok(())
    }
}

/// The worker process's main: run the engine of the spec at `spec_path` (within `bounds`)
/// as the driver says on stdin (see the module docs).
pub fn store_worker(spec_path: &Path, bounds: &WorkerBounds) -> Result<()> {
    let spec: WorkerSpec = start_worker(spec_path)?;
    spec.check(bounds)?;
    let workload = Workload::new(spec.seed, spec.keys, spec.updates_per_block);
    let engine = start(&spec, &workload, &tick)?;
    serve(Box::new(StoreRounds(engine)), spec.blocks)
}

/// A store engine as the worker protocol drives it.
struct StoreRounds(Box<dyn Engine>);

impl Rounds for StoreRounds {
    fn blocks(&mut self, from: u64, to: u64) -> Result<()> {
        self.0.blocks(from, to)
    }

    fn finish(self: Box<Self>) -> Result<String> {
        Ok(serde_json::to_string(&self.0.finish()?)?)
    }
}

/// Open and bulk-load the spec's engine.
fn start(spec: &WorkerSpec, workload: &Workload, tick: &dyn Fn(u64)) -> Result<Box<dyn Engine>> {
    let (config, dir) = (&spec.config, spec.dir.as_path());
    Ok(match spec.engine {
        EngineKind::Arbor => {
            Box::new(ArborEngine::start(config, workload, dir, ArborMode::Prior, tick)?)
        }
        EngineKind::ArborReading => {
            Box::new(ArborEngine::start(config, workload, dir, ArborMode::Read, tick)?)
        }
        EngineKind::PlainUndo => {
            Box::new(PlainEngine::start(config, workload, dir, PlainMode::Undo, tick)?)
        }
        EngineKind::Blind => {
            Box::new(PlainEngine::start(config, workload, dir, PlainMode::Blind, tick)?)
        }
        EngineKind::Nomt => Box::new(NomtRun::start(config, workload, dir, spec.blocks, tick)?),
    })
}
