//! Reads and proofs at a recent block: [`StateDb::at`] and [`ReadHandle::at`] give a
//! [`BlockView`] of any block from head - `history.recent_blocks` to the head.
//!
//! A view answers from the recent window (`tiers/recent/`) what the blocks after it changed,
//! and from the head's state (caches, layers, RocksDB) the rest. Every call holds the
//! window's lock (shared) from its first lookup to its last head read; a commit adds its
//! block's old values under the same lock (exclusive) before it publishes the block, so a
//! call never mixes two blocks. Costs: a point read is one hash lookup more than a read at
//! the head; a proof walks the block's nodes the same way; a range read merges the head's
//! range with the window's changes inside it.
//!
//! The window fills itself on demand below what it holds: flat and meta values from the
//! reverse diffs on disk (one read per block), and old trie nodes, only for proofs, by
//! undoing the blocks one by one on a trie over the view (one trie update per block, about
//! a commit's work; each undo's root is checked against the recorded one).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLockReadGuard;
use state::{KeyValue, TrieId, H256};
use trie::{LayoutName, NodeSource, SourceError};

use crate::error::{AtError, Corruption, StoreError};
use crate::history::ReverseDiff;
use crate::keys::{
    cf, decode_root, encode_node_value, flat_key, flat_range_for_path, history_key, node_key,
    root_key, Column, CF_HISTORY,
};
use crate::layout::Keys;
use crate::rocks::{leaf_scan_iter, scans_one_prefix};
use crate::shared::Shared;
use crate::statedb::{ReadHandle, StateDb};
use crate::tiers::layer::{block_layers, ChangeMap, Entry};
use crate::tiers::reader::{
    checked_node, key_has_path, leaf_at, leaf_under_skipping, load_node, load_node_for_key,
    value_node, StoredNodes,
};
use crate::tiers::recent::{held_bytes, IndexSources, Recent, RecentBlock};

/// A live flat entry: its full flat key and its value.
type FlatPair = (Vec<u8>, Arc<[u8]>);
/// A trie-local key and its value before a block (`None`: absent).
type KeyOld<'a> = (&'a [u8], Option<&'a [u8]>);

/// A read view of one recent block (see the module docs). Cheap to create; each call
/// checks that the block is still in the window.
pub struct BlockView<'a> {
    shared: &'a Shared,
    number: u64,
    root: H256,
}

impl std::fmt::Debug for BlockView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockView").field("number", &self.number).field("root", &self.root).finish()
    }
}

impl StateDb {
    /// A view of block `block`, for head - `history.recent_blocks` ≤ `block` ≤ head;
    /// [`AtError::Outside`] names the window otherwise.
    pub fn at(&self, block: u64) -> Result<BlockView<'_>, AtError> {
        self.check_complete()?;
        BlockView::new(self.shared(), block)
    }
}

impl ReadHandle {
    /// [`StateDb::at`] from a read handle (another thread, while blocks commit).
    pub fn at(&self, block: u64) -> Result<BlockView<'_>, AtError> {
        BlockView::new(&self.shared, block)
    }
}

impl<'a> BlockView<'a> {
    fn new(shared: &'a Shared, number: u64) -> Result<BlockView<'a>, AtError> {
        let (guard, root) = window(shared, number, false)?;
        drop(guard);
        Ok(BlockView { shared, number, root })
    }

    /// The block number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The block's state root (the main trie's).
    pub fn root(&self) -> H256 {
        self.root
    }

    /// The window's lock, once the block is in it (with old nodes if `nodes`).
    fn lock(&self, nodes: bool) -> Result<RwLockReadGuard<'a, Recent>, AtError> {
        let (guard, root) = window(self.shared, self.number, nodes)?;
        if root != self.root {
            return Err(AtError::Reverted { block: self.number });
        }
        Ok(guard)
    }

    /// The value of `key` in `trie` at the block.
    pub fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, AtError> {
        let recent = self.lock(false)?;
        let at = At { recent: &recent, shared: self.shared, number: self.number };
        Ok(at.flat(&flat_key(trie, key)?)?.map(|v| v.to_vec()))
    }

    /// The blob (contract code) stored under `hash`: content-addressed and never removed,
    /// so the head's store answers for every block of the window.
    pub fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, AtError> {
        drop(self.lock(false)?);
        Ok(self.shared.reader.code(hash)?.map(|v| v.to_vec()))
    }

