//! Restoring a state piece by piece (a checkpoint): crash-safe and resumable.
//!
//! A restore runs under the bulk-load marker (`meta` `bulk_load`, labelled by what is
//! restored, say a checkpoint's manifest id): an empty database gets the marker, synced,
//! before anything else; a database holding the marker with the same label resumes; any
//! other is refused. Each verified piece is written by the caller in one atomic batch
//! ([`RestoreBatch`]): its `flat` entries, its nodes, root records, contract code (the
//! `code` family, by hash) and a progress record naming the piece, so a restore killed at
//! any moment holds whole pieces, and the progress records say which. [`Restore::finish`] checks that the nodes hold the root,
//! then in one synced batch sets the head, deletes the marker and the progress records.

use std::sync::Arc;

use rocksdb::{ColumnFamily, WriteBatch, WriteOptions, DB};
use state::{TrieId, H256};
use trie::LayoutName;

use crate::error::{BulkError, StoreError};
use crate::keys::{
    cf, encode_head, encode_node_value, flat_key, node_key, root_key, CF_CODE, CF_FLAT, CF_META,
    CF_NODES, KEY_BYTES_MAX, META_BULK, META_HEAD, META_NODES_AT,
};
use crate::rocks::first_entry;
use crate::statedb::StateDb;

/// `meta` prefix of the progress records a restore keeps until it finishes.
const META_RESTORE: &[u8] = b"restore/";

/// A progress record: (name, value).
pub type ProgressRecord = (Vec<u8>, Vec<u8>);

/// A restore in progress; see the module docs. Dropping it without [`Restore::finish`]
/// leaves the database marked unfinished (and resumable).
pub struct Restore<'a> {
    state: &'a mut StateDb,
    writer: RestoreWriter,
}

/// Writes a restore's pieces; cloneable and shareable across threads.
#[derive(Clone)]
pub struct RestoreWriter {
    db: Arc<DB>,
    layout: LayoutName,
}

impl std::fmt::Debug for RestoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestoreWriter").finish_non_exhaustive()
    }
}

/// One piece's writes, applied atomically by [`RestoreWriter::write`].
pub struct RestoreBatch<'w> {
    batch: WriteBatch,
    layout: LayoutName,
    flat: &'w ColumnFamily,
    nodes: &'w ColumnFamily,
    meta: &'w ColumnFamily,
    code: &'w ColumnFamily,
}

impl StateDb {
    /// Begin restoring the state labelled `label` into this database, or resume the
    /// restore of the same label that a crash or a stop interrupted. An empty database is
    /// marked first (synced); a database holding anything else is refused.
    pub fn begin_restore(&mut self, label: &str) -> Result<Restore<'_>, BulkError> {
        self.claim_marker(label)?;
        let writer = RestoreWriter { db: self.reader().db.clone(), layout: self.layout() };
        Ok(Restore { state: self, writer })
    }

    /// Give up the unfinished restore (or bulk load) labelled `label`: everything it wrote,
    /// its progress records and its marker are deleted (the marker last, synced), which
    /// leaves an empty database that a restore of another label may take. A database with
    /// no unfinished load, or one of another label, is refused and left as it is.
    pub fn abandon_restore(&mut self, label: &str) -> Result<(), BulkError> {
        self.check_poison()?;
        match self.bulk.as_deref() {
            Some(found) if found == label => {}
            Some(found) => {
                return Err(BulkError::OtherUnfinished {
                    found: found.to_owned(),
                    requested: label.to_owned(),
                })
            }
            None => return Err(BulkError::NotEmpty { head: self.head_number() }),
        }
        self.clear_partial_state()?;
        end_load(&self.reader().db, None)?;
        self.bulk = None;
        Ok(())
    }
}

