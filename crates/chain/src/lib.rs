//! Arbor's chain layer: a transfer runtime modelled on Substrate's balances pallet, a block
//! builder that fills blocks up to a proof-of-validity limit using the exact per-transaction
//! proof size, block and witness codecs, and stateless block verification.
//!
//! - The runtime: accounts, `transfer_keep_alive` / `transfer_allow_death` ([`apply`] of a
//!   [`Transfer`]), fees, events and per-block bookkeeping ([`start_block`],
//!   [`finish_block`]), failing transfers rolled back through nested transactions.
//! - The builder: [`build_block`] (with proof recording) and [`build_block_unrecorded`].
//! - Codecs: [`Block`] and witness encodings ([`encode_witness`], [`decode_witness`]) with
//!   typed decode errors.
//! - [`block_txs`]: the runtime's transactions for `exec`'s executors (Block-STM).
//! - The import road, execution and commit pipelined, for any [`BlockExecutor`]
//!   ([`import_with`]); the transfer runtime's ([`import()`]).
//! - Chain files ([`ChainReader`], [`write_header`], [`write_block`]) and the random chain
//!   generator ([`generate`]).
//! - [`verify_block`] re-executes a block on a partial trie built from its witness alone
//!   and checks the post-state root.
//! - Layouts: the builder, the witness codec and verification take the trie layout as a
//!   type parameter (`build_block::<SubstrateV1, _>`), chosen at the edge (the CLI's
//!   `--layout`, through `trie::LayoutName::dispatch`).

#![forbid(unsafe_code)]

mod block;
mod builder;
mod chainfile;
mod parallel;
mod reader;
mod road;
mod runtime;
mod runtime_road;
mod verify;

pub use block::{decode_witness, encode_witness, Block, CodecError, Format};
pub use builder::{
    build_block, build_block_unrecorded, BuildConfig, BuildError, Built, PerTx, Stop,
    DEFAULT_POV_LIMIT, DEFAULT_WEIGHT_LIMIT,
};
pub use chainfile::{
    generate, write_block, write_header, ChainFileError, ChainHeader, ChainParams, GenerateError,
    BLOCK_BYTES_MAX, GENESIS_ACCOUNTS_MAX, GENESIS_BALANCE,
};
pub use parallel::{block_txs, BlockTx, ChainReceipt, ChainTx};
pub use reader::ChainReader;
pub use road::{
    import_with, BlockChanges, BlockExecutor, Executed, IdKind, ImportConfig, ImportError,
    ImportStats, Imported, InvalidBlock, Link, Pending, Rejection,
};
pub use runtime::{
    account, account_id, account_key, apply, default_author, event_key, finish_block,
    funded_accounts, genesis, paired_transfers, start_block, Account, AccountId, ApplyError,
    BlockContext, CorruptState, Counter, FailReason, InvalidTransaction, Outcome, Transfer,
    TransferKind, BLOCK_LENGTH_KEY, BLOCK_WEIGHT_KEY, EVENT_COUNT_KEY, EXISTENTIAL_DEPOSIT, FEE,
    FEE_POT_KEY, TRANSFER_BYTES, TRANSFER_WEIGHT,
};
pub use runtime_road::import;
pub use verify::{verify_block, verify_block_within, BlockLimits, VerifyError};
