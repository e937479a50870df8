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
//! failing one still reach disk; the first failure poisons the store (see `shared.rs`).
//!
//! Durability: groups are written without RocksDB's write-ahead log. The database is
//! opened with atomic flush, so memtables of every column family reach their SST files
//! together, at one point between two groups; after a crash RocksDB reopens at the last
//! such flush, a state that is exactly some group's last block (the head, roots, flat
//! state, nodes and reverse diffs of one block), never a mix. `StateDb::flush` forces that
//! memtable flush (`Shared::make_durable`), so a flushed block survives any crash, as
//! before; a block committed but not flushed may be lost to a crash, as before, and is now
//! lost more often (a kill loses the groups since the last memtable flush, where the WAL
//! kept them). Every write that does use the WAL (reverts, bulk loads, restores, the
//! close's counters) comes after `flush`, so a WAL replay never lands on a state missing
//! earlier groups. The saving: the WAL would copy every group's bytes once more through
//! the kernel and checksum them, which measured over half of this thread's CPU.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rocksdb::{WriteBatch, WriteOptions};

use crate::error::StoreError;
use crate::keys::{
    cf, history_key, CF_CODE, CF_FLAT, CF_HISTORY, CF_META, CF_NODES, META_NODES_AT,
};
use crate::shared::{Poison, Shared};
use crate::tiers::layer::{node_buffer_of, touch_counts, ChangeMap, Entry, Layer};

/// One column's change map inside a layer.
type ColumnOf = fn(&Layer) -> &ChangeMap;

/// Held layers are written after this long without a new one (commits have stopped).
const LINGER: Duration = Duration::from_secs(1);

/// What the committer tells the writer.
pub(crate) enum ToWriter {
    /// A committed layer, next in order.
    Layer(Arc<Layer>),
    /// Write every held layer now, and the node buffer.
    Flush,
    /// Write every held layer as a group (nodes lagging as they may) and stop
    /// (`StateDb::close_with_nodes_behind`).
    Abandon,
}

/// Persist layers in order, in groups; pop them from the stack once they are on disk.
pub(crate) fn writer_loop(shared: Arc<Shared>, rx: Receiver<ToWriter>) {
    let blocks_max = shared.config.layers.persist_blocks.max(1) as usize;
    let bytes_max = shared.config.layers.unpersisted_bytes_max / 2;
    let mut held: Vec<Arc<Layer>> = Vec::new();
    let mut bytes = 0;
    // The catch-up at open may have left a node buffer at the bottom of the stack.
    let mut buffer = node_buffer_of(&shared.reader.layers.read()).cloned();
    loop {
        let msg = if held.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(LINGER)
        };
        // (write the held layers, how the node buffer goes, stop)
        let (write, back, stop) = match msg {
            Ok(ToWriter::Layer(layer)) => {
                bytes += layer.bytes;
                held.push(layer);
                (held.len() >= blocks_max || bytes >= bytes_max, WriteBack::Bound, false)
            }
            Ok(ToWriter::Flush) => (true, WriteBack::Force, false),
            Ok(ToWriter::Abandon) => (true, WriteBack::LagOnly, true),
            Err(RecvTimeoutError::Timeout) => (true, WriteBack::Bound, false),
            Err(RecvTimeoutError::Disconnected) => (true, WriteBack::Force, true),
        };
        let forced = back == WriteBack::Force && buffer.is_some();
        if write && (!held.is_empty() || forced) {
            persist(&shared, &held, &mut buffer, back);
            held.clear();
            bytes = 0;
        }
        if stop {
            return;
        }
    }
}

/// When a group writes the node buffer back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteBack {
    /// Always (a flush, the close).
    Force,
    /// Past the byte bound or at the lag limit.
    Bound,
    /// Only at the lag limit, past which the reverse diffs needed to catch up would be
    /// pruned (`StateDb::close_with_nodes_behind`).
    LagOnly,
}

/// Write `group` (or, if that fails, its layers one at a time) unless the store is poisoned;
/// `back` says when the node buffer goes with it.
fn persist(
    shared: &Shared,
    group: &[Arc<Layer>],
    buffer: &mut Option<Arc<Layer>>,
    back: WriteBack,
) {
    if shared.progress.lock().poisoned.is_some() {
        return;
    }
    let failed = |number: u64, e: StoreError| {
        let mut p = shared.progress.lock();
        p.poisoned = Some(Poison { number, error: Arc::new(e) });
        shared.changed.notify_all();
    };
    let Err(e) = write_group(shared, group, buffer, back) else { return };
    if group.len() <= 1 {
        let number = group.first().or(buffer.as_ref()).map_or(0, |l| l.number);
        return failed(number, e);
    }
    for (i, layer) in group.iter().enumerate() {
        let back = if i + 1 == group.len() { back } else { WriteBack::Bound };
        if let Err(e) = write_group(shared, std::slice::from_ref(layer), buffer, back) {
            return failed(layer.number, e);
        }
    }
}