    /// The root of `trie` at the block.
    pub fn trie_root(&self, trie: &TrieId) -> Result<H256, AtError> {
        let recent = self.lock(false)?;
        let at = At { recent: &recent, shared: self.shared, number: self.number };
        Ok(at.trie_root(trie)?)
    }

    /// The entries of `trie` with `start <= key < end` (no upper bound when `end` is
    /// `None`) at the block, ascending, at most `limit` of them.
    pub fn range(
        &self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<KeyValue>, AtError> {
        let recent = self.lock(false)?;
        let at = At { recent: &recent, shared: self.shared, number: self.number };
        Ok(at.range(trie, start, end, limit)?)
    }

    /// A proof of `keys` in `trie` at the block, from nodes the view loads.
    fn prove_keys(&self, trie: TrieId, keys: Keys<'_>) -> Result<Vec<Vec<u8>>, AtError> {
        let recent = self.lock(true)?;
        let at = At { recent: &recent, shared: self.shared, number: self.number };
        let root = at.trie_root(&trie)?;
        Ok(crate::layout::prove(at.layout(), AtSource { at, trie }, root, keys)?)
    }

    /// A proof of `key` in `trie` at the block: the nodes on its path, root first.
    pub fn prove(&self, trie: TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, AtError> {
        self.prove_keys(trie, Keys::One(key))
    }

    /// One proof of several keys of `trie` at the block (each node once).
    pub fn prove_many(
        &self,
        trie: TrieId,
        keys: &[impl AsRef<[u8]>],
    ) -> Result<Vec<Vec<u8>>, AtError> {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_ref().to_vec()).collect();
        self.prove_keys(trie, Keys::Many(&keys))
    }
}

/// The window's read lock and block `number`'s root, once the window holds the block
/// (and its old nodes if `nodes`), filling it from disk if it must.
fn window(
    shared: &Shared,
    number: u64,
    nodes: bool,
) -> Result<(RwLockReadGuard<'_, Recent>, H256), AtError> {
    let served = |r: &Recent| r.root_at(number).filter(|_| r.serves(number, nodes));
    let below_head = |r: &Recent| number < r.head().0 && number >= r.floor();
    {
        let r = shared.recent.read();
        // A read below the head wants the window's index, built lazily (`tiers/recent/`).
        let sources = below_head(&r).then(|| r.index_sources()).flatten();
        if let Some(root) = served(&r).filter(|_| sources.is_none()) {
            r.note_read();
            return Ok((r, root));
        }
        drop(r);
        if let Some(sources) = sources {
            build_index(shared, sources);
        }
    }
    {
        // Fill the window down to the block; for a refusal, down to its floor, so that
        // the error names the window the store serves, not what it has read back so far.
        // The index is built by now unless another reader was building it.
        let mut w = shared.recent.write();
        if below_head(&w) {
            w.ensure_index();
        }
        let inside = number <= w.head().0 && number >= w.floor();
        let down_to = if inside { number } else { w.floor() };
        extend(shared, &mut w, down_to, nodes && inside)?;
    }
    // Lookups are right with or without the index (a commit between the two locks may
    // have dropped it, after `INDEX_IDLE_BLOCKS` commits without a read).
    let r = shared.recent.read();
    match served(&r) {
        Some(root) => {
            r.note_read();
            Ok((r, root))
        }
        None => Err(outside(&r, number, nodes)),
    }
}

/// Build the window's index outside its lock, then install it (commits and other readers
/// go on meanwhile; the install adds what they changed).
fn build_index(shared: &Shared, sources: IndexSources) {
    /// Lets another reader build the index if this one panics before the install.
    struct Abandon<'a>(&'a Shared, bool);
    impl Drop for Abandon<'_> {
        fn drop(&mut self) {
            if !self.1 {
                self.0.recent.read().abandon_index_build();
            }
        }
    }
    let mut guard = Abandon(shared, false);
    let built = sources.build(false);
    shared.recent.write().install_index(built);
    guard.1 = true;
}

fn outside(r: &Recent, number: u64, nodes: bool) -> AtError {
    let head = r.head().0;
    let oldest = if nodes { r.provable() } else { r.oldest() };
    AtError::Outside { block: number, oldest, head, recent: r.stats().limit_blocks }
}

