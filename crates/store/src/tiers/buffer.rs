//! The node buffer's bookkeeping: the node watermark on disk (`meta` record `nodes_at`, the
//! block whose trie nodes `nodes` holds while they lag the head) and what the open's
//! catch-up did to bring them to the head ([`CatchUpReport`]). The buffer itself is the
//! bottom layer of the layer stack (`layer.rs`); the writer fills and writes it back
//! (`writer.rs`), the catch-up rebuilds it at open (`catch_up.rs`).

use std::time::Duration;

use rocksdb::DB;

use crate::error::{Corruption, StoreError};
use crate::keys::{cf, CF_META, META_NODES_AT};

/// Decode a `nodes_at` record.
pub(crate) fn decode_nodes_at(bytes: &[u8]) -> Result<u64, Corruption> {
    let raw: [u8; 8] =
        bytes.try_into().map_err(|_| Corruption::NodesAtRecord { len: bytes.len() })?;
    Ok(u64::from_be_bytes(raw))
}

/// The node watermark on disk, if the nodes lag the head.
pub(crate) fn read_nodes_at(db: &DB) -> Result<Option<u64>, StoreError> {
    match db.get_cf(cf(db, CF_META)?, META_NODES_AT)? {
        Some(v) => Ok(Some(decode_nodes_at(&v)?)),
        None => Ok(None),
    }
}

/// What the catch-up of an open did (see `arbor stats`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CatchUpReport {
    /// The node watermark found: the block whose nodes were on disk.
    pub from_block: u64,
    /// The head the nodes were brought to.
    pub to_block: u64,
    /// Keys changed in between (each applied once).
    pub keys: u64,
    /// Wall time of the catch-up, reverse diffs read and update pass included (`seconds`
    /// in JSON).
    #[serde(rename = "seconds", serialize_with = "seconds")]
    pub time: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}
