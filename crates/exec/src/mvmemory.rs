//! Multi-version memory: for each key, the values written by each transaction (by block
//! index), with the incarnation that wrote them, or an ESTIMATE marker while the writer is
//! being re-executed. Reads by transaction `j` see the entry of the highest index below `j`.
//!
//! Layout, chosen for few allocations and no key copies on the hot path (measured: the
//! first version, a `HashMap<Key, BTreeMap<txn, entry>>` per shard with the read set as
//! `Vec<(Key, origin)>`, spent more time allocating, hashing and comparing keys than
//! executing a transfer):
//! - Keys are interned once per block: each of 64 shards maps a key to a slot, and a
//!   [`KeyId`] names (shard, slot). The first touch of a key (read or write) copies it;
//!   afterwards reads, writes, read sets, write sets and validation work with ids, and
//!   validation reaches a key's versions without hashing or comparing it.
//! - A slot's versions are a small vector sorted by transaction index, the first one inline
//!   in the slot (most keys have one or two writers; a search from the tail finds the
//!   entries below a reader).
//! - Per transaction one record: the ids its last incarnation wrote values to, its deltas,
//!   its reads (id and where the value came from) and its scans.
//! - An ordered index of every key written during the block serves scans; a key enters
//!   it once, the first time it is written. It is built only when the block's first scan
//!   starts (from the shards), so a block that never scans never touches it.
//! - A scan records every key it visited with the origin of its value, like a read, and
//!   where it stopped. Validation re-reads those keys by id and checks that no key that
//!   entered the index since, inside the covered range, is live below the transaction:
//!   storage does not change during the block, so its side of the range needs no second
//!   walk (the first version replayed the whole scan, storage included, and compared the
//!   entries by value, allocating them again).
//! - Validation compares origins without copying values (a read clones a value only for
//!   the transaction that asked for it).
//! - After a switch to sequential execution, the sequential executor reads the validated
//!   prefix through [`MvMemory::committed`], and the block's writes are the prefix's
//!   ([`MvMemory::finish`] and [`MvMemory::into_writes`] take the prefix's end).
//! - Deltas (commutative additions, [`crate::Write::Delta`]) stay in their transaction's
//!   record, not in the key's versions: a counter every transaction bumps (a fee pot, an
//!   event count) would otherwise gather one version per transaction under one shard lock,
//!   a cache line every worker writes for every transaction. The key's slot only says that
//!   deltas exist (set once per block), each worker remembers the keys it has flagged, and
//!   a read of a flagged key sums the deltas in the records between the newest lower write
//!   and the reader (such reads are rare: the block-end hook). A higher transaction that
//!   read a flagged key raises one shared mark (`delta_readers`) that delta writers check.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use rustc_hash::{FxBuildHasher, FxHashMap};
use smallvec::SmallVec;
use state::{apply_delta, key_prefix64, StateReader};

use crate::{Base, Key, ScanBounds, Value, Write};

/// A transaction incarnation: (block index, incarnation number).
pub(crate) type Version = (usize, u32);

/// An interned key: shard in the top bits, slot below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyId(u32);

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;
const SLOT_BITS: u32 = 32 - SHARD_BITS;

impl KeyId {
    fn new(shard: usize, slot: usize) -> Self {
        assert!(slot < 1 << SLOT_BITS, "more than 2^26 keys in one shard of a block");
        KeyId(((shard as u32) << SLOT_BITS) | slot as u32)
    }

    fn shard(self) -> usize {
        (self.0 >> SLOT_BITS) as usize
    }

    fn slot(self) -> usize {
        (self.0 & ((1 << SLOT_BITS) - 1)) as usize
    }
}

#[derive(Debug, Clone)]
enum Entry {
    Written { incarnation: u32, value: Option<Value> },
    Estimate,
}

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadResult {
    /// A lower transaction's write.
    Version(Version, Option<Value>),
    /// No lower transaction wrote the key: read storage.
    Storage,
    /// A lower transaction's write is being re-executed.
    Blocked(usize),
    /// Lower transactions added deltas (summed) on top of `base`: a lower write, or
    /// storage (`None`).
    Deltas { base: Option<Option<Value>>, sum: i64 },
}