/// Read blocks back into the window down to `number` (and their old nodes if `nodes`),
/// as far as the history on disk and the byte bound allow.
fn extend(shared: &Shared, w: &mut Recent, number: u64, nodes: bool) -> Result<(), StoreError> {
    while w.oldest() > number && w.can_extend() {
        let n = w.oldest();
        match read_back(shared, n)? {
            Some(block) if w.has_room(n, block.bytes()) => w.push_front(block),
            Some(_) => {
                w.note_shrunk();
                break;
            }
            None => w.set_missing(n),
        }
    }
    while nodes && w.provable() > number.max(w.oldest()) {
        let n = w.provable();
        let at = At { recent: w, shared, number: n };
        let old = at.undo_nodes()?;
        if !w.has_room(n, held_bytes(&old)) {
            w.note_shrunk();
            break;
        }
        w.set_nodes(n, old);
    }
    Ok(())
}

/// Block `n`'s old values from its reverse diff (an unpersisted layer's, or the one on
/// disk); `None` when none is kept.
fn read_back(shared: &Shared, n: u64) -> Result<Option<RecentBlock>, StoreError> {
    let from_layer = {
        let layers = shared.reader.layers.read();
        let found = block_layers(&layers).find(|l| l.number == n).map(|l| l.history.clone());
        found
    };
    let raw = match from_layer {
        Some(raw) => raw,
        None => {
            let db = &shared.reader.db;
            match db.get_cf(cf(db, CF_HISTORY)?, history_key(n))? {
                Some(raw) => raw,
                None => return Ok(None),
            }
        }
    };
    let entries =
        ReverseDiff::decode(&raw).map_err(|source| Corruption::History { number: n, source })?;
    Ok(Some(RecentBlock::from_reverse(n, entries).ok_or(Corruption::HistoryHead { number: n })?))
}

/// One block's state: the window's changes after it over the head's state.
#[derive(Clone, Copy)]
pub(crate) struct At<'r> {
    recent: &'r Recent,
    shared: &'r Shared,
    number: u64,
}

