//! The Ethereum block executor, for the forks from Paris on: decode a block from its RLP,
//! validate its header against its parent and its body against its header, execute it
//! through revm over its parent state, and check the header's commitments to the results.
//!
//! The road a block takes (the import road and the blockchain-test runner both follow it):
//! 1. [`decode_block`]: RLP to an [`EthBlock`] (header, hash, transactions with their
//!    senders recovered in parallel, ommers, withdrawals), or a [`DecodeError`].
//! 2. [`validate_header`] against the parent's header under a [`ChainConfig`]: the fork's
//!    rules for the header alone and for the child of that parent; the block's [`Fork`].
//! 3. [`execute_block`] over a [`crate::WorldReader`] of the parent's post-state and the
//!    caller's [`crate::BlockHashes`]: the body checks, the system calls, the transactions, the
//!    withdrawals and requests; a [`BlockOutcome`] (the block's [`eth::EthChanges`], its
//!    [`Receipt`]s) when every commitment but the state root matches, else an
//!    [`ExecError`] ([`ExecError::Invalid`] with the [`InvalidBlock`] reason).
//! 4. The caller commits `outcome.changes` and compares the root with the header's
//!    `state_root`; only then is the block valid and its state the new head.
//!
//! Parts: `chain` (forks and configuration), `decode`, `invalid` (the reasons), `validate`,
//! `overlay` (the block's state so far), `txenv` (revm's transaction), `system` (system
//! calls, withdrawals, requests), `receipts` (receipts and list roots), `execute`, and
//! `genesis` (the genesis header of a geth genesis file, [`genesis_header`]).

mod chain;
mod decode;
mod execute;
mod genesis;
mod invalid;
mod overlay;
mod receipts;
mod system;
mod txenv;
mod validate;

pub use chain::{ChainConfig, ConfigError, Fork, UnsupportedFork};
pub(crate) use decode::split_header;
pub use decode::{decode_block, BlockTx, DecodeError, EthBlock, SignatureProblem, SignedTx};
pub use execute::{execute_block, BlockOutcome, ExecError};
pub use genesis::{genesis_header, header_hash, header_rlp, GenesisHeaderError};
pub use invalid::InvalidBlock;
pub use receipts::Receipt;
pub use validate::{validate_body, validate_header};

#[cfg(test)]
pub(crate) use decode::sender;
pub(crate) use execute::execute_unchecked;
pub(crate) use overlay::NON_EMPTY_STAND_IN;
pub(crate) use receipts::{block_bloom, receipts_root, transactions_root, withdrawals_root};
