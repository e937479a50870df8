//! Arbor's state seam: what every layer above the trie reads, executes and commits
//! through, defined once at the bottom of the crate graph with no dependency of ours.
//!
//! - [`StateReader`]: point reads and ordered ranges of one trie at a time, fallible with
//!   the reader's own typed error; [`StateReaderMut`] for states whose reads change them
//!   (a trie loading nodes), read through a `RefCell`.
//! - [`StateView`]: what a block's execution writes into (own writes visible, commutative
//!   counters with [`apply_delta`], nested transactions).
//! - [`ChangeSet`]: a block's changes, per [`TrieId`]; [`NestedChanges`] with the child
//!   tries a commit clears and the code it stores, for states whose main-trie leaves commit
//!   to child tries as a [`ChildRoots`] model says (the Ethereum account model).
//! - [`TrieId`] and the 32-byte [`H256`] naming storage tries (no hashing here: hashes are
//!   computed by the trie).
//! - The one ordered merge of writes over a base ([`merge_writes`], [`MergeWrites`]) and
//!   the two-source [`Join`] it is built on, which every layered state's range reads and
//!   the executors' scans use.
//! - In-memory states for tests: a plain `BTreeMap` (the main trie) and [`MemoryState`].
//!
//! The store implements [`StateReader`], the overlay and the executors implement
//! [`StateView`]; the executors depend on this crate alone, so execution never links the
//! trie. Modules are private; this list is the whole public surface, one path per item.

#![forbid(unsafe_code)]

mod h256;
mod id;
mod memory;
mod merge;
mod nested;
mod reader;
mod view;

pub use h256::{decode_hex, HexError, H256};
pub use id::TrieId;
pub use memory::{MapRange, MemoryRange, MemoryState};
pub use merge::{merge_writes, Join, Joined, MergeWrites, Order};
pub use nested::{ChildRoots, LeafError, NestedChanges};
pub use reader::{
    key_bounds, key_prefix64, KeyBounds, KeyValue, RangeItem, StateReader, StateReaderMut, VecRange,
};
pub use view::{apply_delta, ChangeSet, StateView, TransactionError};