impl At<'_> {
    /// The value of `key` in `column` at the block.
    fn value(&self, column: Column, key: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        match self.recent.changed_after(column, key, self.number) {
            Some(v) => Ok(v.cloned()),
            None => self.shared.reader.read(column, key),
        }
    }

    fn layout(&self) -> LayoutName {
        self.shared.reader.layout
    }

    fn flat(&self, key: &[u8]) -> Result<Option<Arc<[u8]>>, StoreError> {
        Ok(self.value(Column::Flat, key)?.filter(|v| !v.is_empty()))
    }

    fn trie_root(&self, trie: &TrieId) -> Result<H256, StoreError> {
        if *trie == TrieId::Main {
            return self
                .recent
                .root_at(self.number)
                .ok_or_else(|| Corruption::HistoryHead { number: self.number + 1 }.into());
        }
        match self.value(Column::Meta, &root_key(trie))? {
            None => Ok(self.layout().empty_root()),
            Some(v) => Ok(decode_root(trie, &v)?),
        }
    }

    /// The one live flat key of `trie` under nibble path `path` at the block.
    fn leaf_under(&self, trie: &TrieId, path: &[u8]) -> Result<Option<FlatPair>, StoreError> {
        let (lo, hi) = flat_range_for_path(trie, path);
        for block in self.recent.blocks_after(self.number) {
            for (k, _) in block.flat.range(lo.as_slice()..=hi.as_slice()) {
                if let Some(v) = self.flat(k)? {
                    return Ok(Some((k.clone(), v)));
                }
            }
        }
        let reader = &self.shared.reader;
        let layers = reader.layers.read().clone();
        let mut iter = leaf_scan_iter(&reader.db, scans_one_prefix(trie, path))?;
        let changed = |k: &[u8]| self.recent.changed_after(Column::Flat, k, self.number).is_some();
        leaf_under_skipping(&layers, &mut iter, trie, path, &changed)
    }

    fn range(
        &self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<KeyValue>, StoreError> {
        let lo = flat_key(trie, start)?;
        let end_key = end.map(|e| flat_key(trie, e)).transpose()?;
        let hi = flat_range_for_path(trie, &[]).1;
        let prefix = trie.prefix_len();
        // The window's keys in the range, with their values at the block.
        let mut changed: BTreeMap<Vec<u8>, Option<Arc<[u8]>>> = BTreeMap::new();
        for block in self.recent.blocks_after(self.number) {
            for (k, _) in block.flat.range(lo.as_slice()..=hi.as_slice()) {
                if end_key.as_ref().is_some_and(|e| k >= e) || changed.contains_key(k) {
                    continue;
                }
                changed.insert(k.clone(), self.flat(k)?);
            }
        }
        let mut window = changed
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k[prefix..].to_vec(), v.to_vec())))
            .peekable();
        let mut out = Vec::new();
        let head = self.shared.reader.flat_range(trie, start, end)?;
        for item in head {
            let (k, v) = item?;
            while let Some(w) = window.next_if(|(wk, _)| *wk < k) {
                out.push(w);
            }
            if self.recent.changed_after(Column::Flat, &flat_key(trie, &k)?, self.number).is_none()
            {
                out.push((k, v));
            }
            if out.len() >= limit {
                out.truncate(limit);
                return Ok(out);
            }
        }
        out.extend(window);
        out.truncate(limit);
        Ok(out)
    }

    /// Block `number`'s old nodes, by undoing it on tries over this view (which needs the
    /// old nodes of every later block): the undo writes exactly the paths the block
    /// changed, with their nodes before it. Each undone trie's root must be the one the
    /// block's parent records.
    fn undo_nodes(&self) -> Result<ChangeMap, StoreError> {
        let n = self.number;
        let block = self.recent.block(n).ok_or(Corruption::HistoryHead { number: n })?;
        let mut changes: BTreeMap<TrieId, Vec<KeyOld<'_>>> = BTreeMap::new();
        for (k, old) in block.flat.iter() {
            let (trie, key) =
                TrieId::split(k).ok_or_else(|| Corruption::FlatKey { key: k.clone() })?;
            changes.entry(trie).or_default().push((key, old.as_deref().filter(|v| !v.is_empty())));
        }
        let parent = At { number: n - 1, ..*self };
        let mut writes: Vec<Entry> = Vec::new();
        for (trie, kv) in changes {
            let source = AtSource { at: *self, trie };
            let u = crate::layout::rewrite(self.layout(), source, self.trie_root(&trie)?, kv)?;
            let expected = parent.trie_root(&trie)?;
            if u.root != expected {
                let computed = u.root;
                return Err(Corruption::RevertRoot { number: n, trie, computed, expected }.into());
            }
            // Leaves are not stored, except a trie's root node (see `stage_nodes`).
            let stored = |path: &[u8], is_leaf: bool| !is_leaf || path.is_empty();
            for r in u.removed.iter().filter(|r| stored(r.path.as_slice(), r.is_leaf)) {
                writes.push((node_key(&trie, r.path.as_slice()), None));
            }
            for c in u.new.iter().filter(|c| stored(c.path.as_slice(), c.is_leaf)) {
                let value = encode_node_value(&c.hash, &c.encoded);
                writes.push((node_key(&trie, c.path.as_slice()), Some(Arc::from(value))));
            }
        }
        Ok(ChangeMap::from_writes(writes))
    }
}

/// One trie of a [`BlockView`] as a [`NodeSource`]: nodes at the block, leaves rebuilt
/// from its flat values.
pub struct AtSource<'r> {
    at: At<'r>,
    trie: TrieId,
}

impl StoredNodes for AtSource<'_> {
    fn node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self.at.value(Column::Nodes, &node_key(&self.trie, path))?;
        checked_node(self.trie, v, path, hash)
    }

    fn leaf_by_scan(&self, path: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let prefix = self.trie.prefix_len();
        Ok(self
            .at
            .leaf_under(&self.trie, path)?
            .map(|(k, v)| leaf_at(self.at.layout(), path.len(), &k[prefix..], &v)))
    }

    fn value_node(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        value_node(self.at.layout(), path, hash, |k| self.at.flat(&flat_key(&self.trie, k)?))
    }

    fn node_or_key_leaf(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(n) = self.node(path, hash)? {
            return Ok(Some(n));
        }
        // No node is stored here, so it is a leaf: the looked-up key's if it exists.
        if !key_has_path(key, path) {
            return Ok(None);
        }
        let value = self.at.flat(&flat_key(&self.trie, key)?)?;
        Ok(value.map(|v| leaf_at(self.at.layout(), path.len(), key, &v)))
    }
}

impl NodeSource for AtSource<'_> {
    fn load(&self, path: &[u8], hash: &H256) -> Result<Option<Vec<u8>>, SourceError> {
        load_node(self, path, hash)
    }

    fn load_for_key(
        &self,
        path: &[u8],
        hash: &H256,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, SourceError> {
        load_node_for_key(self, path, hash, key)
    }

    fn trusted(&self) -> bool {
        true
    }
}
