//! The physical baseline of `arbor bench store`: a plain RocksDB database (default column
//! family) that receives the same keys and values as the Arbor store, without any Merkle
//! work, through the same kind of writes.
//!
//! Options are the store's own (`store::rocksdb_options`): one LRU block cache of the
//! configured size, bloom filters, index and filter blocks in the cache, the same file,
//! memtable, WAL and compression settings. Bulk loads write batches of about 8 MiB, like
//! `StateDb::bulk_load`;
//! a block is one `WriteBatch` written with default (non-syncing, WAL-on) options, like the
//! store's background writer; `flush` syncs the WAL, like `StateDb::flush`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use rocksdb::{Options, WriteBatch, DB};
use store::StoreConfig;

/// Bulk-load batches are written at about this size (as in the store's bulk load).
const BULK_BATCH_BYTES: usize = 8 << 20;

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
        let db = DB::open(&options(config), path)
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

    /// One block: every put and delete in one atomic batch.
    pub(crate) fn write_block(&self, changes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> Result<()> {
        let mut batch = WriteBatch::default();
        for (k, v) in changes {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            }
        }
        self.db.write(batch)?;
        Ok(())
    }

    /// Make every write durable (sync the WAL).
    pub(crate) fn flush(&self) -> Result<()> {
        self.db.flush_wal(true)?;
        Ok(())
    }

    /// Flush the memtable and compact everything.
    pub(crate) fn compact(&self) -> Result<()> {
        self.db.flush()?;
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    /// Bytes of live SST files.
    pub(crate) fn sst_bytes(&self) -> Result<u64> {
        Ok(self.db.property_int_value("rocksdb.total-sst-files-size")?.unwrap_or(0))
    }

    /// The value of `key` (cross-checks against the store).
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
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
        db.write_block(&block).unwrap();
        db.flush().unwrap();
        db.compact().unwrap();
        assert_eq!(db.get(&1u32.to_be_bytes()).unwrap(), None);
        assert_eq!(db.get(&500u32.to_be_bytes()).unwrap(), Some(vec![1]));
        assert!(db.sst_bytes().unwrap() > 0);
        drop(db);
        let cols = column_sst_bytes(dir.path()).unwrap();
        assert!(cols["default"] > 0, "{cols:?}");
        assert!(dir_bytes(dir.path()).unwrap() >= cols["default"]);
    }
}
