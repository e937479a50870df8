//! Reads of the latest state: point reads, ordered ranges, roots, proofs and node sources
//! through the caches, the layers and RocksDB (the read order of `docs/design.md`,
//! "Store"), on the committer's [`StateDb`] and on the [`ReadHandle`]s other threads hold;
//! both are the seam's [`state::StateReader`]. Reads at a recent block are in `at`, the
//! merged range iterator in `range`, the pinned persisted state in `snapshot`.

pub(crate) mod at;
pub(crate) mod range;
pub(crate) mod snapshot;

use state::{TrieId, H256};

use crate::error::{Corruption, StoreError};
use crate::history::{parent_root, ReverseDiff};
use crate::keys::{
    block_record_key, cf, decode_head, history_key, Column, CF_HISTORY, CF_META, META_HEAD,
};
use crate::layout::Keys;
use crate::statedb::{ReadHandle, StateDb};
use crate::tiers::layer::block_layers;
use crate::tiers::reader::StoreSource;
use range::FlatRange;

impl StateDb {
    /// A read handle on the latest published state, for other threads (an executor
    /// running beside the committer): each read sees the state as of the newest block
    /// published when it runs. Refused while a bulk load is unfinished.
    pub fn read_handle(&self) -> Result<ReadHandle, StoreError> {
        self.check_complete()?;
        Ok(ReadHandle { shared: self.shared.clone() })
    }

    /// Latest value of `key` in `trie` (never walks a trie; the read order is in
    /// `docs/design.md`, "Store").
    pub fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_complete()?;
        let value = self.shared.reader.get(trie, key)?;
        self.kept.note(self.head_root(), trie, key, &value)?;
        Ok(value.map(|v| v.to_vec()))
    }

    /// Keep this handle's point reads ([`StateDb::get`]) of the head until the next
    /// commit, which then takes the old values of the keys it changes from them rather
    /// than reading them again (see `kept.rs`); off by default. Worth it for a committer
    /// that reads what it writes, as an EVM block does. Turning it off drops what is kept.
    pub fn keep_reads(&mut self, on: bool) {
        self.kept.switch(on);
    }

    /// The entries of `trie` with `start <= key < end` (no upper bound when `end` is
    /// `None`), in ascending key order: the newest layers merged over `flat`.
    pub fn range(
        &self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<crate::FlatRange<'_>, StoreError> {
        self.check_complete()?;
        self.shared.reader.flat_range(trie, start, end)
    }

    /// Current root of `trie`.
    pub fn trie_root(&self, trie: &TrieId) -> Result<H256, StoreError> {
        self.check_complete()?;
        self.stored_root(trie)
    }

    /// The latest state of `trie` as a node source (nodes through the caches, leaves
    /// rebuilt from `flat`), for a trie the caller drives: a block builder recording a
    /// witness, say.
    pub fn node_source(&self, trie: TrieId) -> Result<StoreSource<'_>, StoreError> {
        self.check_complete()?;
        Ok(StoreSource { reader: &self.shared.reader, trie })
    }

    /// Block `number`'s record as its commit (or the bulk load of block 0) stored it (an
    /// Ethereum block's header), while the store keeps it: for the head and the 256
    /// blocks before it. `None` for a block committed without one.
    pub fn block_record(&self, number: u64) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_complete()?;
        let key = block_record_key(number);
        Ok(self.shared.reader.read(Column::Meta, &key)?.map(|v| v.to_vec()))
    }

    /// The blob (contract code) stored under `hash`, if any: code is content-addressed
    /// and outside the tries, so this answers for every block the store holds.
    pub fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_complete()?;
        Ok(self.shared.reader.code(hash)?.map(|v| v.to_vec()))
    }

    /// A proof of `key` in `trie`'s latest state: the nodes on its path, root first (and,
    /// in layouts with value nodes, the value node of a proven value last).
    pub fn prove(&self, trie: TrieId, key: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.prove_keys(trie, Keys::One(key))
    }

    /// One proof of every key of `keys` in `trie`'s latest state (the union of their
    /// paths).
    pub fn prove_many(&self, trie: TrieId, keys: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.prove_keys(trie, Keys::Many(keys))
    }

    fn prove_keys(&self, trie: TrieId, keys: Keys<'_>) -> Result<Vec<Vec<u8>>, StoreError> {
        let root = self.trie_root(&trie)?;
        let source = StoreSource { reader: &self.shared.reader, trie };
        Ok(crate::layout::prove(self.layout(), source, root, keys)?)
    }
}

