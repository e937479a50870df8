//! The checks a block passes before execution: its header alone and against its parent
//! ([`validate_header`]), and its body against its header ([`validate_body`]), for the
//! forks from Paris on, as geth's beacon consensus engine and block validator make them.
//!
//! Header: number, parent hash, timestamp, gas limit (≤ 2^63 - 1, ≥ 5000, within
//! parent/1024 of the parent's), gas used ≤ limit, extra data ≤ 32 bytes, difficulty,
//! nonce and ommers hash of a proof-of-stake block, the base fee EIP-1559 derives from the
//! parent, the fork's fields present and no other (withdrawals root from Shanghai; blob
//! gas used, excess blob gas and parent beacon root from Cancun; requests hash from
//! Prague), excess blob gas as EIP-4844 derives it and blob gas used a multiple of a
//! blob's gas within the block's maximum. Body: no ommers, the transactions root, the
//! withdrawals (present from Shanghai) and their root, each transaction's type allowed at
//! the fork, and the blob gas of the transactions equal to the header's.
//!
//! Cost: a few comparisons for the header; the body's roots cost one encoding and about one
//! keccak per transaction and withdrawal.

use alloy_consensus::{Header, Transaction as _, EMPTY_OMMER_ROOT_HASH};
use alloy_eips::eip1559::BaseFeeParams;
use alloy_eips::eip4844::DATA_GAS_PER_BLOB;
use alloy_primitives::B64;
use state::H256;

use super::chain::{ChainConfig, Fork};
use super::decode::EthBlock;
use super::invalid::InvalidBlock;
use super::receipts::{ommers_hash, transactions_root, withdrawals_root};

/// The largest gas limit a header may have.
const MAX_GAS_LIMIT: u64 = 0x7fff_ffff_ffff_ffff;
/// The smallest.
const MIN_GAS_LIMIT: u64 = 5000;
/// The gas limit may move by less than parent / this per block.
const GAS_LIMIT_BOUND_DIVISOR: u64 = 1024;
/// The longest extra data.
const MAX_EXTRA_DATA: usize = 32;

/// Check `header` alone and as the child of `parent` under `chain`; its fork when valid.
pub fn validate_header(
    header: &Header,
    parent: &Header,
    chain: &ChainConfig,
) -> Result<Fork, InvalidBlock> {
    let fork = chain.fork_at(header.timestamp)?;
    let parent_hash = H256(parent.hash_slow().0);
    if header.parent_hash.0 != parent_hash.0 {
        return Err(InvalidBlock::ParentHash {
            got: H256(header.parent_hash.0),
            want: parent_hash,
        });
    }
    let want = parent.number.saturating_add(1);
    if header.number != want {
        return Err(InvalidBlock::Number { got: header.number, want });
    }
    if header.timestamp <= parent.timestamp {
        return Err(InvalidBlock::Timestamp { got: header.timestamp, parent: parent.timestamp });
    }
    check_proof_of_stake(header)?;
    check_gas(header, parent)?;
    check_fields(header, fork)?;
    let want = parent
        .next_block_base_fee(BaseFeeParams::ethereum())
        .unwrap_or(alloy_eips::eip1559::INITIAL_BASE_FEE);
    let got = header.base_fee_per_gas.unwrap_or_default();
    if got != want {
        return Err(InvalidBlock::BaseFee { got, want });
    }
    if let Some(params) = chain.blob_params(fork) {
        let used = header.blob_gas_used.unwrap_or_default();
        if !used.is_multiple_of(DATA_GAS_PER_BLOB) {
            return Err(InvalidBlock::BlobGasUsedNotMultiple(used));
        }
        let max = params.max_blob_gas_per_block();
        if used > max {
            return Err(InvalidBlock::BlobGasAboveLimit { used, max });
        }
        // Before Cancun the parent has neither field: both count as zero.
        let sum = parent
            .excess_blob_gas
            .unwrap_or_default()
            .saturating_add(parent.blob_gas_used.unwrap_or_default());
        let want = sum.saturating_sub(params.target_blob_gas_per_block());
        let got = header.excess_blob_gas.unwrap_or_default();
        if got != want {
            return Err(InvalidBlock::ExcessBlobGas { got, want });
        }
    }
    Ok(fork)
}

/// Difficulty, nonce and ommers hash of a proof-of-stake header; extra data's length.
fn check_proof_of_stake(header: &Header) -> Result<(), InvalidBlock> {
    if header.extra_data.len() > MAX_EXTRA_DATA {
        return Err(InvalidBlock::ExtraDataTooLong(header.extra_data.len()));
    }
    if !header.difficulty.is_zero() {
        return Err(InvalidBlock::Difficulty(header.difficulty));
    }
    if header.nonce != B64::ZERO {
        return Err(InvalidBlock::Nonce);
    }
    if header.ommers_hash != EMPTY_OMMER_ROOT_HASH {
        return Err(InvalidBlock::OmmersHash(H256(header.ommers_hash.0)));
    }
    Ok(())
}

