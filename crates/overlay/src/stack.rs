//! [`Overlay`]: the state view executors write into, over a read-only backend.
//!
//! Data structures. Every key the block writes or reads gets one slot in an arena
//! (`slots`), found through an ordered index per trie (`index`: trie → key → slot). A
//! slot holds the key's version stack, `(transaction depth, value)` pairs with depths
//! strictly increasing, and the backend's value once read. Each open transaction keeps
//! the list of slots that have a version at its depth (`levels`), so closing it touches
//! only those. Report candidates (`candidates`) are the slots written, or reverted by a
//! rollback, since the last [`Overlay::take_changed`].
//!
//! Costs (n = slots in the block, k = keys written in the transaction being closed):
//! reads and writes O(log n) for the index plus O(1) amortised; `start_transaction` O(1);
//! commit and rollback O(k), never O(n); `take_changed` O(c log c) for c candidates;
//! range reads O(log n) plus O(1) per entry; the change set O(n) plus one backend read
//! per key written without having been read.
//!
//! Read cache: the first read of a key that the overlay does not hold goes to the backend
//! and is kept in the key's slot, so executors re-reading a key pay one backend read per
//! block. It stays correct because the overlay owns its backend and only reads it: the
//! backend must not change underneath the overlay (a backend with interior mutability
//! must present one fixed state). The cache is dropped with the block's changes, whose
//! application is what changes the backend. Memory grows with the keys touched in the
//! block and is freed by [`Overlay::drain_changes`].

use std::collections::{btree_map, BTreeMap};

use state::{apply_delta, key_bounds, ChangeSet, StateReader, StateView, TransactionError, TrieId};

use crate::error::ChangeSetError;
use crate::range::RangeIter;
use crate::slot::Slot;

/// A key with a surviving write and its newest value (`None` = removed).
pub type PendingWrite<'a> = (TrieId, &'a [u8], Option<&'a [u8]>);

/// A block's pending state over a backend: per-key version stacks, nested transactions,
/// changed-key reports and the final [`ChangeSet`].
///
/// By default writes of an empty value are removals (Ethereum's trie and the store treat
/// empty as absent), so reads never return an empty value; an overlay for a layout where
/// an empty value is a value keeps them ([`Overlay::keep_empty_values`]).
#[derive(Debug)]
pub struct Overlay<R> {
    backend: R,
    /// Whether an empty value is a value (else it means absent).
    keep_empty: bool,
    /// Trie → key → index into `slots`.
    index: BTreeMap<TrieId, BTreeMap<Vec<u8>, usize>>,
    slots: Vec<Slot>,
    /// `levels[d - 1]`: the slots whose top version is at depth `d`, for each open
    /// transaction (depth 1 is the outermost).
    levels: Vec<Vec<usize>>,
    /// Emptied level lists kept for reuse, so that a transaction allocates nothing once
    /// the block is warm.
    spare_levels: Vec<Vec<usize>>,
    /// Slots that may be reported by the next `take_changed`, each once.
    candidates: Vec<usize>,
    /// Report epoch: starts at 1, incremented by every report (0 marks "never" in slots).
    epoch: u64,
}

impl<R: StateReader> Overlay<R> {
    /// An empty overlay over `backend`.
    pub fn new(backend: R) -> Self {
        Overlay {
            backend,
            keep_empty: false,
            index: BTreeMap::new(),
            slots: Vec::new(),
            levels: Vec::new(),
            spare_levels: Vec::new(),
            candidates: Vec::new(),
            epoch: 1,
        }
    }

    /// This overlay with an empty value kept as a value (`keep`: Substrate's layouts, where
    /// `trie::Layout::ALLOW_EMPTY_VALUE` holds) or taken as absent (the default: Ethereum's
    /// layout and the store). Chosen before the first write: writes already made keep the
    /// meaning they were made with.
    pub fn keep_empty_values(mut self, keep: bool) -> Self {
        self.keep_empty = keep;
        self
    }

    /// Whether an empty value is a value here (see [`Overlay::keep_empty_values`]).
    pub fn keeps_empty_values(&self) -> bool {
        self.keep_empty
    }

    /// A value as this overlay holds and reports it: `None` for absent, and for empty
    /// unless empty values are kept.
    fn normalize(&self, value: Option<Vec<u8>>) -> Option<Vec<u8>> {
        value.filter(|v| self.keep_empty || !v.is_empty())
    }

