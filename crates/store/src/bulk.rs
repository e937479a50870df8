//! Bulk loading (into an empty database), rebuild and verify.

use rocksdb::WriteBatch;
use trie::{TrieId, EMPTY_ROOT, H256};

use crate::error::StoreError;
use crate::keys::{flat_key, root_key, CF_FLAT, CF_META};
use crate::rebuild::{rebuild, Rebuilt};
use crate::state::{cf, StateDb};

/// The outcome of [`StateDb::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Head block.
    pub number: u64,
    /// Stored head root.
    pub stored_root: H256,
    /// Root recomputed from flat state.
    pub computed_root: H256,
    /// Leaves scanned in the main trie.
    pub leaves: u64,
    /// Other tries checked, and those whose recomputed root differs from the stored one.
    pub tries_checked: usize,
    /// `(trie, stored, computed)` for every mismatch outside the main trie.
    pub trie_mismatches: Vec<(TrieId, H256, H256)>,
}

impl VerifyReport {
    /// True when every recomputed root matches.
    pub fn ok(&self) -> bool {
        self.stored_root == self.computed_root && self.trie_mismatches.is_empty()
    }
}

impl StateDb {
    /// Write entries straight into `flat` (empty database only); finish with
    /// [`StateDb::finish_bulk_load`].
    pub fn bulk_load(
        &mut self,
        entries: impl IntoIterator<Item = (TrieId, Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        if self.head_number() != 0 || self.head_root() != EMPTY_ROOT {
            return Err(StoreError::NotEmpty(self.head_number()));
        }
        let db = &self.reader().db;
        let h = cf(db, CF_FLAT)?;
        let mut batch = WriteBatch::default();
        let mut n = 0;
        for (trie, k, v) in entries {
            if v.is_empty() {
                continue;
            }
            batch.put_cf(h, flat_key(&trie, &k)?, v);
            n += 1;
            if batch.size_in_bytes() >= 8 << 20 {
                db.write(std::mem::take(&mut batch))?;
            }
        }
        db.write(batch)?;
        Ok(n)
    }

    /// Rebuild the nodes of `storage_tries` and of the main trie from flat state, store
    /// their roots and make block 0 the head.
    pub fn finish_bulk_load(&mut self, storage_tries: &[TrieId]) -> Result<H256, StoreError> {
        let db = self.reader().db.clone();
        for t in storage_tries {
            let r = rebuild(&db, t, true)?;
            if r.root != EMPTY_ROOT {
                db.put_cf(cf(&db, CF_META)?, root_key(t), r.root.0)?;
            }
        }
        let main = rebuild(&db, &TrieId::Main, true)?;
        // The rebuild wrote `nodes` behind the caches' back (absent entries may be cached).
        self.reader().clear_caches();
        self.set_head(0, main.root)?;
        Ok(main.root)
    }

    /// Recompute the root of `trie` from flat state without writing anything.
    pub fn recompute_root(&self, trie: &TrieId) -> Result<Rebuilt, StoreError> {
        self.flush()?;
        rebuild(&self.reader().db, trie, false)
    }

    /// Recompute the main root and every stored non-main root from flat state alone and
    /// compare them with the stored ones.
    pub fn verify(&self) -> Result<VerifyReport, StoreError> {
        self.flush()?;
        let db = &self.reader().db;
        let main = rebuild(db, &TrieId::Main, false)?;
        let mut tries_checked = 0;
        let mut trie_mismatches = Vec::new();
        let meta = cf(db, CF_META)?;
        for item in db.prefix_iterator_cf(meta, crate::keys::META_ROOT) {
            let (k, v) = item?;
            if !k.starts_with(crate::keys::META_ROOT) {
                break;
            }
            let (trie, rest) = TrieId::split(&k[crate::keys::META_ROOT.len()..])
                .filter(|(_, rest)| rest.is_empty())
                .ok_or_else(|| {
                    StoreError::CorruptMeta(format!("bad root key {}", hex::encode(&k)))
                })?;
            debug_assert!(rest.is_empty());
            let stored =
                H256::from_slice(&v).ok_or_else(|| StoreError::CorruptMeta("root value".into()))?;
            let computed = rebuild(db, &trie, false)?.root;
            tries_checked += 1;
            if computed != stored {
                trie_mismatches.push((trie, stored, computed));
            }
        }
        Ok(VerifyReport {
            number: self.head_number(),
            stored_root: self.head_root(),
            computed_root: main.root,
            leaves: main.leaves,
            tries_checked,
            trie_mismatches,
        })
    }
}
