//! The background writer: persists committed layers in order, one atomic RocksDB batch per
//! group of layers, and pops them from the layer stack once they are on disk.
//!
//! Layers are written in groups: the writer holds committed layers back until it has
//! `layers.persist_blocks` of them, or half the unpersisted-bytes bound, or a flush asks
//! for them, or no layer has arrived for [`LINGER`] (one second). A group is one batch that writes each
//! key once with its newest value, so the upper trie nodes, which every block rewrites, and
//! hot flat keys reach RocksDB (WAL, memtables, compaction) once per group instead of once
//! per block; every layer's reverse diff is written, so reverts still undo one block at a
//! time. A group is atomic: on disk the state moves from the block before the group to the
//! group's last block. Durability is what it was: a commit is durable after
//! `StateDb::flush`, which makes the writer write at once.
//!
//! A failed group write is retried one layer at a time, so that the blocks before the
//! failing one still reach disk; the first failure poisons the store (see `state.rs`).

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use rocksdb::WriteBatch;
use rustc_hash::FxHashSet;

use crate::error::StoreError;
use crate::keys::{history_key, CF_FLAT, CF_HISTORY, CF_META, CF_NODES};
use crate::layer::{ChangeMap, Layer};
use crate::state::{cf, Poison, Shared};

/// One column's change map inside a layer.
type ColumnOf = fn(&Layer) -> &ChangeMap;

/// Held layers are written after this long without a new one (commits have stopped).
const LINGER: Duration = Duration::from_secs(1);

/// What the committer tells the writer.
pub(crate) enum ToWriter {
    /// A committed layer, next in order.
    Layer(Arc<Layer>),
    /// Write every held layer now.
    Flush,
}

/// Persist layers in order, in groups; pop them from the stack once they are on disk.
pub(crate) fn writer_loop(shared: Arc<Shared>, rx: Receiver<ToWriter>) {
    let blocks_max = shared.config.layers.persist_blocks.max(1) as usize;
    let bytes_max = shared.config.layers.unpersisted_bytes_max / 2;
    let mut held: Vec<Arc<Layer>> = Vec::new();
    let mut bytes = 0;
    loop {
        let msg = if held.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(LINGER)
        };
        let (write, stop) = match msg {
            Ok(ToWriter::Layer(layer)) => {
                bytes += layer.bytes;
                held.push(layer);
                (held.len() >= blocks_max || bytes >= bytes_max, false)
            }
            Ok(ToWriter::Flush) | Err(RecvTimeoutError::Timeout) => (true, false),
            Err(RecvTimeoutError::Disconnected) => (true, true),
        };
        if write && !held.is_empty() {
            persist(&shared, &held);
            held.clear();
            bytes = 0;
        }
        if stop {
            return;
        }
    }
}

/// Write `group` (or, if that fails, its layers one at a time) unless the store is poisoned.
fn persist(shared: &Shared, group: &[Arc<Layer>]) {
    if shared.progress.lock().poisoned.is_some() {
        return;
    }
    if write_group(shared, group).is_ok() {
        persisted(shared, group);
        return;
    }
    for layer in group {
        match write_group(shared, std::slice::from_ref(layer)) {
            Ok(()) => persisted(shared, std::slice::from_ref(layer)),
            Err(e) => {
                let mut p = shared.progress.lock();
                p.poisoned = Some(Poison { number: layer.number, error: Arc::new(e) });
                shared.changed.notify_all();
                return;
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
        let mut seen: FxHashSet<&[u8]> = FxHashSet::default();
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
    let bytes = batch.size_in_bytes() as u64;
    db.write(batch)?;
    shared.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    Ok(())
}
