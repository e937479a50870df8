//! The committer's point reads of the head, kept for the next commit when asked
//! ([`crate::StateDb::keep_reads`]): an executor reads every key it then writes (revm loads an
//! account or a slot before it changes it), so the commit takes those keys' old values
//! from here instead of reading them a second time.
//!
//! Soundness: a kept value is what [`crate::StateDb::get`] returned at the head whose root the
//! record carries. A root is a commitment to the whole state, so a value kept at root R
//! is the value at any head whose root is R; a commit takes the record only when its head
//! root is the record's, and every commit empties it. Nothing a caller says is trusted:
//! the values are the store's own answers. Memory: at most [`KEPT_MAX`] entries (reads
//! past it are served and not kept; their keys are read by the commit as before).

use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use state::{TrieId, H256};

use crate::error::StoreError;
use crate::keys::flat_key;

/// The most reads kept between two commits.
const KEPT_MAX: usize = 1 << 20;

/// Flat key → value read (`None`: absent).
pub(crate) type KeptValues = FxHashMap<Vec<u8>, Option<Arc<[u8]>>>;

/// The record (see the module docs).
#[derive(Default)]
pub(crate) struct KeptReads {
    on: bool,
    inner: Mutex<(H256, KeptValues)>,
}

impl KeptReads {
    /// Keep reads from now on, or stop and drop what is kept.
    pub(crate) fn switch(&mut self, on: bool) {
        self.on = on;
        if !on {
            *self.inner.get_mut() = Default::default();
        }
    }

    /// Keep `value`, read at the head whose root is `root`, unless the record is full.
    pub(crate) fn note(
        &self,
        root: H256,
        trie: &TrieId,
        key: &[u8],
        value: &Option<Arc<[u8]>>,
    ) -> Result<(), StoreError> {
        if !self.on {
            return Ok(());
        }
        let flat = flat_key(trie, key)?;
        let mut inner = self.inner.lock();
        if inner.0 != root {
            *inner = (root, KeptValues::default());
        }
        if inner.1.len() < KEPT_MAX {
            inner.1.entry(flat).or_insert_with(|| value.clone());
        }
        Ok(())
    }

    /// The values kept at the head whose root is `root` (none if the record is of another
    /// root), leaving the record empty.
    pub(crate) fn take(&self, root: H256) -> KeptValues {
        let (at, values) = std::mem::take(&mut *self.inner.lock());
        if at == root {
            values
        } else {
            KeptValues::default()
        }
    }
}