    /// The backend reads fall through to.
    pub fn backend(&self) -> &R {
        &self.backend
    }

    /// The backend, discarding every pending write.
    pub fn into_backend(self) -> R {
        self.backend
    }

    /// How many transactions are open (0 = none).
    pub fn transaction_depth(&self) -> usize {
        self.levels.len()
    }

    /// The value of `key` in trie `trie`: the newest write, else the backend's value
    /// (read once per block, then cached).
    pub fn get(&mut self, trie: &TrieId, key: &[u8]) -> Result<Option<&[u8]>, R::Error> {
        let idx = match self.find(trie, key) {
            Some(idx) => idx,
            None => {
                let value = self.normalize(self.backend.get(trie, key)?);
                let idx = self.insert_slot(trie, key);
                self.slots[idx].backend = Some(value);
                idx
            }
        };
        if self.slots[idx].versions.is_empty() && self.slots[idx].backend.is_none() {
            // Written and rolled back before any read: the backend was never asked.
            let value = self.normalize(self.backend.get(trie, key)?);
            self.slots[idx].backend = Some(value);
        }
        let slot = &self.slots[idx];
        Ok(match slot.newest() {
            Some(version) => version.value.as_deref(),
            None => slot.backend.as_ref().and_then(Option::as_deref),
        })
    }

    /// The newest write of `key` if it has one that survives (`Some(None)`: removed), without
    /// reading the backend.
    pub fn newest_write(&self, trie: &TrieId, key: &[u8]) -> Option<Option<&[u8]>> {
        let slot = &self.slots[self.find(trie, key)?];
        slot.newest().map(|v| v.value.as_deref())
    }

