//! Bulk loading into an empty database, crash-safe (the bottom-up rebuild is `rebuild`).
//!
//! A bulk load writes `flat` directly in large batches, then rebuilds every touched trie's
//! nodes bottom-up from `flat` and makes block 0 the head. It is made crash-safe by a
//! marker in `meta` (the load's label): written and synced before the first entry, and
//! deleted in the same synced batch that sets the head. A database with the marker is an
//! unfinished bulk load whatever else it holds: it opens, names the load
//! ([`StateDb::unfinished_bulk_load`]), refuses reads, commits and reverts, and only a bulk
//! load with the same label may proceed, which clears the partial state and starts over.
//! Everything a load writes precedes its final batch in RocksDB's write order, so a
//! recovered database that has the head has all of it.

use std::collections::BTreeSet;

use rocksdb::{WriteBatch, WriteOptions};
use state::{TrieId, H256};

pub(crate) mod rebuild;

use crate::bulk::rebuild::{rebuild, Mode};
use crate::error::{BulkError, StoreError};
use crate::keys::{
    block_record_key, cf, encode_head, flat_key, root_key, CF_CODE, CF_FLAT, CF_HISTORY, CF_META,
    CF_NODES, KEY_BYTES_MAX, META_BULK, META_HEAD, META_NODES_AT, META_ROOT,
};
use crate::rocks::first_entry;
use crate::statedb::StateDb;

/// Longest label a bulk load may carry.
pub const BULK_LABEL_BYTES_MAX: usize = 1024;

/// Flat writes are flushed in batches of about this size.
const BATCH_BYTES_TARGET: usize = 8 << 20;

/// A bulk load in progress; see the module docs. Dropping it without [`BulkLoad::finish`]
/// leaves the database marked unfinished.
pub struct BulkLoad<'a> {
    db: &'a mut StateDb,
    batch: WriteBatch,
    entries: u64,
    /// Non-main tries that received entries: their roots are rebuilt and recorded.
    tries: BTreeSet<TrieId>,
    /// Block 0's record, written with the head (see [`BulkLoad::set_record`]).
    record: Option<Vec<u8>>,
}

/// What a finished bulk load produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkSummary {
    /// The main root (the head of block 0).
    pub root: H256,
    /// Entries written (empty values are skipped).
    pub entries: u64,
    /// The root of every non-main trie that received entries.
    pub roots: Vec<(TrieId, H256)>,
}

impl StateDb {
    /// Start a bulk load labelled `label` (say, the genesis it loads). On an empty database
    /// the marker is written first; on a database holding an unfinished load with the same
    /// label, its partial state is cleared and the load starts over; anything else is
    /// refused.
    pub fn begin_bulk_load(&mut self, label: &str) -> Result<BulkLoad<'_>, BulkError> {
        if self.claim_marker(label)? {
            self.clear_partial_state()?;
        }
        let batch = WriteBatch::default();
        Ok(BulkLoad { db: self, batch, entries: 0, tries: BTreeSet::new(), record: None })
    }

    /// Run a whole bulk load of `entries` (see [`StateDb::begin_bulk_load`]).
    pub fn bulk_load<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        label: &str,
        entries: impl IntoIterator<Item = (TrieId, K, V)>,
    ) -> Result<BulkSummary, BulkError> {
        let mut load = self.begin_bulk_load(label)?;
        for (trie, k, v) in entries {
            load.put(&trie, k.as_ref(), v.as_ref())?;
        }
        load.finish()
    }

    /// Put the unfinished-load marker `label` on an empty database (synced), or find it
    /// there already: `true` when the database holds an unfinished load of the same label
    /// (which the caller resumes or restarts). Another label, or a database that is not
    /// empty, is refused.
    pub(crate) fn claim_marker(&mut self, label: &str) -> Result<bool, BulkError> {
        if label.len() > BULK_LABEL_BYTES_MAX {
            return Err(BulkError::LabelTooLong { len: label.len(), max: BULK_LABEL_BYTES_MAX });
        }
        self.check_poison()?;
        match self.bulk.as_deref() {
            Some(found) if found == label => Ok(true),
            Some(found) => Err(BulkError::OtherUnfinished {
                found: found.to_owned(),
                requested: label.to_owned(),
            }),
            None => {
                if !self.is_empty()? {
                    return Err(BulkError::NotEmpty { head: self.head_number() });
                }
                let db = &self.reader().db;
                let mut sync = WriteOptions::default();
                sync.set_sync(true);
                db.put_cf_opt(cf(db, CF_META)?, META_BULK, label.as_bytes(), &sync)
                    .map_err(StoreError::from)?;
                self.bulk = Some(label.to_owned());
                Ok(false)
            }
        }
    }

    /// True for a database with no blocks, no state and no unfinished bulk load.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        if self.bulk.is_some()
            || self.head_number() != 0
            || self.head_root() != self.layout().empty_root()
        {
            return Ok(false);
        }
        let db = &self.reader().db;
        Ok(first_entry(db, cf(db, CF_FLAT)?)?.is_none())
    }

    /// Delete everything an interrupted bulk load may have written (`flat`, `nodes`,
    /// root records, history, code), keeping its marker.
    pub(crate) fn clear_partial_state(&mut self) -> Result<(), StoreError> {
        let db = &self.reader().db;
        // Flat and node keys start with a trie prefix byte (0x00 or 0x01) and are shorter
        // than this bound; history keys are 8 bytes.
        let end = vec![0xff; 2 * KEY_BYTES_MAX + 64];
        // Code keys are 32-byte hashes, below the bound too.
        for name in [CF_FLAT, CF_NODES, CF_HISTORY, CF_CODE] {
            db.delete_range_cf(cf(db, name)?, [].as_slice(), end.as_slice())?;
        }
        let mut roots_end = META_ROOT.to_vec();
        roots_end.extend_from_slice(&end);
        db.delete_range_cf(cf(db, CF_META)?, META_ROOT, roots_end.as_slice())?;
        self.reader().clear_caches();
        Ok(())
    }
}

