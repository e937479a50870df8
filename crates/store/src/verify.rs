//! Checking a store against itself: [`StateDb::verify`] recomputes every trie's root from
//! `flat` (bottom-up, in parallel) and compares it with the recorded roots;
//! [`StateDb::verify_deep`] also checks every stored node against the recomputed trie and
//! reads every reverse diff; [`StateDb::repair`] rebuilds the stored nodes from `flat` when
//! `flat` holds the recorded roots. What `verify` counts as corruption is in
//! `docs/design.md`, "Store".

use rocksdb::DB;
use state::{TrieId, H256};

use crate::bulk::rebuild::{rebuild, Mode, Rebuilt};
use crate::error::{Corruption, StoreError};
use crate::history::{parent_root, ReverseDiff};
use crate::keys::{cf, decode_root, split_trie_prefix, CF_HISTORY, CF_META, CF_NODES, META_ROOT};
use crate::rocks::flat_iter;
use crate::statedb::StateDb;
use crate::tiers::layer::ChangeMap;

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
    /// Non-main tries checked: every trie with a root record or with flat entries.
    pub tries_checked: usize,
    /// Every non-main trie whose recomputed root differs from its stored one.
    pub trie_mismatches: Vec<TrieMismatch>,
}

/// A non-main trie whose root, recomputed from `flat`, is not the recorded one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrieMismatch {
    /// The trie.
    pub trie: TrieId,
    /// Its root record ([`trie::EMPTY_ROOT`] when there is none).
    pub stored: H256,
    /// The root of its flat entries.
    pub computed: H256,
}

impl VerifyReport {
    /// True when every recomputed root matches.
    pub fn ok(&self) -> bool {
        self.stored_root == self.computed_root && self.trie_mismatches.is_empty()
    }
}

impl StateDb {
    /// Recompute the main root and the root of every other trie (each with a root record
    /// or with flat entries) from flat state alone and compare them with the stored ones.
    /// A database holding an unfinished bulk load is refused
    /// ([`StoreError::UnfinishedBulkLoad`]): its state is partial by definition.
    pub fn verify(&self) -> Result<VerifyReport, StoreError> {
        Ok(self.recompute(Mode::Count)?.0)
    }

    /// Rebuild every trie from `flat` in `mode` (one scan each): the roots against the
    /// recorded ones, and each trie's rebuild (the main trie first).
    fn recompute(&self, mode: Mode) -> Result<(VerifyReport, Vec<(TrieId, Rebuilt)>), StoreError> {
        self.check_complete()?;
        self.flush()?;
        let db = &self.reader().db;
        check_flat_ends(db)?;
        check_history_newest(db, self.head_number())?;
        let buffer = self.node_buffer();
        let overlay = buffer.as_ref().map(|b| &b.nodes);
        let main = rebuild(self.layout(), db, &TrieId::Main, mode, self.scanned(), overlay)?;
        let mut tries = root_records(db)?;
        for t in storage_tries_in_flat(db)? {
            tries.entry(t).or_insert(self.layout().empty_root());
        }
        let mut trie_mismatches = Vec::new();
        let mut rebuilt = Vec::with_capacity(tries.len() + 1);
        for (trie, stored) in &tries {
            let r = rebuild(self.layout(), db, trie, mode, self.scanned(), overlay)?;
            if r.root != *stored {
                trie_mismatches.push(TrieMismatch {
                    trie: *trie,
                    stored: *stored,
                    computed: r.root,
                });
            }
            rebuilt.push((*trie, r));
        }
        let report = VerifyReport {
            number: self.head_number(),
            stored_root: self.head_root(),
            computed_root: main.root,
            leaves: main.leaves,
            tries_checked: tries.len(),
            trie_mismatches,
        };
        rebuilt.insert(0, (TrieId::Main, main));
        Ok((report, rebuilt))
    }
}

/// How one trie's stored nodes compare with the nodes recomputed from `flat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// The trie.
    pub trie: TrieId,
    /// Nodes recomputed (referenced by hash, and the root).
    pub expected: u64,
    /// Stored exactly as recomputed.
    pub matched: u64,
    /// Stored with other bytes.
    pub differing: u64,
    /// Not stored.
    pub missing: u64,
    /// Stored at paths the recomputed trie has no node at.
    pub extra: u64,
    /// Nibble path (hex digits) of the first differing or missing node.
    pub first_bad: Option<String>,
}

impl NodeReport {
    /// True when every stored node is the recomputed one and nothing else is stored.
    pub fn ok(&self) -> bool {
        self.differing == 0 && self.missing == 0 && self.extra == 0
    }
}

