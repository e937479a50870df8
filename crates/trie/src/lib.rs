//! Arbor's trie layer: no I/O, only the Merkle-Patricia trie and what is built from it.
//!
//! - Hashes and paths: [`H256`], [`keccak256`], [`Nibbles`], [`NibbleSlice`].
//! - Nodes: [`ChildRef`], the [`Layout`] seam and the Ethereum codec [`EthLayout`], with the
//!   minimal RLP it is written in ([`RlpItem`], [`rlp_encode_list`]).
//! - [`RootBuilder`], [`root_from_sorted`], [`parallel_root`]: the streaming root builder.
//! - [`Trie`]: the mutable trie over a [`NodeSource`], with cached hashes and dirty paths.
//! - [`verify_proof`] and friends: inclusion/exclusion proofs, multiproofs, range proofs.
//! - [`prove_key_range`] and [`verify_key_range`]: boundary proofs of key ranges whose
//!   verification rebuilds (and reports) every node inside the range (checkpoint chunks).
//! - [`Recorder`]: the witness recorder with nested scopes.
//! - A `RefCell<Trie>` is a [`StateReader`] (through [`state::StateReaderMut`]).
//!
//! Modules are private; this list is the whole public surface. The state seam
//! ([`TrieId`], [`StateReader`], [`StateView`], [`ChangeSet`], [`H256`]...) is defined in
//! the `state` crate and re-exported here, so `trie::StateReader` and `state::StateReader`
//! name the same trait. The Ethereum account model (accounts, genesis, eth_getProof JSON)
//! lives in the `eth` crate.

#![forbid(unsafe_code)]

mod builder;
mod hash;
mod nibbles;
mod node;
mod proof;
mod range;
mod recorder;
mod rlp;
mod source;
mod trie;

pub use builder::{
    parallel_root, root_from_sorted, BuildError, EmittedKind, HashStats, NodeSink, RootBuilder,
};
pub use hash::{keccak256, EMPTY_CODE_HASH, EMPTY_ROOT};
pub use nibbles::{common_prefix_nibbles, nibble_at, NibbleSlice, Nibbles};
pub use node::{ChildKind, ChildRef, DecodedNode, EthLayout, Layout, NodeError, INLINE_MAX};
pub use proof::{
    verify_multiproof, verify_proof, verify_range_proof, verify_value, ProofError, RangeProof,
    UsedNodes,
};
pub use range::{prove_key_range, verify_key_range, RangeStats};
pub use recorder::Recorder;
pub use rlp::{rlp_encode_list, rlp_encode_string, RlpError, RlpItem, RlpListIter};
pub use source::{MemoryNodeSource, NodeSource, SourceError};
pub use state::{
    apply_delta, decode_hex, key_bounds, ChangeSet, HexError, KeyBounds, KeyValue, MapRange,
    RangeItem, StateReader, StateView, TransactionError, TrieId, VecRange, H256,
};
pub use trie::{
    path_hex, CollapseDelta, CommittedNode, Entry, RemovedNode, Trie, TrieError, TrieUpdates,
};
