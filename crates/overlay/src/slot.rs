//! One key's entry in the overlay: its version stack, its cached backend value and the
//! bookkeeping of changed-key reports.
//!
//! Invariant: version depths strictly increase from the bottom of the stack to the top,
//! and the top depth never exceeds the overlay's transaction depth. A slot exists for
//! every key written or read during the block; it is freed only when the block's changes
//! are drained.

use state::TrieId;

/// A key's value as written at one transaction depth.
#[derive(Debug, Clone)]
pub(crate) struct Version {
    /// The transaction depth the write belongs to (0 = outside every transaction).
    pub(crate) depth: u32,
    /// The written value; `None` = removed.
    pub(crate) value: Option<Vec<u8>>,
    /// Report epoch of the earliest write folded into this version (own or committed
    /// from a nested transaction). A rollback that discards a version whose first write
    /// predates the last report makes the key "changed" again.
    pub(crate) first_epoch: u64,
    /// Report epoch of the latest write folded into this version.
    pub(crate) last_epoch: u64,
}

/// The overlay's state for one key.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    /// The key's trie (kept here so reports need no reverse lookup).
    pub(crate) trie: TrieId,
    /// The key.
    pub(crate) key: Vec<u8>,
    /// Versions, oldest (shallowest) first.
    pub(crate) versions: Vec<Version>,
    /// The backend's value once read (`Some(None)` = absent in the backend).
    pub(crate) backend: Option<Option<Vec<u8>>>,
    /// The epoch in which the key was last queued as a report candidate.
    pub(crate) candidate_epoch: u64,
    /// The epoch in which a rollback last discarded a version written before the report
    /// that opened that epoch.
    pub(crate) reverted_epoch: u64,
}

impl Slot {
    /// A slot with no versions and nothing cached.
    pub(crate) fn new(trie: TrieId, key: Vec<u8>) -> Self {
        Slot {
            trie,
            key,
            versions: Vec::new(),
            backend: None,
            candidate_epoch: 0,
            reverted_epoch: 0,
        }
    }

    /// Queue the key for the report that closes epoch `epoch`; true when it was not
    /// queued yet (the caller then appends it to the candidate list).
    pub(crate) fn mark_candidate(&mut self, epoch: u64) -> bool {
        let fresh = self.candidate_epoch != epoch;
        self.candidate_epoch = epoch;
        fresh
    }

    /// Whether the report that closes epoch `epoch` lists this key: its newest surviving
    /// write happened in the epoch, or a rollback in the epoch discarded an older write.
    pub(crate) fn changed_in(&self, epoch: u64) -> bool {
        self.reverted_epoch == epoch || self.newest().is_some_and(|v| v.last_epoch == epoch)
    }

    /// The newest version, if the key was written and not rolled back.
    pub(crate) fn newest(&self) -> Option<&Version> {
        self.versions.last()
    }

    /// Record a write at `depth` in report epoch `epoch`. Returns true when the write
    /// opened a new version (the caller then lists the slot as touched at `depth`).
    pub(crate) fn write(&mut self, depth: u32, epoch: u64, value: Option<Vec<u8>>) -> bool {
        match self.versions.last_mut() {
            Some(top) if top.depth == depth => {
                top.value = value;
                top.last_epoch = epoch;
                false
            }
            top => {
                // Invariant: a version deeper than the current depth was committed or
                // rolled back with its transaction.
                assert!(
                    top.is_none_or(|t| t.depth < depth),
                    "overlay version deeper than the open transaction"
                );
                self.versions.push(Version { depth, value, first_epoch: epoch, last_epoch: epoch });
                true
            }
        }
    }

    /// Fold the top version (at `depth`) into depth `depth - 1`. Returns true when the
    /// parent had no version of its own, so the slot is now touched at the parent depth.
    pub(crate) fn commit(&mut self, depth: u32) -> bool {
        let child = self.pop_at(depth);
        match self.versions.last_mut() {
            Some(parent) if parent.depth == depth - 1 => {
                parent.value = child.value;
                parent.first_epoch = parent.first_epoch.min(child.first_epoch);
                parent.last_epoch = child.last_epoch;
                false
            }
            _ => {
                self.versions.push(Version { depth: depth - 1, ..child });
                true
            }
        }
    }

    /// Discard the top version (at `depth`). Returns true when it held a write made
    /// before the report that opened epoch `epoch`.
    pub(crate) fn rollback(&mut self, depth: u32, epoch: u64) -> bool {
        self.pop_at(depth).first_epoch < epoch
    }

    fn pop_at(&mut self, depth: u32) -> Version {
        // Invariant: a slot listed as touched at `depth` has its top version there.
        match self.versions.pop() {
            Some(v) if v.depth == depth => v,
            other => panic!(
                "overlay slot listed at depth {depth} has top version at {:?}",
                other.map(|v| v.depth)
            ),
        }
    }
}