impl ReadResult {
    /// The value read, resolving deltas on storage; `None` when blocked.
    pub(crate) fn resolve<S: StateReader>(
        self,
        key: &[u8],
        storage: &Base<'_, S>,
    ) -> Option<Option<Value>> {
        match self {
            ReadResult::Version(_, v) => Some(v),
            ReadResult::Storage => Some(storage.get(key)),
            ReadResult::Blocked(_) => None,
            ReadResult::Deltas { base, sum } => {
                let base = match base {
                    Some(b) => b,
                    None => storage.get(key),
                };
                Some(Some(apply_delta(base.as_deref(), sum)))
            }
        }
    }
}

/// Where a read's value came from, for validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadOrigin {
    Version(Version),
    Storage,
    /// A value resolved from deltas: validated by value (the key is kept to resolve a
    /// delta on storage again).
    Resolved {
        key: Key,
        value: Option<Value>,
    },
}

/// A range scan of one incarnation: the range it covered (`from` up to `stop` inclusive;
/// `None`: to the end of the key space) and every key it visited there, dead or alive,
/// with where the value below the transaction came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanRecord {
    pub(crate) from: Key,
    pub(crate) reverse: bool,
    pub(crate) stop: Option<Key>,
    /// In scan order.
    pub(crate) visited: Vec<(KeyId, ReadOrigin)>,
}

/// What a read finds among a key's versions (deltas aside), without copying the value.
enum Found<'s> {
    /// No lower transaction wrote the key.
    Storage,
    /// The newest lower write is an estimate of this transaction's.
    Estimate(usize),
    /// The newest lower write.
    Written(Version, &'s Option<Value>),
}

/// One key's versions (sorted by transaction), the highest transaction that read it from
/// below, whether it is in the ordered index yet, and whether any transaction recorded a
/// delta on it (the deltas are in the transactions' records).
#[derive(Debug, Default)]
struct Slot {
    /// Inline for the usual single writer: no allocation, and no second cache line to
    /// reach on every read, write and at the block's end.
    versions: SmallVec<[(usize, Entry); 1]>,
    max_reader: Option<usize>,
    indexed: bool,
    deltas: bool,
}

impl Slot {
    /// Where `txn`'s entry is (`Ok`) or goes (`Err`). Writers arrive roughly in block
    /// order, so the tail is looked at first: on a key many transactions write, a binary
    /// search over its entries, under the shard's lock and on lines the other workers
    /// write, costs more than the rest of the record.
    fn position(&self, txn: usize) -> Result<usize, usize> {
        const TAIL: usize = 8;
        let n = self.versions.len();
        let tail_start = n.saturating_sub(TAIL);
        for i in (tail_start..n).rev() {
            let t = self.versions[i].0;
            if t == txn {
                return Ok(i);
            }
            if t < txn {
                return Err(i + 1);
            }
        }
        self.versions[..tail_start].binary_search_by_key(&txn, |(t, _)| *t)
    }

    fn put(&mut self, txn: usize, entry: Entry) {
        match self.position(txn) {
            Ok(i) => self.versions[i].1 = entry,
            Err(i) => self.versions.insert(i, (txn, entry)),
        }
    }

    fn remove(&mut self, txn: usize) {
        if let Ok(i) = self.position(txn) {
            self.versions.remove(i);
        }
    }

    /// What `txn` finds among the versions (deltas aside): the newest lower write,
    /// storage, or the estimate that blocks it.
    fn find(&self, txn: usize) -> Found<'_> {
        let below = self.position(txn).unwrap_or_else(|i| i);
        match self.versions[..below].last() {
            None => Found::Storage,
            Some((idx, Entry::Estimate)) => Found::Estimate(*idx),
            Some((idx, Entry::Written { incarnation, value })) => {
                Found::Written((*idx, *incarnation), value)
            }
        }
    }

    /// [`Slot::find`] with the value copied.
    fn read(&self, txn: usize) -> ReadResult {
        match self.find(txn) {
            Found::Storage => ReadResult::Storage,
            Found::Estimate(idx) => ReadResult::Blocked(idx),
            Found::Written(version, value) => ReadResult::Version(version, value.clone()),
        }
    }

    /// The last write of a transaction below `end` and its transaction, consuming the
    /// versions (those of `end` and above may be estimates: a run that switched to
    /// sequential execution at `end` drops them).
    fn last_write_below(self, end: usize) -> Option<(usize, Option<Value>)> {
        self.versions.into_iter().rev().find(|(txn, _)| *txn < end).map(
            |(txn, entry)| match entry {
                Entry::Written { value, .. } => (txn, value),
                Entry::Estimate => unreachable!("no estimates remain below the end of a run"),
            },
        )
    }
}