/// Pop `group` (the oldest block layers, on disk now) from the stack, and put `buffer` (the
/// node buffer after this group; `None` once written back) at its bottom.
fn persisted(shared: &Shared, group: &[Arc<Layer>], buffer: Option<Arc<Layer>>) {
    let mut p = shared.progress.lock();
    {
        let mut layers = shared.reader.layers.write();
        if node_buffer_of(&layers).is_some() {
            layers.remove(0);
        }
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
        p.nodes_at = buffer.as_ref().and_then(|b| b.lag_base);
        p.buffer_bytes = buffer.as_ref().map_or(0, |b| b.bytes);
        shared.peak_buffer_bytes.fetch_max(p.buffer_bytes, Ordering::Relaxed);
        if let Some(b) = buffer {
            layers.insert(0, b);
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

/// The next key of one map in [`merged`]'s heap: its 8-byte prefix, the key, and the map's
/// index reversed (of equal keys, the newest map first).
type Head<'a> = (u64, &'a [u8], Reverse<usize>);

/// Every key of `maps` (oldest first) once, in ascending order, with its value in the
/// newest map that has it: a k-way merge of the sorted maps. The heap orders keys by their
/// 8-byte prefixes first (an integer compare, which the key order never contradicts) and
/// compares whole keys only where prefixes tie.
fn merged<'a>(maps: &[&'a ChangeMap]) -> impl Iterator<Item = &'a Entry> {
    let mut iters: Vec<_> = maps.iter().map(|m| m.iter_prefixed().peekable()).collect();
    // Smallest key first; of equal keys, the newest map (highest index) first.
    let mut heap: BinaryHeap<Reverse<Head<'a>>> = BinaryHeap::new();
    for (i, it) in iters.iter_mut().enumerate() {
        if let Some((p, (k, _))) = it.peek() {
            heap.push(Reverse((*p, k.as_slice(), Reverse(i))));
        }
    }
    let mut last: Option<&'a [u8]> = None;
    std::iter::from_fn(move || loop {
        let Reverse((_, key, Reverse(i))) = heap.pop()?;
        let (_, entry) =
            iters[i].next().unwrap_or_else(|| unreachable!("a queued map has an entry"));
        if let Some((p, (k, _))) = iters[i].peek() {
            heap.push(Reverse((*p, k.as_slice(), Reverse(i))));
        }
        if last != Some(key) {
            last = Some(key);
            return Some(entry);
        }
    })
}

/// The most a group's write batch reserves up front (it may still grow past it).
const BATCH_RESERVE_MAX: u64 = 256 << 20;

/// One atomic batch for `group` (consecutive layers, oldest first), built straight from
/// their maps: each key once, with its newest value, in ascending key order per column
/// (RocksDB's memtable insert reuses its position in the skip list when keys come in
/// order, where a random order walks it from the top). The group's node writes join the
/// node `buffer`; the batch writes the buffer back as `back` says, and always when the
/// nodes on disk would lag `history_depth` blocks (the catch-up reads the reverse diffs of
/// the lag), and otherwise records the node watermark. On success the group is popped and
/// `buffer` replaced.
fn write_group(
    shared: &Shared,
    group: &[Arc<Layer>],
    buffer: &mut Option<Arc<Layer>>,
    back: WriteBack,
) -> Result<(), StoreError> {
    let db = &shared.reader.db;
    let Some(last) = group.last().or(buffer.as_ref()).cloned() else { return Ok(()) };
    // The block whose nodes are on disk.
    let base = match (buffer.as_ref(), group.first()) {
        (Some(b), _) => b.lag_base.unwrap_or(b.number),
        (None, Some(first)) => first.number.saturating_sub(1),
        (None, None) => return Ok(()),
    };
    let node_maps: Vec<&ChangeMap> = buffer.iter().chain(group.iter()).map(|l| &l.nodes).collect();
    // The buffer and the group's node writes merged, each path once: its bytes, not the
    // sum of the maps' (every block rewrites the upper levels), decide the write-back.
    let nodes = node_buffer(&node_maps, &last, base);
    let l = &shared.config.layers;
    let write_back = match back {
        WriteBack::Force => true,
        WriteBack::Bound => nodes.bytes >= l.node_buffer_bytes,
        WriteBack::LagOnly => false,
    } || last.number.saturating_sub(base) >= l.history_depth;
    // Reserved once: grown by doubling, the batch's buffer would be copied at every step
    // and each new buffer's pages faulted in again (the layers' byte counts bound it).
    let mut reserve = group.iter().map(|l| l.bytes - l.nodes.bytes()).sum::<u64>();
    if write_back {
        reserve += nodes.bytes;
    }
    let mut batch = WriteBatch::with_capacity_bytes(reserve.min(BATCH_RESERVE_MAX) as usize);
    let columns: [(&str, ColumnOf); 3] =
        [(CF_FLAT, |l| &l.flat), (CF_META, |l| &l.meta), (CF_CODE, |l| &l.code)];
    for (name, map) in columns {
        let h = cf(db, name)?;
        let maps: Vec<&ChangeMap> = group.iter().map(|l| map(l)).collect();
        for (k, v) in merged(&maps) {
            stage_write(&mut batch, h, k, v.as_deref());
        }
    }
    let meta = cf(db, CF_META)?;
    if write_back {
        let h = cf(db, CF_NODES)?;
        for (k, v) in nodes.nodes.iter() {
            stage_write(&mut batch, h, k, v.as_deref());
        }
        batch.delete_cf(meta, META_NODES_AT);
    } else {
        batch.put_cf(meta, META_NODES_AT, base.to_be_bytes());
    }
    let hist = cf(db, CF_HISTORY)?;
    for layer in group {
        batch.put_cf(hist, history_key(layer.number), &layer.history);
        if let Some(old) = layer.prune {
            batch.delete_cf(hist, history_key(old));
        }
        shared.faults.check(layer.number)?;
    }
    if group.is_empty() {
        shared.faults.check(last.number)?;
    }
    let bytes = batch.size_in_bytes() as u64;
    let mut options = WriteOptions::default();
    options.disable_wal(true);
    db.write_opt(batch, &options)?;
    shared.unflushed.store(true, Ordering::Release);
    shared.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    let next = if write_back {
        shared.write_backs.fetch_add(1, Ordering::Relaxed);
        None
    } else {
        Some(Arc::new(nodes))
    };
    persisted(shared, group, next.clone());
    *buffer = next;
    Ok(())
}

