//! Arbor's trie layer: no I/O, only the Merkle-Patricia trie and what is built from it.
//!
//! - [`node`]: node references, the [`Layout`] seam and the Ethereum codec.
//! - [`builder`]: the streaming root builder (serial and parallel).
//! - [`trie`]: the mutable trie over a [`NodeSource`], with cached hashes and dirty paths.
//! - [`proof`]: inclusion/exclusion proofs, multiproofs and range proofs.
//! - [`recorder`]: the witness recorder with nested scopes.
//! - [`eth`]: secure keys, Ethereum accounts, genesis allocations.

#![forbid(unsafe_code)]

pub mod builder;
pub mod eth;
pub mod hash;
pub mod nibbles;
pub mod node;
pub mod proof;
pub mod recorder;
pub mod rlp;
pub mod source;
pub mod trie;

pub use builder::{parallel_root, root_from_sorted, BuildError, HashStats, NodeSink, RootBuilder};
pub use hash::{keccak256, EMPTY_CODE_HASH, EMPTY_ROOT, H256};
pub use nibbles::{NibbleSlice, Nibbles};
pub use node::{ChildKind, ChildRef, DecodedNode, EthLayout, Layout, NodeError};
pub use recorder::Recorder;
pub use source::{MemoryNodeSource, NodeSource, SourceError, StateReader, TrieId};
pub use trie::{CollapseDelta, CommittedNode, RemovedNode, Trie, TrieError, TrieUpdates};
