//! Reverts: [`StateDb::revert`] undoes the last blocks from their reverse diffs, each block
//! one synced batch. Flat and meta entries are restored as recorded; the nodes are
//! recomputed by applying the old flat values to each touched trie, and each recomputed root
//! must equal the root the diff restores, else nothing is written. The durable record is
//! lowered to the target before the head moves.

use std::collections::BTreeMap;

use rocksdb::{WriteBatch, WriteOptions, DB};
use state::{ChangeSet, TrieId, H256};
use trie::TrieUpdates;

use crate::error::{Corruption, RevertError, StoreError};
use crate::history::{ReverseDiff, ReverseEntry};
use crate::keys::{
    cf, decode_head, decode_root, encode_node_value, history_key, node_key, split_trie_prefix,
    Column, CF_HISTORY, CF_NODES, META_HEAD, META_ROOT,
};
use crate::statedb::{ReadHandle, StateDb};
use crate::tiers::reader::StoreSource;
use crate::writer::stage_write;

impl StateDb {
    /// Undo the last `n` blocks from their reverse diffs, restoring the exact earlier roots
    /// (each block one synced batch; the nodes are recomputed, see `revert_batch`). All or
    /// nothing: a missing reverse diff is refused before anything is written.
    pub fn revert(&mut self, n: u64) -> Result<(), RevertError> {
        self.revert_with_progress(n, &mut |_| true).map(|_| ())
    }

    /// [`revert`](Self::revert), calling `progress` with the number of blocks undone so
    /// far after each one (each block is its own synced batch); when it returns `false` the
    /// revert stops there, at that block (a signal handler's clean stop). Returns the
    /// blocks undone.
    pub fn revert_with_progress(
        &mut self,
        n: u64,
        progress: &mut dyn FnMut(u64) -> bool,
    ) -> Result<u64, RevertError> {
        self.check_poison()?;
        self.check_complete()?;
        self.flush()?;
        let head = self.head.0;
        if n > head {
            return Err(RevertError::TooFar { requested: n, head });
        }
        if n == 0 {
            return Ok(0);
        }
        let db = self.shared.reader.db.clone();
        let history = cf(&db, CF_HISTORY)?;
        // `1 <= n <= head`, so `head - n + 1` neither underflows nor overflows.
        for number in (head - n + 1)..=head {
            if db.get_pinned_cf(history, history_key(number)).map_err(StoreError::from)?.is_none() {
                return Err(RevertError::Pruned { number });
            }
        }
        // Invariant: the durable record is lowered to the target before the head moves, so
        // that a crash anywhere in between leaves it at or below the head (durable.rs).
        let target = head - n;
        let handle = ReadHandle { shared: self.shared.clone() };
        let root =
            handle.recorded_root(target)?.ok_or(RevertError::Pruned { number: target + 1 })?;
        self.shared.durable.set((target, root))?;
        let mut done = 0;
        while done < n {
            self.revert_head(&db)?;
            done += 1;
            if !progress(done) {
                break;
            }
        }
        // Each block's batch was synced.
        self.record_durable()?;
        Ok(done)
    }

    /// Undo the head block (which has a parent: the caller checked `n <= head`).
    fn revert_head(&mut self, db: &DB) -> Result<(), RevertError> {
        let number = self.head.0;
        let raw = db
            .get_cf(cf(db, CF_HISTORY)?, history_key(number))
            .map_err(StoreError::from)?
            .ok_or(RevertError::Pruned { number })?;
        let entries = ReverseDiff::decode(&raw)
            .map_err(|source| StoreError::from(Corruption::History { number, source }))?;
        let (batch, head) = self.revert_batch(number, &entries)?;
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.shared.faults.check(number)?;
        // Readers at recent blocks wait while the head moves (see `read/at.rs`).
        let shared = self.shared.clone();
        let mut recent = shared.recent.write();
        db.write_opt(batch, &opts).map_err(StoreError::from)?;
        // The batch went to disk behind the caches' and the resident trie's back.
        self.shared.reader.clear_caches();
        self.resident.clear();
        self.head = head;
        self.shared.progress.lock().persisted = head.0;
        recent.set_head(head);
        Ok(())
    }