/// The node buffer holding `maps` merged (each path once, its newest write), for the
/// blocks `base + 1..=last.number`.
fn node_buffer(maps: &[&ChangeMap], last: &Layer, base: u64) -> Layer {
    let entries: Vec<&Entry> = merged(maps).collect();
    // The merges of a 1M-key store's buffer over 100 blocks: 758-788 ms without this,
    // 562-611 ms with it (the heap's prefix compares then took it to ~500 ms).
    touch_counts(entries.iter().copied());
    let nodes = ChangeMap::from_sorted(entries.into_iter().cloned().collect());
    let mut layer = Layer {
        number: last.number,
        root: last.root,
        nodes,
        lag_base: Some(base),
        ..Layer::default()
    };
    layer.measure();
    layer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&[u8], u8)]) -> ChangeMap {
        let v = |b: u8| (b != 0).then(|| Arc::<[u8]>::from(vec![b]));
        ChangeMap::from_writes(entries.iter().map(|(k, b)| (k.to_vec(), v(*b))).collect())
    }

    #[test]
    fn merge_keeps_each_key_once_newest_value_ascending() {
        let old = map(&[(b"a", 1), (b"c", 1), (b"e", 1)]);
        let mid = map(&[(b"b", 2), (b"c", 0), (b"f", 2)]);
        let new = map(&[(b"a", 3), (b"c", 3), (b"d", 3)]);
        let got: Vec<(Vec<u8>, Option<u8>)> = merged(&[&old, &mid, &new])
            .map(|(k, v)| (k.clone(), v.as_ref().map(|v| v[0])))
            .collect();
        let want: Vec<(Vec<u8>, Option<u8>)> = vec![
            (b"a".to_vec(), Some(3)),
            (b"b".to_vec(), Some(2)),
            (b"c".to_vec(), Some(3)),
            (b"d".to_vec(), Some(3)),
            (b"e".to_vec(), Some(1)),
            (b"f".to_vec(), Some(2)),
        ];
        assert_eq!(got, want);
        // A deletion in the newest map wins over older values.
        let del = map(&[(b"e", 0)]);
        let got: Vec<_> = merged(&[&old, &del]).map(|(k, v)| (k.clone(), v.is_some())).collect();
        assert_eq!(got, vec![(b"a".to_vec(), true), (b"c".to_vec(), true), (b"e".to_vec(), false)]);
        assert_eq!(merged(&[]).count(), 0);
    }

    proptest::proptest! {
        /// Keys over a small alphabet and of 6 to 11 bytes share their 8-byte prefixes
        /// often, and some are proper prefixes of others (the same zero-padded prefix):
        /// the heap's prefix order must fall back to the whole keys there.
        #[test]
        fn merge_matches_a_model_where_prefixes_tie(
            maps in proptest::collection::vec(
                proptest::collection::vec(
                    (proptest::collection::vec(0u8..2, 6..11), 0u8..3),
                    0..30,
                ),
                0..5,
            ),
        ) {
            let built: Vec<ChangeMap> = maps
                .iter()
                .map(|m| {
                    let v = |b: u8| (b != 0).then(|| Arc::<[u8]>::from(vec![b]));
                    ChangeMap::from_writes(m.iter().map(|(k, b)| (k.clone(), v(*b))).collect())
                })
                .collect();
            let mut model = std::collections::BTreeMap::new();
            for m in &built {
                for (k, v) in m.iter() {
                    model.insert(k.clone(), v.as_ref().map(|v| v[0]));
                }
            }
            let refs: Vec<&ChangeMap> = built.iter().collect();
            let got: Vec<(Vec<u8>, Option<u8>)> =
                merged(&refs).map(|(k, v)| (k.clone(), v.as_ref().map(|v| v[0]))).collect();
            let want: Vec<(Vec<u8>, Option<u8>)> = model.into_iter().collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
