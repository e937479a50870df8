//! The background writer: persists committed layers in order, one atomic RocksDB batch per
//! group of layers, and pops them from the layer stack once they are on disk.
//!
//! When commits outrun it, layers queue up; the writer then takes every queued layer (up to
//! [`GROUP_BYTES_MAX`]) into one batch, writing each key once with its newest value: the
//! upper trie nodes, which every block rewrites, and hot flat keys are written once per
//! group instead of once per block, which is where aggregation pays. Every layer's reverse
//! diff is written, so reverts still undo one block at a time. A group is atomic: on disk
//! the state moves from the block before the group to the group's last block.
//!
//! A failed group write is retried one layer at a time, so that the blocks before the
//! failing one still reach disk; the first failure poisons the store (see `state.rs`).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use rocksdb::WriteBatch;

use crate::error::StoreError;
use crate::keys::{history_key, CF_FLAT, CF_HISTORY, CF_META, CF_NODES};
use crate::layer::{ChangeMap, Layer};
use crate::state::{cf, Poison, Shared};

/// One column's change map inside a layer.
type ColumnOf = fn(&Layer) -> &ChangeMap;

/// A group of queued layers is cut at about this many bytes.
const GROUP_BYTES_MAX: u64 = 64 << 20;

/// Persist layers in order; pop them from the stack once they are on disk.
pub(crate) fn writer_loop(shared: Arc<Shared>, rx: Receiver<Arc<Layer>>) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        let mut bytes = group[0].bytes;
        while bytes < GROUP_BYTES_MAX {
            match rx.try_recv() {
                Ok(layer) => {
                    bytes += layer.bytes;
                    group.push(layer);
                }
                Err(_) => break,
            }
        }
        if shared.progress.lock().poisoned.is_some() {
            continue;
        }
        if write_group(&shared, &group).is_ok() {
            persisted(&shared, &group);
            continue;
        }
        for layer in &group {
            match write_group(&shared, std::slice::from_ref(layer)) {
                Ok(()) => persisted(&shared, std::slice::from_ref(layer)),
                Err(e) => {
                    let mut p = shared.progress.lock();
                    p.poisoned = Some(Poison { number: layer.number, error: Arc::new(e) });
                    shared.changed.notify_all();
                    break;
                }
            }
        }
    }
}

/// Pop `group` (the oldest layers, on disk now) from the stack.
fn persisted(shared: &Shared, group: &[Arc<Layer>]) {
    let mut p = shared.progress.lock();
    {
        let mut layers = shared.reader.layers.write();
        for layer in group {
            assert!(
                layers.first().is_some_and(|l| l.number == layer.number),
                "writer persisted block {} out of order",
                layer.number
            );
            layers.remove(0);
            p.pending_bytes -= layer.bytes;
            p.persisted = layer.number;
        }
    }
    shared.layers_persisted.fetch_add(group.len() as u64, Ordering::Relaxed);
    shared.changed.notify_all();
}

/// Add a put (`Some`) or a delete (`None`) of `key` in column family `h` to `batch`.
pub(crate) fn stage_write(
    batch: &mut WriteBatch,
    h: &rocksdb::ColumnFamily,
    key: &[u8],
    value: Option<&[u8]>,
) {
    match value {
        Some(v) => batch.put_cf(h, key, v),
        None => batch.delete_cf(h, key),
    }
}

/// One atomic batch for `group` (consecutive layers, oldest first), built straight from
/// their maps: each key once, with its newest value.
fn write_group(shared: &Shared, group: &[Arc<Layer>]) -> Result<(), StoreError> {
    let db = &shared.reader.db;
    let mut batch = WriteBatch::default();
    let columns: [(&str, ColumnOf); 3] =
        [(CF_FLAT, |l| &l.flat), (CF_NODES, |l| &l.nodes), (CF_META, |l| &l.meta)];
    for (name, map) in columns {
        let h = cf(db, name)?;
        if let [layer] = group {
            for (k, v) in map(layer).iter() {
                stage_write(&mut batch, h, k, v.as_deref());
            }
            continue;
        }
        let mut seen: HashSet<&[u8]> = HashSet::new();
        for layer in group.iter().rev() {
            for (k, v) in map(layer).iter() {
                if seen.insert(k) {
                    stage_write(&mut batch, h, k, v.as_deref());
                }
            }
        }
    }
    let hist = cf(db, CF_HISTORY)?;
    for layer in group {
        batch.put_cf(hist, history_key(layer.number), &layer.history);
        if let Some(old) = layer.prune {
            batch.delete_cf(hist, history_key(old));
        }
        shared.faults.check(layer.number)?;
    }
    db.write(batch)?;
    Ok(())
}