/// The last write of a restore, finished (`head` set) or abandoned: the head, if any,
/// the marker's and the progress records' deletion, in one synced batch.
fn end_load(db: &DB, head: Option<(u64, &H256)>) -> Result<(), StoreError> {
    let meta = cf(db, CF_META)?;
    let mut last = WriteBatch::default();
    if let Some((number, root)) = head {
        last.put_cf(meta, META_HEAD, encode_head(number, root));
    }
    last.delete_cf(meta, META_BULK);
    last.delete_cf(meta, META_NODES_AT);
    let mut end = META_RESTORE.to_vec();
    end.extend_from_slice(&[0xff; 64]);
    last.delete_range_cf(meta, META_RESTORE, end.as_slice());
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    db.write_opt(last, &sync)?;
    Ok(())
}

impl Restore<'_> {
    /// The writer for this restore's pieces.
    pub fn writer(&self) -> RestoreWriter {
        self.writer.clone()
    }

    /// Every progress record written so far: (name, value).
    pub fn progress(&self) -> Result<Vec<ProgressRecord>, StoreError> {
        let db = &self.writer.db;
        let mut out = Vec::new();
        for item in db.prefix_iterator_cf(cf(db, CF_META)?, META_RESTORE) {
            let (k, v) = item?;
            let Some(name) = k.strip_prefix(META_RESTORE) else { break };
            out.push((name.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    /// Check that the restored nodes hold `root` (the stored root node hashes to it, or,
    /// for a one-key trie, the key's leaf does), then make block `number` the head and
    /// drop the marker and the progress records, in one synced batch.
    pub fn finish(self, number: u64, root: H256) -> Result<(), BulkError> {
        let Restore { state, writer } = self;
        let db = &writer.db;
        check_root(state.layout(), db, &root)?;
        end_load(db, Some((number, &root)))?;
        state.reader().clear_caches();
        state.bulk = None;
        state.set_head(number, root);
        // `end_load` synced its batch.
        state.record_durable()?;
        Ok(())
    }
}

/// The main trie's stored root node (or its only leaf) must hash to `root`.
fn check_root(layout: LayoutName, db: &DB, root: &H256) -> Result<(), BulkError> {
    let bad = |found: String| BulkError::RestoredRoot { expected: *root, found };
    let flat = cf(db, CF_FLAT)?;
    let first =
        first_entry(db, flat).map_err(StoreError::from)?.filter(|(k, _)| k.first() == Some(&0));
    if *root == layout.empty_root() {
        return match first {
            None => Ok(()),
            Some(_) => Err(bad("main-trie entries".into())),
        };
    }
    if let Some(v) =
        db.get_cf(cf(db, CF_NODES)?, node_key(&TrieId::Main, &[])).map_err(StoreError::from)?
    {
        return match v.get(..32) == Some(root.as_bytes()) && layout.hash(&v[32..]) == *root {
            true => Ok(()),
            false => Err(bad("a root node with another hash".into())),
        };
    }
    // No stored root node: the trie is one leaf, rebuilt from its key.
    let Some((k, v)) = first else { return Err(bad("no main-trie entries".into())) };
    let leaf = crate::tiers::reader::leaf_at(layout, 0, &k[1..], &v);
    match layout.hash(&leaf) == *root {
        true => Ok(()),
        false => Err(bad("no root node".into())),
    }
}

impl RestoreWriter {
    /// An empty batch.
    pub fn batch(&self) -> Result<RestoreBatch<'_>, StoreError> {
        let db = &self.db;
        Ok(RestoreBatch {
            batch: WriteBatch::default(),
            layout: self.layout,
            flat: cf(db, CF_FLAT)?,
            nodes: cf(db, CF_NODES)?,
            meta: cf(db, CF_META)?,
            code: cf(db, CF_CODE)?,
        })
    }

    /// Write `batch` atomically (not synced: a kill loses nothing the OS has; a power
    /// loss at most the latest pieces, whose progress records go with them).
    pub fn write(&self, batch: RestoreBatch<'_>) -> Result<(), StoreError> {
        Ok(self.db.write(batch.batch)?)
    }

    /// A restored `flat` value.
    pub fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get_cf(cf(&self.db, CF_FLAT)?, flat_key(trie, key)?)?)
    }

    /// True when restored code (a blob of the `code` family) is stored under `hash`.
    pub fn has_code(&self, hash: &H256) -> Result<bool, StoreError> {
        Ok(self.db.get_pinned_cf(cf(&self.db, CF_CODE)?, hash.0)?.is_some())
    }
}

