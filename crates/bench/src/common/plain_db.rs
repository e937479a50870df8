//! The physical baseline of `arbor bench store` and `arbor bench evm`: a plain RocksDB
//! database (default column family) that receives the same keys and values as the Arbor
//! store (in `bench evm`, the account model flattened to keys), without any Merkle work,
//! through the same kind of writes.
//!
//! Options are the store's own (`store::rocksdb_options`): one LRU block cache of the
//! configured size, bloom filters, index and filter blocks in the cache, the same file,
//! memtable, WAL and compression settings. Bulk loads write batches of about 8 MiB, like
//! `StateDb::bulk_load`;
//! a block is one `WriteBatch` written with default (non-syncing, WAL-on) options, like the
//! store's background writer; `flush` syncs the WAL, like `StateDb::flush`.
//!
//! Two ways to write a block: *blind* (the new values only) and *with undo* (what any store
//! that can revert a block must do: read the old values of the block's keys with batched
//! MultiGets on every thread, then write the new values and one history record of the old
//! ones — a reverse diff encoded by the store's own [`ReverseDiff`] — under the block
//! number in a `history` column family, pruned 128 blocks back like the store's).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use rayon::prelude::*;
use rocksdb::{ColumnFamilyDescriptor, Options, WriteBatch, DB};
use store::{Column, ReverseDiff, StoreConfig};

/// The column family of the undo engine's history records.
const HISTORY: &str = "history";
/// History records kept (as the store's default `layers.history_depth`).
const HISTORY_DEPTH: u64 = 128;
/// Smallest share of a block's keys one thread reads.
const READ_CHUNK_MIN: usize = 256;

/// Bulk-load batches are written at about this size (as in the store's bulk load).
const BULK_BATCH_BYTES: usize = 8 << 20;

/// What [`PlainDb::scan`] calls on each entry, key and value.
pub(crate) type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'a;

/// A plain RocksDB database.
pub(crate) struct PlainDb {
    db: DB,
}

fn options(config: &StoreConfig) -> Options {
    let mut o = store::rocksdb_options(config);
    o.create_if_missing(true);
    o
}

impl PlainDb {
    /// Create (or open) the database at `path` with the store's RocksDB options.
    pub(crate) fn open(path: &Path, config: &StoreConfig) -> Result<PlainDb> {
        let mut opts = options(config);
        opts.create_missing_column_families(true);
        let cfs = ["default", HISTORY]
            .into_iter()
            .map(|name| ColumnFamilyDescriptor::new(name, store::rocksdb_options(config)));
        let db = DB::open_cf_descriptors(&opts, path, cfs)
            .with_context(|| format!("cannot open plain RocksDB at {}", path.display()))?;
        Ok(PlainDb { db })
    }

    /// Write `entries` in batches of about 8 MiB; returns the entries written.
    pub(crate) fn bulk_load<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<u64> {
        let mut batch = WriteBatch::default();
        let mut n = 0;
        for (k, v) in entries {
            batch.put(k, v);
            n += 1;
            if batch.size_in_bytes() >= BULK_BATCH_BYTES {
                self.db.write(std::mem::take(&mut batch))?;
            }
        }
        self.db.write(batch)?;
        Ok(n)
    }

