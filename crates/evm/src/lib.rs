//! revm over Arbor: Ethereum execution on Arbor's account model.
//!
//! - [`WorldReader`] (`reader`): the reads execution runs over (account, storage slot,
//!   code by hash, block hash), with a typed error; the in-memory [`eth::MemoryWorld`]
//!   implements it here.
//! - [`StoreWorld`] (`stored`): the same reads over the RocksDB store (the head through a
//!   `store::ReadHandle` or `&store::StateDb`, a recent block through a `store::BlockView`),
//!   block hashes from a caller's [`BlockHashes`], errors [`StoreReadError`].
//! - [`StoreTries`] (`store_tries`): those store states as `eth`'s `TrieReader` and
//!   `TrieProver`, the one adapter `eth::AccountReader` reads and proves through over the
//!   store (for [`StoreWorld`], `arbor prove --db`, the C ABI's account calls).
//! - [`WorldDb`] (`database`): revm's `Database` and `DatabaseRef` over any
//!   [`WorldReader`], with its errors ([`DbError`]).
//! - [`Eip7610Journal`] and [`world_context`] (`journal`): revm's journal with EIP-7610's
//!   collision rule (creation over non-empty storage fails), which revm lacks, and the
//!   context that runs transactions over a [`WorldReader`] with it.
//! - [`evm_changes`] (`changes`): revm's committed state after a transaction as one
//!   [`eth::EthChanges`] (self-destruct, creation over storage, EIP-161's removal of touched
//!   empty accounts, new code), which a commit takes; per-transaction changes merge into a
//!   block's with [`eth::EthChanges::merge`].
//! - [`RecordingReader`] and [`PovNeeds`] (`access`): what a transaction read and wrote,
//!   the input a per-transaction proof will need.
//! - [`block`]: the Ethereum block executor (decode, validate, execute through revm,
//!   check the header's commitments), for the forks from Paris on.
//! - [`road`]: Ethereum blocks on the import road (`chain::import_with`): the EVM's
//!   `chain::BlockExecutor` over the road's pending state, [`road::import_eth`].
//! - [`blocktest`]: the Ethereum blockchain-test runner, over a backend seam.
//! - [`generate`]: generated chains (keys, the token, signed transactions, blocks
//!   executed and sealed with their results) for `arbor gen-chain --evm` and the benches.
//! - [`statetest`]: the Ethereum state-test runner.
//! - What both runners share: their fixtures' JSON (`fixture_json`: the field readers and
//!   [`FixtureError`], [`FieldProblem`]) and their store back-ends' database (`test_db`:
//!   creation, the check at the end, removal; [`TestDbError`]).
//!
//! Addresses are `eth::Address` (20 bytes), hashes and slots `state::H256`, numbers
//! `alloy_primitives::U256`; revm's own types appear only at revm's interfaces.

#![forbid(unsafe_code)]

mod access;
pub mod block;
pub mod blocktest;
mod changes;
mod database;
mod fixture_json;
pub mod generate;
mod journal;
mod reader;
pub mod road;
pub mod statetest;
mod store_tries;
mod stored;
mod test_db;

pub use access::{PovNeeds, Reads, RecordingReader};
pub use changes::{evm_changes, ConvertError};
pub use database::{DbError, WorldDb};
pub use fixture_json::{FieldProblem, FixtureError};
pub use journal::{world_context, Eip7610Journal, WorldContext};
pub use reader::WorldReader;
pub use store_tries::StoreTries;
pub use stored::{BlockHashes, NoBlockHashes, StoreReadError, StoreWorld};
pub use test_db::TestDbError;
