//! Overlay vs a deliberately simple model, over random sequences of reads, writes,
//! nested transactions, range reads, change reports and change-set drains.
//!
//! The model keeps a full snapshot of the pending writes per transaction level (start =
//! push a clone, commit = pop and replace the parent, rollback = pop) and answers every
//! query by brute force. Each pending write carries the report epoch it was made in, and
//! each level logs the writes made in it (or committed into it), which is all the
//! changed-key rule needs: a key is reported when its surviving write is from the current
//! epoch, or when a rollback in the current epoch discarded a write from an earlier one.
//! Keys, values and tries come from tiny alphabets so that collisions, no-op writes and
//! shadowed backend entries are common.

use std::collections::{BTreeMap, BTreeSet};

use overlay::{ChangeSetError, Overlay};
use proptest::prelude::*;
use state::{ChangeSet, MemoryState, TransactionError, TrieId, H256};

type Key = (TrieId, Vec<u8>);

#[derive(Debug, Clone)]
enum Op {
    Get(Key),
    Set(Key, Vec<u8>),
    Remove(Key),
    Start,
    Commit,
    Rollback,
    Range(TrieId, Vec<u8>, Option<Vec<u8>>),
    TakeChanged,
    Drain,
}

#[derive(Debug, Clone, Default)]
struct Level {
    /// Every pending write visible at this level: key → (value, epoch of the write).
    writes: BTreeMap<Key, (Option<Vec<u8>>, u64)>,
    /// The writes made at this level or committed into it, with their epochs.
    log: Vec<(Key, u64)>,
}

#[derive(Debug)]
struct Model {
    backend: BTreeMap<Key, Vec<u8>>,
    /// `levels[0]` is the block itself; one more per open transaction.
    levels: Vec<Level>,
    epoch: u64,
    /// Keys whose earlier-epoch writes a rollback discarded in the current epoch.
    reverted: BTreeSet<Key>,
}

impl Model {
    fn new(backend: BTreeMap<Key, Vec<u8>>) -> Self {
        Model { backend, levels: vec![Level::default()], epoch: 0, reverted: BTreeSet::new() }
    }

    fn top(&self) -> &Level {
        self.levels.last().unwrap()
    }

    fn get(&self, key: &Key) -> Option<Vec<u8>> {
        match self.top().writes.get(key) {
            Some((value, _)) => value.clone(),
            None => self.backend.get(key).cloned(),
        }
    }

    fn write(&mut self, key: Key, value: Option<Vec<u8>>) {
        let value = value.filter(|v| !v.is_empty());
        let epoch = self.epoch;
        let top = self.levels.last_mut().unwrap();
        top.writes.insert(key.clone(), (value, epoch));
        top.log.push((key, epoch));
    }

    fn start(&mut self) {
        let writes = self.top().writes.clone();
        self.levels.push(Level { writes, log: Vec::new() });
    }

    fn commit(&mut self) -> bool {
        if self.levels.len() == 1 {
            return false;
        }
        let child = self.levels.pop().unwrap();
        let parent = self.levels.last_mut().unwrap();
        parent.writes = child.writes;
        parent.log.extend(child.log);
        true
    }

    fn rollback(&mut self) -> bool {
        if self.levels.len() == 1 {
            return false;
        }
        let child = self.levels.pop().unwrap();
        for (key, epoch) in child.log {
            if epoch < self.epoch {
                self.reverted.insert(key);
            }
        }
        true
    }

    fn range(&self, trie: &TrieId, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut view: BTreeMap<Vec<u8>, Vec<u8>> = self
            .backend
            .iter()
            .filter(|((t, _), _)| t == trie)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        for ((t, k), (value, _)) in &self.top().writes {
            if t == trie {
                match value {
                    Some(v) => view.insert(k.clone(), v.clone()),
                    None => view.remove(k),
                };
            }
        }
        view.into_iter()
            .filter(|(k, _)| k.as_slice() >= start && end.is_none_or(|end| k.as_slice() < end))
            .collect()
    }

    fn take_changed(&mut self) -> Vec<Key> {
        let mut changed = std::mem::take(&mut self.reverted);
        for (key, (_, epoch)) in &self.top().writes {
            if *epoch == self.epoch {
                changed.insert(key.clone());
            }
        }
        self.epoch += 1;
        changed.into_iter().collect()
    }

    /// The change set, or `None` while transactions are open; resets the pending state.
    fn drain(&mut self) -> Option<ChangeSet> {
        if self.levels.len() > 1 {
            return None;
        }
        let mut changes = ChangeSet::new();
        for ((trie, key), (value, _)) in &self.levels[0].writes {
            if *value != self.backend.get(&(*trie, key.clone())).cloned() {
                changes.entry(*trie).or_default().insert(key.clone(), value.clone());
            }
        }
        self.levels = vec![Level::default()];
        self.reverted.clear();
        self.epoch += 1;
        Some(changes)
    }
}

