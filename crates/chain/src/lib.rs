//! Arbor's chain layer: a transfer runtime modelled on Substrate's balances pallet, a block
//! builder that fills blocks up to a proof-of-validity limit using the exact per-transaction
//! proof size, block and witness codecs, and stateless block verification.
//!
//! - [`runtime`]: accounts, `transfer_keep_alive` / `transfer_allow_death`, fees, events and
//!   per-block bookkeeping, failing transfers rolled back through nested transactions.
//! - [`builder`]: [`build_block`] (with proof recording) and [`build_block_unrecorded`].
//! - [`block`]: [`Block`] and witness encodings with typed decode errors.
//! - [`parallel`]: the runtime's transactions for `exec`'s executors (Block-STM).
//! - [`import`]: the import road, execution and commit pipelined ([`import()`]).
//! - [`chainfile`]: chain files (a genesis and its blocks) and the random chain generator.
//! - [`verify`]: [`verify_block`] re-executes a block on a partial trie built from its
//!   witness alone and checks the post-state root.

#![forbid(unsafe_code)]

pub mod block;
pub mod builder;
pub mod chainfile;
pub mod import;
pub mod parallel;
pub mod runtime;
pub mod verify;

pub use block::{decode_witness, encode_witness, Block, CodecError, Format};
pub use builder::{
    build_block, build_block_unrecorded, BuildConfig, BuildError, Built, PerTx, Stop,
};
pub use import::{import, ImportConfig, ImportError, ImportStats, Imported, InvalidBlock};
pub use runtime::{AccountId, BlockContext, Outcome, Transfer, TransferKind};
pub use verify::{verify_block, verify_block_within, BlockLimits, VerifyError};
