//! The durable record, `ARBOR-DURABLE`: Arbor's own note, outside RocksDB, of a block that
//! RocksDB holds durably, checked at every open (see `docs/design.md`, "The durable
//! record").
//!
//! RocksDB cannot tell a torn or truncated MANIFEST from a short one: it applies the
//! version edits it can read and opens at that earlier state (an empty database when the
//! cut falls before the first table file), and a writable open then deletes the table
//! files the MANIFEST no longer names. The record says which block must at least be there:
//! a database whose head is older (or the same block with another root, or no head at
//! all) is reported as [`Corruption::RolledBack`], never served.
//!
//! Invariant: the record never names more than the database durably holds. It is written
//! only after RocksDB made its block durable (a memtable flush and a synced WAL, or a
//! synced batch), and lowered before anything moves the head back (a revert), so a crash
//! at any moment leaves it at or below the head. It is replaced whole (a temporary file,
//! synced, renamed over it, the directory synced): a crash leaves the old record or the
//! new one, so a record that does not decode was damaged after it was written, and is
//! corruption too. Databases of older builds have none: nothing is checked until the
//! first flush or close writes one.
//!
//! Cost: one 84-byte file written (two fsyncs) at a flush, a close, the end of a bulk load
//! or restore, and around a revert; nothing per block. Layout, big-endian: magic
//! `ARBORDUR` ‖ version (u32, 1) ‖ block (u64) ‖ root (32) ‖ keccak-256 of the 52 bytes
//! before it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use state::H256;

use crate::error::{Corruption, DurableRecordError, OpenError, StoreError};

/// The record's file name in the database directory.
pub(crate) const DURABLE: &str = "ARBOR-DURABLE";

/// The file a new record is written to before it is renamed over the record.
const DURABLE_TMP: &str = "ARBOR-DURABLE.tmp";

const MAGIC: &[u8; 8] = b"ARBORDUR";
const VERSION: u32 = 1;
/// Magic, version, block and root: what the checksum covers.
const BODY_BYTES: usize = 8 + 4 + 8 + 32;
const RECORD_BYTES: usize = BODY_BYTES + 32;

/// A block and its main root.
pub(crate) type Head = (u64, H256);

fn encode((number, root): Head) -> [u8; RECORD_BYTES] {
    let mut out = [0; RECORD_BYTES];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_be_bytes());
    out[12..20].copy_from_slice(&number.to_be_bytes());
    out[20..BODY_BYTES].copy_from_slice(&root.0);
    let sum = keccak8::keccak256(&out[..BODY_BYTES]);
    out[BODY_BYTES..].copy_from_slice(&sum);
    out
}

fn decode(bytes: &[u8]) -> Result<Head, DurableRecordError> {
    let record: &[u8; RECORD_BYTES] = bytes
        .try_into()
        .map_err(|_| DurableRecordError::Length { len: bytes.len(), expected: RECORD_BYTES })?;
    // Fixed ranges of a fixed-size array: none of the copies below can fail.
    let field = |range: std::ops::Range<usize>, out: &mut [u8]| out.copy_from_slice(&record[range]);
    if &record[..8] != MAGIC {
        return Err(DurableRecordError::Magic);
    }
    if keccak8::keccak256(&record[..BODY_BYTES])[..] != record[BODY_BYTES..] {
        return Err(DurableRecordError::Checksum);
    }
    let (mut version, mut number, mut root) = ([0; 4], [0; 8], [0; 32]);
    field(8..12, &mut version);
    field(12..20, &mut number);
    field(20..BODY_BYTES, &mut root);
    match u32::from_be_bytes(version) {
        VERSION => Ok((u64::from_be_bytes(number), H256(root))),
        other => Err(DurableRecordError::Version(other)),
    }
}