fn trie_id() -> impl Strategy<Value = TrieId> {
    prop_oneof![Just(TrieId::Main), Just(TrieId::Storage(H256([7; 32])))]
}

fn key_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..3, 0..3)
}

fn key() -> impl Strategy<Value = Key> {
    (trie_id(), key_bytes())
}

/// Empty (a removal) or one byte from a tiny alphabet, so writes often restore values.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..3, 0..2)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => key().prop_map(Op::Get),
        6 => (key(), value()).prop_map(|(k, v)| Op::Set(k, v)),
        2 => key().prop_map(Op::Remove),
        3 => Just(Op::Start),
        2 => Just(Op::Commit),
        2 => Just(Op::Rollback),
        2 => (trie_id(), key_bytes(), prop::option::of(key_bytes()))
            .prop_map(|(t, s, e)| Op::Range(t, s, e)),
        2 => Just(Op::TakeChanged),
        1 => Just(Op::Drain),
    ]
}

fn backend() -> impl Strategy<Value = BTreeMap<Key, Vec<u8>>> {
    prop::collection::btree_map(key(), prop::collection::vec(0u8..3, 1..2), 0..16)
}

fn apply(model: &mut BTreeMap<Key, Vec<u8>>, changes: &ChangeSet) {
    for (trie, entries) in changes {
        for (key, value) in entries {
            match value {
                Some(v) => model.insert((*trie, key.clone()), v.clone()),
                None => model.remove(&(*trie, key.clone())),
            };
        }
    }
}

fn step(o: &mut Overlay<MemoryState>, m: &mut Model, op: Op) -> Result<(), TestCaseError> {
    match op {
        Op::Get(key) => {
            let got = o.get(&key.0, &key.1).unwrap().map(<[u8]>::to_vec);
            prop_assert_eq!(got, m.get(&key), "get {:?}", key);
        }
        Op::Set(key, value) => {
            o.set(&key.0, &key.1, value.clone());
            m.write(key, Some(value));
        }
        Op::Remove(key) => {
            o.remove(&key.0, &key.1);
            m.write(key, None);
        }
        Op::Start => {
            o.start_transaction();
            m.start();
        }
        Op::Commit => {
            let expected = if m.commit() { Ok(()) } else { Err(TransactionError::NoTransaction) };
            prop_assert_eq!(o.commit_transaction(), expected);
        }
        Op::Rollback => {
            let expected = if m.rollback() { Ok(()) } else { Err(TransactionError::NoTransaction) };
            prop_assert_eq!(o.rollback_transaction(), expected);
        }
        Op::Range(trie, start, end) => {
            let got: Vec<_> =
                o.range(&trie, &start, end.as_deref()).unwrap().map(Result::unwrap).collect();
            prop_assert_eq!(
                got,
                m.range(&trie, &start, end.as_deref()),
                "range {:?}",
                (start, end)
            );
        }
        Op::TakeChanged => prop_assert_eq!(o.take_changed(), m.take_changed()),
        Op::Drain => match (o.drain_changes(), m.drain()) {
            (Ok(got), Some(expected)) => prop_assert_eq!(got, expected),
            (Err(ChangeSetError::TransactionsOpen { depth }), None) => {
                prop_assert_eq!(depth, m.levels.len() - 1)
            }
            (got, expected) => prop_assert!(false, "drain: {:?} vs {:?}", got, expected),
        },
    }
    prop_assert_eq!(o.transaction_depth(), m.levels.len() - 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(128)))]

    #[test]
    fn overlay_matches_snapshot_model(
        initial in backend(),
        ops in prop::collection::vec(op(), 1..160),
    ) {
        let state: MemoryState =
            initial.iter().map(|((t, k), v)| (*t, k.clone(), v.clone())).collect();
        let mut o = Overlay::new(state);
        let mut m = Model::new(initial);
        for op in ops {
            step(&mut o, &mut m, op)?;
        }
        // End the block: close every transaction, then hand over and apply the changes.
        while m.commit() {
            o.commit_transaction().unwrap();
        }
        let changes = o.drain_changes().unwrap();
        prop_assert_eq!(&changes, &m.drain().unwrap());
        let mut state = o.into_backend();
        state.apply(&changes);
        apply(&mut m.backend, &changes);
        let got: BTreeMap<Key, Vec<u8>> =
            state.iter().map(|(t, k, v)| ((*t, k.to_vec()), v.to_vec())).collect();
        prop_assert_eq!(got, m.backend);
    }
}
