//! Arbor's state overlay: the view executors write into during a block.
//!
//! - [`Overlay`]: per-key version stacks over a [`StateReader`] backend, nested
//!   transactions to any depth, a read cache, changed-key reports and the block's
//!   [`ChangeSet`] (the seam's types are imported from the `state` crate).
//! - [`RangeIter`]: ordered iteration over a key range of one trie,
//!   merging the overlay's writes with the backend's entries.
//! - [`PovSession`]: an overlay over a recording trie of the parent state, with the exact
//!   proof size and state root after every transaction.
//!
//! Values follow the trie: by default (Ethereum's layout, and the store) an empty value
//! means "absent", so writing an empty value is a removal and no read ever returns an
//! empty value; an overlay for Substrate's layouts keeps empty values as values
//! ([`Overlay::keep_empty_values`]; [`PovSession`] sets it from its layout).
//!
//! [`StateReader`]: state::StateReader
//! [`ChangeSet`]: state::ChangeSet

#![forbid(unsafe_code)]

mod error;
mod pov;
mod range;
mod slot;
mod stack;

pub use error::ChangeSetError;
pub use pov::{PovError, PovSession, RecordingBackend};
pub use range::RangeIter;
pub use stack::{Overlay, PendingWrite};
