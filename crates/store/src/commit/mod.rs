//! The commit path: a block's change set becomes the new roots and one immutable layer.
//!
//! 1. The old value of every changed key is read in one batch (layers, then sorted RocksDB
//!    MultiGets on every thread): the reverse diff needs them, and they tell the walk which
//!    keys exist, so that a leaf is recognised without a probe.
//! 2. Every touched trie is updated by one sorted pass ([`trie::update_trie`], `pass.rs`) over a pre-state
//!    that serves nodes from the resident trie first ([`crate::tiers::resident`]), then the layers,
//!    caches and RocksDB; tries run in parallel, and the big ones fan out by child. Beside
//!    each walk, on the pool, the trie's flat changes and reverse diff are built.
//! 3. The layer is assembled (`assemble.rs`) from sorted vectors (flat changes in key order as the change
//!    set gives them, node writes sorted once), with the encoded reverse diff.
//! 4. The layer is published (its keys invalidated in the caches, the `Arc` pushed) and the
//!    resident trie takes the node writes and the nodes the walk loaded.
//!
//! Cost: the keccak calls of the new nodes, one decode per node the walk visits, one
//! batched read per changed key; no cache admission, no copy of a node into a second map.

mod assemble;
mod nested;
mod pass;

use std::sync::Arc;
use std::time::{Duration, Instant};

use state::{ChangeSet, TrieId, H256};

use crate::error::{CommitError, Corruption, StoreError};
use crate::kept::KeptValues;
use crate::keys::{flat_key, Column, KEY_BYTES_MAX};
use crate::statedb::StateDb;
use crate::tiers::layer::Entry;
use crate::tiers::reader::Values;

/// What a block stores beside its tries: blobs by hash (code), and its record.
#[derive(Default)]
pub(crate) struct Extras<'a> {
    /// `code` writes, ascending by hash.
    pub(crate) code: Vec<Entry>,
    /// The block's record (see `keys::META_BLOCK`).
    pub(crate) record: Option<&'a [u8]>,
}
use pass::TrieCommit;

/// What a commit produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The new head number.
    pub number: u64,
    /// The new main-trie root.
    pub root: H256,
    /// The new root of every touched trie.
    pub roots: Vec<(TrieId, H256)>,
    /// Keccak calls spent on the roots.
    pub hashes: u64,
    /// Leaves read by a prefix scan of `flat` (an insert beside another key's leaf, a branch
    /// collapsing onto a leaf it did not change).
    pub leaf_scans: u64,
    /// Where the commit's time went.
    pub timings: CommitTimings,
}

/// Wall time of a commit's phases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitTimings {
    /// The batched read of the changed keys' old values.
    pub read_old_values: Duration,
    /// The tries' update pass (walk, encode, hash), in parallel.
    pub trie_updates: Duration,
    /// Assembling the layer: sorting the node writes, the reverse diff.
    pub assemble: Duration,
    /// Publishing the layer (including any wait for the writer: back-pressure) and
    /// updating the resident trie.
    pub publish: Duration,
}

/// Every changed key's flat key, in the change set's order.
pub(crate) fn flat_keys(changes: &ChangeSet) -> Result<Vec<Vec<u8>>, StoreError> {
    changes.iter().flat_map(|(t, kv)| kv.keys().map(move |k| flat_key(t, k))).collect()
}

/// Every changed key's value before the block from the caller's `prior` (in the change
/// set's order; empty values are absent), by one merge of the two sorted maps.
fn priors<'p>(
    changes: &ChangeSet,
    prior: &'p ChangeSet,
) -> Result<Vec<Option<&'p [u8]>>, CommitError> {
    let mut olds = Vec::with_capacity(changes.values().map(|kv| kv.len()).sum());
    for (trie, kv) in changes {
        let mut known = prior.get(trie).map(|p| p.iter().peekable());
        for k in kv.keys() {
            let found = known.as_mut().and_then(|p| {
                while p.next_if(|(pk, _)| *pk < k).is_some() {}
                p.next_if(|(pk, _)| *pk == k)
            });
            let (_, old) =
                found.ok_or_else(|| CommitError::MissingPrior { trie: *trie, key: k.clone() })?;
            olds.push(old.as_deref().filter(|v| !v.is_empty()));
        }
    }
    Ok(olds)
}

