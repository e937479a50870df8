//! [`execute_block`]: one Ethereum block through revm over its parent state, giving the
//! block's state changes and receipts ([`BlockOutcome`]) or why it is invalid.
//!
//! Order, as the forks define it: the body checked against the header
//! ([`super::validate_body`]); the block environment from the header (number, timestamp,
//! beneficiary, PREVRANDAO from the mix hash, base fee, gas limit, blob base fee from the
//! excess blob gas); the pre-block system calls (EIP-4788, EIP-2935); each transaction,
//! refused when its gas limit exceeds the block's gas left, run by revm over the parent
//! state under the block's changes so far ([`BlockOverlay`]), its changes merged into the
//! block's; the withdrawals; Prague's requests; then the header's commitments to the
//! results: gas used, receipts root, logs bloom, requests hash. The state root is the
//! caller's to check, when it commits.
//!
//! What the caller does (the import road, the blockchain-test runner): decode the block
//! ([`super::decode_block`]), check its header against the parent
//! ([`super::validate_header`]), call this with a reader of the parent's state and the
//! hashes of the 256 blocks before it, then commit `outcome.changes` (as one nested
//! commit, [`eth::EthChanges::to_nested`] under [`eth::AccountModel`], or
//! [`eth::MemoryWorld::apply`]) and compare the new root with `header.state_root`: a
//! mismatch makes the block invalid and the commit must not become the head. Errors are
//! of two kinds: [`ExecError::Invalid`] (the block breaks a rule: refuse it) and the
//! others (the state could not be read, revm failed: the block's validity is unknown).
//!
//! Cost: one revm context per transaction and system call (a journal, the precompile
//! table), the transactions' execution, one change set per transaction merged into the
//! block's, one encoding and keccak per receipt for the receipts root.

use alloy_consensus::Transaction as _;
use alloy_primitives::{Bloom, U256};
use eth::EthChanges;
use revm::context::{BlockEnv, CfgEnv};
use revm::context_interface::block::BlobExcessGasAndPrice;
use revm::context_interface::result::EVMError;
use revm::{ExecuteEvm, MainBuilder};
use state::H256;

use super::chain::{ChainConfig, Fork};
use super::decode::EthBlock;
use super::invalid::InvalidBlock;
use super::overlay::BlockOverlay;
use super::receipts::{block_bloom, receipts_root, Receipt};
use super::system::{self, Env};
use super::txenv::tx_env;
use super::validate::validate_body;
use crate::changes::{evm_changes, ConvertError};
use crate::database::DbError;
use crate::journal::world_context;
use crate::reader::WorldReader;
use crate::stored::BlockHashes;

/// A valid block's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockOutcome {
    /// The block's fork.
    pub fork: Fork,
    /// Every state change of the block (transactions, system calls, withdrawals), merged.
    pub changes: EthChanges,
    /// One receipt per transaction.
    pub receipts: Vec<Receipt>,
    /// Gas used by the transactions (equal to the header's).
    pub gas_used: u64,
    /// Blob gas used by the transactions (Cancun on; equal to the header's).
    pub blob_gas_used: u64,
    /// The requests hash (Prague on; equal to the header's).
    pub requests_hash: Option<H256>,
}

/// Why a block could not be executed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError<E: std::error::Error + 'static> {
    /// The block is invalid.
    #[error("invalid block: {0}")]
    Invalid(#[from] InvalidBlock),
    /// A read of the parent state (or of a block hash) failed.
    #[error(transparent)]
    State(DbError<E>),
    /// revm's state broke its own invariants.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// revm failed for a reason that is not the block's (a header revm refuses, a fatal
    /// precompile error).
    #[error("revm failed: {0}")]
    Evm(String),
}

impl<E: std::error::Error + 'static> ExecError<E> {
    /// A read of the block's state that failed.
    pub(crate) fn read(e: E) -> Self {
        ExecError::State(DbError::Read(e))
    }
}

/// Execute `block` over `parent` (a reader of its parent's post-state) with `hashes` of
/// the blocks before it, under `chain` (see the module docs for what the caller does).
pub fn execute_block<R: WorldReader, B: BlockHashes + ?Sized>(
    block: &EthBlock,
    parent: R,
    hashes: &B,
    chain: &ChainConfig,
) -> Result<BlockOutcome, ExecError<R::Error>> {
    let outcome = execute_unchecked(block, parent, hashes, chain)?;
    check_results(block, outcome.gas_used, &outcome.receipts, outcome.requests_hash)?;
    Ok(outcome)
}

