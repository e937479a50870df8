//! On-disk key layout (see `docs/design.md`): column families, flat keys, node keys,
//! history keys and meta keys. All integers are big-endian so that keys sort by them.

use rocksdb::{ColumnFamily, DB};
use state::{TrieId, H256};

use crate::error::{Corruption, StoreError};

/// Column family of the latest flat state: `trie prefix ‖ key → value`.
pub(crate) const CF_FLAT: &str = "flat";
/// Column family of branch and extension nodes: `trie prefix ‖ packed path ‖ nibble count → hash ‖ encoding`.
pub(crate) const CF_NODES: &str = "nodes";
/// Column family of per-block reverse diffs: `block number (u64 BE) → reverse diff`.
pub(crate) const CF_HISTORY: &str = "history";
/// Column family of bookkeeping: schema version, head, per-trie roots.
pub(crate) const CF_META: &str = "meta";
/// Every column family the store needs.
/// Column family of content-addressed blobs a state refers to by hash (contract code):
/// `hash (32) → bytes`. Outside the tries and the reverse diffs: a revert keeps what a
/// reverted block stored (nothing of the state refers to it any more, and a later block
/// that stores it again writes the same bytes).
pub(crate) const CF_CODE: &str = "code";
pub(crate) const COLUMN_FAMILIES: [&str; 5] = [CF_FLAT, CF_NODES, CF_HISTORY, CF_META, CF_CODE];
/// Families added after schema version 1 was first written: a writable open creates them
/// in a database that lacks them, and a read-only open of such a database opens without
/// them (it holds nothing there to read).
pub(crate) const LATER_FAMILIES: [&str; 1] = [CF_CODE];

/// The handle of column family `name` (one of [`COLUMN_FAMILIES`]) in an open database.
pub(crate) fn cf<'a>(db: &'a DB, name: &'static str) -> Result<&'a ColumnFamily, StoreError> {
    db.cf_handle(name).ok_or(StoreError::MissingColumnFamily { name })
}

/// The schema version this build reads and writes.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Meta key of the schema version (`u32` BE).
pub(crate) const META_SCHEMA: &[u8] = b"schema";
/// Meta key of the head: `number (u64 BE) ‖ root (32 bytes)`.
pub(crate) const META_HEAD: &[u8] = b"head";
/// Meta key prefix of a non-main trie's root: `b"root" ‖ trie prefix → root`.
pub(crate) const META_ROOT: &[u8] = b"root";
/// Meta key of the bulk-load marker: present (holding the load's UTF-8 label) from before
/// a bulk load's first write until the batch that sets its head (see `bulk/`).
pub(crate) const META_BULK: &[u8] = b"bulk_load";
/// Meta key of the node watermark: `block number (u64 BE)`, the block whose trie nodes
/// `nodes` holds, when it is below the head (the writer holds newer nodes in memory; see
/// `catch_up.rs`). Absent: `nodes` is at the head.
pub(crate) const META_NODES_AT: &[u8] = b"nodes_at";
/// Meta key of the trie layout the database was created with (its name, as `--layout`
/// spells it). Absent in databases created before layouts could be chosen: Ethereum.
pub(crate) const META_LAYOUT: &[u8] = b"layout";
/// Meta key prefix of a block's record: `b"block" ‖ number (u64 BE) → bytes`, what the
/// block's executor keeps with it (an Ethereum block's header: its hash, the parent a
/// successor is checked against, the hashes `BLOCKHASH` reads). Written with the block,
/// undone by its revert, and deleted [`BLOCK_RECORDS_KEPT`] blocks later.
pub(crate) const META_BLOCK: &[u8] = b"block";
/// Blocks whose records are kept: the 256 `BLOCKHASH` can reach, and the head's.
pub(crate) const BLOCK_RECORDS_KEPT: u64 = 257;
/// Meta key of the cache counters summed over every closed session
/// ([`crate::tiers::cache::CacheTotals`], six `u64` BE).
pub(crate) const META_CACHE_TOTALS: &[u8] = b"cache_totals";

/// Longest key a trie may hold (its node paths must fit the one-byte nibble count).
pub const KEY_BYTES_MAX: usize = 127;

/// The column a reverse-diff entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub enum Column {
    /// `flat`.
    Flat = 0,
    /// `nodes`.
    Nodes = 1,
    /// `meta`.
    Meta = 2,
}

impl Column {
    /// Decode the tag byte.
    pub(crate) fn from_tag(tag: u8) -> Option<Column> {
        match tag {
            0 => Some(Column::Flat),
            1 => Some(Column::Nodes),
            2 => Some(Column::Meta),
            _ => None,
        }
    }

    /// The column family name.
    pub(crate) fn cf(self) -> &'static str {
        match self {
            Column::Flat => CF_FLAT,
            Column::Nodes => CF_NODES,
            Column::Meta => CF_META,
        }
    }
}

/// `trie prefix ‖ key`.
pub(crate) fn flat_key(trie: &TrieId, key: &[u8]) -> Result<Vec<u8>, StoreError> {
    if key.len() > KEY_BYTES_MAX {
        return Err(StoreError::KeyTooLong { len: key.len(), max: KEY_BYTES_MAX });
    }
    let mut k = Vec::with_capacity(trie.prefix_len() + key.len());
    trie.write_prefix(&mut k);
    k.extend_from_slice(key);
    Ok(k)
}