    /// Every key with a surviving write and its newest value (`None` = removed), in trie
    /// and key order. Costs O(keys touched in the block).
    pub fn pending_writes(&self) -> Vec<PendingWrite<'_>> {
        let mut out = Vec::new();
        for (trie, keys) in &self.index {
            for (key, &idx) in keys {
                if let Some(v) = self.slots[idx].newest() {
                    out.push((*trie, key.as_slice(), v.value.as_deref()));
                }
            }
        }
        out
    }

    /// Drop every cached backend value, so that the next read of each key asks the
    /// backend again (a recording backend then records it again).
    pub fn forget_backend_reads(&mut self) {
        for slot in &mut self.slots {
            slot.backend = None;
        }
    }

    /// Set `key` in trie `trie` to `value` in the innermost open transaction (or the block
    /// itself); an empty value removes the key unless empty values are kept.
    pub fn set(&mut self, trie: &TrieId, key: &[u8], value: Vec<u8>) {
        let value = self.normalize(Some(value));
        self.write(trie, key, value);
    }

    /// Remove `key` from trie `trie` in the innermost open transaction (or the block).
    pub fn remove(&mut self, trie: &TrieId, key: &[u8]) {
        self.write(trie, key, None);
    }

    /// Open a nested transaction: later writes can be undone with
    /// [`Overlay::rollback_transaction`] or kept with [`Overlay::commit_transaction`].
    pub fn start_transaction(&mut self) {
        assert!(self.levels.len() < u32::MAX as usize, "overlay transaction depth overflow");
        let touched = self.spare_levels.pop().unwrap_or_default();
        self.levels.push(touched);
    }

    /// Close the innermost transaction, keeping its writes: they now belong to the
    /// enclosing transaction (or the block). Costs O(keys written in it).
    pub fn commit_transaction(&mut self) -> Result<(), TransactionError> {
        let depth = self.depth();
        let mut touched = self.levels.pop().ok_or(TransactionError::NoTransaction)?;
        for &idx in &touched {
            if self.slots[idx].commit(depth) {
                if let Some(parent) = self.levels.last_mut() {
                    parent.push(idx);
                }
            }
        }
        touched.clear();
        self.spare_levels.push(touched);
        Ok(())
    }

    /// Close the innermost transaction, discarding its writes (and those of the
    /// transactions committed into it). Costs O(keys written in it).
    pub fn rollback_transaction(&mut self) -> Result<(), TransactionError> {
        let depth = self.depth();
        let mut touched = self.levels.pop().ok_or(TransactionError::NoTransaction)?;
        for &idx in &touched {
            let slot = &mut self.slots[idx];
            if slot.rollback(depth, self.epoch) {
                // The discarded version held a value the last report may have shown.
                slot.reverted_epoch = self.epoch;
                if slot.mark_candidate(self.epoch) {
                    self.candidates.push(idx);
                }
            }
        }
        touched.clear();
        self.spare_levels.push(touched);
        Ok(())
    }

    /// The keys changed since the previous call (or since the overlay was created or last
    /// drained), sorted by trie and key, each once.
    ///
    /// A key is changed when its newest surviving write happened since the last report,
    /// or when a rollback since the last report discarded a write made before it (its
    /// visible value may have gone back). Writes undone by a rollback before being
    /// reported do not count; a removal followed by a write is one change; a write that
    /// happens to restore the previous value still counts (values are not compared).
    /// Costs O(c log c) for the c keys written or reverted since the last report.
    pub fn take_changed(&mut self) -> Vec<(TrieId, Vec<u8>)> {
        let epoch = self.epoch;
        let slots = &self.slots;
        let mut changed: Vec<(TrieId, Vec<u8>)> = self
            .candidates
            .drain(..)
            .filter(|&idx| slots[idx].changed_in(epoch))
            .map(|idx| (slots[idx].trie, slots[idx].key.clone()))
            .collect();
        changed.sort_unstable();
        self.epoch += 1;
        changed
    }

    /// Hand over the block's changes and reset the overlay to empty over the same
    /// backend (read cache and change reports included).
    ///
    /// Lists only keys whose final value differs from the backend's: a write that
    /// restores the backend value, or removes a key the backend lacks, is dropped. Keys
    /// written without having been read cost one backend read here. Fails, leaving the
    /// overlay unchanged, when a transaction is open or a backend read fails.
    pub fn drain_changes(&mut self) -> Result<ChangeSet, ChangeSetError<R::Error>> {
        if !self.levels.is_empty() {
            return Err(ChangeSetError::TransactionsOpen { depth: self.levels.len() });
        }
        // Read first, so that a failed read leaves the overlay as it was.
        let keep_empty = self.keep_empty;
        for slot in &mut self.slots {
            if !slot.versions.is_empty() && slot.backend.is_none() {
                let value = self.backend.get(&slot.trie, &slot.key);
                let value = value.map_err(ChangeSetError::Backend)?;
                slot.backend = Some(value.filter(|v| keep_empty || !v.is_empty()));
            }
        }
        let index = std::mem::take(&mut self.index);
        let mut slots = std::mem::take(&mut self.slots);
        self.candidates.clear();
        self.epoch += 1;
        let mut changes = ChangeSet::new();
        for (trie, keys) in index {
            let entries: BTreeMap<Vec<u8>, Option<Vec<u8>>> = keys
                .into_iter()
                .filter_map(|(key, idx)| {
                    let slot = &mut slots[idx];
                    let value = slot.versions.pop()?.value;
                    // Invariant: the loop above read every written key's backend value.
                    let Some(base) = slot.backend.take() else {
                        panic!("overlay change set: backend value of a written key not read");
                    };
                    (base != value).then_some((key, value))
                })
                .collect();
            if !entries.is_empty() {
                changes.insert(trie, entries);
            }
        }
        Ok(changes)
    }

    /// [`Overlay::drain_changes`], consuming the overlay.
    pub fn into_change_set(mut self) -> Result<ChangeSet, ChangeSetError<R::Error>> {
        self.drain_changes()
    }

    /// The innermost open transaction's depth (0 = none).
    fn depth(&self) -> u32 {
        // Invariant: `start_transaction` keeps the depth within u32.
        self.levels.len() as u32
    }

    fn find(&self, trie: &TrieId, key: &[u8]) -> Option<usize> {
        self.index.get(trie)?.get(key).copied()
    }

    fn insert_slot(&mut self, trie: &TrieId, key: &[u8]) -> usize {
        let idx = self.slots.len();
        self.slots.push(Slot::new(*trie, key.to_vec()));
        self.index.entry(*trie).or_default().insert(key.to_vec(), idx);
        idx
    }

    fn write(&mut self, trie: &TrieId, key: &[u8], value: Option<Vec<u8>>) {
        let idx = match self.find(trie, key) {
            Some(idx) => idx,
            None => self.insert_slot(trie, key),
        };
        let depth = self.depth();
        let slot = &mut self.slots[idx];
        if slot.write(depth, self.epoch, value) {
            if let Some(level) = self.levels.last_mut() {
                level.push(idx);
            }
        }
        if slot.mark_candidate(self.epoch) {
            self.candidates.push(idx);
        }
    }
}

