//! Trie nodes behind the block: the node watermark, and the catch-up that brings the nodes
//! to the head when a database opens.
//!
//! The writer persists flat values, reverse diffs, root records and the head with every
//! group of blocks, but keeps the groups' node writes in a node buffer (each path once, its
//! newest version) until the buffer passes `layers.node_buffer_bytes`, a flush or close asks,
//! or the lag reaches `layers.history_depth` blocks (see `writer.rs`). A group written while
//! nodes lag records the watermark `nodes_at` = W: `nodes` on disk is the trie of block W.
//! After a crash the database reopens at some group's block H with its nodes at W ≤ H. The
//! catch-up rebuilds the buffer from what is durable: the reverse diffs of blocks
//! W+1..=H name every key that changed since W and the value it held at W (the old value of
//! the first block to change it), `flat` holds its value at H. The update pass applies
//! those changes to the trie of block W — over a pre-state that shows `flat` at W (a
//! temporary layer of the old values) and the nodes at W — with every old value checked
//! against the trie, and each new root must equal the one block H records (the head's for
//! the main trie, the `root` records for the others). Only then is anything served: a
//! mismatch or an unreadable diff fails the open as corruption, never a wrong root.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use rocksdb::DB;
use state::{ChangeSet, TrieId, H256};
use trie::LayoutName;

use crate::commit::flat_keys;
use crate::error::{Corruption, StoreError};
use crate::history::ReverseDiff;
use crate::keys::{
    cf, decode_head, decode_root, history_key, root_key, Column, CF_FLAT, CF_HISTORY, CF_META,
    META_HEAD,
};
use crate::statedb::StateDb;
use crate::tiers::buffer::{read_nodes_at, CatchUpReport};
use crate::tiers::layer::{ChangeMap, Layer};

/// Each key changed in blocks `base + 1..=head` (by column) with its value at `base`: the
/// old value recorded by the first of those blocks that changed it.
#[derive(Default)]
struct OldValues {
    flat: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    meta: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

/// Read the reverse diffs of blocks `base + 1..=head` (every one must be there).
fn old_values(db: &DB, base: u64, head: u64) -> Result<OldValues, StoreError> {
    let history = cf(db, CF_HISTORY)?;
    let mut out = OldValues::default();
    for number in base + 1..=head {
        let raw = db
            .get_pinned_cf(history, history_key(number))?
            .ok_or(Corruption::LagHistory { number, base })?;
        let entries =
            ReverseDiff::decode(&raw).map_err(|source| Corruption::History { number, source })?;
        for (column, key, old) in entries {
            let map = match column {
                Column::Flat => &mut out.flat,
                Column::Meta => &mut out.meta,
                Column::Nodes => continue,
            };
            map.entry(key).or_insert(old);
        }
    }
    Ok(out)
}

/// The temporary layer that shows block `base`'s flat values and meta records over the
/// head's on disk.
fn base_layer(old: &OldValues, base: u64, root: H256) -> Layer {
    let entries = |m: &BTreeMap<Vec<u8>, Option<Vec<u8>>>| {
        m.iter().map(|(k, v)| (k.clone(), v.as_deref().map(Arc::from))).collect()
    };
    let mut layer = Layer {
        number: base,
        root,
        flat: ChangeMap::from_sorted(entries(&old.flat)),
        meta: ChangeMap::from_sorted(entries(&old.meta)),
        ..Layer::default()
    };
    layer.measure();
    layer
}

/// The changes that take block `base` to the head: every changed key's value on disk (at
/// the head), per trie, and their flat keys and values at `base` in the same order.
type Changes = (ChangeSet, Vec<Vec<u8>>, Vec<Option<Vec<u8>>>);

fn head_changes(db: &DB, old: &OldValues) -> Result<Changes, StoreError> {
    let keys: Vec<&Vec<u8>> = old.flat.keys().collect();
    let values = db.batched_multi_get_cf(cf(db, CF_FLAT)?, keys.iter().copied(), true);
    let mut changes: ChangeSet = BTreeMap::new();
    for (key, value) in keys.into_iter().zip(values) {
        let (trie, k) =
            TrieId::split(key).ok_or_else(|| Corruption::FlatKey { key: key.clone() })?;
        changes.entry(trie).or_default().insert(k.to_vec(), value?.map(|v| v.to_vec()));
    }
    // In the commit's order (trie by trie, keys ascending within each).
    let keys = flat_keys(&changes)?;
    let olds = keys.iter().map(|fk| old.flat.get(fk).cloned().flatten()).collect();
    Ok((changes, keys, olds))
}

/// The root block `head` records for `trie` on disk.
fn head_root_of(
    layout: LayoutName,
    db: &DB,
    trie: &TrieId,
    head_root: H256,
) -> Result<H256, StoreError> {
    if *trie == TrieId::Main {
        return Ok(head_root);
    }
    match db.get_cf(cf(db, CF_META)?, root_key(trie))? {
        Some(v) => Ok(decode_root(trie, &v)?),
        None => Ok(layout.empty_root()),
    }
}

impl StateDb {
    /// Bring the nodes to the head if they lag it (see the module docs): on success the
    /// node buffer holds the missing node writes, at the bottom of the layer stack, and the
    /// resident trie is at the head. Runs at open, before the writer starts.
    pub(crate) fn catch_up(&mut self) -> Result<Option<CatchUpReport>, StoreError> {
        let db = self.reader().db.clone();
        let Some(base) = read_nodes_at(&db)? else { return Ok(None) };
        if self.unfinished_bulk_load().is_some() {
            return Ok(None);
        }
        let (head, head_root) = (self.head_number(), self.head_root());
        if base >= head {
            return Err(Corruption::NodesAhead { nodes_at: base, head }.into());
        }
        let start = Instant::now();
        let old = old_values(&db, base, head)?;
        let base_head = old.meta.get(META_HEAD).cloned().flatten();
        let base_root = match base_head.as_deref().map(decode_head).transpose()? {
            Some((n, root)) if n == base => root,
            _ => return Err(Corruption::HistoryHead { number: base + 1 }.into()),
        };
        self.reader().layers.write().push(Arc::new(base_layer(&old, base, base_root)));
        self.set_head_in_memory(base, base_root);
        let result = self.catch_up_pass(&db, &old, head_root);
        self.reader().layers.write().clear();
        // Reads during the pass admitted nodes of block `base`.
        self.reader().clear_caches();
        self.set_head_in_memory(head, head_root);
        let (buffer, keys) = match result {
            Ok(done) => done,
            Err(e) => {
                self.resident.clear();
                return Err(e);
            }
        };
        let mut layer = Layer { number: head, root: head_root, ..Layer::default() };
        layer.nodes = buffer;
        layer.lag_base = Some(base);
        layer.measure();
        self.note_buffer(base, layer.bytes);
        self.reader().layers.write().push(Arc::new(layer));
        let time = start.elapsed();
        Ok(Some(CatchUpReport { from_block: base, to_block: head, keys, time }))
    }

