//! Per-block reverse diffs: the old value of every key a block changed, in every column,
//! so that the block can be undone exactly.
//!
//! Layout (version 1): `0x01 ‖ entry count (u32 BE) ‖ entries`, each entry
//! `column tag (u8) ‖ key length (u32 BE) ‖ key ‖ present (u8: 0 or 1) ‖ [value length
//! (u32 BE) ‖ value]`. The decoder checks every length against the bytes present.

// Public for the `test-hooks` re-export only.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]

use state::H256;

use crate::error::{Corruption, HistoryError};
use crate::keys::{decode_head, Column, META_HEAD};

/// Format version of reverse diffs.
pub(crate) const HISTORY_VERSION: u8 = 1;

/// One restored value: `None` means the key did not exist before the block.
pub type ReverseEntry = (Column, Vec<u8>, Option<Vec<u8>>);

/// The root of block `number - 1`, from the parent's head record that the reverse diff of
/// block `number` (`entries`) holds; [`Corruption::HistoryHead`] when it holds none, or one
/// of another block.
pub(crate) fn parent_root(number: u64, entries: &[ReverseEntry]) -> Result<H256, Corruption> {
    let head = entries.iter().find(|(c, k, _)| *c == Column::Meta && k.as_slice() == META_HEAD);
    match head.and_then(|(_, _, old)| old.as_deref()).map(decode_head).transpose()? {
        Some((n, root)) if n.checked_add(1) == Some(number) => Ok(root),
        _ => Err(Corruption::HistoryHead { number }),
    }
}

/// Builds a reverse diff, encoding each entry as it is recorded.
#[derive(Debug, Clone, Default)]
pub struct ReverseDiff {
    /// The entries encoded so far (the header's count is written by `encode`).
    body: Vec<u8>,
    count: u32,
}

impl ReverseDiff {
    /// An empty diff.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty diff with room for `bytes` of entries ([`ReverseDiff::entry_len`] each).
    pub fn with_capacity(bytes: usize) -> Self {
        Self { body: Vec::with_capacity(bytes), count: 0 }
    }

    /// Bytes one entry of `key` and `old` takes in the encoding: column, key length, key,
    /// presence, and the value with its length when present.
    pub fn entry_len(key: &[u8], old: Option<&[u8]>) -> usize {
        6 + key.len() + old.map_or(0, |v| 4 + v.len())
    }

    /// Record that `key` in `column` held `old` before the block.
    pub fn record(&mut self, column: Column, key: Vec<u8>, old: Option<Vec<u8>>) {
        self.record_ref(column, &key, old.as_deref());
    }

    /// [`ReverseDiff::record`] from borrowed bytes.
    pub fn record_ref(&mut self, column: Column, key: &[u8], old: Option<&[u8]>) {
        let out = &mut self.body;
        out.reserve(Self::entry_len(key, old));
        out.push(column as u8);
        out.extend_from_slice(&(key.len() as u32).to_be_bytes());
        out.extend_from_slice(key);
        match old {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v);
            }
        }
        self.count += 1;
    }

    /// Append `other`'s entries after this diff's.
    pub fn append(&mut self, other: ReverseDiff) {
        if self.count == 0 {
            *self = other;
            return;
        }
        self.body.extend_from_slice(&other.body);
        self.count += other.count;
    }

    /// Serialize.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + self.body.len());
        out.push(HISTORY_VERSION);
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.body);
        out
    }

    /// Parse; the error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Vec<ReverseEntry>, HistoryError> {
        let mut r = Reader { bytes, pos: 0 };
        let version = r.u8()?;
        if version != HISTORY_VERSION {
            return Err(HistoryError::Version(version));
        }
        let count = r.u32()? as usize;
        // Each entry needs at least 6 bytes: refuse counts the input cannot hold.
        if count > bytes.len() / 6 {
            return Err(HistoryError::Count { count, bytes: bytes.len() });
        }
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let tag = r.u8()?;
            let col = Column::from_tag(tag).ok_or(HistoryError::Column(tag))?;
            let klen = r.u32()? as usize;
            let key = r.take(klen)?.to_vec();
            let old = match r.u8()? {
                0 => None,
                1 => {
                    let vlen = r.u32()? as usize;
                    Some(r.take(vlen)?.to_vec())
                }
                t => return Err(HistoryError::Presence(t)),
            };
            out.push((col, key, old));
        }
        if r.pos != bytes.len() {
            return Err(HistoryError::Trailing(bytes.len() - r.pos));
        }
        Ok(out)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HistoryError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(
            HistoryError::Truncated {
                need: n,
                offset: self.pos,
                have: self.bytes.len() - self.pos,
            },
        )?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, HistoryError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, HistoryError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let mut d = ReverseDiff::new();
        d.record(Column::Flat, b"k1".to_vec(), None);
        d.record(Column::Nodes, b"k2".to_vec(), Some(vec![1, 2, 3]));
        d.record(Column::Meta, b"head".to_vec(), Some(vec![0; 40]));
        let enc = d.encode();
        // The header (version, count), then exactly each entry's `entry_len`.
        let sizes = ReverseDiff::entry_len(b"k1", None)
            + ReverseDiff::entry_len(b"k2", Some(&[1, 2, 3]))
            + ReverseDiff::entry_len(b"head", Some(&[0; 40]));
        assert_eq!(enc.len(), 5 + sizes);
        let dec = ReverseDiff::decode(&enc).unwrap();
        assert_eq!(dec.len(), 3);
        assert_eq!(dec[1], (Column::Nodes, b"k2".to_vec(), Some(vec![1, 2, 3])));
        for cut in 0..enc.len() {
            assert!(ReverseDiff::decode(&enc[..cut]).is_err(), "truncated at {cut}");
        }
        let mut bad = enc.clone();
        bad[0] = 9;
        assert!(ReverseDiff::decode(&bad).is_err());
        assert!(ReverseDiff::decode(&[1, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
