//! [`Corruption`]: something on disk that contradicts the store's own invariants, typed by
//! what was found where; and the two decoders' errors it carries ([`DurableRecordError`]
//! for the durable record, [`HistoryError`] for a reverse diff).

use std::path::PathBuf;

use state::{TrieId, H256};
use trie::TrieError;

/// A nibble path as people read it (`0x` and one hex digit per nibble; `root` if empty).
pub(super) fn path_text(path: &[u8]) -> String {
    if path.is_empty() {
        return "root".to_owned();
    }
    let digits: String =
        path.iter().map(|n| char::from_digit(u32::from(*n), 16).unwrap_or('?')).collect();
    format!("0x{digits}")
}

/// A head as people read it: `block N (root R)`, or that there is none.
fn head_text(head: &Option<(u64, H256)>) -> String {
    match head {
        Some((number, root)) => format!("block {number} (root {root})"),
        None => "no head (no schema or head record)".to_owned(),
    }
}

/// Something on disk that contradicts the store's own invariants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    /// The `head` record is missing.
    #[error("the head record is missing")]
    NoHead,
    /// The roots recomputed from `flat` are not the recorded ones: the flat state itself
    /// is damaged, which rebuilding nodes cannot repair.
    #[error(
        "the flat state does not hold the recorded roots (head {stored}, recomputed {computed}; \
         {tries} other trie(s) differ): nodes cannot repair it"
    )]
    FlatRoot {
        /// The head's root.
        stored: H256,
        /// The root of `flat`.
        computed: H256,
        /// Other tries whose recomputed root differs.
        tries: usize,
    },
    /// The `head` record has the wrong size.
    #[error("head record of {len} bytes (expected 40)")]
    HeadRecord {
        /// Its size.
        len: usize,
    },
    /// The head block number has no successor (a corrupted head record).
    #[error("head block number {number} leaves no room for another block")]
    HeadNumber {
        /// The stored number.
        number: u64,
    },
    /// The `schema` record has the wrong size.
    #[error("schema record of {len} bytes (expected 4)")]
    SchemaRecord {
        /// Its size.
        len: usize,
    },
    /// The `layout` record names no layout this build knows.
    #[error("layout record {found:?} names no known layout")]
    LayoutRecord {
        /// The record, lossily as text.
        found: String,
    },
    /// A non-main trie's root record has the wrong size.
    #[error("root record of {trie:?} holds {len} bytes (expected 32)")]
    RootRecord {
        /// The trie.
        trie: TrieId,
        /// Its size.
        len: usize,
    },
    /// A root record's key names no trie.
    #[error("root record key 0x{} names no trie", hex::encode(.key))]
    RootKey {
        /// The key.
        key: Vec<u8>,
    },
    /// A `flat` key names no trie.
    #[error("flat key 0x{} names no trie", hex::encode(.key))]
    FlatKey {
        /// The key.
        key: Vec<u8>,
    },
    /// A `nodes` key names no trie, or a trie the state does not hold (no flat entry and
    /// no root record): a stray record no rebuild would touch.
    #[error("nodes key 0x{} belongs to no trie of the state", hex::encode(.key))]
    NodeKey {
        /// The key.
        key: Vec<u8>,
    },
    /// The cache-counter record has the wrong size.
    #[error("cache totals record of {len} bytes (expected {expected})")]
    CacheTotals {
        /// Its size.
        len: usize,
        /// The expected size.
        expected: usize,
    },
    /// The bulk-load marker is not a UTF-8 label.
    #[error("bulk-load marker of {len} bytes is not a UTF-8 label")]
    BulkMarker {
        /// Its size.
        len: usize,
    },
    /// A stored node does not carry the hash its parent refers to.
    #[error("node at path {} of {trie:?} does not match its parent's hash {expected}", path_text(.path))]
    NodeHash {
        /// The trie.
        trie: TrieId,
        /// The node's nibble path.
        path: Vec<u8>,
        /// The parent's reference.
        expected: H256,
    },
    /// A trie walk over stored nodes failed (a missing or malformed node).
    #[error("trie {trie:?}: {source}")]
    Trie {
        /// The trie.
        trie: TrieId,
        /// What the trie found.
        source: TrieError,
    },
    /// A stored or inline node does not decode.
    #[error("node at path {} of {trie:?} does not decode: {source}", path_text(.path))]
    Node {
        /// The trie.
        trie: TrieId,
        /// The node's nibble path.
        path: Vec<u8>,
        /// The decoder's complaint.
        source: trie::NodeError,
    },
    /// A leaf whose full key has an odd number of nibbles.
    #[error("leaf at path {} of {trie:?} has an odd-length key", path_text(.path))]
    OddKey {
        /// The trie.
        trie: TrieId,
        /// The key's nibbles.
        path: Vec<u8>,
    },
    /// A block's change claims an old value of a key that the trie does not hold (a key
    /// claimed present that is absent, absent that is present, or with another value).
    #[error("the value of key 0x{} in {trie:?} before the block is not the one the trie holds", hex::encode(.key))]
    OldValue {
        /// The trie.
        trie: TrieId,
        /// The key.
        key: Vec<u8>,
    },
    /// A leaf position under which the flat state holds no key.
    #[error("flat state of {trie:?} holds no key for the leaf at path {}", path_text(.path))]
    MissingLeaf {
        /// The trie.
        trie: TrieId,
        /// The leaf's nibble path.
        path: Vec<u8>,
    },
    /// `flat` yielded keys out of order during a rebuild.
    #[error("flat state of {trie:?} is out of key order: {source}")]
    FlatOrder {
        /// The trie.
        trie: TrieId,
        /// The builder's complaint.
        source: trie::BuildError,
    },
    /// A reverse diff does not decode.
    #[error("history record of block {number}: {source}")]
    History {
        /// The block.
        number: u64,
        /// What is wrong with it.
        source: HistoryError,
    },
    /// The newest reverse diff is not the head block's (every commit writes its own with
    /// its head, and reverts delete theirs): the head record or the history was altered.
    #[error("the head is block {head} but the newest reverse diff is of block {newest}")]
    HistoryNewest {
        /// The head block.
        head: u64,
        /// The newest reverse diff's block (its key, when it is not 8 bytes: `u64::MAX`).
        newest: u64,
    },
    /// The node watermark record has the wrong size.
    #[error("node watermark record of {len} bytes (expected 8)")]
    NodesAtRecord {
        /// Its size.
        len: usize,
    },
    /// The node watermark is not below the head (the writer records it only while the
    /// nodes lag).
    #[error("the trie nodes are recorded at block {nodes_at}, not below the head {head}")]
    NodesAhead {
        /// The watermark.
        nodes_at: u64,
        /// The head block.
        head: u64,
    },
    /// A block between the node watermark and the head has no reverse diff: the nodes
    /// cannot be brought to the head.
    #[error("the trie nodes are at block {base} but the reverse diff of block {number}, needed to bring them to the head, is missing")]
    LagHistory {
        /// The block whose diff is missing.
        number: u64,
        /// The node watermark.
        base: u64,
    },
    /// The nodes brought from the watermark to the head give another root than the head
    /// records: the reverse diffs, `flat` or `nodes` were altered.
    #[error("bringing the trie nodes to the head gives {trie:?} root {computed}, the head records {expected}")]
    CatchUpRoot {
        /// The trie.
        trie: TrieId,
        /// The root computed.
        computed: H256,
        /// The root recorded.
        expected: H256,
    },
    /// A reverse diff lacks the head record every diff holds.
    #[error("history record of block {number} has no head record")]
    HistoryHead {
        /// The block.
        number: u64,
    },
    /// A key in the history column that is not a block number (8 bytes).
    #[error("history key 0x{} is not a block number", hex::encode(key))]
    HistoryKey {
        /// The key.
        key: Vec<u8>,
    },
    /// The database holds an earlier state than the block Arbor recorded as durable in
    /// `ARBOR-DURABLE` (an older block, the same block with another root, or no head at
    /// all): RocksDB reopened at a state it had left behind, which it cannot tell from the
    /// real one (a torn or truncated MANIFEST ends where it is cut).
    #[error(
        "the database holds {} but {} records block {number} (root {root}) as durable: \
         RocksDB's MANIFEST or table files are damaged or rolled back",
        head_text(.head), .path.display()
    )]
    RolledBack {
        /// The record's path.
        path: PathBuf,
        /// The database's head (`None`: no schema or head record).
        head: Option<(u64, H256)>,
        /// The block the record names.
        number: u64,
        /// Its root.
        root: H256,
    },
    /// The durable-block record does not decode. It is replaced by a rename, never
    /// rewritten in place, so a crash leaves the old or the new one whole: a garbled one
    /// was damaged after it was written.
    #[error("{} does not decode: {reason}", .path.display())]
    DurableRecord {
        /// The record's path.
        path: PathBuf,
        /// What is wrong with it.
        reason: DurableRecordError,
    },
    /// Applying a reverse diff does not give the roots it promises.
    #[error(
        "reverting block {number}: restoring {trie:?} gives root {computed}, the diff restores {expected}"
    )]
    RevertRoot {
        /// The block.
        number: u64,
        /// The trie.
        trie: TrieId,
        /// Root of the restored values.
        computed: H256,
        /// Root the diff records.
        expected: H256,
    },
}

