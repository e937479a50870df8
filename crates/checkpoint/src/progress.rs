//! The progress records a restore keeps in the database (`store::RestoreBatch::put_progress`,
//! written in the same atomic batch as what they record), by name: `c` ‖ chunk index
//! (u64 BE) → the chunk's [`Counts`] and entry bytes, for every restored chunk; `b` ‖
//! storage trie → its root, in layouts whose bindings lie in a key range; `n` ‖ code hash
//! (no value), for every code a restored account refers to. A resumed restore reads them
//! back; the store deletes them when the restore finishes.

use state::H256;

use crate::boundary::ChunkBytes;

/// What a chunk adds to the storage bookkeeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Main-trie accounts whose storage root is not empty.
    pub(crate) accounts_with_storage: u64,
    /// Storage tries whose first segment the chunk holds.
    pub(crate) storage_tries: u64,
}

impl Counts {
    /// A chunk's progress record: its counts, then its entry bytes.
    pub(crate) fn encode(&self, bytes: ChunkBytes) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&self.accounts_with_storage.to_be_bytes());
        b[8..16].copy_from_slice(&self.storage_tries.to_be_bytes());
        b[16..24].copy_from_slice(&bytes.flat.to_be_bytes());
        b[24..].copy_from_slice(&bytes.first.to_be_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<(Counts, ChunkBytes)> {
        let b: &[u8; 32] = b.try_into().ok()?;
        let at = |i: usize| b[i..i + 8].try_into().ok().map(u64::from_be_bytes);
        let counts = Counts { accounts_with_storage: at(0)?, storage_tries: at(8)? };
        Some((counts, ChunkBytes { flat: at(16)?, first: at(24)? }))
    }
}

/// Progress record name of chunk `i`.
pub(crate) fn progress_name(i: usize) -> [u8; 9] {
    let mut n = [0u8; 9];
    n[0] = b'c';
    n[1..].copy_from_slice(&(i as u64).to_be_bytes());
    n
}

/// Progress record name of the binding of storage trie `trie` (value: its root), written
/// with the chunk whose main-trie entry commits to it, in layouts whose bindings cannot be
/// looked up by key (`keys::Place::Range`): a resumed restore reads them back.
pub(crate) fn binding_name(trie: &H256) -> [u8; 33] {
    let mut n = [0u8; 33];
    n[0] = b'b';
    n[1..].copy_from_slice(&trie.0);
    n
}

/// Progress record name of code `hash`, which a restored account refers to (no value):
/// `Restorer::finish` checks that each was restored.
pub(crate) fn code_ref_name(hash: &H256) -> [u8; 33] {
    let mut n = [0u8; 33];
    n[0] = b'n';
    n[1..].copy_from_slice(&hash.0);
    n
}
