//! Bottom-up rebuild: recompute every branch and extension node and the root of a trie
//! from `flat` alone, by sequential scans in on-disk order, parallel across the 16
//! first-nibble ranges. Used after bulk loads (writing the `nodes` column family) and by
//! `verify` (comparing with the stored root, writing nothing).

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use rocksdb::{Direction, IteratorMode, WriteBatch, DB};
use state::{TrieId, H256};
use trie::{
    ChildRef, EmittedKind, Layout, LayoutName, NibbleSlice, NodeSink, RootBuilder, WithLayout,
};

use crate::error::{Corruption, StoreError};
use crate::keys::{
    cf, encode_node_value, flat_range_for_path, node_key, CF_FLAT, CF_NODES, KEY_BYTES_MAX,
};
use crate::rocks::{flat_total_order, KvPair};
use crate::tiers::layer::ChangeMap;
use crate::tiers::reader::leaf_at;

/// Write batches of the rebuild are flushed at about this size.
const BATCH_BYTES_TARGET: usize = 8 << 20;

/// What a rebuild does with the nodes it recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Count them (the root only).
    Count,
    /// Replace the trie's stored nodes with them.
    Write,
    /// Compare each with the stored node at its path.
    Check,
}

/// How the stored nodes compare with the recomputed ones ([`Mode::Check`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeCheck {
    /// Stored exactly as recomputed.
    pub(crate) matched: u64,
    /// Stored with other bytes (hash or encoding).
    pub(crate) differing: u64,
    /// Not stored.
    pub(crate) missing: u64,
    /// The nibble path of the first node that differs or is missing.
    pub(crate) first_bad: Option<Vec<u8>>,
}

impl NodeCheck {
    fn merge(&mut self, other: NodeCheck) {
        self.matched += other.matched;
        self.differing += other.differing;
        self.missing += other.missing;
        if self.first_bad.is_none() {
            self.first_bad = other.first_bad;
        }
    }
}

/// Collects emitted nodes into write batches, checks them, or only counts them.
struct NodeWriter<'a> {
    db: &'a DB,
    layout: LayoutName,
    trie: TrieId,
    mode: Mode,
    /// Node writes not on disk yet (the node buffer of a read-only handle whose nodes lag;
    /// see `catch_up.rs`): [`Mode::Check`] compares with them first.
    overlay: Option<&'a ChangeMap>,
    batch: WriteBatch,
    nodes: u64,
    check: NodeCheck,
    error: Option<StoreError>,
}

impl<'a> NodeWriter<'a> {
    fn new(job: &Job<'a>) -> Self {
        let Job { db, layout, trie, mode, overlay, .. } = *job;
        NodeWriter {
            db,
            layout,
            trie: *trie,
            mode,
            overlay,
            batch: WriteBatch::default(),
            nodes: 0,
            check: NodeCheck::default(),
            error: None,
        }
    }