impl<'w> RestoreBatch<'w> {
    /// A `flat` entry (the value must not be empty: empty means absent).
    pub fn put_flat(&mut self, trie: &TrieId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        if key.len() > KEY_BYTES_MAX {
            return Err(StoreError::KeyTooLong { len: key.len(), max: KEY_BYTES_MAX });
        }
        self.batch.put_cf(self.flat, flat_key(trie, key)?, value);
        Ok(())
    }

    /// A node at nibble path `path` (at most `2 × KEY_BYTES_MAX` nibbles) with its hash.
    pub fn put_node(
        &mut self,
        trie: &TrieId,
        path: &[u8],
        hash: &H256,
        encoding: &[u8],
    ) -> Result<(), StoreError> {
        if path.len() > 2 * KEY_BYTES_MAX {
            return Err(StoreError::KeyTooLong { len: path.len().div_ceil(2), max: KEY_BYTES_MAX });
        }
        self.batch.put_cf(self.nodes, node_key(trie, path), encode_node_value(hash, encoding));
        Ok(())
    }

    /// Contract code under its hash (the `code` family, read by [`StateDb::code`]); the
    /// caller keeps the invariant that `hash` is the keccak256 of `code`.
    pub fn put_code(&mut self, hash: &H256, code: &[u8]) {
        self.batch.put_cf(self.code, hash.0, code);
    }

    /// The root record of a non-main trie.
    pub fn put_root(&mut self, trie: &TrieId, root: &H256) {
        if *trie != TrieId::Main {
            self.batch.put_cf(self.meta, root_key(trie), root.0);
        }
    }

    /// A sink for the nodes of `trie` that a streaming builder or a range verification
    /// reports: it keeps those the store stores (`keys::stored_hash`) in this batch. The
    /// first error (a path too long) is kept for [`NodeBatch::finish`].
    pub fn nodes(&mut self, trie: TrieId) -> NodeBatch<'_, 'w> {
        NodeBatch { batch: self, trie, error: None }
    }

    /// A progress record (read back by [`Restore::progress`]).
    pub fn put_progress(&mut self, name: &[u8], value: &[u8]) {
        let mut k = META_RESTORE.to_vec();
        k.extend_from_slice(name);
        self.batch.put_cf(self.meta, k, value);
    }

    /// Bytes the batch holds.
    pub fn size_in_bytes(&self) -> usize {
        self.batch.size_in_bytes()
    }
}

/// [`RestoreBatch::nodes`].
pub struct NodeBatch<'b, 'w> {
    batch: &'b mut RestoreBatch<'w>,
    trie: TrieId,
    error: Option<StoreError>,
}

impl NodeBatch<'_, '_> {
    /// The first error, if a node could not be added.
    pub fn finish(self) -> Result<(), StoreError> {
        self.error.map_or(Ok(()), Err)
    }
}

impl trie::NodeSink for NodeBatch<'_, '_> {
    fn node(
        &mut self,
        _: trie::EmittedKind,
        path: trie::NibbleSlice<'_>,
        encoded: &[u8],
        reference: &trie::ChildRef,
    ) {
        let Some(hash) = crate::keys::stored_hash(self.batch.layout, &path, encoded, reference)
        else {
            return;
        };
        if self.error.is_none() {
            let nibbles = path.to_nibbles();
            if let Err(e) = self.batch.put_node(&self.trie, nibbles.as_slice(), &hash, encoded) {
                self.error = Some(e);
            }
        }
    }
}
