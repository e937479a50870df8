//! One block through revm, the same way in every engine: the senders recovered from the
//! signed transactions (in parallel over the rayon pool, as a node does before executing
//! a block), then each transaction executed in order (Cancun rules, chain id 1) over a
//! revm database that takes each transaction's state before the next one runs. An engine
//! that commits collects the block's account-model changes as it goes
//! (`evm::evm_changes` per transaction, merged into one `eth::EthChanges`).
//!
//! Every transaction must succeed: the workloads are made of valid calls, so a failure
//! (or a block over its gas limit) means a wrong state, and the run stops.

use alloy_primitives::{Address as RevmAddress, B256, U256};
use anyhow::{anyhow, ensure, Context as _, Result};
use eth::EthChanges;
use evm::generate::{coinbase, CHAIN_ID};
use rayon::prelude::*;
use revm::context::{BlockEnv, CfgEnv, Context, TxEnv};
use revm::primitives::hardfork::SpecId;
use revm::{Database, DatabaseCommit, ExecuteCommitEvm, ExecuteEvm, MainBuilder, MainContext};

use crate::evm_bench::blocks::BASE_FEE;
use crate::evm_bench::tx::decode;

/// The first block's timestamp; blocks are 12 seconds apart.
const GENESIS_TIME: u64 = 1_700_000_000;

/// Decode every transaction and recover its sender, in parallel.
pub(crate) fn recover(txs: &[Vec<u8>]) -> Result<Vec<TxEnv>> {
    txs.par_iter()
        .enumerate()
        .map(|(i, tx)| decode(tx, CHAIN_ID).with_context(|| format!("transaction {i}")))
        .collect()
}

/// revm's block `number` of `gas_limit`.
fn block_env(number: u64, gas_limit: u64) -> BlockEnv {
    BlockEnv {
        number: U256::from(number),
        beneficiary: RevmAddress::from(coinbase()),
        timestamp: U256::from(GENESIS_TIME + 12 * number),
        gas_limit,
        basefee: BASE_FEE,
        prevrandao: Some(B256::ZERO),
        ..BlockEnv::default()
    }
}

/// What executing a block gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Executed {
    /// Gas the transactions used.
    pub(crate) gas: u64,
    /// Transactions executed.
    pub(crate) txs: u64,
}

/// Execute `txs` as block `number` over `db`, committing each transaction's state into it;
/// with `changes`, also collect the block's account-model changes there.
pub(crate) fn execute<DB>(
    db: DB,
    number: u64,
    gas_limit: u64,
    txs: Vec<TxEnv>,
    mut changes: Option<&mut EthChanges>,
) -> Result<Executed>
where
    DB: Database + DatabaseCommit,
    DB::Error: std::error::Error + Send + Sync + 'static,
{
    let mut cfg = CfgEnv::new_with_spec(SpecId::CANCUN);
    cfg.chain_id = CHAIN_ID;
    let mut evm = Context::mainnet()
        .with_db(db)
        .with_block(block_env(number, gas_limit))
        .with_cfg(cfg)
        .build_mainnet();
    let mut done = Executed { gas: 0, txs: 0 };
    for (i, tx) in txs.into_iter().enumerate() {
        let out = evm.transact(tx).map_err(|e| anyhow!("block {number}, transaction {i}: {e}"))?;
        ensure!(
            out.result.is_success(),
            "block {number}, transaction {i} did not succeed: {:?}",
            out.result
        );
        done.gas += out.result.tx_gas_used();
        done.txs += 1;
        if let Some(changes) = changes.as_deref_mut() {
            changes.merge(evm::evm_changes(&out.state)?);
        }
        evm.commit(out.state);
    }
    ensure!(done.gas <= gas_limit, "block {number} used {} gas, over its limit", done.gas);
    Ok(done)
}