    /// The stored node under `key`, or `None` with the error kept for `finish`.
    fn stored(&mut self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if let Some(v) = self.overlay.and_then(|o| o.get(key)) {
            return Some(v.map(|v| v.to_vec()));
        }
        let db = self.db;
        match cf(db, CF_NODES).and_then(|h| Ok(db.get_pinned_cf(h, key)?)) {
            Ok(v) => Some(v.map(|v| v.to_vec())),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    fn compare(&mut self, path: &[u8], key: &[u8], expected: &[u8]) {
        let Some(stored) = self.stored(key) else { return };
        match stored {
            Some(v) if &v[..] == expected => self.check.matched += 1,
            Some(_) => self.check.differing += 1,
            None => self.check.missing += 1,
        }
        if self.check.differing + self.check.missing > 0 && self.check.first_bad.is_none() {
            self.check.first_bad = Some(path.to_vec());
        }
    }
}

impl NodeWriter<'_> {
    fn flush(&mut self) {
        if self.batch.is_empty() || self.error.is_some() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        if let Err(e) = self.db.write(batch) {
            self.error = Some(e.into());
        }
    }

    /// [`Mode::Check`] of a trie that is one leaf: commits store their root node whatever
    /// it is, a lone leaf included, while a rebuild writes none; so a stored root is
    /// compared with the leaf, and no stored root is fine.
    fn check_root_leaf(&mut self, root: &H256, encoded: &[u8]) {
        let key = node_key(&self.trie, &[]);
        let Some(stored) = self.stored(&key) else { return };
        match stored {
            Some(v) if v[..] == encode_node_value(root, encoded)[..] => self.check.matched += 1,
            Some(_) => {
                self.check.differing += 1;
                self.check.first_bad.get_or_insert_with(Vec::new);
            }
            None => {}
        }
    }

    fn finish(mut self) -> Result<(u64, NodeCheck), StoreError> {
        self.flush();
        match self.error {
            Some(e) => Err(e),
            None => Ok((self.nodes, self.check)),
        }
    }
}

impl NodeSink for NodeWriter<'_> {
    fn node(
        &mut self,
        _kind: EmittedKind,
        path: NibbleSlice<'_>,
        encoded: &[u8],
        reference: &ChildRef,
    ) {
        let Some(hash) = crate::keys::stored_hash(self.layout, &path, encoded, reference) else {
            return;
        };
        self.nodes += 1;
        if self.mode == Mode::Count {
            return;
        }
        let nibbles = path.to_nibbles();
        let key = node_key(&self.trie, nibbles.as_slice());
        if self.mode == Mode::Check {
            self.compare(nibbles.as_slice(), &key, &encode_node_value(&hash, encoded));
            return;
        }
        let Ok(h) = cf(self.db, CF_NODES) else { return };
        self.batch.put_cf(h, key, encode_node_value(&hash, encoded));
        if self.batch.size_in_bytes() >= BATCH_BYTES_TARGET {
            self.flush();
        }
    }
}

/// Result of a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rebuilt {
    /// The recomputed root.
    pub(crate) root: H256,
    /// Leaves scanned.
    pub(crate) leaves: u64,
    /// Branch/extension nodes (stored by hash, or the root) emitted.
    pub(crate) nodes: u64,
    /// With [`Mode::Check`]: how the stored nodes compare.
    pub(crate) check: NodeCheck,
}

/// A first-nibble subtree's result: its reference, leaves, nodes and node check.
type Part = (ChildRef, u64, (u64, NodeCheck));

/// One `flat` entry as RocksDB's iterator yields it.
type FlatEntry = Result<KvPair, rocksdb::Error>;

fn scan<'a>(
    db: &'a DB,
    trie: &TrieId,
    path: &[u8],
) -> Result<impl Iterator<Item = FlatEntry> + 'a, StoreError> {
    let (lo, hi) = flat_range_for_path(trie, path);
    let mut opts = flat_total_order();
    opts.set_iterate_upper_bound(hi);
    opts.fill_cache(false);
    Ok(db.iterator_cf_opt(cf(db, CF_FLAT)?, opts, IteratorMode::From(&lo, Direction::Forward)))
}

fn feed<L: Layout, S: NodeSink>(
    b: &mut RootBuilder<L, S>,
    iter: impl Iterator<Item = Result<(Box<[u8]>, Box<[u8]>), rocksdb::Error>>,
    trie: &TrieId,
    scanned: &AtomicU64,
) -> Result<(), StoreError> {
    let prefix_len = trie.prefix_len();
    let mut n = 0u64;
    for item in iter {
        let (k, v) = item?;
        b.add(&k[prefix_len..], &v)
            .map_err(|source| Corruption::FlatOrder { trie: *trie, source })?;
        n += 1;
        if n == 4096 {
            scanned.fetch_add(n, Ordering::Relaxed);
            n = 0;
        }
    }
    scanned.fetch_add(n, Ordering::Relaxed);
    Ok(())
}

/// One rebuild's inputs.
#[derive(Clone, Copy)]
struct Job<'a> {
    db: &'a DB,
    layout: LayoutName,
    trie: &'a TrieId,
    mode: Mode,
    scanned: &'a AtomicU64,
    overlay: Option<&'a ChangeMap>,
}