impl ReadHandle {
    /// The values of many keys of one trie at once (`None`: absent), in the order given:
    /// the layers answer what they hold, the rest comes from batched RocksDB MultiGets
    /// spread over the rayon pool. Nothing is admitted to the caches. Each value is the
    /// key's value in some state between the call's start and its end.
    pub fn get_many(
        &self,
        trie: &TrieId,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let flat: Vec<Vec<u8>> =
            keys.iter().map(|k| crate::keys::flat_key(trie, k)).collect::<Result<_, _>>()?;
        let values = self.shared.reader.read_batch(Column::Flat, &flat)?;
        Ok(values.into_iter().map(|v| v.map(|v| v.to_vec())).collect())
    }

    /// Block `number`'s record ([`StateDb::block_record`]).
    pub fn block_record(&self, number: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let key = block_record_key(number);
        Ok(self.shared.reader.read(Column::Meta, &key)?.map(|v| v.to_vec()))
    }

    /// The blob (contract code) stored under `hash`, if any ([`StateDb::code`]).
    pub fn code(&self, hash: &H256) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.shared.reader.code(hash)?.map(|v| v.to_vec()))
    }

    /// The state root of block `number` as the store holds it: the head's, an unpersisted
    /// block's, or the one block `number + 1`'s reverse diff restores. `None` when it holds
    /// none: `number` is above the head, its history was pruned (`layers.history_depth`),
    /// or the state was bulk-loaded or restored at a later block.
    pub fn recorded_root(&self, number: u64) -> Result<Option<H256>, StoreError> {
        let Some(next) = number.checked_add(1) else { return Ok(None) };
        let history = {
            let layers = self.shared.reader.layers.read();
            // Block layers only: the node buffer holds no history.
            let mut blocks = block_layers(&layers);
            if let Some(l) = blocks.clone().find(|l| l.number == number) {
                return Ok(Some(l.root));
            }
            blocks.find(|l| l.number == next).map(|l| l.history.clone())
        };
        let db = self.db();
        let raw = match history {
            Some(h) => h,
            // A layer leaves the stack only once its block is on disk.
            None => {
                let head = db.get_pinned_cf(cf(db, CF_META)?, META_HEAD)?;
                match head.as_deref().map(decode_head).transpose()? {
                    Some((n, root)) if n == number => return Ok(Some(root)),
                    Some((n, _)) if n < number => return Ok(None),
                    _ => {}
                }
                match db.get_pinned_cf(cf(db, CF_HISTORY)?, history_key(next))? {
                    Some(v) => v.to_vec(),
                    None => return Ok(None),
                }
            }
        };
        let entries = ReverseDiff::decode(&raw)
            .map_err(|source| Corruption::History { number: next, source })?;
        Ok(Some(parent_root(next, &entries)?))
    }
}

impl state::StateReader for ReadHandle {
    type Error = StoreError;
    type Range<'a> = FlatRange<'a>;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.shared.reader.get(trie, key)?.map(|v| v.to_vec()))
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<FlatRange<'a>, StoreError> {
        self.shared.reader.flat_range(trie, start, end)
    }
}

/// The store is the state the import road executes against: point reads through the
/// caches and layers, ranges merged from the layers and `flat`.
impl state::StateReader for StateDb {
    type Error = StoreError;
    type Range<'a> = FlatRange<'a>;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        StateDb::get(self, trie, key)
    }

    fn range<'a>(
        &'a self,
        trie: &TrieId,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<FlatRange<'a>, StoreError> {
        StateDb::range(self, trie, start, end)
    }
}