    /// One block: every put and delete in one atomic batch. Returns the batch's bytes.
    pub(crate) fn write_block(&self, changes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> Result<u64> {
        let mut batch = WriteBatch::default();
        stage_changes(&mut batch, changes);
        let bytes = batch.size_in_bytes() as u64;
        self.db.write(batch)?;
        Ok(bytes)
    }

    /// One block with undo data: the old values of its keys (batched MultiGets, one sorted
    /// chunk per thread), then one batch with the new values and the history record of the
    /// old ones (and the prune of the record that fell out of the depth). Returns the
    /// batch's bytes.
    pub(crate) fn write_block_with_undo(
        &self,
        number: u64,
        changes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    ) -> Result<u64> {
        let keys: Vec<&Vec<u8>> = changes.keys().collect();
        let chunk = keys.len().div_ceil(rayon::current_num_threads()).max(READ_CHUNK_MIN);
        let parts: Vec<Result<ReverseDiff>> = keys
            .par_chunks(chunk.max(1))
            .map(|part| {
                let mut diff = ReverseDiff::new();
                let values = self.db.batched_multi_get_cf(self.default_cf()?, part.iter(), true);
                for (k, v) in part.iter().zip(values) {
                    diff.record_ref(Column::Flat, k, v?.as_deref());
                }
                Ok(diff)
            })
            .collect();
        let mut diff = ReverseDiff::new();
        for p in parts {
            diff.append(p?);
        }
        let record = diff.encode();
        let mut batch = WriteBatch::default();
        stage_changes(&mut batch, changes);
        let history = self.history_cf()?;
        batch.put_cf(history, number.to_be_bytes(), &record);
        if let Some(old) = number.checked_sub(HISTORY_DEPTH) {
            batch.delete_cf(history, old.to_be_bytes());
        }
        let bytes = batch.size_in_bytes() as u64;
        self.db.write(batch)?;
        Ok(bytes)
    }

    fn default_cf(&self) -> Result<&rocksdb::ColumnFamily> {
        self.db.cf_handle("default").context("plain RocksDB lacks its default column family")
    }

    fn history_cf(&self) -> Result<&rocksdb::ColumnFamily> {
        self.db.cf_handle(HISTORY).context("plain RocksDB lacks its history column family")
    }

    /// Make every write durable (sync the WAL).
    pub(crate) fn flush(&self) -> Result<()> {
        self.db.flush_wal(true)?;
        Ok(())
    }

    /// Flush the memtables and compact everything.
    pub(crate) fn compact(&self) -> Result<()> {
        for cf in [self.default_cf()?, self.history_cf()?] {
            self.db.flush_cf(cf)?;
            self.db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    /// Bytes of live SST files.
    pub(crate) fn sst_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for cf in [self.default_cf()?, self.history_cf()?] {
            total +=
                self.db.property_int_value_cf(cf, "rocksdb.total-sst-files-size")?.unwrap_or(0);
        }
        Ok(total)
    }

    /// The value of `key` (cross-checks against the store; `bench evm`'s reads).
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, rocksdb::Error> {
        self.db.get(key)
    }

    /// Every key that starts with `prefix`, in order (one iterator seek and scan).
    pub(crate) fn keys_with_prefix(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        self.scan(prefix, &mut |k, _| {
            keys.push(k.to_vec());
            Ok(())
        })?;
        Ok(keys)
    }

    /// Call `visit` on every entry whose key starts with `prefix`, in key order (the
    /// default column family only: not the history records).
    pub(crate) fn scan(&self, prefix: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        let mode = rocksdb::IteratorMode::From(prefix, rocksdb::Direction::Forward);
        for entry in self.db.iterator_cf(self.default_cf()?, mode) {
            let (k, v) = entry?;
            if !k.starts_with(prefix) {
                break;
            }
            visit(&k, &v)?;
        }
        Ok(())
    }
}

/// Add a block's puts and deletes to `batch`.
fn stage_changes(batch: &mut WriteBatch, changes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
    for (k, v) in changes {
        match v {
            Some(v) => batch.put(k, v),
            None => batch.delete(k),
        }
    }
}

/// Bytes of live SST files per column family of the (closed) database at `path`.
pub(crate) fn column_sst_bytes(path: &Path) -> Result<BTreeMap<String, u64>> {
    let opts = Options::default();
    let names = DB::list_cf(&opts, path)?;
    let db = DB::open_cf_for_read_only(&opts, path, &names, false)?;
    let mut sizes: BTreeMap<String, u64> = names.iter().map(|n| (n.clone(), 0)).collect();
    for f in db.live_files()? {
        *sizes.entry(f.column_family_name).or_default() += f.size as u64;
    }
    Ok(sizes)
}

/// Sum of the sizes of every file under `path` (SSTs, WAL, manifest, logs).
pub(crate) fn dir_bytes(path: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in
        std::fs::read_dir(path).with_context(|| format!("cannot list {}", path.display()))?
    {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() { dir_bytes(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_reads_and_measures() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig::default();
        let db = PlainDb::open(dir.path(), &config).unwrap();
        assert_eq!(db.bulk_load((0u32..100).map(|i| (i.to_be_bytes(), [7u8; 100]))).unwrap(), 100);
        let block = BTreeMap::from([
            (1u32.to_be_bytes().to_vec(), None),
            (500u32.to_be_bytes().to_vec(), Some(vec![1])),
        ]);
        assert!(db.write_block(&block).unwrap() > 0);
        let undo = BTreeMap::from([(2u32.to_be_bytes().to_vec(), Some(vec![9]))]);
        assert!(db.write_block_with_undo(2, &undo).unwrap() > 100);
        db.flush().unwrap();
        db.compact().unwrap();
        assert_eq!(db.get(&1u32.to_be_bytes()).unwrap(), None);
        assert_eq!(db.get(&500u32.to_be_bytes()).unwrap(), Some(vec![1]));
        assert_eq!(db.get(&2u32.to_be_bytes()).unwrap(), Some(vec![9]));
        let record = db.db.get_cf(db.history_cf().unwrap(), 2u64.to_be_bytes()).unwrap().unwrap();
        let entries = ReverseDiff::decode(&record).unwrap();
        assert_eq!(entries.len(), 1, "one undo entry");
        let key = 2u32.to_be_bytes().to_vec();
        assert_eq!(entries[0], (Column::Flat, key, Some(vec![7; 100])), "key 2 existed");
        assert!(db.sst_bytes().unwrap() > 0);
        // Keys 0..100 and 500 (but 1): those under 0x0000_00 are 0 and 2..100.
        let under = db.keys_with_prefix(&[0, 0, 0]).unwrap();
        let want: Vec<Vec<u8>> =
            [0u32].into_iter().chain(2..100).map(|i| i.to_be_bytes().to_vec()).collect();
        assert_eq!(under, want);
        assert!(db.keys_with_prefix(&[9]).unwrap().is_empty());
        drop(db);
        let cols = column_sst_bytes(dir.path()).unwrap();
        assert!(cols["default"] > 0, "{cols:?}");
        assert!(dir_bytes(dir.path()).unwrap() >= cols["default"]);
    }
}