/// [`execute_block`] but for the header's commitments to the results (gas used, receipts
/// root, logs bloom, requests hash), which are not checked: what a block builder runs
/// before it seals a header with them (`crate::generate`).
pub(crate) fn execute_unchecked<R: WorldReader, B: BlockHashes + ?Sized>(
    block: &EthBlock,
    parent: R,
    hashes: &B,
    chain: &ChainConfig,
) -> Result<BlockOutcome, ExecError<R::Error>> {
    let header = &block.header;
    let fork = chain.fork_at(header.timestamp).map_err(InvalidBlock::from)?;
    validate_body(block, fork, chain)?;
    let (cfg, block_env) = environment(block, fork, chain);
    let env = Env { cfg: &cfg, block: &block_env };
    let mut overlay = BlockOverlay::new(parent, hashes);
    let beacon_root = header.parent_beacon_block_root.filter(|_| fork >= Fork::Cancun);
    let parent_hash = (fork >= Fork::Prague).then_some(header.parent_hash);
    system::pre_block(&mut overlay, &env, beacon_root, parent_hash)?;
    let receipts = run_transactions(block, &mut overlay, &env)?;
    if let Some(withdrawals) = &block.withdrawals {
        system::withdraw(&mut overlay, withdrawals)?;
    }
    let requests_hash = if fork >= Fork::Prague {
        Some(system::requests(&mut overlay, &env, &receipts, chain.deposit_contract)?)
    } else {
        None
    };
    let gas_used = receipts.last().map_or(0, |r| r.cumulative_gas_used);
    Ok(BlockOutcome {
        fork,
        changes: overlay.into_changes(),
        receipts,
        gas_used,
        blob_gas_used: header.blob_gas_used.unwrap_or_default(),
        requests_hash,
    })
}

/// revm's configuration and block environment for `block` at `fork`.
fn environment(block: &EthBlock, fork: Fork, chain: &ChainConfig) -> (CfgEnv, BlockEnv) {
    let header = &block.header;
    let mut cfg = CfgEnv::new_with_spec(fork.spec());
    cfg.chain_id = chain.chain_id;
    let blob = chain.blob_params(fork);
    if let Some(params) = blob {
        cfg.max_blobs_per_tx = Some(params.max_blobs_per_tx);
        cfg.blob_base_fee_update_fraction = u64::try_from(params.update_fraction).ok();
    }
    let block_env = BlockEnv {
        number: U256::from(header.number),
        beneficiary: header.beneficiary,
        timestamp: U256::from(header.timestamp),
        gas_limit: header.gas_limit,
        basefee: header.base_fee_per_gas.unwrap_or_default(),
        difficulty: header.difficulty,
        prevrandao: Some(header.mix_hash),
        blob_excess_gas_and_price: blob.map(|params| {
            let fraction = u64::try_from(params.update_fraction).unwrap_or(u64::MAX);
            BlobExcessGasAndPrice::new(header.excess_blob_gas.unwrap_or_default(), fraction)
        }),
        ..BlockEnv::default()
    };
    (cfg, block_env)
}

/// Run the transactions in order over `overlay`; their receipts.
fn run_transactions<R: WorldReader, B: BlockHashes + ?Sized>(
    block: &EthBlock,
    overlay: &mut BlockOverlay<'_, R, B>,
    env: &Env<'_>,
) -> Result<Vec<Receipt>, ExecError<R::Error>> {
    let mut receipts = Vec::with_capacity(block.transactions.len());
    let mut cumulative = 0u64;
    for (index, signed) in block.transactions.iter().enumerate() {
        let available = block.header.gas_limit.saturating_sub(cumulative);
        let gas_limit = signed.tx.gas_limit();
        if gas_limit > available {
            return Err(InvalidBlock::GasAllowanceExceeded { index, gas_limit, available }.into());
        }
        let mut evm = world_context(&*overlay, env.cfg.clone(), env.block.clone()).build_mainnet();
        let out = evm.transact(tx_env(signed)).map_err(|e| match e {
            EVMError::Transaction(reason) => {
                ExecError::Invalid(InvalidBlock::Transaction { index, reason: reason.to_string() })
            }
            EVMError::Database(e) => ExecError::State(e),
            other => ExecError::Evm(other.to_string()),
        })?;
        drop(evm);
        overlay.apply(evm_changes(&out.state)?);
        cumulative = cumulative.saturating_add(out.result.gas().tx_gas_used());
        let success = out.result.is_success();
        let tx_type = signed.tx.tx_type() as u8;
        receipts.push(Receipt::new(tx_type, success, cumulative, out.result.into_logs()));
    }
    Ok(receipts)
}

/// The header's commitments to execution's results.
fn check_results(
    block: &EthBlock,
    gas_used: u64,
    receipts: &[Receipt],
    requests_hash: Option<H256>,
) -> Result<(), InvalidBlock> {
    let header = &block.header;
    if header.gas_used != gas_used {
        return Err(InvalidBlock::GasUsed { header: header.gas_used, executed: gas_used });
    }
    let executed = receipts_root(receipts);
    if header.receipts_root.0 != executed.0 {
        return Err(InvalidBlock::ReceiptsRoot { header: H256(header.receipts_root.0), executed });
    }
    let bloom: Bloom = block_bloom(receipts);
    if header.logs_bloom != bloom {
        return Err(InvalidBlock::LogsBloom);
    }
    if let Some(executed) = requests_hash {
        let header = H256(header.requests_hash.unwrap_or_default().0);
        if header != executed {
            return Err(InvalidBlock::RequestsHash { header, executed });
        }
    }
    Ok(())
}