impl<R: StateReader> Overlay<R> {
    /// The entries of trie `trie` with `start <= key < end` (no upper bound when `end` is
    /// `None`) as this overlay sees them, in ascending key order. Empty when
    /// `end <= start`. Does not fill the read cache.
    pub fn range(
        &self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<RangeIter<'_, R>, R::Error> {
        let backend = self.backend.range(trie, start, end)?;
        let overlay = match (self.index.get(trie), key_bounds(start, end)) {
            (Some(keys), Some(bounds)) => keys.range::<[u8], _>(bounds),
            _ => btree_map::Range::default(),
        };
        Ok(RangeIter::new(backend, overlay, &self.slots))
    }
}

/// The runtime's view of the overlay: the main trie, deltas applied at once (the overlay
/// is sequential, so reading the counter costs no parallelism), nested transactions.
impl<R: StateReader> StateView for Overlay<R> {
    type Error = R::Error;

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, R::Error> {
        Ok(Overlay::get(self, &TrieId::Main, key)?.map(<[u8]>::to_vec))
    }

    fn set(&mut self, key: &[u8], value: Vec<u8>) {
        Overlay::set(self, &TrieId::Main, key, value);
    }

    fn remove(&mut self, key: &[u8]) {
        Overlay::remove(self, &TrieId::Main, key);
    }

    fn add_delta(&mut self, key: &[u8], amount: i64) -> Result<(), R::Error> {
        let value = apply_delta(Overlay::get(self, &TrieId::Main, key)?, amount);
        Overlay::set(self, &TrieId::Main, key, value);
        Ok(())
    }

    fn start(&mut self) {
        self.start_transaction();
    }

    fn commit(&mut self) -> Result<(), TransactionError> {
        self.commit_transaction()
    }