/// The outcome of [`StateDb::verify_deep`]: the roots ([`VerifyReport`]) and every trie's
/// stored nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeepReport {
    /// Roots recomputed from `flat` against the stored ones.
    pub roots: VerifyReport,
    /// Per trie, the stored nodes against the recomputed ones (only tries with a problem
    /// are listed).
    pub bad_tries: Vec<NodeReport>,
    /// Nodes checked in all.
    pub nodes_checked: u64,
}

impl DeepReport {
    /// True when the roots match and every stored node is right.
    pub fn ok(&self) -> bool {
        self.roots.ok() && self.bad_tries.is_empty()
    }
}

impl StateDb {
    /// [`StateDb::verify`], and then every stored node against the trie recomputed from
    /// `flat` (a corrupted, missing or stray node is found even when the roots match).
    pub fn verify_deep(&self) -> Result<DeepReport, StoreError> {
        // One scan per trie gives both its root and the check of its stored nodes.
        let (roots, rebuilt) = self.recompute(Mode::Check)?;
        let db = &self.reader().db;
        check_history(db)?;
        let buffer = self.node_buffer();
        let overlay = buffer.as_ref().map(|b| &b.nodes);
        let mut stored = stored_nodes(db, rebuilt.iter().map(|(t, _)| *t).collect(), overlay)?;
        let mut bad_tries = Vec::new();
        let mut nodes_checked = 0;
        for (trie, r) in rebuilt {
            let stored = stored.remove(&trie).unwrap_or(0);
            let c = r.check;
            let report = NodeReport {
                trie,
                expected: r.nodes,
                matched: c.matched,
                differing: c.differing,
                missing: c.missing,
                extra: stored.saturating_sub(c.matched + c.differing),
                first_bad: c.first_bad.map(|p| trie::path_hex(&p)),
            };
            nodes_checked += r.nodes;
            if !report.ok() {
                bad_tries.push(report);
            }
        }
        Ok(DeepReport { roots, bad_tries, nodes_checked })
    }

    /// Rebuild every trie's stored nodes from `flat` (the bottom-up rebuild), when the
    /// roots recomputed from `flat` are the recorded ones: nodes are derived data, `flat`
    /// and the roots are not. Refused (nothing written) when a root differs.
    pub fn repair(&mut self) -> Result<u64, StoreError> {
        self.check_poison()?;
        let roots = self.verify()?;
        if !roots.ok() {
            return Err(Corruption::FlatRoot {
                stored: roots.stored_root,
                computed: roots.computed_root,
                tries: roots.trie_mismatches.len(),
            }
            .into());
        }
        let db = self.reader().db.clone();
        let mut tries = vec![TrieId::Main];
        tries.extend(root_records(&db)?.into_keys());
        let mut nodes = 0;
        for trie in &tries {
            nodes += rebuild(self.layout(), &db, trie, Mode::Write, self.scanned(), None)?.nodes;
        }
        // The rebuild wrote `nodes` behind the caches' and the resident trie's back.
        self.reader().clear_caches();
        let (number, root) = (self.head_number(), self.head_root());
        self.set_head(number, root);
        Ok(nodes)
    }
}

/// How many nodes each of `tries` has stored, from one scan of `nodes`: a record of no
/// trie, or of a trie not in `tries` (which holds every trie of the state), is an error.
fn stored_nodes(
    db: &DB,
    tries: std::collections::BTreeSet<TrieId>,
    overlay: Option<&ChangeMap>,
) -> Result<std::collections::BTreeMap<TrieId, u64>, StoreError> {
    let mut counts: std::collections::BTreeMap<TrieId, u64> =
        tries.into_iter().map(|t| (t, 0)).collect();
    let mut count = |key: &[u8]| -> Result<(), StoreError> {
        let count = TrieId::split(key).and_then(|(trie, _)| counts.get_mut(&trie));
        *count.ok_or_else(|| Corruption::NodeKey { key: key.to_vec() })? += 1;
        Ok(())
    };
    let mut opts = rocksdb::ReadOptions::default();
    opts.fill_cache(false);
    let mut it = db.raw_iterator_cf_opt(cf(db, CF_NODES)?, opts);
    it.seek_to_first();
    // The node buffer's writes over the stored keys (both ascending): a deletion hides a
    // stored node, a write adds one where none is stored.
    let mut pending = overlay.into_iter().flat_map(|o| o.iter()).peekable();
    while let Some(key) = it.key() {
        while let Some((k, v)) = pending.next_if(|(k, _)| k.as_slice() < key) {
            if v.is_some() {
                count(k)?;
            }
        }
        match pending.next_if(|(k, _)| k.as_slice() == key) {
            Some((_, None)) => {}
            _ => count(key)?,
        }
        it.next();
    }
    it.status()?;
    for (k, v) in pending {
        if v.is_some() {
            count(k)?;
        }
    }
    Ok(counts)
}