/// The record in the database directory `dir`, if there is one.
pub(crate) fn read(dir: &Path) -> Result<Option<Head>, OpenError> {
    let path = dir.join(DURABLE);
    let io = |source| OpenError::DurableRecord { path: path.clone(), source };
    let garbled = |reason| Corruption::DurableRecord { path: path.clone(), reason };
    // Looked at before it is opened: opening a FIFO would block.
    match path.symlink_metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(garbled(DurableRecordError::NotAFile).into()),
        Err(e) if absent(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if absent(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    // One byte past a record is enough to tell a longer file.
    let mut bytes = Vec::with_capacity(RECORD_BYTES + 1);
    file.take(RECORD_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(decode(&bytes).map_err(garbled)?))
}

/// No record: the file is absent, or the directory is (or is not a directory: opening it
/// reports that).
fn absent(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
}

/// Check the database's `head` (`None`: no schema or head record) against `recorded`, the
/// record read from `dir` before the database was opened; the record accepted is returned.
/// A mismatch is read again once: a revert in another process lowers the record before it
/// moves the head, so a reader that read the record before the revert and opened the
/// database after it finds the lowered record now.
pub(crate) fn check(
    dir: &Path,
    recorded: Head,
    head: Option<Head>,
) -> Result<Option<Head>, OpenError> {
    if covers(head, recorded) {
        return Ok(Some(recorded));
    }
    match read(dir)? {
        Some((number, root)) if !covers(head, (number, root)) => {
            let path = dir.join(DURABLE);
            Err(Corruption::RolledBack { path, head, number, root }.into())
        }
        again => Ok(again),
    }
}

/// True when a database at `head` holds the block `recorded` names: a later block, or that
/// block with its root.
fn covers(head: Option<Head>, recorded: Head) -> bool {
    head.is_some_and(|(number, root)| {
        number > recorded.0 || (number == recorded.0 && root == recorded.1)
    })
}

/// A writable store's record: where it is and what it holds.
pub(crate) struct DurableRecord {
    dir: PathBuf,
    /// The record as last read or written (`None`: none, or unknown after a failed write).
    last: Mutex<Option<Head>>,
}

impl DurableRecord {
    /// The record of the database directory `dir`, which holds `last` (as read at open).
    pub(crate) fn new(dir: PathBuf, last: Option<Head>) -> Self {
        DurableRecord { dir, last: Mutex::new(last) }
    }

    /// Make the record name `head` (written only when it names another block or root).
    /// The caller guarantees the invariant: `head` is durable in RocksDB, or the database
    /// is about to move back to it and no lower.
    pub(crate) fn set(&self, head: Head) -> Result<(), StoreError> {
        let mut last = self.last.lock();
        if *last == Some(head) {
            return Ok(());
        }
        // Unknown until the write succeeds (the rename may have happened).
        *last = None;
        write(&self.dir, head)
            .map_err(|source| StoreError::DurableRecord { path: self.dir.join(DURABLE), source })?;
        *last = Some(head);
        Ok(())
    }
}

/// Replace the record in `dir` with one naming `head`: written to a new temporary file
/// (never through a link someone left there), synced, renamed over the record, and the
/// directory synced.
fn write(dir: &Path, head: Head) -> std::io::Result<()> {
    let tmp = dir.join(DURABLE_TMP);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    file.write_all(&encode(head))?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, dir.join(DURABLE))?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_every_damage() {
        let head = (u64::MAX - 3, H256([0x5a; 32]));
        let good = encode(head);
        assert_eq!(decode(&good), Ok(head));
        for len in [0, 1, RECORD_BYTES - 1, RECORD_BYTES + 1] {
            let mut bytes = good.to_vec();
            bytes.resize(len, 0);
            let e = decode(&bytes).unwrap_err();
            assert_eq!(e, DurableRecordError::Length { len, expected: RECORD_BYTES });
        }
        // Every single-bit flip is caught, by the magic or the checksum.
        for bit in 0..RECORD_BYTES * 8 {
            let mut bytes = good;
            bytes[bit / 8] ^= 1 << (bit % 8);
            let e = decode(&bytes).unwrap_err();
            let expected =
                if bit < 64 { DurableRecordError::Magic } else { DurableRecordError::Checksum };
            assert_eq!(e, expected, "bit {bit}");
        }
        // A future version with a valid checksum.
        let mut bytes = good;
        bytes[8..12].copy_from_slice(&2u32.to_be_bytes());
        let sum = keccak8::keccak256(&bytes[..BODY_BYTES]);
        bytes[BODY_BYTES..].copy_from_slice(&sum);
        assert_eq!(decode(&bytes), Err(DurableRecordError::Version(2)));
    }

    #[test]
    fn covers_later_blocks_and_the_same_block_with_its_root() {
        let (a, b) = (H256([1; 32]), H256([2; 32]));
        assert!(covers(Some((5, a)), (5, a)));
        assert!(covers(Some((6, b)), (5, a)));
        assert!(!covers(Some((5, b)), (5, a)));
        assert!(!covers(Some((4, a)), (5, a)));
        assert!(!covers(None, (0, a)));
    }
}
