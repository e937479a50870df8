//! The nested commit: one block of a state whose main-trie leaves commit to child tries
//! (the Ethereum account model), in one call and one layer, with the model's encoding kept
//! behind a [`ChildRoots`].
//!
//! 1. The effective changes: each cleared child trie (named, or under a deleted parent
//!    leaf) gets a deletion for every key it holds that the block does not write again
//!    (one ordered range read of that trie: work proportional to its entries, once; the
//!    reverse diff then holds every old value, so a revert restores them all); every child
//!    trie with changes gets its parent leaf among the main trie's changes (its current leaf
//!    when the block does not write it).
//! 2. The old values of every changed key in one batch, as any commit reads them.
//! 3. The child tries' update passes, in parallel (the same pass as any commit's).
//! 4. Each written parent leaf takes its child's root: the new one where the child changed,
//!    else the one its old leaf holds, else the empty root. A parent that ends absent while
//!    its child keeps entries is refused ([`CommitError::ChildWithoutParent`]).
//! 5. The main trie's pass, then one layer with the blobs (code) and the block's record
//!    beside the tries.

use std::collections::{btree_map, BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use state::{ChangeSet, ChildRoots, NestedChanges, TrieId, H256};

use crate::error::CommitError;
use crate::kept::KeptValues;
use crate::keys::flat_key;
use crate::statedb::StateDb;
use crate::tiers::layer::Entry;

use super::pass::TrieCommit;
use super::{flat_keys, CommitInfo, Extras};

/// One trie's writes: key → new value (`None` deletes).
type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

impl StateDb {
    /// Commit one block of a state of nested tries (see the module docs): `block`'s
    /// changes, cleared child tries and blobs, with `model` saying which child trie each
    /// main-trie leaf commits to. One new head, one layer; nothing is visible if it fails.
    pub fn commit_nested(
        &mut self,
        block: &NestedChanges,
        model: &dyn ChildRoots,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_nested_inner(block, model, None)
    }

    /// [`StateDb::commit_nested`] that publishes the block only if its new main-trie root
    /// is `expected` (see [`StateDb::commit_expecting`]).
    pub fn commit_nested_expecting(
        &mut self,
        block: &NestedChanges,
        model: &dyn ChildRoots,
        expected: H256,
    ) -> Result<CommitInfo, CommitError> {
        self.commit_nested_inner(block, model, Some(expected))
    }

    fn commit_nested_inner(
        &mut self,
        block: &NestedChanges,
        model: &dyn ChildRoots,
        expected: Option<H256>,
    ) -> Result<CommitInfo, CommitError> {
        self.check_poison()?;
        self.check_complete()?;
        self.check_keys(&block.changes)?;
        let start = Instant::now();
        let kept = self.kept.take(self.head_root());
        let (changes, found) = self.effective_changes(block, model)?;
        self.prepare(&changes)?;
        let keys = flat_keys(&changes)?;
        let values = self.known_or_read(&keys, [&kept, &found])?;
        let olds: Vec<Option<&[u8]>> = values.iter().map(|v| v.as_deref()).collect();
        let read = start.elapsed();
        let start = Instant::now();
        let tries = self.update_nested(changes, keys, &olds, model)?;
        let code: Vec<Entry> =
            block.code.iter().map(|(h, c)| (h.0.to_vec(), Some(Arc::from(c.as_slice())))).collect();
        let extras = Extras { code, record: block.record.as_deref() };
        let mut info = self.publish_block(tries, extras, start.elapsed(), expected)?;
        info.timings.read_old_values = read;
        Ok(info)
    }

    /// Step 1 of the module docs: the block's changes with the cleared tries' deletions and
    /// the changed children's parent leaves; beside them, the old values those reads found.
    fn effective_changes(
        &self,
        block: &NestedChanges,
        model: &dyn ChildRoots,
    ) -> Result<(ChangeSet, KeptValues), CommitError> {
        let mut found = KeptValues::default();
        let mut changes = block.changes.clone();
        let mut cleared = block.cleared.clone();
        let deleted_parents = block.changes.get(&TrieId::Main).into_iter().flatten();
        for (key, value) in deleted_parents {
            if value.as_deref().is_none_or(<[u8]>::is_empty) {
                cleared.extend(model.child_of(key));
            }
        }
        let empty = self.layout().empty_root();
        for trie in cleared {
            if model.parent_of(&trie).is_none() {
                return Err(CommitError::NotAChild { trie });
            }
            // An empty child trie has nothing to delete (and its range read would find so).
            if self.stored_root(&trie)? == empty {
                continue;
            }
            let writes = changes.entry(trie).or_default();
            for entry in self.reader().flat_range(&trie, &[], None)? {
                let (key, old) = entry?;
                found.insert(flat_key(&trie, &key)?, Some(Arc::from(old)));
                writes.entry(key).or_insert(None);
            }
        }
        changes.retain(|_, writes| !writes.is_empty());
        let children: Vec<TrieId> =
            changes.keys().filter(|t| **t != TrieId::Main).copied().collect();
        for child in children {
            let parent = model.parent_of(&child).ok_or(CommitError::NotAChild { trie: child })?;
            if let btree_map::Entry::Vacant(slot) =
                changes.entry(TrieId::Main).or_default().entry(parent)
            {
                let current = self.reader().get(&TrieId::Main, slot.key())?;
                found.insert(flat_key(&TrieId::Main, slot.key())?, current.clone());
                slot.insert(current.map(|v| v.to_vec()));
            }
        }
        Ok((changes, found))
    }

    /// Steps 3 to 5: the children's passes, the roots folded into their parents' leaves,
    /// the main trie's pass; the results in trie order (the main trie first).
    fn update_nested(
        &self,
        mut changes: ChangeSet,
        mut keys: Vec<Vec<u8>>,
        olds: &[Option<&[u8]>],
        model: &dyn ChildRoots,
    ) -> Result<Vec<TrieCommit>, CommitError> {
        let keep_reads = self.shared().recent.read().enabled();
        // The main trie sorts first: its keys and old values lead the change set's order.
        let main = changes.remove(&TrieId::Main).unwrap_or_default();
        let n = main.len();
        let child_keys = keys.split_off(n);
        let children = self.update_tries(&changes, child_keys, &olds[n..], false, keep_reads)?;
        let roots: HashMap<TrieId, H256> = children.iter().map(|t| (t.trie, t.root)).collect();
        if main.is_empty() {
            return Ok(children);
        }
        let main = self.fold_roots(main, &olds[..n], &roots, model)?;
        let main = ChangeSet::from([(TrieId::Main, main)]);
        let mut tries = self.update_tries(&main, keys, &olds[..n], false, keep_reads)?;
        tries.extend(children);
        Ok(tries)
    }

    /// Step 4: every written main-trie leaf with a child trie takes that child's root
    /// (`olds` are the leaves' values before the block, in `main`'s order).
    fn fold_roots(
        &self,
        mut main: Writes,
        olds: &[Option<&[u8]>],
        roots: &HashMap<TrieId, H256>,
        model: &dyn ChildRoots,
    ) -> Result<Writes, CommitError> {
        let empty = self.layout().empty_root();
        for ((key, value), old) in main.iter_mut().zip(olds) {
            let Some(child) = model.child_of(key) else { continue };
            let root = match (roots.get(&child), old) {
                (Some(root), _) => *root,
                (None, Some(leaf)) => model.child_root(key, leaf)?,
                (None, None) => empty,
            };
            match value.as_mut().filter(|v| !v.is_empty()) {
                Some(leaf) => *leaf = model.with_child_root(key, leaf, &root)?,
                None if root != empty => {
                    return Err(CommitError::ChildWithoutParent {
                        trie: child,
                        parent: key.clone(),
                    })
                }
                None => {}
            }
        }
        Ok(main)
    }
}