#[derive(Default)]
struct Shard {
    ids: FxHashMap<Key, u32>,
    slots: Vec<Slot>,
}

impl Shard {
    fn with_capacity(n: usize) -> Self {
        Shard {
            ids: FxHashMap::with_capacity_and_hasher(n, FxBuildHasher),
            slots: Vec::with_capacity(n),
        }
    }

    /// The slot of `key`, interning it (one copy) on first sight.
    fn intern(&mut self, key: &[u8]) -> usize {
        if let Some(&slot) = self.ids.get(key) {
            return slot as usize;
        }
        self.insert(key.to_vec())
    }

    fn insert(&mut self, key: Key) -> usize {
        let slot = self.slots.len();
        self.slots.push(Slot::default());
        self.ids.insert(key, slot as u32);
        slot
    }
}

/// A key of the ordered index.
pub(crate) type IndexKey = std::sync::Arc<[u8]>;

/// Final writes in key order, each with its [`key_prefix64`].
type SortedWrites = Vec<(u64, Key, Option<Value>)>;

/// Key order on [`SortedWrites`] entries, prefixes first.
fn by_key(a: &(u64, Key, Option<Value>), b: &(u64, Key, Option<Value>)) -> std::cmp::Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1))
}

/// What the memory keeps of a transaction's last incarnation.
#[derive(Default)]
struct TxnRecord {
    /// Keys it wrote values to (their entries are in the slots).
    written: Vec<KeyId>,
    /// Its deltas, summed per key.
    deltas: Vec<(KeyId, i64)>,
    /// The incarnation was aborted: its deltas are estimates until it records again.
    estimate: bool,
    reads: Vec<(KeyId, ReadOrigin)>,
    scans: Vec<ScanRecord>,
}

/// A worker's delta keys it has flagged during the block (their ids), so that recording
/// another delta to them touches no shard.
pub(crate) type DeltaKeys = FxHashMap<Key, KeyId>;

/// A key with deltas, once the shards are finished: its last value write, if any.
type DeltaKey = (Key, KeyId, Option<(usize, Option<Value>)>);

/// The keys written during the block, in order, for scans. Writers only append to
/// `pending` (no ordering work on the hot path, where most blocks never scan); a scan
/// first sorts what is pending into `sorted`. Keys are shared ([`IndexKey`]), so a scan
/// holding the next key of the index copies no bytes.
#[derive(Default)]
struct OrderedIndex {
    sorted: BTreeSet<IndexKey>,
    pending: Vec<IndexKey>,
}

pub(crate) struct MvMemory {
    shards: Vec<Mutex<Shard>>,
    /// One more than the highest transaction that started a scan (0: none).
    max_scanner: AtomicUsize,
    /// The ordered index exists (a scan has started): writers enter new keys into it.
    /// Read under the shard lock that covers the write, set before the build locks any
    /// shard, so every written key is either seen by the build or entered by its writer.
    index_built: AtomicBool,
    /// Every key any incarnation wrote during the block (for scans).
    ordered: RwLock<OrderedIndex>,
    txns: Vec<Mutex<TxnRecord>>,
    /// One more than the highest transaction that read a key with deltas (0: none).
    delta_readers: AtomicUsize,
    /// The keys with deltas, gathered by [`MvMemory::finish`].
    delta_keys: Mutex<Vec<DeltaKey>>,
    /// Per shard, its final writes in key order (see [`MvMemory::finish`]).
    finished: Vec<Mutex<SortedWrites>>,
    finished_shards: AtomicUsize,
    released_txns: AtomicUsize,
}

