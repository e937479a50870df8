//! Arbor's state overlay: the view executors write into during a block.
//!
//! - [`Overlay`]: per-key version stacks over a [`StateReader`] backend, nested
//!   transactions to any depth, a read cache, changed-key reports and the block's
//!   [`ChangeSet`].
//! - [`RangeReader`] and [`RangeIter`]: ordered iteration over a key range of one trie,
//!   merging the overlay's writes with the backend's entries.
//! - [`PovSession`]: an overlay over a recording trie of the parent state, with the exact
//!   proof size and state root after every transaction.
//! - [`MemoryState`]: an in-memory backend (one `BTreeMap` per trie) for tests and
//!   benchmarks.
//!
//! Values follow the trie and the store: an empty value means "absent", so writing an
//! empty value is a removal and no read ever returns an empty value.
//!
//! [`StateReader`]: trie::StateReader

#![forbid(unsafe_code)]

mod error;
mod memory;
mod overlay;
mod pov;
mod range;
mod slot;

use std::collections::BTreeMap;

use trie::TrieId;

pub use error::{ChangeSetError, TransactionError};
pub use memory::{MemoryRange, MemoryState};
pub use overlay::{Overlay, PendingWrite};
pub use pov::{PovError, PovSession, RecordingBackend};
pub use range::{RangeIter, RangeReader};

/// A block's changes: per trie, key → new value (`None` = delete). The same shape as the
/// store's `ChangeSet`, so an overlay's change set is handed to the store as is.
pub type ChangeSet = BTreeMap<TrieId, BTreeMap<Vec<u8>, Option<Vec<u8>>>>;

/// The value a read reports: `None` for absent or empty, as the trie and the store do.
fn normalize(value: Option<Vec<u8>>) -> Option<Vec<u8>> {
    value.filter(|v| !v.is_empty())
}
