//! Block and witness codecs. Every decoder returns a typed error on garbage.
//!
//! Block: `"ARBB" ‖ version (u8 = 1) ‖ number (u64 BE) ‖ parent root (32) ‖ post-state
//! root (32) ‖ author (32) ‖ count (u32 BE) ‖ count × transfer (89 bytes each)`.
//!
//! Witness: `"ARBW" ‖ version (u8 = 1) ‖ count (u32 BE) ‖ count × (length (u32 BE) ‖ node)`,
//! nodes deduplicated and sorted by hash. Values travel inside their leaves.

use state::H256;
use trie::Layout;

use crate::runtime::{AccountId, Transfer, TRANSFER_BYTES};

/// A block: its header fields and its transactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Block number.
    pub number: u64,
    /// State root before the block.
    pub parent_root: H256,
    /// State root after the block.
    pub state_root: H256,
    /// Receives the fees.
    pub author: AccountId,
    /// The transactions, in order.
    pub transfers: Vec<Transfer>,
}

/// Which encoding a [`CodecError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// [`Block::encode`]'s.
    Block,
    /// [`encode_witness`]'s.
    Witness,
}

impl Format {
    /// The magic bytes its encoding starts with.
    pub const fn magic(self) -> &'static [u8; 4] {
        match self {
            Format::Block => BLOCK_MAGIC,
            Format::Witness => WITNESS_MAGIC,
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Block => "block",
            Format::Witness => "witness",
        })
    }
}

/// Why bytes are not a block or a witness.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// Wrong magic bytes.
    #[error(
        "not a {what}: the file does not start with {:?}",
        String::from_utf8_lossy(.what.magic())
    )]
    Magic {
        /// The expected encoding.
        what: Format,
    },
    /// Unknown format version.
    #[error("{what} format version {version} is not supported (this build reads {VERSION})")]
    Version {
        /// The encoding.
        what: Format,
        /// The version found.
        version: u8,
    },
    /// The bytes end early or go on after the end.
    #[error("{what} is truncated or has trailing bytes at offset {offset}")]
    Length {
        /// The encoding.
        what: Format,
        /// Where decoding stopped.
        offset: usize,
    },
    /// A transaction does not decode (its kind byte is neither 0 nor 1).
    #[error("transaction {index} does not decode: its kind byte is neither 0 (keep-alive) nor 1 (allow-death)")]
    Transfer {
        /// Its position.
        index: usize,
    },
    /// The witness holds the same node twice.
    #[error("witness node {index} repeats an earlier node")]
    Duplicate {
        /// Its position.
        index: usize,
    },
}

const BLOCK_MAGIC: &[u8; 4] = b"ARBB";
const WITNESS_MAGIC: &[u8; 4] = b"ARBW";
const VERSION: u8 = 1;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: Format,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or(CodecError::Length { what: self.what, offset: self.at })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn header(&mut self) -> Result<(), CodecError> {
        if self.bytes.get(..4) != Some(&self.what.magic()[..]) {
            return Err(CodecError::Magic { what: self.what });
        }
        self.at = 4;
        let [version] = self.array::<1>()?;
        if version != VERSION {
            return Err(CodecError::Version { what: self.what, version });
        }
        Ok(())
    }

    fn end(&self) -> Result<(), CodecError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(CodecError::Length { what: self.what, offset: self.at })
        }
    }
}

impl Block {
    /// The block's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(4 + 1 + 8 + 96 + 4 + self.transfers.len() * TRANSFER_BYTES);
        out.extend_from_slice(BLOCK_MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&self.number.to_be_bytes());
        out.extend_from_slice(self.parent_root.as_bytes());
        out.extend_from_slice(self.state_root.as_bytes());
        out.extend_from_slice(&self.author);
        // Invariant: a block's count fits its u32 field (blocks hold at most thousands).
        let count = u32::try_from(self.transfers.len()).expect("a block holds < 2^32 transfers");
        out.extend_from_slice(&count.to_be_bytes());
        for t in &self.transfers {
            t.encode(&mut out);
        }
        out
    }

    /// Decode [`Block::encode`]'s output.
    pub fn decode(bytes: &[u8]) -> Result<Block, CodecError> {
        let mut r = Reader { bytes, at: 0, what: Format::Block };
        r.header()?;
        let number = u64::from_be_bytes(r.array()?);
        let parent_root = H256(r.array()?);
        let state_root = H256(r.array()?);
        let author = r.array()?;
        let count = u32::from_be_bytes(r.array()?) as usize;
        // Bound the allocation by what the bytes can hold.
        let mut transfers = Vec::with_capacity(count.min(bytes.len() / TRANSFER_BYTES));
        for index in 0..count {
            let b = r.take(TRANSFER_BYTES)?;
            transfers.push(Transfer::decode(b).ok_or(CodecError::Transfer { index })?);
        }
        r.end()?;
        Ok(Block { number, parent_root, state_root, author, transfers })
    }
}

/// Encode witness nodes (already deduplicated).
pub fn encode_witness(nodes: &[Vec<u8>]) -> Vec<u8> {
    let len: usize = nodes.iter().map(|n| n.len() + 4).sum();
    let mut out = Vec::with_capacity(9 + len);
    out.extend_from_slice(WITNESS_MAGIC);
    out.push(VERSION);
    // Invariant: counts and node lengths fit their u32 fields (a witness is megabytes).
    let count = u32::try_from(nodes.len()).expect("a witness holds < 2^32 nodes");
    out.extend_from_slice(&count.to_be_bytes());
    for n in nodes {
        let len = u32::try_from(n.len()).expect("a witness node is < 4 GiB");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(n);
    }
    out
}

/// Decode [`encode_witness`]'s output, a witness of trie layout `L`, into nodes keyed by
/// `L`'s hash.
pub fn decode_witness<L: Layout>(bytes: &[u8]) -> Result<Vec<(H256, Vec<u8>)>, CodecError> {
    let mut r = Reader { bytes, at: 0, what: Format::Witness };
    r.header()?;
    let count = u32::from_be_bytes(r.array()?) as usize;
    let mut nodes = Vec::with_capacity(count.min(bytes.len() / 4));
    let mut seen = std::collections::HashSet::new();
    for index in 0..count {
        let len = u32::from_be_bytes(r.array()?) as usize;
        let node = r.take(len)?.to_vec();
        let h = L::hash(&node);
        if !seen.insert(h) {
            return Err(CodecError::Duplicate { index });
        }
        nodes.push((h, node));
    }
    r.end()?;
    Ok(nodes)
}