/// The newest reverse diff, if any, is the head block's.
fn check_history_newest(db: &DB, head: u64) -> Result<(), StoreError> {
    let mut it = db.raw_iterator_cf(cf(db, CF_HISTORY)?);
    it.seek_to_last();
    if let Some(key) = it.key() {
        let newest = <[u8; 8]>::try_from(key).map_or(u64::MAX, u64::from_be_bytes);
        if newest != head {
            return Err(Corruption::HistoryNewest { head, newest }.into());
        }
    }
    it.status()?;
    Ok(())
}

/// Every reverse diff reads back (RocksDB checks its blocks' checksums), decodes, and holds
/// its parent's head record: what a revert or a read at an earlier block will need.
fn check_history(db: &DB) -> Result<(), StoreError> {
    let mut it = db.raw_iterator_cf(cf(db, CF_HISTORY)?);
    it.seek_to_first();
    while let (Some(key), Some(value)) = (it.key(), it.value()) {
        let bytes =
            <[u8; 8]>::try_from(key).map_err(|_| Corruption::HistoryKey { key: key.to_vec() })?;
        let number = u64::from_be_bytes(bytes);
        let entries =
            ReverseDiff::decode(value).map_err(|source| Corruption::History { number, source })?;
        parent_root(number, &entries)?;
        it.next();
    }
    it.status()?;
    Ok(())
}

/// `flat` holds nothing outside the tries' prefixes: no key before the main trie's (the
/// empty key) and none after the storage tries' (a first byte above `0x01`). Keys within
/// them are checked by the scans (the main trie's) and seeks (the storage tries').
fn check_flat_ends(db: &DB) -> Result<(), StoreError> {
    let mut it = flat_iter(db)?;
    it.seek_to_first();
    if let Some(key) = it.key().filter(|k| k.is_empty()) {
        return Err(Corruption::FlatKey { key: key.to_vec() }.into());
    }
    it.seek([0x02]);
    if let Some(key) = it.key() {
        return Err(Corruption::FlatKey { key: key.to_vec() }.into());
    }
    it.status()?;
    Ok(())
}

/// Every root record in `meta`: trie → stored root.
fn root_records(db: &DB) -> Result<std::collections::BTreeMap<TrieId, H256>, StoreError> {
    let mut out = std::collections::BTreeMap::new();
    for item in db.prefix_iterator_cf(cf(db, CF_META)?, META_ROOT) {
        let (k, v) = item?;
        let Some(rest) = k.strip_prefix(META_ROOT) else { break };
        let trie =
            split_trie_prefix(rest).ok_or_else(|| Corruption::RootKey { key: k.to_vec() })?;
        out.insert(trie, decode_root(&trie, &v)?);
    }
    Ok(out)
}

/// Every storage trie with at least one `flat` entry, found by seeking from one trie's
/// prefix to the next (one seek per trie, not a scan of the entries).
fn storage_tries_in_flat(db: &DB) -> Result<Vec<TrieId>, StoreError> {
    let mut out = Vec::new();
    let mut iter = flat_iter(db)?;
    let mut from = vec![0x01];
    loop {
        iter.seek(&from);
        let Some(key) = iter.key() else { break };
        if key.first() != Some(&0x01) {
            break;
        }
        let Some((trie @ TrieId::Storage(account), _)) = TrieId::split(key) else {
            return Err(Corruption::FlatKey { key: key.to_vec() }.into());
        };
        out.push(trie);
        match next_account(&account.0) {
            Some(next) => {
                from.truncate(1);
                from.extend_from_slice(&next);
            }
            None => break,
        }
    }
    iter.status()?;
    Ok(out)
}

/// The 32-byte big-endian successor of `account`, or `None` after `0xff…ff`.
fn next_account(account: &[u8; 32]) -> Option<[u8; 32]> {
    let mut next = *account;
    for b in next.iter_mut().rev() {
        let (v, carry) = b.overflowing_add(1);
        *b = v;
        if !carry {
            return Some(next);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::next_account;

    #[test]
    fn account_successor_carries() {
        let mut a = [0u8; 32];
        a[31] = 0xff;
        a[30] = 0x01;
        let n = next_account(&a).unwrap();
        assert_eq!((n[30], n[31]), (0x02, 0x00));
        assert_eq!(next_account(&[0xff; 32]), None);
    }
}
