//! The Ethereum account model on top of Arbor's generic trie.
//!
//! - Accounts ([`Account`]): the leaf `RLP[nonce, balance, storage_root, code_hash]` of the
//!   main trie under the secure key `keccak(address)` ([`secure_key`]); storage slots are
//!   leaves `keccak(slot) → RLP(value)` of one storage trie per account, named
//!   `TrieId::Storage(keccak(address))`.
//! - Genesis allocations ([`Genesis`]) parsed from the JSON that geth, reth and the
//!   ethereum/tests fixtures write, quirks included; their state root
//!   ([`genesis_state_root`]), their flat entries for a store's bulk load
//!   ([`genesis_entries`]) and an in-memory state that answers eth_getProof ([`EthState`]).
//! - Changes and commits ([`EthChanges`], [`MemoryWorld`]): one block's or transaction's
//!   account-model changes (accounts written or removed, storage cleared, slot writes, new
//!   code), and an in-memory world that applies them and returns the state root through
//!   Arbor's trie, answering account, storage and code reads.
//! - The model as a store commits it ([`AccountModel`], [`EthChanges::to_nested`]): which
//!   storage trie an account leaf commits to, and a block's changes as one nested commit.
//! - eth_getProof (EIP-1186) responses ([`AccountProof`]): parse, emit, verify.
//! - Reads and proofs of the account model over any back-end of tries ([`AccountReader`]
//!   over a [`TrieReader`] / [`TrieProver`]: a store at a block, [`EthState`]): account,
//!   slot, code, and the eth_getProof answer, checked against the root before it is served.
//! - Numbers are [`alloy_primitives::U256`] (imported from there: this crate re-exports
//!   nothing); [`parse_quantity`] reads the JSON-RPC spelling with typed errors
//!   ([`NumberError`]), and the genesis parser reads geth's.
//!
//! Nothing here does I/O: callers hand in strings or parsed JSON.

#![forbid(unsafe_code)]

mod account;
mod changes;
mod genesis;
mod memory_world;
mod model;
mod number;
mod proof;
mod reader;
mod world;

pub use account::{decode_storage_value, secure_key, storage_value_rlp, Account, AccountError};
pub use changes::{AccountChange, AccountWrite, ChangeCounts, CodeHashMismatch, EthChanges};
pub use genesis::{
    parse_address, parse_json_strict, Address, FieldError, Genesis, GenesisAccount, GenesisError,
};
pub use memory_world::{MemoryWorld, WorldError};
pub use model::AccountModel;
pub use number::{parse_quantity, NumberError};
pub use proof::{AccountProof, EthProofError, FieldProblem, StorageProof};
pub use reader::{AccountReader, ReadError, TrieProver, TrieReader};
pub use world::{genesis_entries, genesis_state_root, EthState, GenesisEntries};
