//! A transaction's own writes with nested transactions: a checkpoint stack over an undo
//! journal, so that opening, committing or rolling back costs O(keys written inside).

use std::collections::BTreeMap;

use state::TransactionError;

use crate::Key;

/// Writes (key → `W`) with a checkpoint per open nested transaction.
#[derive(Debug)]
pub(crate) struct Journaled<W> {
    writes: BTreeMap<Key, W>,
    /// Each write made inside an open transaction: the key and what it held before.
    undo: Vec<(Key, Option<W>)>,
    /// Per open transaction, the undo length when it started.
    marks: Vec<usize>,
}

impl<W> Default for Journaled<W> {
    fn default() -> Self {
        Journaled { writes: BTreeMap::new(), undo: Vec::new(), marks: Vec::new() }
    }
}

impl<W> Journaled<W> {
    /// The writes as they stand.
    pub(crate) fn map(&self) -> &BTreeMap<Key, W> {
        &self.writes
    }

    /// The write under `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&W> {
        self.writes.get(key)
    }

    /// Write `w` under `key`, undoably when a transaction is open.
    pub(crate) fn insert(&mut self, key: &[u8], w: W) {
        let before = self.writes.insert(key.to_vec(), w);
        if !self.marks.is_empty() {
            self.undo.push((key.to_vec(), before));
        }
    }

    /// Replace the write under `key` by an equivalent one (a delta resolved into its
    /// value): nothing to undo, the visible value does not change.
    pub(crate) fn settle(&mut self, key: &[u8], w: W) {
        self.writes.insert(key.to_vec(), w);
    }

    /// Open a nested transaction.
    pub(crate) fn start(&mut self) {
        self.marks.push(self.undo.len());
    }

    /// Keep the innermost transaction's writes (they now belong to the enclosing one).
    pub(crate) fn commit(&mut self) -> Result<(), TransactionError> {
        self.marks.pop().ok_or(TransactionError::NoTransaction)?;
        if self.marks.is_empty() {
            self.undo.clear();
        }
        Ok(())
    }

    /// Undo the innermost transaction's writes.
    pub(crate) fn rollback(&mut self) -> Result<(), TransactionError> {
        let mark = self.marks.pop().ok_or(TransactionError::NoTransaction)?;
        for (key, before) in self.undo.drain(mark..).rev() {
            match before {
                Some(w) => self.writes.insert(key, w),
                None => self.writes.remove(&key),
            };
        }
        Ok(())
    }

    /// Drop every write and every open transaction.
    pub(crate) fn clear(&mut self) {
        self.writes.clear();
        self.undo.clear();
        self.marks.clear();
    }

    /// The writes, once the transaction is done; open nested transactions are dropped
    /// with their writes (a transaction that returns without closing them keeps only what
    /// it committed).
    pub(crate) fn into_writes(mut self) -> BTreeMap<Key, W> {
        while self.rollback().is_ok() {}
        self.writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_rollback_restores_and_commit_keeps() {
        let mut j = Journaled::default();
        j.insert(b"a", 1);
        j.start();
        j.insert(b"a", 2);
        j.insert(b"b", 3);
        j.start();
        j.insert(b"b", 4);
        j.rollback().unwrap();
        assert_eq!(j.get(b"b"), Some(&3));
        j.commit().unwrap();
        assert_eq!(j.get(b"a"), Some(&2));
        j.start();
        j.insert(b"c", 5);
        j.rollback().unwrap();
        assert_eq!(j.get(b"c"), None);
        assert_eq!(j.commit(), Err(TransactionError::NoTransaction));
        j.start();
        j.insert(b"d", 6);
        let w = j.into_writes();
        assert_eq!(w.into_iter().collect::<Vec<_>>(), vec![(b"a".to_vec(), 2), (b"b".to_vec(), 3)]);
    }
}