/// Why the durable-block record (`ARBOR-DURABLE`) does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurableRecordError {
    /// It is not a regular file (a directory, a symbolic link, a FIFO).
    #[error("not a regular file")]
    NotAFile,
    /// It has the wrong size.
    #[error("{len} bytes (expected {expected})")]
    Length {
        /// Its size (or the first bytes read past the expected size).
        len: usize,
        /// The size of a record.
        expected: usize,
    },
    /// It does not start with the record's magic bytes.
    #[error("bad magic bytes")]
    Magic,
    /// Its checksum does not match its contents.
    #[error("checksum mismatch")]
    Checksum,
    /// An unknown format version.
    #[error("unknown version {0}")]
    Version(u32),
}

/// Why a reverse diff does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// An unknown format version.
    #[error("unknown reverse-diff version {0}")]
    Version(u8),
    /// The input ends inside a field.
    #[error("truncated: need {need} bytes at offset {offset}, have {have}")]
    Truncated {
        /// Bytes the field needs.
        need: usize,
        /// Where it starts.
        offset: usize,
        /// Bytes left.
        have: usize,
    },
    /// More entries than the input could hold.
    #[error("entry count {count} exceeds what {bytes} bytes can hold")]
    Count {
        /// The claimed count.
        count: usize,
        /// The input size.
        bytes: usize,
    },
    /// An unknown column tag.
    #[error("unknown column tag {0}")]
    Column(u8),
    /// A presence flag other than 0 or 1.
    #[error("bad presence flag {0}")]
    Presence(u8),
    /// Bytes after the last entry.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}
