//! Arbor's trie layer: no I/O, only the Merkle-Patricia trie and what is built from it.
//!
//! - Hashes and paths: [`keccak256`], [`blake2_256`], [`Nibbles`], [`NibbleSlice`].
//! - Nodes: [`ChildRef`], the [`Layout`] seam (neutral: what one [`Family`] alone has is
//!   its codec, [`ExtensionCodec`] or [`NibbledCodec`], reached through
//!   [`Layout::FAMILY`]), Ethereum's layout [`EthLayout`] with the minimal RLP it is
//!   written in ([`RlpItem`], [`rlp_encode_list`]), and Substrate's layouts [`SubstrateV0`]
//!   and [`SubstrateV1`] (no extension nodes, SCALE, Blake2-256). Every layout decodes into
//!   [`NodeView`]. [`LayoutName`] names a layout chosen at run time (a command-line flag);
//!   [`LayoutName::dispatch`] runs a [`WithLayout`] in it.
//! - [`RootBuilder`], [`root_from_sorted`], [`parallel_root`]: the streaming root builder.
//! - [`Trie`]: the mutable trie over a [`NodeSource`], with cached hashes and dirty paths,
//!   in every layout; [`Trie::get_stored`] reads a value as its node holds it
//!   ([`StoredValue`]: a V1 value node by its hash, unread).
//! - [`update_trie`]: a block's one-pass update of path-keyed stored nodes over a
//!   [`PreState`] (stored nodes by path, the flat state's leaves) that a store implements:
//!   each [`Change`] with its old value in, the new root and [`NodeWrite`]s out.
//!   Why two engines: [`Trie`] is the general one (any hash-keyed [`NodeSource`], loads
//!   checked against their hashes, reads, proofs, witness recording, roots after any
//!   write), while [`update_trie`] serves only a block commit over stored nodes whose
//!   leaves live in the flat state, where it recognises a leaf from the change's old value
//!   instead of reading it, batches the hashes and fans out over the pool. A store's rare
//!   rewrites of a few keys (reverting a block, the recent window's old nodes) use [`Trie`]
//!   over the same node source its reads and proofs use, which needs no second pre-state.
//! - [`verify_proof`] and friends: inclusion/exclusion proofs, multiproofs, range proofs;
//!   [`prove_sorted`]: a (multi)proof from sorted entries, in any layout.
//! - [`prove_key_range`] and [`verify_key_range`]: boundary proofs of key ranges whose
//!   verification rebuilds (and reports) every node inside the range (checkpoint chunks).
//! - [`Recorder`]: the witness recorder with nested scopes, counting sizes by the layout's
//!   [`ProofSizeRule`].
//! - A `RefCell<Trie>` is a [`state::StateReader`] (through [`state::StateReaderMut`]).
//!
//! Modules are private; this list is the whole public surface. The state seam
//! ([`state::TrieId`], [`state::StateReader`], [`state::StateView`], [`state::ChangeSet`],
//! [`state::H256`]...) is defined in the `state` crate and imported from there only: this
//! crate does not re-export it. The Ethereum account model (accounts, genesis, eth_getProof
//! JSON) lives in the `eth` crate.

#![forbid(unsafe_code)]

mod builder;
mod ethereum;
mod hash;
mod layout_name;
mod mutable;
mod nibbles;
mod node;
mod proof;
mod prover;
mod range;
mod recorder;
mod rlp;
mod scale;
mod source;
mod substrate;
mod update;

pub use builder::{
    parallel_root, root_from_sorted, BuildError, EmittedKind, HashStats, NodeSink, RootBuilder,
};
pub use ethereum::EthLayout;
pub use hash::{blake2_256, keccak256, EMPTY_CODE_HASH, EMPTY_ROOT, SUBSTRATE_EMPTY_ROOT};
pub use layout_name::{LayoutName, UnknownLayout, WithLayout};
pub use mutable::{
    path_hex, CollapseDelta, CommittedNode, CommittedValue, Entry, RemovedNode, StoredValue, Trie,
    TrieError, TrieUpdates,
};
pub use nibbles::{common_prefix_nibbles, nibble_at, NibbleSlice, Nibbles};
pub use node::{
    ChildKind, ChildRef, ExtensionCodec, Family, Layout, NibbledCodec, NodeError, NodeValue,
    NodeView, ProofSizeRule, INLINE_MAX,
};
pub use proof::{
    verify_multiproof, verify_proof, verify_range_proof, verify_value, ProofError, RangeProof,
    UsedNodes,
};
pub use prover::prove_sorted;
pub use range::{prove_key_range, verify_key_range, RangeStats};
pub use recorder::Recorder;
pub use rlp::{rlp_encode_list, rlp_encode_string, RlpError, RlpItem, RlpListIter};
pub use source::{MemoryNodeSource, NodeSource, SourceError};
pub use substrate::{SubstrateV0, SubstrateV1, SUBSTRATE_V1_VALUE_NODE_MIN};
pub use update::{update_trie, Change, NodeWrite, PreState, UpdateError, Updated};
