//! The block's layer from its tries' results: flat changes in key order, node writes sorted
//! once, root records and the head, the reverse diff encoded as its entries were recorded;
//! then the resident trie takes the node writes and the nodes the walks loaded.

use std::sync::Arc;

use state::{TrieId, H256};

use crate::error::{Corruption, StoreError};
use crate::history::ReverseDiff;
use crate::keys::{block_record_key, encode_head, root_key, Column, BLOCK_RECORDS_KEPT, META_HEAD};
use crate::statedb::StateDb;
use crate::tiers::layer::{touch_counts, ChangeMap, Entry, Layer};
use crate::tiers::reader::Values;
use crate::tiers::recent::RecentBlock;

use super::pass::{ReadBelow, TrieCommit, Walked};
use super::{CommitInfo, CommitTimings, Extras};

impl StateDb {
    /// The block's layer from its tries' results, the nodes to admit, and the commit info.
    pub(super) fn assemble(
        &mut self,
        number: u64,
        head_root: H256,
        tries: Vec<TrieCommit>,
        extras: Extras<'_>,
    ) -> Result<(Layer, Walked, CommitInfo), StoreError> {
        let mut rev = ReverseDiff::new();
        let mut flat = Vec::new();
        let mut nodes = Vec::new();
        let mut meta = Vec::new();
        let mut loaded = Vec::new();
        let mut below = ReadBelow::default();
        let mut roots = Vec::with_capacity(tries.len());
        let (mut hashes, mut leaf_scans, mut hits, mut misses) = (0, 0, 0, 0);
        let mut main_root = head_root;
        for mut t in tries {
            rev.append(t.undo);
            flat.extend(t.flat);
            nodes.extend(t.nodes);
            loaded.extend(t.loaded);
            if below.len() < t.below.len() {
                std::mem::swap(&mut below, &mut t.below);
            }
            below.extend(t.below);
            if t.trie == TrieId::Main {
                main_root = t.root;
            } else if t.root != t.old_root {
                let key = root_key(&t.trie);
                let new =
                    (t.root != self.layout().empty_root()).then(|| Arc::from(t.root.0.as_slice()));
                rev.record(Column::Meta, key.clone(), self.read_meta(&key)?);
                meta.push((key, new));
            }
            roots.push((t.trie, t.root));
            hashes += t.hashes;
            leaf_scans += t.leaf_scans;
            hits += t.resident_hits;
            misses += t.resident_misses;
        }
        self.resident.count(hits, misses);
        if let Some(record) = extras.record {
            self.stage_record(number, record, &mut rev, &mut meta)?;
        }
        let head = (self.head_number(), head_root);
        rev.record(Column::Meta, META_HEAD.to_vec(), Some(encode_head(head.0, &head.1)));
        meta.push((META_HEAD.to_vec(), Some(Arc::from(encode_head(number, &main_root)))));
        let mut layer = Layer {
            number,
            root: main_root,
            flat: ChangeMap::from_sorted(flat),
            nodes: ChangeMap::from_writes(nodes),
            meta: ChangeMap::from_writes(meta),
            code: ChangeMap::from_sorted(extras.code),
            history: rev.encode(),
            prune: number.checked_sub(self.config().layers.history_depth),
            bytes: 0,
            lag_base: None,
        };
        layer.measure();
        let info = CommitInfo {
            number,
            root: main_root,
            roots,
            hashes,
            leaf_scans,
            timings: CommitTimings::default(),
        };
        Ok((layer, Walked { loaded, below }, info))
    }

    /// The resident trie takes the block's node writes and the nodes its walk loaded; with
    /// the recent window on, the nodes the writes replace go to the window with the block's
    /// old values, before the block is published (see `tiers/recent/`): flat and meta from the
    /// reverse diff, nodes from what the resident trie held and, below its levels, what the
    /// walk read (every node it rewrote or deleted) and one batched read of the rest (nodes
    /// written where the walk read nothing, most of them new). The resident update runs
    /// beside the diff and the read.
    pub(super) fn apply_resident(
        &mut self,
        layer: &Layer,
        walked: Walked,
    ) -> Result<(), StoreError> {
        let Walked { loaded, mut below } = walked;
        // The apply clones every written node's `Arc`.
        touch_counts(layer.nodes.iter());
        let writes = layer.nodes.iter().map(|(k, v)| (k.as_slice(), v.as_ref()));
        if !self.shared().recent.read().enabled() {
            self.resident.apply(loaded, writes);
            return Ok(());
        }
        // The old nodes are keyed exactly like the layer's node writes (each written key's
        // node before the block, `None` where there was none), so they are filled by
        // position and take the layer's keys in its order, with no sort.
        let mut old: Values = vec![None; layer.nodes.len()];
        let mut unknown = Vec::new();
        for (at, (k, _)) in layer.nodes.iter().enumerate() {
            if self.resident.keeps(k) {
                continue;
            }
            match below.remove(k) {
                Some(node) => old[at] = node,
                None => unknown.push(at),
            }
        }
        let (resident, shared) = self.resident_and_shared();
        let number = layer.number;
        let rest = || -> Result<(RecentBlock, ChangeMap, Values), StoreError> {
            drop(below);
            let entries = ReverseDiff::decode(&layer.history)
                .map_err(|source| Corruption::History { number, source })?;
            let block = RecentBlock::from_reverse(number, entries)
                .ok_or(Corruption::HistoryHead { number })?;
            let values = match unknown.is_empty() {
                true => Vec::new(),
                false => {
                    let keys: Vec<Vec<u8>> =
                        unknown.iter().map(|&at| layer.nodes.key_at(at).to_vec()).collect();
                    shared.reader.read_batch(Column::Nodes, &keys)?
                }
            };
            Ok((block, ChangeMap::keys_of(&layer.nodes), values))
        };
        let (captured, rest) = rayon::join(|| resident.apply_capturing(loaded, writes), rest);
        let (mut block, keys, values) = rest?;
        for (at, node) in unknown.into_iter().zip(values).chain(captured) {
            old[at] = node;
        }
        block.set_old_nodes(keys.with_values(old));
        shared.recent.write().push(block);
        Ok(())
    }

    /// Block `number`'s record into the layer's meta writes, and the record that leaves the
    /// kept window deleted; both undone by the block's reverse diff.
    fn stage_record(
        &self,
        number: u64,
        record: &[u8],
        rev: &mut ReverseDiff,
        meta: &mut Vec<Entry>,
    ) -> Result<(), StoreError> {
        let key = block_record_key(number);
        rev.record(Column::Meta, key.clone(), self.read_meta(&key)?);
        meta.push((key, Some(Arc::from(record))));
        if let Some(old) = number.checked_sub(BLOCK_RECORDS_KEPT) {
            let key = block_record_key(old);
            if let Some(value) = self.read_meta(&key)? {
                rev.record(Column::Meta, key.clone(), Some(value));
                meta.push((key, None));
            }
        }
        Ok(())
    }

    fn read_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.reader().read(Column::Meta, key)?.map(|v| v.to_vec()))
    }
}