/// Gas limit bounds and change, gas used within the limit.
fn check_gas(header: &Header, parent: &Header) -> Result<(), InvalidBlock> {
    let limit = header.gas_limit;
    if limit > MAX_GAS_LIMIT {
        return Err(InvalidBlock::GasLimitTooBig(limit));
    }
    if header.gas_used > limit {
        return Err(InvalidBlock::GasUsedAboveLimit { used: header.gas_used, limit });
    }
    if limit.abs_diff(parent.gas_limit) >= parent.gas_limit / GAS_LIMIT_BOUND_DIVISOR {
        return Err(InvalidBlock::GasLimitChange { got: limit, parent: parent.gas_limit });
    }
    if limit < MIN_GAS_LIMIT {
        return Err(InvalidBlock::GasLimitTooLow(limit));
    }
    Ok(())
}

/// The fork's optional header fields present, and no others.
fn check_fields(header: &Header, fork: Fork) -> Result<(), InvalidBlock> {
    let fields: [(&'static str, bool, Fork); 6] = [
        ("baseFeePerGas", header.base_fee_per_gas.is_some(), Fork::Paris),
        ("withdrawalsRoot", header.withdrawals_root.is_some(), Fork::Shanghai),
        ("blobGasUsed", header.blob_gas_used.is_some(), Fork::Cancun),
        ("excessBlobGas", header.excess_blob_gas.is_some(), Fork::Cancun),
        ("parentBeaconBlockRoot", header.parent_beacon_block_root.is_some(), Fork::Cancun),
        ("requestsHash", header.requests_hash.is_some(), Fork::Prague),
    ];
    for (field, present, from) in fields {
        match (present, fork >= from) {
            (false, true) => return Err(InvalidBlock::MissingField { field, fork: from.name() }),
            (true, false) => {
                return Err(InvalidBlock::UnexpectedField { field, fork: fork.name() })
            }
            _ => {}
        }
    }
    let later = [
        ("blockAccessListHash", header.block_access_list_hash.is_some()),
        ("slotNumber", header.slot_number.is_some()),
    ];
    if let Some((field, _)) = later.into_iter().find(|(_, present)| *present) {
        return Err(InvalidBlock::UnexpectedField { field, fork: fork.name() });
    }
    Ok(())
}

/// Check `block`'s body against its header at `fork`: ommers, transactions root,
/// withdrawals, transaction types, blob gas.
pub fn validate_body(
    block: &EthBlock,
    fork: Fork,
    chain: &ChainConfig,
) -> Result<(), InvalidBlock> {
    let header = &block.header;
    if !block.ommers.is_empty() {
        return Err(InvalidBlock::Ommers(block.ommers.len()));
    }
    let ommers = ommers_hash(&block.ommers);
    if header.ommers_hash.0 != ommers.0 {
        return Err(InvalidBlock::OmmersHash(H256(header.ommers_hash.0)));
    }
    let body = transactions_root(&block.transactions);
    if header.transactions_root.0 != body.0 {
        let header = H256(header.transactions_root.0);
        return Err(InvalidBlock::TransactionsRoot { header, body });
    }
    check_withdrawals(block, fork)?;
    let mut blob_gas = 0u64;
    for (index, signed) in block.transactions.iter().enumerate() {
        let tx_type = signed.tx.tx_type() as u8;
        let allowed = match tx_type {
            0..=2 => true,
            3 => fork >= Fork::Cancun,
            4 => fork >= Fork::Prague,
            _ => false,
        };
        if !allowed {
            return Err(InvalidBlock::TxType { index, tx_type, fork: fork.name() });
        }
        let blobs = signed.tx.blob_versioned_hashes().map_or(0, <[_]>::len) as u64;
        blob_gas = blob_gas.saturating_add(blobs.saturating_mul(DATA_GAS_PER_BLOB));
    }
    if let Some(params) = chain.blob_params(fork) {
        let max = params.max_blob_gas_per_block();
        if blob_gas > max {
            return Err(InvalidBlock::BlobGasAboveLimit { used: blob_gas, max });
        }
        let header_gas = header.blob_gas_used.unwrap_or_default();
        if header_gas != blob_gas {
            return Err(InvalidBlock::BlobGasUsed { header: header_gas, body: blob_gas });
        }
    }
    Ok(())
}

/// Withdrawals present exactly from Shanghai on, matching the header's root.
fn check_withdrawals(block: &EthBlock, fork: Fork) -> Result<(), InvalidBlock> {
    let shanghai = fork >= Fork::Shanghai;
    match (&block.withdrawals, block.header.withdrawals_root) {
        (Some(withdrawals), Some(root)) if shanghai => {
            let body = withdrawals_root(withdrawals);
            if root.0 != body.0 {
                return Err(InvalidBlock::WithdrawalsRoot { header: H256(root.0), body });
            }
            Ok(())
        }
        (None, None) if !shanghai => Ok(()),
        (present, _) => {
            Err(InvalidBlock::Withdrawals { present: present.is_some(), fork: fork.name() })
        }
    }
}