impl WithLayout for Job<'_> {
    type Output = Result<Rebuilt, StoreError>;
    fn run<L: Layout>(self) -> Self::Output {
        rebuild_in::<L>(&self)
    }
}

/// Recompute `trie`'s root (in `layout`) from `flat`; with [`Mode::Write`], replace its
/// stored nodes, with [`Mode::Check`], compare them. The caller makes sure every layer is
/// persisted first. `scanned` counts the `flat` entries read (a progress counter).
pub(crate) fn rebuild(
    layout: LayoutName,
    db: &DB,
    trie: &TrieId,
    mode: Mode,
    scanned: &AtomicU64,
    overlay: Option<&ChangeMap>,
) -> Result<Rebuilt, StoreError> {
    layout.dispatch(Job { db, layout, trie, mode, scanned, overlay })
}

fn rebuild_in<L: Layout>(job: &Job<'_>) -> Result<Rebuilt, StoreError> {
    let Job { db, trie, mode, scanned, .. } = *job;
    if mode == Mode::Write {
        let lo = node_key(trie, &[]);
        let mut hi = trie.prefix();
        hi.extend(std::iter::repeat_n(0xff, KEY_BYTES_MAX + 2));
        db.delete_range_cf(cf(db, CF_NODES)?, &lo[..trie.prefix_len()], &hi)?;
    }
    // An empty key sorts before every first-nibble range: the split cannot apply.
    let has_empty_key = db.get_cf(cf(db, CF_FLAT)?, trie.prefix())?.is_some();
    let parts: Vec<Result<Part, StoreError>> = if has_empty_key {
        Vec::new()
    } else {
        (0..16u8)
            .into_par_iter()
            .map(|n| {
                let mut b = RootBuilder::<L, _>::subtree(1, NodeWriter::new(job));
                feed(&mut b, scan(db, trie, &[n])?, trie, scanned)?;
                let leaves = b.leaves();
                let (r, sink, _) = b.finish_ref();
                Ok((r, leaves, sink.finish()?))
            })
            .collect()
    };
    let mut children = [ChildRef::EMPTY; 16];
    let (mut leaves, mut nodes, mut check) = (0, 0, NodeCheck::default());
    for (i, p) in parts.into_iter().enumerate() {
        let (r, l, (n, c)) = p?;
        children[i] = r;
        leaves += l;
        nodes += n;
        check.merge(c);
    }
    if has_empty_key || children.iter().filter(|c| !c.is_empty()).count() < 2 {
        return rebuild_serial::<L>(job);
    }
    let mut enc = Vec::with_capacity(600);
    L::encode_branch(&children, None, &mut enc);
    let root = L::hash(&enc);
    let mut w = NodeWriter::new(job);
    w.node(EmittedKind::Branch, NibbleSlice::new(&[]), &enc, &ChildRef::hash(root));
    let (n, c) = w.finish()?;
    nodes += n;
    check.merge(c);
    Ok(Rebuilt { root, leaves, nodes, check })
}

fn rebuild_serial<L: Layout>(job: &Job<'_>) -> Result<Rebuilt, StoreError> {
    let Job { db, layout, trie, mode, scanned, .. } = *job;
    if mode == Mode::Write {
        let lo = trie.prefix();
        let mut hi = trie.prefix();
        hi.extend(std::iter::repeat_n(0xff, KEY_BYTES_MAX + 2));
        db.delete_range_cf(cf(db, CF_NODES)?, &lo, &hi)?;
    }
    let mut b = RootBuilder::<L, _>::with_sink(NodeWriter::new(job));
    feed(&mut b, scan(db, trie, &[])?, trie, scanned)?;
    let leaves = b.leaves();
    let (root, mut sink, _) = b.finish_with();
    if mode == Mode::Check && leaves == 1 {
        if let Some(item) = scan(db, trie, &[])?.next() {
            let (k, v) = item?;
            sink.check_root_leaf(&root, &leaf_at(layout, 0, &k[trie.prefix_len()..], &v));
        }
    }
    let (nodes, check) = sink.finish()?;
    Ok(Rebuilt { root, leaves, nodes, check })
}