impl BulkLoad<'_> {
    /// Write one entry (an empty value is no entry, or refused in layouts where it is a
    /// value). Keys may come in any order.
    pub fn put(&mut self, trie: &TrieId, key: &[u8], value: &[u8]) -> Result<(), BulkError> {
        if value.is_empty() {
            let layout = self.db.layout();
            if layout.allows_empty_value() {
                return Err(BulkError::EmptyValue { trie: *trie, key: key.to_vec(), layout });
            }
            return Ok(());
        }
        let db = &self.db.reader().db;
        self.batch.put_cf(cf(db, CF_FLAT)?, flat_key(trie, key)?, value);
        self.entries += 1;
        if *trie != TrieId::Main {
            self.tries.insert(*trie);
        }
        if self.batch.size_in_bytes() >= BATCH_BYTES_TARGET {
            db.write(std::mem::take(&mut self.batch)).map_err(StoreError::from)?;
        }
        Ok(())
    }

    /// Store a blob (contract code) under `hash`, outside the tries (see
    /// [`StateDb::code`]); the caller keeps the invariant that `hash` names the blob.
    pub fn put_code(&mut self, hash: &H256, code: &[u8]) -> Result<(), BulkError> {
        let db = &self.db.reader().db;
        self.batch.put_cf(cf(db, CF_CODE)?, hash.0, code);
        if self.batch.size_in_bytes() >= BATCH_BYTES_TARGET {
            db.write(std::mem::take(&mut self.batch)).map_err(StoreError::from)?;
        }
        Ok(())
    }

    /// Block 0's record (a chain's genesis header), written in the load's last batch with
    /// the head (see [`StateDb::block_record`]).
    pub fn set_record(&mut self, record: &[u8]) {
        self.record = Some(record.to_vec());
    }

    /// Entries written so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Rebuild the nodes of every trie that received entries, record their roots, and in
    /// one synced batch make block 0 the head and delete the marker.
    pub fn finish(self) -> Result<BulkSummary, BulkError> {
        let BulkLoad { db: state, batch, entries, tries, record } = self;
        let db = state.reader().db.clone();
        db.write(batch).map_err(StoreError::from)?;
        let mut last = WriteBatch::default();
        let mut roots = Vec::with_capacity(tries.len());
        for t in &tries {
            let root = rebuild(state.layout(), &db, t, Mode::Write, state.scanned(), None)?.root;
            last.put_cf(cf(&db, CF_META)?, root_key(t), root.0);
            roots.push((*t, root));
        }
        let root =
            rebuild(state.layout(), &db, &TrieId::Main, Mode::Write, state.scanned(), None)?.root;
        let meta = cf(&db, CF_META)?;
        last.put_cf(meta, META_HEAD, encode_head(0, &root));
        if let Some(record) = &record {
            last.put_cf(meta, block_record_key(0), record);
        }
        last.delete_cf(meta, META_BULK);
        last.delete_cf(meta, META_NODES_AT);
        let mut sync = WriteOptions::default();
        sync.set_sync(true);
        db.write_opt(last, &sync).map_err(StoreError::from)?;
        // The rebuild wrote `nodes` behind the caches' back (absent entries may be cached).
        state.reader().clear_caches();
        state.bulk = None;
        state.set_head(0, root);
        // The batch above was synced.
        state.record_durable()?;
        Ok(BulkSummary { root, entries, roots })
    }
}