/// The trie whose whole prefix `bytes` is (`0x00`, or `0x01 ‖ account key`).
pub(crate) fn split_trie_prefix(bytes: &[u8]) -> Option<TrieId> {
    TrieId::split(bytes).filter(|(_, rest)| rest.is_empty()).map(|(trie, _)| trie)
}

/// `trie prefix ‖ packed nibbles (odd paths padded with a zero nibble) ‖ nibble count`.
pub(crate) fn node_key(trie: &TrieId, path: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(trie.prefix_len() + path.len() / 2 + 2);
    node_key_into(trie, path, &mut k);
    k
}

/// [`node_key`] into `out` (cleared first), reusing its allocation.
pub(crate) fn node_key_into(trie: &TrieId, path: &[u8], out: &mut Vec<u8>) {
    assert!(path.len() <= 2 * KEY_BYTES_MAX, "node path of {} nibbles", path.len());
    out.clear();
    trie.write_prefix(out);
    for pair in path.chunks(2) {
        out.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
    }
    out.push(path.len() as u8);
}

/// The flat-key range `[lo, hi]` holding every key of `trie` whose nibbles start with `path`.
pub(crate) fn flat_range_for_path(trie: &TrieId, path: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut lo = trie.prefix();
    for pair in path.chunks(2) {
        lo.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
    }
    let mut hi = lo.clone();
    if path.len() % 2 == 1 {
        *hi.last_mut().expect("odd path has a byte") |= 0x0f;
    }
    // Every key with prefix `hi` sorts at or below `hi ‖ 0xff…`; keys are at most
    // KEY_BYTES_MAX long.
    hi.extend(std::iter::repeat_n(0xff, KEY_BYTES_MAX + 1));
    (lo, hi)
}

/// `block number` as a history key.
pub(crate) fn history_key(number: u64) -> [u8; 8] {
    number.to_be_bytes()
}

/// Meta key of a non-main trie's root.
pub(crate) fn root_key(trie: &TrieId) -> Vec<u8> {
    let mut k = META_ROOT.to_vec();
    trie.write_prefix(&mut k);
    k
}

/// The meta key of block `number`'s record.
pub(crate) fn block_record_key(number: u64) -> Vec<u8> {
    let mut k = META_BLOCK.to_vec();
    k.extend_from_slice(&number.to_be_bytes());
    k
}

/// Encode the head record.
pub(crate) fn encode_head(number: u64, root: &H256) -> Vec<u8> {
    let mut v = number.to_be_bytes().to_vec();
    v.extend_from_slice(&root.0);
    v
}

/// Decode the head record.
pub(crate) fn decode_head(bytes: &[u8]) -> Result<(u64, H256), Corruption> {
    let bad = || Corruption::HeadRecord { len: bytes.len() };
    if bytes.len() != 40 {
        return Err(bad());
    }
    let number = u64::from_be_bytes(bytes[..8].try_into().map_err(|_| bad())?);
    let root = H256::from_slice(&bytes[8..]).ok_or_else(bad)?;
    Ok((number, root))
}

/// Decode a non-main trie's root record.
pub(crate) fn decode_root(trie: &TrieId, bytes: &[u8]) -> Result<H256, Corruption> {
    H256::from_slice(bytes).ok_or(Corruption::RootRecord { trie: *trie, len: bytes.len() })
}

/// The hash under which the store keeps a branch or extension node a builder reports, or
/// `None` for one it does not keep: nodes referenced by hash, and the root whatever its
/// size (inline nodes live inside their parent).
pub(crate) fn stored_hash(
    layout: trie::LayoutName,
    path: &trie::NibbleSlice<'_>,
    encoded: &[u8],
    reference: &trie::ChildRef,
) -> Option<H256> {
    match reference.as_hash() {
        Some(h) => Some(h),
        None if path.is_empty() => Some(layout.hash(encoded)),
        None => None,
    }
}

/// Node value: `hash ‖ encoding`.
pub(crate) fn encode_node_value(hash: &H256, encoding: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(32 + encoding.len());
    v.extend_from_slice(&hash.0);
    v.extend_from_slice(encoding);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_keys_sort_parents_first() {
        let t = TrieId::Main;
        let a = node_key(&t, &[]);
        let b = node_key(&t, &[1]);
        let c = node_key(&t, &[1, 0]);
        let d = node_key(&t, &[1, 0, 5]);
        let e = node_key(&t, &[2]);
        assert!(a < b && b < c && c < d && d < e);
    }

    #[test]
    fn flat_range_covers_prefix() {
        let t = TrieId::Main;
        let (lo, hi) = flat_range_for_path(&t, &[0xa, 0xb, 0xc]);
        let inside = flat_key(&t, &[0xab, 0xc7, 0xff]).unwrap();
        let outside = flat_key(&t, &[0xab, 0xd0]).unwrap();
        assert!(lo <= inside && inside <= hi);
        assert!(outside > hi);
        assert!(flat_key(&t, &[0u8; 200]).is_err());
    }
}