impl StateDb {
    /// Every changed key's value before the block, by its flat key (`keys`, in the change
    /// set's order): from the first of `known` that holds it, else read, all the read ones
    /// in one batch.
    fn known_or_read<const N: usize>(
        &self,
        keys: &[Vec<u8>],
        known: [&KeptValues; N],
    ) -> Result<Values, StoreError> {
        let found: Vec<Option<Option<Arc<[u8]>>>> =
            keys.iter().map(|k| known.iter().find_map(|m| m.get(k)).cloned()).collect();
        let missing: Vec<Vec<u8>> =
            keys.iter().zip(&found).filter(|(_, f)| f.is_none()).map(|(k, _)| k.clone()).collect();
        // One value per missing key, in their order.
        let mut read = match missing.is_empty() {
            true => Vec::new(),
            false => self.reader().read_batch(Column::Flat, &missing)?,
        }
        .into_iter();
        Ok(found.into_iter().map(|f| f.or_else(|| read.next()).flatten()).collect())
    }

    /// Refuse a block with an over-long key, or an empty value where an empty value is a
    /// value, before any work is done.
    pub(crate) fn check_keys(&self, changes: &ChangeSet) -> Result<(), CommitError> {
        let layout = self.layout();
        for (trie, kv) in changes {
            if let Some(k) = kv.keys().find(|k| k.len() > KEY_BYTES_MAX) {
                return Err(CommitError::KeyTooLong {
                    trie: *trie,
                    len: k.len(),
                    max: KEY_BYTES_MAX,
                });
            }
            if !layout.allows_empty_value() {
                continue;
            }
            if let Some((k, _)) = kv.iter().find(|(_, v)| v.as_ref().is_some_and(|v| v.is_empty()))
            {
                return Err(CommitError::EmptyValue { trie: *trie, key: k.clone(), layout });
            }
        }
        Ok(())
    }

    /// Apply one block's changes, compute the new roots, and queue the block for
    /// persistence. Returns once the block is an in-memory layer (see [`StateDb::flush`]).
    /// Nothing of the block is visible if it fails. The keys' old values (for the reverse
    /// diff and the walk) are read here; [`StateDb::commit_with_prior`] takes them from the
    /// caller instead.
    pub fn commit(&mut self, changes: &ChangeSet) -> Result<CommitInfo, CommitError> {
        self.commit_reading(changes, None)
    }

    /// [`StateDb::commit`] that publishes the block only if its new main-trie root is
    /// `expected` (a block header's post-state root): on a mismatch nothing of the block is
    /// visible or queued, [`CommitError::RootMismatch`], and the store stays at its head.
    pub fn commit_expecting(
        &mut self,
        changes: &ChangeSet,
        expected: H256,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_reading(changes, Some(expected))
    }

    /// A commit that reads the changed keys' old values itself.
    fn commit_reading(
        &mut self,
        changes: &ChangeSet,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        let kept = self.kept.take(self.head_root());
        self.prepare(changes)?;
        let start = Instant::now();
        let keys = flat_keys(changes)?;
        let values = self.known_or_read(&keys, [&kept])?;
        let olds: Vec<Option<&[u8]>> = values.iter().map(|v| v.as_deref()).collect();
        let read = start.elapsed();
        let mut info = self.commit_with_olds(changes, keys, &olds, false, expected)?;
        info.timings.read_old_values = read;
        Ok(info)
    }

    /// [`StateDb::commit`] with every changed key's value before the block given by the
    /// caller (`prior`: per trie, key → old value or `None` for absent), as an executor that
    /// read them has them: the commit reads nothing but the nodes it rewrites. Every
    /// changed key needs a prior value ([`CommitError::MissingPrior`]). A prior value the
    /// trie contradicts (a key claimed absent that exists, present that does not, or with
    /// another value) is [`CommitError::PriorMismatch`], and nothing is committed; claims
    /// about keys whose value does not change are not checked (they change nothing).
    pub fn commit_with_prior(
        &mut self,
        changes: &ChangeSet,
        prior: &ChangeSet,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_prior(changes, prior, None)
    }

    /// [`StateDb::commit_with_prior`] that publishes only if the new main-trie root is
    /// `expected` (see [`StateDb::commit_expecting`]).
    pub fn commit_with_prior_expecting(
        &mut self,
        changes: &ChangeSet,
        prior: &ChangeSet,
        expected: H256,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_prior(changes, prior, Some(expected))
    }