    /// The update pass of the catch-up: the node writes that take block `base`'s trie (the
    /// pre-state in place) to the head, checked against the head's recorded roots, and the
    /// number of keys applied. The resident trie takes the writes.
    fn catch_up_pass(
        &mut self,
        db: &DB,
        old: &OldValues,
        head_root: H256,
    ) -> Result<(ChangeMap, u64), StoreError> {
        let (changes, keys, olds) = head_changes(db, old)?;
        // A writable store fills its resident trie here, as its first commit would; a
        // read-only one serves reads, most of which need no node, so the pass reads the
        // nodes it visits through the store instead of scanning every node first (at 10M
        // keys the scan takes seconds).
        if !self.is_read_only() && !self.resident.is_complete() {
            let layers = self.reader().layers.read().clone();
            self.resident.fill(db, &layers)?;
        }
        let olds: Vec<Option<&[u8]>> =
            olds.iter().map(|v| v.as_deref().filter(|v| !v.is_empty())).collect();
        let count = keys.len() as u64;
        let tries = self.update_tries(&changes, keys, &olds, true, false)?;
        let mut nodes = Vec::new();
        let mut loaded = Vec::new();
        for t in tries {
            let expected = head_root_of(self.layout(), db, &t.trie, head_root)?;
            if t.root != expected {
                let (trie, computed) = (t.trie, t.root);
                return Err(Corruption::CatchUpRoot { trie, computed, expected }.into());
            }
            nodes.extend(t.nodes);
            loaded.extend(t.loaded);
        }
        let buffer = ChangeMap::from_writes(nodes);
        if self.resident.is_complete() {
            let writes = buffer.iter().map(|(k, v)| (k.as_slice(), v.as_ref()));
            self.resident.apply(loaded, writes);
        }
        Ok((buffer, count))
    }
}