    /// The write batch that undoes block `number` (the head) from its reverse diff, and the
    /// head it restores. Flat and meta entries are restored as recorded; the nodes are
    /// recomputed by applying the old flat values to each touched trie, and each recomputed
    /// root must equal the root the diff restores, else nothing is written.
    fn revert_batch(
        &self,
        number: u64,
        entries: &[ReverseEntry],
    ) -> Result<(WriteBatch, (u64, H256)), StoreError> {
        let db = &self.shared.reader.db;
        let mut batch = WriteBatch::default();
        let mut head = None;
        let mut old_roots: BTreeMap<TrieId, H256> = BTreeMap::new();
        let mut changes: ChangeSet = BTreeMap::new();
        for (col, key, old) in entries {
            match col {
                Column::Flat => {
                    let (trie, k) = TrieId::split(key)
                        .ok_or_else(|| Corruption::FlatKey { key: key.clone() })?;
                    changes.entry(trie).or_default().insert(k.to_vec(), old.clone());
                }
                Column::Meta if key.as_slice() == META_HEAD => {
                    head = old.as_deref().map(decode_head).transpose()?;
                }
                Column::Meta => {
                    if let Some(trie) = key.strip_prefix(META_ROOT).and_then(split_trie_prefix) {
                        let root = match old {
                            None => self.layout().empty_root(),
                            Some(v) => decode_root(&trie, v)?,
                        };
                        old_roots.insert(trie, root);
                    }
                }
                // Written by earlier versions; the nodes are recomputed below instead.
                Column::Nodes => continue,
            }
            stage_write(&mut batch, cf(db, col.cf())?, key, old.as_deref());
        }
        let head = head.ok_or(Corruption::HistoryHead { number })?;
        old_roots.insert(TrieId::Main, head.1);
        let h = cf(db, CF_NODES)?;
        for (trie_id, kv) in &changes {
            let source = StoreSource { reader: &self.shared.reader, trie: *trie_id };
            let current = self.trie_root(trie_id)?;
            let writes = kv.iter().map(|(k, v)| (&k[..], v.as_deref().filter(|v| !v.is_empty())));
            let updates = crate::layout::rewrite(self.layout(), source, current, writes)?;
            // A storage trie whose root record the block did not change keeps its root.
            let expected = old_roots.get(trie_id).copied().unwrap_or(current);
            if updates.root != expected {
                return Err(Corruption::RevertRoot {
                    number,
                    trie: *trie_id,
                    computed: updates.root,
                    expected,
                }
                .into());
            }
            stage_nodes(&mut batch, h, trie_id, &updates);
        }
        batch.delete_cf(cf(db, CF_HISTORY)?, history_key(number));
        Ok((batch, head))
    }
}

/// Stage a trie commit's node deletions and writes (leaves are never stored) into `batch`.
fn stage_nodes(
    batch: &mut WriteBatch,
    h: &rocksdb::ColumnFamily,
    trie_id: &TrieId,
    u: &TrieUpdates,
) {
    // Leaves are rebuilt from `flat` and not stored, except at the root: the store keeps a
    // trie's root node whatever it is (see `trie::update_trie`), so a root leaf that a
    // revert replaces or removes must be rewritten or deleted like any stored node.
    let stored = |path: &[u8], is_leaf: bool| !is_leaf || path.is_empty();
    for r in u.removed.iter().filter(|r| stored(r.path.as_slice(), r.is_leaf)) {
        batch.delete_cf(h, node_key(trie_id, r.path.as_slice()));
    }
    for n in u.new.iter().filter(|n| stored(n.path.as_slice(), n.is_leaf)) {
        batch.put_cf(
            h,
            node_key(trie_id, n.path.as_slice()),
            encode_node_value(&n.hash, &n.encoded),
        );
    }
}