    fn commit_prior(
        &mut self,
        changes: &ChangeSet,
        prior: &ChangeSet,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        self.prepare(changes)?;
        let start = Instant::now();
        let keys = flat_keys(changes)?;
        let olds = priors(changes, prior)?;
        let gathered = start.elapsed();
        let info =
            self.commit_with_olds(changes, keys, &olds, true, expected).map_err(|e| match e {
                CommitError::Store(s) => match s.corruption() {
                    Some(Corruption::OldValue { trie, key }) => {
                        CommitError::PriorMismatch { trie: *trie, key: key.clone() }
                    }
                    _ => CommitError::Store(s),
                },
                e => e,
            });
        info.map(|mut info| {
            info.timings.read_old_values = gathered;
            info
        })
    }

    /// The checks before any work, and the resident trie filled if it is not.
    pub(super) fn prepare(&mut self, changes: &ChangeSet) -> Result<(), CommitError> {
        self.check_poison()?;
        self.check_complete()?;
        self.check_keys(changes)?;
        if !self.resident.is_complete() {
            let layers = self.reader().layers.read().clone();
            let db = self.reader().db.clone();
            self.resident.fill(&db, &layers)?;
        }
        Ok(())
    }

    /// The commit once the old values are known (`olds[i]` is `keys[i]`'s, in the change
    /// set's order).
    fn commit_with_olds(
        &mut self,
        changes: &ChangeSet,
        keys: Vec<Vec<u8>>,
        olds: &[Option<&[u8]>],
        verify_old: bool,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        let start = Instant::now();
        let keep_reads = self.shared().recent.read().enabled();
        let tries = self.update_tries(changes, keys, olds, verify_old, keep_reads)?;
        self.publish_block(tries, Extras::default(), start.elapsed(), expected)
    }

    /// The block from its tries' results (in trie order, the main trie first) and what it
    /// stores beside its tries: its layer assembled, the expected root checked, the resident trie
    /// updated, the layer published and the head moved.
    pub(super) fn publish_block(
        &mut self,
        tries: Vec<TrieCommit>,
        extras: Extras<'_>,
        trie_updates: Duration,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        let (head_number, head_root) = (self.head_number(), self.head_root());
        let number = head_number
            .checked_add(1)
            .ok_or(StoreError::from(Corruption::HeadNumber { number: head_number }))?;
        let mut timings = CommitTimings { trie_updates, ..CommitTimings::default() };

        let start = Instant::now();
        let (layer, walked, info) = self.assemble(number, head_root, tries, extras)?;
        timings.assemble = start.elapsed();
        if let Some(expected) = expected.filter(|e| *e != info.root) {
            return Err(CommitError::RootMismatch { expected, computed: info.root });
        }

        let start = Instant::now();
        // The resident trie takes the block before it is published: only the committer
        // reads it, and a failed publish poisons the store.
        self.apply_resident(&layer, walked)?;
        let layer = self.push_layer(layer).inspect_err(|_| {
            self.shared().recent.write().truncate_above(head_number);
        })?;
        timings.publish = start.elapsed();
        self.set_head_in_memory(number, layer.root);
        Ok(CommitInfo { timings, ..info })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn set(entries: &[(&[u8], Option<&[u8]>)]) -> ChangeSet {
        let kv: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            entries.iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect();
        ChangeSet::from([(TrieId::Main, kv)])
    }

    #[test]
    fn priors_merge_the_sorted_maps() {
        let changes = set(&[(b"b", Some(b"1")), (b"d", None), (b"f", Some(b"2"))]);
        // Extra claims before, between and after the changed keys are skipped; an empty
        // value is absent.
        let prior = set(&[
            (b"a", Some(b"x")),
            (b"b", Some(b"old")),
            (b"c", None),
            (b"d", Some(b"")),
            (b"e", Some(b"y")),
            (b"f", None),
            (b"g", Some(b"z")),
        ]);
        let olds = priors(&changes, &prior).unwrap();
        assert_eq!(olds, vec![Some(b"old".as_slice()), None, None]);
        let missing = set(&[(b"b", Some(b"old")), (b"f", None)]);
        let e = priors(&changes, &missing).unwrap_err();
        assert!(matches!(e, CommitError::MissingPrior { ref key, .. } if key == b"d"), "{e:?}");
        let e = priors(&changes, &ChangeSet::new()).unwrap_err();
        assert!(matches!(e, CommitError::MissingPrior { ref key, .. } if key == b"b"), "{e:?}");
    }
}
