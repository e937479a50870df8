//! [`InvalidBlock`]: why a block is not valid, one variant per consensus rule, for the
//! header checks (alone and against the parent), the body checks and execution's
//! results. A block that fails any of them is refused whole: no state change of it is
//! returned.

use alloy_primitives::U256;
use state::H256;

use super::chain::UnsupportedFork;

/// Why a block is invalid (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBlock {
    /// The block's fork is one this executor does not implement.
    #[error(transparent)]
    UnsupportedFork(#[from] UnsupportedFork),
    /// The header's parent hash is not the parent's hash.
    #[error("parent hash {got} is not the parent's hash {want}")]
    ParentHash {
        /// The header's.
        got: H256,
        /// The parent's.
        want: H256,
    },
    /// The number is not the parent's plus one.
    #[error("block number {got}, expected {want}")]
    Number {
        /// The header's.
        got: u64,
        /// The parent's plus one.
        want: u64,
    },
    /// The timestamp is not after the parent's.
    #[error("timestamp {got} is not after the parent's {parent}")]
    Timestamp {
        /// The header's.
        got: u64,
        /// The parent's.
        parent: u64,
    },
    /// The gas limit is above 2^63 - 1.
    #[error("gas limit {0} is above 2^63 - 1")]
    GasLimitTooBig(u64),
    /// The gas limit is below 5000.
    #[error("gas limit {0} is below 5000")]
    GasLimitTooLow(u64),
    /// The gas limit moved by parent/1024 or more.
    #[error(
        "gas limit {got} moved too far from the parent's {parent} (less than parent/1024 allowed)"
    )]
    GasLimitChange {
        /// The header's.
        got: u64,
        /// The parent's.
        parent: u64,
    },
    /// More gas used than the limit.
    #[error("gas used {used} is above the gas limit {limit}")]
    GasUsedAboveLimit {
        /// The header's gas used.
        used: u64,
        /// The header's gas limit.
        limit: u64,
    },
    /// Extra data longer than 32 bytes.
    #[error("extra data has {0} bytes (at most 32)")]
    ExtraDataTooLong(usize),
    /// Non-zero difficulty after the merge.
    #[error("difficulty {0} after the merge (must be 0)")]
    Difficulty(U256),
    /// Non-zero nonce after the merge.
    #[error("header nonce is not zero after the merge")]
    Nonce,
    /// Ommers after the merge.
    #[error("{0} ommers after the merge (none allowed)")]
    Ommers(usize),
    /// The ommers hash is not that of an empty list.
    #[error("ommers hash {0} is not the empty list's")]
    OmmersHash(H256),
    /// The base fee is not the one EIP-1559 gives from the parent.
    #[error("base fee {got}, expected {want} (EIP-1559)")]
    BaseFee {
        /// The header's.
        got: u64,
        /// From the parent.
        want: u64,
    },
    /// A header field the fork requires is absent.
    #[error("header field {field} is missing (required from {fork})")]
    MissingField {
        /// The field.
        field: &'static str,
        /// The fork that requires it.
        fork: &'static str,
    },
    /// A header field the fork does not have is present.
    #[error("header field {field} is present but fork {fork} has no such field")]
    UnexpectedField {
        /// The field.
        field: &'static str,
        /// The block's fork.
        fork: &'static str,
    },
    /// Excess blob gas is not the one EIP-4844 gives from the parent.
    #[error("excess blob gas {got}, expected {want} (EIP-4844)")]
    ExcessBlobGas {
        /// The header's.
        got: u64,
        /// From the parent.
        want: u64,
    },
    /// Blob gas used is not a multiple of the gas per blob.
    #[error("blob gas used {0} is not a multiple of 131072")]
    BlobGasUsedNotMultiple(u64),
    /// Blob gas used is above the block's maximum.
    #[error("blob gas used {used} is above the block's maximum {max}")]
    BlobGasAboveLimit {
        /// The header's (or the transactions') blob gas.
        used: u64,
        /// The fork's maximum.
        max: u64,
    },
    /// The header's blob gas used is not the transactions' blob gas.
    #[error("header blob gas used {header}, the transactions use {body}")]
    BlobGasUsed {
        /// The header's.
        header: u64,
        /// The transactions'.
        body: u64,
    },
    /// The transactions root does not match the transactions.
    #[error("transactions root {header}, the transactions give {body}")]
    TransactionsRoot {
        /// The header's.
        header: H256,
        /// Computed.
        body: H256,
    },
    /// The withdrawals root does not match the withdrawals.
    #[error("withdrawals root {header}, the withdrawals give {body}")]
    WithdrawalsRoot {
        /// The header's.
        header: H256,
        /// Computed.
        body: H256,
    },
    /// Withdrawals present before Shanghai, or absent from it on.
    #[error("the body's withdrawals are {}, at fork {fork}", if *.present { "present" } else { "absent" })]
    Withdrawals {
        /// Whether the body has a withdrawals list.
        present: bool,
        /// The block's fork.
        fork: &'static str,
    },
    /// A transaction type the fork does not have.
    #[error("transaction {index} has type {tx_type}, not allowed at fork {fork}")]
    TxType {
        /// The transaction's index.
        index: usize,
        /// Its type.
        tx_type: u8,
        /// The block's fork.
        fork: &'static str,
    },
    /// A transaction's gas limit is above the gas the block has left.
    #[error("transaction {index} has gas limit {gas_limit}, the block has {available} left")]
    GasAllowanceExceeded {
        /// The transaction's index.
        index: usize,
        /// Its gas limit.
        gas_limit: u64,
        /// The block's gas left.
        available: u64,
    },
    /// revm refused a transaction (nonce, balance, fees, intrinsic gas, blobs…).
    #[error("transaction {index} is invalid: {reason}")]
    Transaction {
        /// The transaction's index.
        index: usize,
        /// revm's reason.
        reason: String,
    },
    /// The header's gas used is not what the transactions used.
    #[error("header gas used {header}, execution used {executed}")]
    GasUsed {
        /// The header's.
        header: u64,
        /// Execution's.
        executed: u64,
    },
    /// The receipts root does not match the receipts.
    #[error("receipts root {header}, execution gives {executed}")]
    ReceiptsRoot {
        /// The header's.
        header: H256,
        /// Computed.
        executed: H256,
    },
    /// The logs bloom does not match the receipts.
    #[error("logs bloom differs from the receipts' union")]
    LogsBloom,
    /// The requests hash does not match the block's requests (EIP-7685).
    #[error("requests hash {header}, execution gives {executed}")]
    RequestsHash {
        /// The header's.
        header: H256,
        /// Computed.
        executed: H256,
    },
    /// A system contract call that must succeed did not (EIP-7002/7251), or its contract
    /// has no code.
    #[error("system call to {contract} failed: {reason}")]
    SystemCall {
        /// The system contract.
        contract: &'static str,
        /// What happened.
        reason: String,
    },
    /// A deposit contract log that is not a well-formed DepositEvent (EIP-6110).
    #[error("deposit log {index} of the block is malformed (EIP-6110)")]
    DepositLog {
        /// The log's index among the deposit contract's logs.
        index: usize,
    },
}