    fn rollback(&mut self) -> Result<(), TransactionError> {
        self.rollback_transaction()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use state::MemoryState;

    const MAIN: TrieId = TrieId::Main;

    /// A [`MemoryState`] that counts point reads and fails them on command.
    #[derive(Debug, Default)]
    struct Probe {
        state: MemoryState,
        reads: Cell<usize>,
        fail: Cell<bool>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("injected read failure")]
    struct Injected;

    impl StateReader for Probe {
        type Error = Injected;
        type Range<'a> = state::VecRange<Injected>;
        fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Injected> {
            if self.fail.get() {
                return Err(Injected);
            }
            self.reads.set(self.reads.get() + 1);
            Ok(self.state.value(trie, key).map(<[u8]>::to_vec))
        }

        fn range<'a>(
            &'a self,
            trie: &TrieId,
            start: &[u8],
            end: Option<&[u8]>,
        ) -> Result<Self::Range<'a>, Injected> {
            let mut items: Vec<_> = self
                .state
                .range(trie, start, end)
                .unwrap_or_else(|e| match e {})
                .map(|r| Ok(r.unwrap_or_else(|e| match e {})))
                .collect();
            if self.fail.get() {
                items.insert(items.len() / 2, Err(Injected));
            }
            Ok(items.into_iter())
        }
    }

    fn probe(entries: &[(&[u8], &[u8])]) -> Overlay<Probe> {
        let state = entries.iter().map(|(k, v)| (MAIN, k.to_vec(), v.to_vec())).collect();
        Overlay::new(Probe { state, ..Probe::default() })
    }

    fn get(o: &mut Overlay<Probe>, key: &[u8]) -> Option<Vec<u8>> {
        o.get(&MAIN, key).unwrap().map(<[u8]>::to_vec)
    }

    fn changed(o: &mut Overlay<Probe>) -> Vec<Vec<u8>> {
        o.take_changed().into_iter().map(|(_, k)| k).collect()
    }

    fn entries(o: &Overlay<Probe>, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
        o.range(&MAIN, start, end).unwrap().map(Result::unwrap).collect()
    }

    fn kv(k: &[u8], v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (k.to_vec(), v.to_vec())
    }

    #[test]
    fn writes_shadow_the_backend_and_empty_values_remove() {
        let mut o = probe(&[(b"a", b"1"), (b"b", b"2")]);
        assert_eq!(get(&mut o, b"a"), Some(b"1".to_vec()));
        o.set(&MAIN, b"a", b"9".to_vec());
        o.set(&MAIN, b"b", Vec::new());
        o.remove(&MAIN, b"zz");
        assert_eq!(get(&mut o, b"a"), Some(b"9".to_vec()));
        assert_eq!(get(&mut o, b"b"), None);
        let other = TrieId::Storage(state::H256([3; 32]));
        assert_eq!(o.get(&other, b"a").unwrap(), None);
    }

    #[test]
    fn kept_empty_values_are_values() {
        let mut o = probe(&[(b"a", b"1")]).keep_empty_values(true);
        assert!(o.keeps_empty_values());
        o.set(&MAIN, b"a", Vec::new());
        o.set(&MAIN, b"b", Vec::new());
        assert_eq!(get(&mut o, b"a"), Some(Vec::new()));
        assert_eq!(entries(&o, b"", None), [kv(b"a", b""), kv(b"b", b"")]);
        o.remove(&MAIN, b"b");
        assert_eq!(get(&mut o, b"b"), None);
        let changes = o.drain_changes().unwrap();
        let expected: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            [(b"a".to_vec(), Some(Vec::new()))].into();
        assert_eq!(changes, ChangeSet::from([(MAIN, expected)]));
    }

    #[test]
    fn nested_transactions_commit_into_parent_and_roll_back() {
        let mut o = probe(&[(b"k", b"0")]);
        assert_eq!(o.commit_transaction(), Err(TransactionError::NoTransaction));
        assert_eq!(o.rollback_transaction(), Err(TransactionError::NoTransaction));
        o.set(&MAIN, b"k", b"1".to_vec());
        o.start_transaction();
        o.set(&MAIN, b"k", b"2".to_vec());
        o.start_transaction();
        o.remove(&MAIN, b"k");
        o.set(&MAIN, b"j", b"x".to_vec());
        o.start_transaction();
        o.set(&MAIN, b"k", b"4".to_vec());
        assert_eq!(o.transaction_depth(), 3);
        o.rollback_transaction().unwrap();
        assert_eq!(get(&mut o, b"k"), None);
        o.commit_transaction().unwrap();
        assert_eq!(get(&mut o, b"k"), None);
        assert_eq!(get(&mut o, b"j"), Some(b"x".to_vec()));
        o.rollback_transaction().unwrap();
        assert_eq!(get(&mut o, b"k"), Some(b"1".to_vec()));
        assert_eq!(get(&mut o, b"j"), None);
        assert_eq!(o.transaction_depth(), 0);
    }

    #[test]
    fn deep_nesting_commits_down_to_the_block() {
        let mut o = probe(&[]);
        for i in 0..1000u32 {
            o.start_transaction();
            o.set(&MAIN, &i.to_be_bytes(), vec![1]);
        }
        for _ in 0..1000 {
            o.commit_transaction().unwrap();
        }
        let changes = o.into_change_set().unwrap();
        assert_eq!(changes[&MAIN].len(), 1000);
    }

    #[test]
    fn backend_reads_are_cached_for_the_block() {
        let mut o = probe(&[(b"a", b"1")]);
        get(&mut o, b"a");
        get(&mut o, b"a");
        get(&mut o, b"missing");
        get(&mut o, b"missing");
        assert_eq!(o.backend().reads.get(), 2);
        o.start_transaction();
        o.set(&MAIN, b"a", b"2".to_vec());
        o.rollback_transaction().unwrap();
        assert_eq!(get(&mut o, b"a"), Some(b"1".to_vec()));
        assert_eq!(o.backend().reads.get(), 2);
        // A blind write rolled back: the next read asks the backend once.
        o.start_transaction();
        o.set(&MAIN, b"blind", b"2".to_vec());
        o.rollback_transaction().unwrap();
        assert_eq!(get(&mut o, b"blind"), None);
        assert_eq!(get(&mut o, b"blind"), None);
        assert_eq!(o.backend().reads.get(), 3);
    }

    #[test]
    fn changed_keys_follow_commit_and_rollback() {
        let mut o = probe(&[(b"a", b"1")]);
        assert!(changed(&mut o).is_empty());
        // A removal and a later write of the same key: one change.
        o.remove(&MAIN, b"a");
        o.set(&MAIN, b"a", b"2".to_vec());
        get(&mut o, b"r");
        assert_eq!(changed(&mut o), vec![b"a".to_vec()]);
        assert!(changed(&mut o).is_empty());
        // Written before the transaction and since the report: still changed after rollback.
        o.set(&MAIN, b"b", b"1".to_vec());
        o.start_transaction();
        o.set(&MAIN, b"b", b"2".to_vec());
        o.set(&MAIN, b"c", b"2".to_vec());
        o.rollback_transaction().unwrap();
        assert_eq!(changed(&mut o), vec![b"b".to_vec()]);
        // A rolled-back write that was never reported: nothing changed.
        o.start_transaction();
        o.set(&MAIN, b"a", b"3".to_vec());
        o.rollback_transaction().unwrap();
        assert!(changed(&mut o).is_empty());
        // A reported write later rolled back: its value went back, so it is changed again.
        o.start_transaction();
        o.set(&MAIN, b"d", b"1".to_vec());
        o.start_transaction();
        o.set(&MAIN, b"e", b"1".to_vec());
        o.commit_transaction().unwrap();
        assert_eq!(changed(&mut o), vec![b"d".to_vec(), b"e".to_vec()]);
        o.rollback_transaction().unwrap();
        assert_eq!(changed(&mut o), vec![b"d".to_vec(), b"e".to_vec()]);
        assert!(changed(&mut o).is_empty());
    }

    #[test]
    fn change_set_drops_no_op_writes_and_resets_the_overlay() {
        let mut o = probe(&[(b"a", b"1"), (b"b", b"2")]);
        o.set(&MAIN, b"a", b"1".to_vec()); // same as the backend
        o.remove(&MAIN, b"nope"); // absent in the backend too
        o.remove(&MAIN, b"b");
        o.set(&MAIN, b"c", b"3".to_vec());
        o.start_transaction();
        assert!(matches!(o.drain_changes(), Err(ChangeSetError::TransactionsOpen { depth: 1 })));
        o.commit_transaction().unwrap();
        let changes = o.drain_changes().unwrap();
        let expected: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            [(b"b".to_vec(), None), (b"c".to_vec(), Some(b"3".to_vec()))].into();
        assert_eq!(changes, ChangeSet::from([(MAIN, expected)]));
        assert_eq!(get(&mut o, b"c"), None);
        assert!(changed(&mut o).is_empty());
        assert!(o.drain_changes().unwrap().is_empty());
    }

    #[test]
    fn backend_failures_are_returned_and_leave_the_overlay_intact() {
        let mut o = probe(&[(b"a", b"1")]);
        o.set(&MAIN, b"blind", b"1".to_vec());
        o.backend().fail.set(true);
        assert!(o.get(&MAIN, b"a").is_err());
        let err = o.drain_changes().unwrap_err();
        assert!(matches!(err, ChangeSetError::Backend(Injected)));
        assert_eq!(o.range(&MAIN, b"", None).unwrap().filter(Result::is_err).count(), 1);
        o.backend().fail.set(false);
        assert_eq!(get(&mut o, b"a"), Some(b"1".to_vec()));
        assert_eq!(o.drain_changes().unwrap()[&MAIN].len(), 1);
    }

    #[test]
    fn ranges_merge_overlay_and_backend_in_order() {
        let mut o = probe(&[(b"a", b"1"), (b"c", b"3"), (b"e", b"5"), (b"g", b"7")]);
        o.set(&MAIN, b"b", b"2".to_vec());
        o.remove(&MAIN, b"c");
        o.set(&MAIN, b"e", b"50".to_vec());
        o.set(&MAIN, b"h", b"8".to_vec());
        get(&mut o, b"g"); // cached only: must not appear twice
        o.start_transaction();
        o.set(&MAIN, b"f", b"6".to_vec());
        o.rollback_transaction().unwrap();
        let all = [kv(b"a", b"1"), kv(b"b", b"2"), kv(b"e", b"50"), kv(b"g", b"7"), kv(b"h", b"8")];
        assert_eq!(entries(&o, b"", None), all);
        assert_eq!(entries(&o, b"b", Some(b"g")), all[1..3]);
        assert_eq!(entries(&o, b"c", Some(b"c")), []);
        assert_eq!(entries(&o, b"h", Some(b"a")), []);
    }
}
