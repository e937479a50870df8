//! The Ethereum account model on top of the generic trie: secure keys, account leaves,
//! per-account storage tries, genesis allocations and eth_getProof responses.

pub mod account;
pub mod genesis;
pub mod proof;
pub mod state;
pub mod u256;

pub use account::{secure_key, Account};
pub use genesis::{Genesis, GenesisError};
pub use proof::{AccountProof, EthProofError, StorageProof};
pub use state::{genesis_state_root, EthState};
pub use u256::U256;