fn shard_of(key: &[u8]) -> usize {
    (FxBuildHasher.hash_one(key) >> (64 - SHARD_BITS)) as usize
}

impl MvMemory {
    pub(crate) fn new(block_size: usize) -> Self {
        // Room for about two keys per transaction without rehashing.
        let per_shard = (2 * block_size / SHARDS).max(4);
        MvMemory {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::with_capacity(per_shard))).collect(),
            max_scanner: AtomicUsize::new(0),
            index_built: AtomicBool::new(false),
            ordered: RwLock::new(OrderedIndex::default()),
            txns: (0..block_size).map(|_| Mutex::new(TxnRecord::default())).collect(),
            delta_readers: AtomicUsize::new(0),
            delta_keys: Mutex::new(Vec::new()),
            finished: (0..SHARDS).map(|_| Mutex::new(Vec::new())).collect(),
            finished_shards: AtomicUsize::new(0),
            released_txns: AtomicUsize::new(0),
        }
    }

    /// Record an incarnation's reads, scans and writes. Returns true when a higher
    /// transaction may have read a key this incarnation writes and its previous one did
    /// not write the same way (a value, or a delta; the higher ones must then be validated
    /// again): a higher reader of that key is recorded, or a higher transaction has read a
    /// key with deltas or started a scan.
    /// This is the paper's "wrote a new location", narrowed by read markers so that a
    /// conflict-free block is not re-validated after every first execution.
    pub(crate) fn record(
        &self,
        (txn, incarnation): Version,
        reads: Vec<(KeyId, ReadOrigin)>,
        scans: Vec<ScanRecord>,
        writes: BTreeMap<Key, Write>,
        flagged: &mut DeltaKeys,
    ) -> bool {
        let mut rec = self.txns[txn].lock();
        rec.reads = reads;
        rec.scans = scans;
        rec.estimate = false;
        let old_deltas = std::mem::take(&mut rec.deltas);
        let mut affects = false;
        let mut ids: SmallVec<[KeyId; 8]> = SmallVec::with_capacity(writes.len());
        // Keys not yet in the ordered index: entered after their entries are in place,
        // and flagged as indexed only once they are in.
        let mut unindexed: SmallVec<[(KeyId, Key); 4]> = SmallVec::new();
        for (key, write) in writes {
            let new_here = match write {
                Write::Delta(amount) => {
                    let id = match flagged.get(&key) {
                        Some(&id) => id,
                        None => self.flag_delta_key(key, flagged, &mut unindexed),
                    };
                    rec.deltas.push((id, amount));
                    let new_here = !old_deltas.iter().any(|(d, _)| *d == id);
                    // A reader of a flagged key raises `delta_readers` (see `read`).
                    affects |= new_here && self.delta_readers.load(SeqCst) > txn + 1;
                    new_here
                }
                Write::Value(value) => {
                    let entry = Entry::Written { incarnation, value };
                    let shard_no = shard_of(&key);
                    let mut shard = self.shards[shard_no].lock();
                    let slot_no = shard.intern(&key);
                    let id = KeyId::new(shard_no, slot_no);
                    let new_here = !rec.written.contains(&id);
                    let slot = &mut shard.slots[slot_no];
                    slot.put(txn, entry);
                    affects |= new_here && slot.max_reader.is_some_and(|r| r > txn);
                    let to_index = self.to_index(slot);
                    drop(shard);
                    if to_index {
                        unindexed.push((id, key));
                    }
                    ids.push(id);
                    new_here
                }
            };
            // A higher scan may have passed this key's place before this entry was there:
            // checked after the entry is in place, so a scan registered later reads it.
            affects |= new_here && self.max_scanner.load(SeqCst) > txn + 1;
        }
        if !unindexed.is_empty() {
            affects |= self.index_keys(txn, unindexed);
        }
        for &old in &rec.written {
            if !ids.contains(&old) {
                self.shards[old.shard()].lock().slots[old.slot()].remove(txn);
            }
        }
        rec.written.clear();
        rec.written.extend_from_slice(&ids);
        affects
    }

    /// Enter keys that `txn` wrote into the ordered index (their entries are in place) and
    /// flag them as indexed. Returns true when a higher transaction has started a scan,
    /// which may have passed their place.
    fn index_keys(&self, txn: usize, unindexed: SmallVec<[(KeyId, Key); 4]>) -> bool {
        let scanned = {
            let mut ordered = self.ordered.write();
            ordered.pending.extend(unindexed.iter().map(|(_, k)| IndexKey::from(k.as_slice())));
            // Under the index's write lock: a scan registers under its read lock before it
            // walks the index, so it either is seen here or sees these keys (whose entries
            // are already in place).
            self.max_scanner.load(SeqCst) > txn + 1
        };
        for (id, _) in &unindexed {
            self.shards[id.shard()].lock().slots[id.slot()].indexed = true;
        }
        scanned
    }

    /// The first delta this worker records to `key` in the block: intern it and flag its
    /// slot. Readers that read it before it was flagged (they saw no deltas) are folded
    /// into `delta_readers`, under the shard's lock, so that every later delta to the key,
    /// recorded without that lock, still sees them.
    fn flag_delta_key(
        &self,
        key: Key,
        flagged: &mut DeltaKeys,
        unindexed: &mut SmallVec<[(KeyId, Key); 4]>,
    ) -> KeyId {
        let shard_no = shard_of(&key);
        let mut shard = self.shards[shard_no].lock();
        let slot_no = shard.intern(&key);
        let slot = &mut shard.slots[slot_no];
        slot.deltas = true;
        if let Some(r) = slot.max_reader {
            self.delta_readers.fetch_max(r + 1, SeqCst);
        }
        let to_index = self.to_index(slot);
        drop(shard);
        let id = KeyId::new(shard_no, slot_no);
        if to_index {
            unindexed.push((id, key.clone()));
        }
        flagged.insert(key, id);
        id
    }

    /// Whether a key just written must be entered into the ordered index by its writer: it
    /// is not in yet and the index exists (before the block's first scan, the build will
    /// find it). Read under the lock of the shard holding `slot`.
    fn to_index(&self, slot: &Slot) -> bool {
        !slot.indexed && self.index_built.load(SeqCst)
    }

    /// Note that `txn` starts a scan (see [`MvMemory::record`]), building the ordered
    /// index first if this is the block's first scan.
    pub(crate) fn note_scan(&self, txn: usize) {
        self.build_index();
        let _index = self.ordered.read();
        self.max_scanner.fetch_max(txn + 1, SeqCst);
    }

    /// Enter every key written so far into the ordered index, once per block.
    fn build_index(&self) {
        if self.index_built.load(SeqCst) {
            return;
        }
        let mut ordered = self.ordered.write();
        if self.index_built.swap(true, SeqCst) {
            return;
        }
        for shard in &self.shards {
            let mut shard = shard.lock();
            let Shard { ids, slots } = &mut *shard;
            for (key, &slot_no) in ids.iter() {
                let slot = &mut slots[slot_no as usize];
                if !slot.indexed && (!slot.versions.is_empty() || slot.deltas) {
                    slot.indexed = true;
                    ordered.pending.push(IndexKey::from(key.as_slice()));
                }
            }
        }
    }

    /// Mark every write of `txn`'s last incarnation as an estimate (its deltas too).
    pub(crate) fn convert_writes_to_estimates(&self, txn: usize) {
        let mut rec = self.txns[txn].lock();
        rec.estimate = true;
        for id in &rec.written {
            self.shards[id.shard()].lock().slots[id.slot()].put(txn, Entry::Estimate);
        }
    }

    /// What transaction `txn` reads under `key`, and the key's id.
    /// The read is marked on the key (under the same lock), so that a lower transaction
    /// writing the key later knows a higher one may have read past it; a read of a key
    /// with deltas also raises `delta_readers` (see [`MvMemory::record`]).
    pub(crate) fn read(&self, key: &[u8], txn: usize) -> (KeyId, ReadResult) {
        let shard_no = shard_of(key);
        let (slot_no, r, deltas) = {
            let mut shard = self.shards[shard_no].lock();
            let slot_no = shard.intern(key);
            let slot = &mut shard.slots[slot_no];
            slot.max_reader = Some(slot.max_reader.map_or(txn, |r| r.max(txn)));
            if slot.deltas {
                self.delta_readers.fetch_max(txn + 1, SeqCst);
            }
            (slot_no, slot.read(txn), slot.deltas)
        };
        let id = KeyId::new(shard_no, slot_no);
        (id, if deltas { self.with_deltas(id, txn, r) } else { r })
    }

    /// What `txn` reads under an interned key (validation: the markers are already set).
    fn read_id(&self, id: KeyId, txn: usize) -> ReadResult {
        let (r, deltas) = {
            let shard = self.shards[id.shard()].lock();
            let slot = &shard.slots[id.slot()];
            (slot.read(txn), slot.deltas)
        };
        if deltas {
            self.with_deltas(id, txn, r)
        } else {
            r
        }
    }

    /// `r` (what the versions give `txn`) with the deltas of the transactions between that
    /// write (or the block's start) and `txn` added. Takes record locks of transactions
    /// below `txn` only, with no shard lock held, so the lock order stays: a record, then
    /// lower records or shards.
    fn with_deltas(&self, id: KeyId, txn: usize, r: ReadResult) -> ReadResult {
        let (from, base) = match &r {
            ReadResult::Version((w, _), v) => (w + 1, Some(v.clone())),
            ReadResult::Storage => (0, None),
            ReadResult::Blocked(_) | ReadResult::Deltas { .. } => return r,
        };
        let mut sum: Option<i64> = None;
        for t in from..txn {
            let rec = self.txns[t].lock();
            if let Some((_, amount)) = rec.deltas.iter().find(|(d, _)| *d == id) {
                if rec.estimate {
                    return ReadResult::Blocked(t);
                }
                sum = Some(sum.unwrap_or(0).wrapping_add(*amount));
            }
        }
        match sum {
            None => r,
            Some(sum) => ReadResult::Deltas { base, sum },
        }
    }

    /// The ordered index with every pending key sorted in, read-locked.
    fn sorted_index(&self) -> RwLockReadGuard<'_, OrderedIndex> {
        {
            let ordered = self.ordered.read();
            if ordered.pending.is_empty() {
                return ordered;
            }
        }
        let mut ordered = self.ordered.write();
        let pending = std::mem::take(&mut ordered.pending);
        ordered.sorted.extend(pending);
        RwLockWriteGuard::downgrade(ordered)
    }

    /// The next key written during the block within `bounds`, in scan order.
    pub(crate) fn next_key(&self, bounds: &ScanBounds<'_>) -> Option<IndexKey> {
        self.build_index();
        let ordered = self.sorted_index();
        bounds.first_of(ordered.sorted.range::<[u8], _>(bounds.range())).cloned()
    }

    /// The id of `key` if the block has seen it (no interning).
    fn lookup(&self, key: &[u8]) -> Option<KeyId> {
        let shard_no = shard_of(key);
        let slot = *self.shards[shard_no].lock().ids.get(key)?;
        Some(KeyId::new(shard_no, slot as usize))
    }

    /// Whether `txn` still reads under `id` what its last incarnation read (`origin`).
    /// Without deltas on the key the versions are compared in place, copying nothing.
    fn still_reads<S: StateReader>(
        &self,
        id: KeyId,
        txn: usize,
        origin: &ReadOrigin,
        storage: &Base<'_, S>,
    ) -> bool {
        {
            let shard = self.shards[id.shard()].lock();
            let slot = &shard.slots[id.slot()];
            if !slot.deltas {
                return match (slot.find(txn), origin) {
                    (Found::Storage, ReadOrigin::Storage) => true,
                    (Found::Written(v, _), ReadOrigin::Version(w)) => v == *w,
                    _ => false,
                };
            }
        }
        match (self.read_id(id, txn), origin) {
            (ReadResult::Storage, ReadOrigin::Storage) => true,
            (ReadResult::Version(v, _), ReadOrigin::Version(w)) => v == *w,
            (r @ ReadResult::Deltas { .. }, ReadOrigin::Resolved { key, value }) => {
                r.resolve(key, storage).as_ref() == Some(value)
            }
            _ => false,
        }
    }

    /// Whether `txn` sees a value under `id`, a key storage does not hold; `None` when an
    /// estimate blocks the read.
    fn live_unstored(&self, id: KeyId, txn: usize) -> Option<bool> {
        {
            let shard = self.shards[id.shard()].lock();
            let slot = &shard.slots[id.slot()];
            if !slot.deltas {
                return match slot.find(txn) {
                    Found::Storage => Some(false),
                    Found::Estimate(_) => None,
                    Found::Written(_, value) => Some(value.is_some()),
                };
            }
        }
        match self.read_id(id, txn) {
            ReadResult::Storage => Some(false),
            ReadResult::Blocked(_) => None,
            ReadResult::Version(_, value) => Some(value.is_some()),
            ReadResult::Deltas { .. } => Some(true),
        }
    }

    /// Whether `scan` would see the same entries below `txn` now: every key it visited
    /// reads the same, and every key that entered the index inside the covered range
    /// since is dead below `txn` (storage does not change, so the scan saw all of its keys
    /// there; a key the index gained is new to the scan only if storage lacks it).
    fn scan_unchanged<S: StateReader>(
        &self,
        txn: usize,
        scan: &ScanRecord,
        storage: &Base<'_, S>,
    ) -> bool {
        if !scan.visited.iter().all(|(id, origin)| self.still_reads(*id, txn, origin, storage)) {
            return false;
        }
        let Some(range) = ScanBounds::covered(&scan.from, scan.stop.as_deref(), scan.reverse)
        else {
            return true;
        };
        // Collected under the index's lock, checked without it: a check may take lower
        // transactions' record locks, which a writer holds while it waits for the index.
        let fresh: SmallVec<[KeyId; 8]> = {
            let ordered = self.sorted_index();
            ordered
                .sorted
                .range::<[u8], _>(range)
                .filter_map(|k| self.lookup(k))
                .filter(|id| !scan.visited.iter().any(|(v, _)| v == id))
                .collect()
        };
        fresh.iter().all(|id| self.live_unstored(*id, txn) == Some(false))
    }

    /// Whether every read and scan of `txn`'s last incarnation would still see the same.
    pub(crate) fn validate_read_set<S: StateReader>(
        &self,
        txn: usize,
        storage: &Base<'_, S>,
    ) -> bool {
        let rec = self.txns[txn].lock();
        rec.scans.iter().all(|scan| self.scan_unchanged(txn, scan, storage))
            && rec.reads.iter().all(|(id, origin)| self.still_reads(*id, txn, origin, storage))
    }

    /// What the transactions below `end` leave under `key`, `None` if none of them wrote
    /// it. For the sequential executor that finishes a block on top of Block-STM's
    /// validated prefix `..end` (every transaction there executed and validated, so no
    /// estimate lies below `end`); interns nothing.
    pub(crate) fn committed<S: StateReader>(
        &self,
        key: &[u8],
        end: usize,
        storage: &Base<'_, S>,
    ) -> Option<Option<Value>> {
        let id = self.lookup(key)?;
        let (r, deltas) = {
            let shard = self.shards[id.shard()].lock();
            let slot = &shard.slots[id.slot()];
            (slot.read(end), slot.deltas)
        };
        match if deltas { self.with_deltas(id, end, r) } else { r } {
            ReadResult::Storage => None,
            ReadResult::Blocked(t) => {
                panic!("transaction {t} of a validated prefix holds an estimate")
            }
            r => r.resolve(key, storage),
        }
    }

    /// Once the block is done, each worker calls this: it claims shards one at a time and
    /// turns each into its sorted final value writes (keys with deltas are set aside for
    /// [`MvMemory::into_writes`]), then releases transaction records in chunks (their
    /// deltas stay) — so the teardown runs on every worker instead of after the join.
    /// Only the writes of transactions below `end` count (the block's length, or where a
    /// run switched to sequential execution).
    pub(crate) fn finish(&self, end: usize) {
        loop {
            let i = self.finished_shards.fetch_add(1, SeqCst);
            let Some(target) = self.finished.get(i) else { break };
            let Shard { ids, mut slots } = std::mem::take(&mut *self.shards[i].lock());
            let mut out = Vec::with_capacity(ids.len());
            let mut with_deltas = Vec::new();
            for (key, slot_no) in ids {
                let slot = std::mem::take(&mut slots[slot_no as usize]);
                let deltas = slot.deltas;
                let last = slot.last_write_below(end);
                if deltas {
                    with_deltas.push((key, KeyId::new(i, slot_no as usize), last));
                } else if let Some((_, v)) = last {
                    out.push((key_prefix64(&key), key, v));
                }
            }
            out.sort_unstable_by(by_key);
            *target.lock() = out;
            if !with_deltas.is_empty() {
                self.delta_keys.lock().append(&mut with_deltas);
            }
        }
        const CHUNK: usize = 512;
        loop {
            let start = self.released_txns.fetch_add(CHUNK, SeqCst);
            let Some(chunk) = self.txns.get(start..(start + CHUNK).min(self.txns.len())) else {
                break;
            };
            for rec in chunk {
                let mut rec = rec.lock();
                let deltas = std::mem::take(&mut rec.deltas);
                *rec = TxnRecord { deltas, ..TxnRecord::default() };
            }
        }
    }

    /// The final value of every key the transactions below `end` wrote, after
    /// [`MvMemory::finish`] with the same `end`: a key with deltas gets its last value
    /// write (or its value before the block) plus the deltas of the transactions after
    /// that write.
    pub(crate) fn into_writes<S: StateReader>(
        self,
        end: usize,
        storage: &Base<'_, S>,
    ) -> BTreeMap<Key, Option<Value>> {
        // Sorted runs, one per shard, merged on their prefixes, so that the sort inside
        // `collect` finds one run.
        let mut sorted: SortedWrites =
            self.finished.into_iter().flat_map(Mutex::into_inner).collect();
        // Stable: the shards' sorted runs are merged.
        sorted.sort_by(by_key);
        let mut writes: BTreeMap<Key, Option<Value>> =
            sorted.into_iter().map(|(_, key, value)| (key, value)).collect();
        let keys = self.delta_keys.into_inner();
        if keys.is_empty() {
            return writes;
        }
        let index: FxHashMap<u32, usize> =
            keys.iter().enumerate().map(|(i, (_, id, _))| (id.0, i)).collect();
        let mut sums: Vec<Option<i64>> = vec![None; keys.len()];
        for (t, rec) in self.txns.into_iter().enumerate().take(end) {
            for (id, amount) in rec.into_inner().deltas {
                let Some(&i) = index.get(&id.0) else { continue };
                if keys[i].2.as_ref().is_none_or(|(w, _)| t > *w) {
                    sums[i] = Some(sums[i].unwrap_or(0).wrapping_add(amount));
                }
            }
        }
        for ((key, _, last), sum) in keys.into_iter().zip(sums) {
            let value = match (last, sum) {
                (None, None) => continue,
                (Some((_, v)), None) => v,
                (last, Some(sum)) => {
                    let base = match last {
                        Some((_, v)) => v,
                        None => storage.get(&key),
                    };
                    Some(apply_delta(base.as_deref(), sum))
                }
            };
            writes.insert(key, value);
        }
        writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefixes never order two keys against their byte order, including keys shorter
    /// than eight bytes, keys that are prefixes of others and trailing zero bytes.
    #[test]
    fn prefixes_order_keys_as_their_bytes_do() {
        let mut keys: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0, 0], vec![1], vec![1, 0]];
        keys.extend([vec![1; 8], vec![1; 9], [vec![1; 8], vec![0]].concat(), vec![0xff; 12]]);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..40 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys.push(x.to_be_bytes().iter().cycle().take(len % 13).map(|b| b & 0x03).collect());
        }
        for a in &keys {
            for b in &keys {
                if a < b {
                    assert!(key_prefix64(a) <= key_prefix64(b), "{a:?} < {b:?}");
                }
            }
        }
        let mut writes: SortedWrites =
            keys.iter().rev().map(|k| (key_prefix64(k), k.clone(), None)).collect();
        writes.sort_by(by_key);
        let mut expected = keys.clone();
        expected.sort();
        assert_eq!(writes.into_iter().map(|(_, k, _)| k).collect::<Vec<_>>(), expected);
    }
}
