//! Byte formats of checkpoints (`docs/design.md`, "Checkpoints"): the chunk (version 1)
//! and the manifest (version 1: an Ethereum checkpoint; version 2: the same fields after
//! the trie layout's name; both name chunks by keccak256. Version 3, what `create` writes:
//! the layout's name for every layout, chunks named by BLAKE3, and after the state chunks
//! the list of code chunks, [`CodeList`], whose own format is in `code.rs`), with decoders
//! that return typed errors on any input and never allocate more than the input can hold.

use state::{TrieId, H256};
use trie::{keccak256, LayoutName};

/// Magic bytes opening a chunk.
pub const CHUNK_MAGIC: &[u8; 8] = b"ARBCHUNK";
/// Magic bytes opening a manifest.
pub const MANIFEST_MAGIC: &[u8; 8] = b"ARBMANIF";
/// The chunk format version this build writes and reads, and the version of a manifest of
/// an Ethereum checkpoint (which records no layout: its bytes, and so its id, are those of
/// the checkpoints written before layouts were recorded).
pub const FORMAT_VERSION: u8 = 1;
/// The manifest version that records the trie layout (every layout but Ethereum, whose
/// manifests stay at [`FORMAT_VERSION`]).
pub const MANIFEST_LAYOUT_VERSION: u8 = 2;
/// The manifest version whose chunks are named by BLAKE3 (any layout, named): what
/// `create` writes. Versions 1 and 2 (keccak256 chunk names) are still read.
pub const MANIFEST_BLAKE3_VERSION: u8 = 3;
/// Longest layout name a manifest holds.
const LAYOUT_NAME_BYTES_MAX: usize = 32;
/// Largest chunk, the hard bound every reader and verifier checks before it allocates (a
/// manifest's chunk lengths, a served body, a chunk file, the decoder), whatever the
/// manifest's rule says. It holds the largest chunk of any state the store takes
/// (checked below at compile time): either entries within the rule's largest
/// `max_bytes` ([`BoundaryRule::MAX_BYTES_MAX`]) or one entry of any size up to
/// [`ENTRY_BYTES_MAX`] alone, with their framing, plus the boundary proof, whose nodes
/// may hold a value inline (an Ethereum leaf, a Substrate V0 node): the leaf of the key
/// before the chunk and the leaf of its last entry, each up to [`NODE_BYTES_MAX`], and
/// the branch nodes of two boundary paths. Only a state whose boundary paths also pass
/// several branches that hold large values (keys that are prefixes of one another, each
/// with megabytes of value) can need more; `create` refuses it
/// (`CreateError::ChunkTooLarge`) rather than write a chunk no reader takes.
pub const CHUNK_BYTES_MAX: u64 = 64 << 20;
/// Largest manifest a decoder accepts.
pub const MANIFEST_BYTES_MAX: u64 = 256 << 20;
/// Longest trie key (the store's limit).
pub(crate) const KEY_BYTES_MAX: usize = store::KEY_BYTES_MAX;
/// Longest value a checkpoint holds: the store's value limit (16 MiB, `ARBOR_VALUE_MAX`
/// of the C ABI, which every committing front end enforces).
pub const VALUE_BYTES_MAX: usize = 16 << 20;
/// Longest full flat key (trie prefix of up to 33 bytes, then the key).
pub(crate) const FLAT_KEY_BYTES_MAX: usize = 33 + KEY_BYTES_MAX;
/// Largest entry (full flat key and value), as the boundary rule counts it.
pub const ENTRY_BYTES_MAX: u64 = (FLAT_KEY_BYTES_MAX + VALUE_BYTES_MAX) as u64;
/// Longest proof node: a node holding a value of [`VALUE_BYTES_MAX`] inline, with its
/// headers, partial path (at most 128 bytes) and 16 child references of 33 bytes each
/// (Ethereum's RLP and Substrate's codec alike stay well within 4 KiB of the value).
pub(crate) const NODE_BYTES_MAX: usize = VALUE_BYTES_MAX + 4096;
/// Bytes of a chunk's header (magic, version, block, root, segment count).
const CHUNK_HEADER_BYTES_MAX: u64 = 8 + 1 + 8 + 32 + 10;
/// Bytes of the branch nodes (holding no value) on one boundary path: at most one per
/// nibble of the longest key and the root, each with 16 references and a partial path.
const PATH_BRANCHES_BYTES_MAX: u64 = (2 * KEY_BYTES_MAX as u64 + 1) * (16 * 33 + 256);

// Invariant: the largest chunk `create` cuts fits the hard bound (see CHUNK_BYTES_MAX).
// A proof holds at most two boundary paths (the first segment's left one, the last
// segment's right one), so at most two nodes with values: the leaf of the key before the
// chunk and the leaf of its last entry.
const _: () = {
    let paths = CHUNK_HEADER_BYTES_MAX + 2 * PATH_BRANCHES_BYTES_MAX;
    // One entry alone (any size): its framing (a storage segment's fields, two length
    // varints) and the two leaves.
    let alone = ENTRY_BYTES_MAX + 64 + 2 * NODE_BYTES_MAX as u64;
    assert!(paths + alone <= CHUNK_BYTES_MAX, "one largest entry must fit a chunk");
    // Entries within `max_bytes`: an entry of flat bytes f takes at most 1.5 f in the
    // chunk (the worst: a 1-byte flat key with a 1-byte value, framed by two 1-byte
    // lengths; a storage segment's fields are paid by its entries' 33-byte trie prefix),
    // and the last entry's leaf repeats at most `max_bytes` of them.
    let max = BoundaryRule::MAX_BYTES_MAX as u64;
    let packed = max * 3 / 2 + (max + 4096) + NODE_BYTES_MAX as u64;
    assert!(paths + packed <= CHUNK_BYTES_MAX, "a full chunk must fit the bound");
};

/// Why bytes are not a chunk or a manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input does not start with the expected magic bytes.
    #[error("not a {0} (bad magic bytes)")]
    Magic(&'static str),
    /// A version this build does not read.
    #[error("unsupported {what} version {found} (this build reads chunk version {FORMAT_VERSION}, manifest versions {FORMAT_VERSION} and {MANIFEST_LAYOUT_VERSION})")]
    Version {
        /// Chunk or manifest.
        what: &'static str,
        /// The version found.
        found: u8,
    },
    /// The input ends inside a field.
    #[error("truncated at byte {0}")]
    Truncated(usize),
    /// Bytes follow the last field.
    #[error("{0} trailing byte(s)")]
    Trailing(usize),
    /// The input is larger than the format allows.
    #[error("{len} bytes exceed the {max}-byte limit")]
    TooLarge {
        /// Input length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A length or count is out of range, not minimally encoded, or larger than the
    /// bytes left.
    #[error("bad length or count at byte {0}")]
    Length(usize),
    /// A manifest names a trie layout this build does not know.
    #[error("unknown trie layout {name:?} at byte {at}")]
    Layout {
        /// Offset of the field.
        at: usize,
        /// The name found (lossy UTF-8).
        name: String,
    },
    /// A field holds a value the format does not allow.
    #[error("invalid field at byte {at}: {what}")]
    Field {
        /// Offset of the field.
        at: usize,
        /// What is wrong.
        what: &'static str,
    },
}

/// Reads fields off a byte slice, tracking the offset for errors.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// The head every chunk kind opens with (magic, version, block, root), after the bound on
/// the chunk's length: the reader positioned after it, the block and the root.
pub(crate) fn chunk_head<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    version: u8,
    what: &'static str,
) -> Result<(Reader<'a>, u64, H256), DecodeError> {
    if bytes.len() as u64 > CHUNK_BYTES_MAX {
        return Err(DecodeError::TooLarge { len: bytes.len() as u64, max: CHUNK_BYTES_MAX });
    }
    let mut r = Reader::new(bytes);
    if r.bytes(8).ok() != Some(&magic[..]) {
        return Err(DecodeError::Magic(what));
    }
    let found = r.u8()?;
    if found != version {
        return Err(DecodeError::Version { what, found });
    }
    let block = r.u64()?;
    let root = r.h256()?;
    Ok((r, block, root))
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.left() {
            return Err(DecodeError::Truncated(self.pos));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.bytes(1)?[0])
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.bytes(8)?;
        Ok(u64::from_be_bytes(b.try_into().map_err(|_| DecodeError::Truncated(self.pos))?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes(b.try_into().map_err(|_| DecodeError::Truncated(self.pos))?))
    }

    pub(crate) fn h256(&mut self) -> Result<H256, DecodeError> {
        let at = self.pos;
        H256::from_slice(self.bytes(32)?).ok_or(DecodeError::Truncated(at))
    }

    /// A minimal LEB128 integer of at most `max`.
    pub(crate) fn varint(&mut self, max: u64) -> Result<u64, DecodeError> {
        let at = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return Err(DecodeError::Length(at));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                // Minimal: no trailing zero group (except the value 0 itself).
                if b == 0 && i > 0 {
                    return Err(DecodeError::Length(at));
                }
                return if v <= max { Ok(v) } else { Err(DecodeError::Length(at)) };
            }
        }
        Err(DecodeError::Length(at))
    }

    /// A count of items each at least `min_item` bytes long: never more than the bytes
    /// left can hold (so that no allocation exceeds the input).
    pub(crate) fn count(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.varint(u64::from(u32::MAX))? as usize;
        if n.saturating_mul(min_item.max(1)) > self.left() {
            return Err(DecodeError::Length(at));
        }
        Ok(n)
    }

    /// Length-prefixed bytes of at most `max`.
    pub(crate) fn var_bytes(&mut self, max: usize) -> Result<&'a [u8], DecodeError> {
        let n = self.varint(max as u64)? as usize;
        self.bytes(n)
    }

    pub(crate) fn end(&self) -> Result<(), DecodeError> {
        match self.left() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }

    pub(crate) fn field(&self, what: &'static str) -> DecodeError {
        DecodeError::Field { at: self.pos, what }
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_var_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// One segment entry (its key within the trie, then its value); returns where the key's
/// bytes start in `out`.
pub(crate) fn put_entry(out: &mut Vec<u8>, k: &[u8], v: &[u8]) -> usize {
    put_varint(out, k.len() as u64);
    let at = out.len();
    out.extend_from_slice(k);
    put_var_bytes(out, v);
    at
}

fn put_trie(out: &mut Vec<u8>, trie: &TrieId) {
    trie.write_prefix(out);
}

fn read_trie(r: &mut Reader<'_>) -> Result<TrieId, DecodeError> {
    match r.u8()? {
        0 => Ok(TrieId::Main),
        1 => Ok(TrieId::Storage(r.h256()?)),
        _ => Err(DecodeError::Field { at: r.pos - 1, what: "unknown trie tag" }),
    }
}

/// One trie's part of a chunk: the entries of `[start, last entry]` (or of `[start, end of
/// the trie]` when `open`) and the boundary proof against the trie's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment<'a> {
    /// The trie.
    pub trie: TrieId,
    /// First key of the range (empty: the trie's first key).
    pub start: &'a [u8],
    /// The range runs to the end of the trie (no key of the trie follows the entries).
    pub open: bool,
    /// The entries, ascending, values non-empty.
    pub entries: Vec<(&'a [u8], &'a [u8])>,
    /// Boundary proof nodes ([`trie::prove_key_range`]).
    pub proof: Vec<&'a [u8]>,
}

impl Segment<'_> {
    /// The range's last key: the last entry (`None` when open).
    pub fn last(&self) -> Option<&[u8]> {
        if self.open {
            None
        } else {
            self.entries.last().map(|(k, _)| *k)
        }
    }
}

/// A decoded chunk: the checkpoint it belongs to (block and root) and its segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// The checkpoint's block.
    pub block: u64,
    /// The checkpoint's state root.
    pub root: H256,
    /// Segments in trie order.
    pub segments: Vec<Segment<'a>>,
}

impl Chunk<'_> {
    /// Encode (the inverse of [`Chunk::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = ChunkWriter::new(self.block, &self.root, self.segments.len());
        for s in &self.segments {
            w.segment(&s.trie, s.start, s.open, &s.entries, &s.proof);
        }
        w.finish()
    }

    /// Decode a chunk. Checks the framing and each field's own rules (key and value
    /// lengths, strictly ascending keys within a segment, tries in order, open flags);
    /// how the chunk fits its checkpoint is checked by the restore.
    pub fn decode(bytes: &[u8]) -> Result<Chunk<'_>, DecodeError> {
        let (mut r, block, root) = chunk_head(bytes, CHUNK_MAGIC, FORMAT_VERSION, "chunk")?;
        // A segment is at least: trie tag, start length, open flag, two counts.
        let n = r.count(5)?;
        if n == 0 {
            return Err(r.field("a chunk without segments"));
        }
        let mut segments: Vec<Segment<'_>> = Vec::with_capacity(n);
        for _ in 0..n {
            let s = read_segment(&mut r)?;
            if let Some(prev) = segments.last() {
                if prev.trie >= s.trie {
                    return Err(r.field("segments not in trie order"));
                }
            }
            segments.push(s);
        }
        r.end()?;
        Ok(Chunk { block, root, segments })
    }
}

/// Encodes a chunk segment by segment (the creator holds its proof nodes owned).
pub(crate) struct ChunkWriter {
    out: Vec<u8>,
}

impl ChunkWriter {
    pub(crate) fn new(block: u64, root: &H256, segments: usize) -> Self {
        Self::appending(Vec::with_capacity(1 << 16), block, root, segments)
    }

    /// A writer appending to `out`, so that a caller can reuse one buffer and place the
    /// chunk in it.
    pub(crate) fn appending(mut out: Vec<u8>, block: u64, root: &H256, segments: usize) -> Self {
        out.extend_from_slice(CHUNK_MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&block.to_be_bytes());
        out.extend_from_slice(&root.0);
        put_varint(&mut out, segments as u64);
        ChunkWriter { out }
    }

    pub(crate) fn segment(
        &mut self,
        trie: &TrieId,
        start: &[u8],
        open: bool,
        entries: &[(&[u8], &[u8])],
        proof: &[impl AsRef<[u8]>],
    ) {
        let bytes: usize = entries.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
        self.out.reserve(bytes);
        self.segment_head(trie, start, open, entries.len());
        for (k, v) in entries {
            put_entry(&mut self.out, k, v);
        }
        self.proof(proof);
    }

    /// [`ChunkWriter::segment`] of `count` entries already encoded one after another by
    /// [`put_entry`] (the creator encodes them as it reads them).
    pub(crate) fn encoded_segment(
        &mut self,
        trie: &TrieId,
        start: &[u8],
        open: bool,
        count: usize,
        encoded: &[u8],
        proof: &[impl AsRef<[u8]>],
    ) {
        self.out.reserve(encoded.len());
        self.segment_head(trie, start, open, count);
        self.out.extend_from_slice(encoded);
        self.proof(proof);
    }

    fn segment_head(&mut self, trie: &TrieId, start: &[u8], open: bool, count: usize) {
        let out = &mut self.out;
        put_trie(out, trie);
        put_var_bytes(out, start);
        out.push(u8::from(open));
        put_varint(out, count as u64);
    }

    fn proof(&mut self, proof: &[impl AsRef<[u8]>]) {
        put_varint(&mut self.out, proof.len() as u64);
        for n in proof {
            put_var_bytes(&mut self.out, n.as_ref());
        }
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.out
    }
}

fn read_segment<'a>(r: &mut Reader<'a>) -> Result<Segment<'a>, DecodeError> {
    let trie = read_trie(r)?;
    let start = r.var_bytes(KEY_BYTES_MAX + 1)?;
    let open = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(r.field("open flag not 0 or 1")),
    };
    // An entry is at least a key length, a value length and one value byte.
    let n = r.count(3)?;
    let mut entries: Vec<(&[u8], &[u8])> = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.var_bytes(KEY_BYTES_MAX)?;
        let v = r.var_bytes(VALUE_BYTES_MAX)?;
        if v.is_empty() {
            return Err(r.field("empty value"));
        }
        if let Some((prev, _)) = entries.last() {
            if *prev >= k {
                return Err(r.field("keys not strictly ascending"));
            }
        } else if k < start {
            return Err(r.field("key before the segment start"));
        }
        entries.push((k, v));
    }
    if !open && entries.is_empty() {
        return Err(r.field("a closed segment without entries"));
    }
    // A proof node is at least a length and one byte.
    let n = r.count(2)?;
    let mut proof = Vec::with_capacity(n);
    for _ in 0..n {
        let node = r.var_bytes(NODE_BYTES_MAX)?;
        if node.is_empty() {
            return Err(r.field("empty proof node"));
        }
        proof.push(node);
    }
    Ok(Segment { trie, start, open, entries, proof })
}

/// How chunk boundaries are chosen (recorded in the manifest; see `boundary.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BoundaryRule {
    /// Expected entries per chunk: a key ends a chunk when its boundary hash falls under
    /// `u64::MAX / target_entries`.
    pub target_entries: u32,
    /// Entry bytes (key + value) after which a chunk is cut regardless.
    pub max_bytes: u32,
}

impl Default for BoundaryRule {
    fn default() -> Self {
        BoundaryRule { target_entries: 8192, max_bytes: 4 << 20 }
    }
}

impl BoundaryRule {
    /// Smallest `max_bytes`: room for one entry of the longest key and a modest value.
    pub const MAX_BYTES_MIN: u32 = 4096;
    /// Largest `max_bytes` (a quarter of [`CHUNK_BYTES_MAX`]; an entry larger than
    /// `max_bytes` is cut into a chunk of its own).
    pub const MAX_BYTES_MAX: u32 = (CHUNK_BYTES_MAX / 4) as u32;
    /// Largest `target_entries`.
    pub const TARGET_ENTRIES_MAX: u32 = 1 << 24;

    /// Check the parameters' ranges.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.target_entries == 0 || self.target_entries > Self::TARGET_ENTRIES_MAX {
            return Err("target entries per chunk must be 1..=16777216");
        }
        if !(Self::MAX_BYTES_MIN..=Self::MAX_BYTES_MAX).contains(&self.max_bytes) {
            return Err("maximum chunk bytes must be 4 KiB..=16 MiB");
        }
        Ok(())
    }
}

/// The hash that names a checkpoint's chunks (its digests), fixed by its manifest's
/// version. A manifest's own id is the keccak256 of its bytes whatever the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChunkHash {
    /// keccak256 (manifest versions 1 and 2).
    Keccak256,
    /// BLAKE3 with its 32-byte output (manifest version 3): several times keccak's speed,
    /// so naming a chunk costs less than reading its entries.
    Blake3,
}

impl ChunkHash {
    /// The digest of `bytes`.
    pub fn digest(self, bytes: &[u8]) -> H256 {
        match self {
            ChunkHash::Keccak256 => keccak256(bytes),
            ChunkHash::Blake3 => H256(*blake3::hash(bytes).as_bytes()),
        }
    }

    /// Its name, as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkHash::Keccak256 => "keccak256",
            ChunkHash::Blake3 => "blake3",
        }
    }
}

/// What the manifest says about one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkInfo {
    /// Full flat key (trie prefix ‖ key) of its first entry (empty for the empty state).
    pub first: Vec<u8>,
    /// Full flat key of its last entry.
    pub last: Vec<u8>,
    /// Entries it holds.
    pub entries: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The manifest's [`ChunkHash`] of its bytes: its name.
    pub digest: H256,
    /// Its last segment runs to the end of its trie.
    pub ends_trie: bool,
}

/// The list of a checkpoint's chunks. The only trusted input of a restore is `(block,
/// root)`: everything here is checked against the chunks, and they against the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The trie layout of the state (every proof verifies in it; a restore creates its
    /// database in it).
    pub layout: LayoutName,
    /// The hash its chunks are named by (the manifest's version: see [`ChunkHash`]).
    pub chunk_hash: ChunkHash,
    /// The block whose state this is.
    pub block: u64,
    /// Its state root.
    pub root: H256,
    /// The boundary rule the chunks were cut by.
    pub rule: BoundaryRule,
    /// Entries in all chunks.
    pub entries: u64,
    /// Bytes of all chunks.
    pub chunk_bytes: u64,
    /// Key and value bytes of all entries (the flat state's size).
    pub flat_bytes: u64,
    /// The chunks in key order.
    pub chunks: Vec<ChunkInfo>,
    /// The code chunks (version 3; empty in versions 1 and 2, and for a state without
    /// contract code).
    pub code: CodeList,
}

/// What the manifest says about one code chunk (`code.rs`): codes in ascending hash order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChunkInfo {
    /// Hash of its first code.
    pub first: H256,
    /// Hash of its last code.
    pub last: H256,
    /// Codes it holds (at least one).
    pub entries: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The manifest's [`ChunkHash`] of its bytes: its name.
    pub digest: H256,
}

/// A checkpoint's contract code (the store's `code` family): the code chunks in hash
/// order and their totals. A restore's chunk indices run over the state chunks, then
/// these ([`Manifest::chunk_name`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeList {
    /// Codes in all code chunks.
    pub entries: u64,
    /// Bytes of all code chunks.
    pub chunk_bytes: u64,
    /// Hash and code bytes of all codes (32 bytes per code and its length), the measure
    /// the boundary rule's `max_bytes` cuts code chunks by.
    pub bytes: u64,
    /// The code chunks in hash order.
    pub chunks: Vec<CodeChunkInfo>,
}

impl CodeList {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.entries.to_be_bytes());
        out.extend_from_slice(&self.chunk_bytes.to_be_bytes());
        out.extend_from_slice(&self.bytes.to_be_bytes());
        put_varint(out, self.chunks.len() as u64);
        for c in &self.chunks {
            out.extend_from_slice(&c.first.0);
            out.extend_from_slice(&c.last.0);
            put_varint(out, c.entries);
            put_varint(out, c.len);
            out.extend_from_slice(&c.digest.0);
        }
    }

    /// Decode and check: hashes in strictly ascending order across chunks, at least one
    /// code per chunk, lengths within the chunk limit, totals that add up.
    fn decode(r: &mut Reader<'_>) -> Result<CodeList, DecodeError> {
        let (entries, chunk_bytes, bytes) = (r.u64()?, r.u64()?, r.u64()?);
        // A record is two hashes, two varints and a digest.
        let n = r.count(98)?;
        let mut chunks: Vec<CodeChunkInfo> = Vec::with_capacity(n);
        for _ in 0..n {
            let (first, last) = (r.h256()?, r.h256()?);
            if first > last {
                return Err(r.field("code chunk's first hash after its last"));
            }
            if chunks.last().is_some_and(|p| p.last >= first) {
                return Err(r.field("code chunks overlap or are out of order"));
            }
            let count = r.varint(CHUNK_BYTES_MAX)?;
            let len = r.varint(CHUNK_BYTES_MAX)?;
            if count == 0 || len == 0 {
                return Err(r.field("an empty code chunk"));
            }
            let digest = r.h256()?;
            chunks.push(CodeChunkInfo { first, last, entries: count, len, digest });
        }
        let sum = |f: fn(&CodeChunkInfo) -> u64| chunks.iter().map(f).sum::<u64>();
        if sum(|c| c.entries) != entries || sum(|c| c.len) != chunk_bytes {
            return Err(r.field("code totals do not add up"));
        }
        if entries.saturating_mul(32) > bytes || (chunks.is_empty() && bytes != 0) {
            return Err(r.field("code bytes less than their hashes"));
        }
        Ok(CodeList { entries, chunk_bytes, bytes, chunks })
    }
}

impl Manifest {
    /// Encode (the inverse of [`Manifest::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + self.chunks.len() * 120);
        out.extend_from_slice(MANIFEST_MAGIC);
        match (self.chunk_hash, self.layout) {
            (ChunkHash::Keccak256, LayoutName::Ethereum) => out.push(FORMAT_VERSION),
            (ChunkHash::Keccak256, _) => out.push(MANIFEST_LAYOUT_VERSION),
            (ChunkHash::Blake3, _) => out.push(MANIFEST_BLAKE3_VERSION),
        }
        if out[MANIFEST_MAGIC.len()] != FORMAT_VERSION {
            put_var_bytes(&mut out, self.layout.as_str().as_bytes());
        }
        out.extend_from_slice(&self.block.to_be_bytes());
        out.extend_from_slice(&self.root.0);
        out.extend_from_slice(&self.rule.target_entries.to_be_bytes());
        out.extend_from_slice(&self.rule.max_bytes.to_be_bytes());
        out.extend_from_slice(&self.entries.to_be_bytes());
        out.extend_from_slice(&self.chunk_bytes.to_be_bytes());
        out.extend_from_slice(&self.flat_bytes.to_be_bytes());
        put_varint(&mut out, self.chunks.len() as u64);
        for c in &self.chunks {
            put_var_bytes(&mut out, &c.first);
            put_var_bytes(&mut out, &c.last);
            put_varint(&mut out, c.entries);
            put_varint(&mut out, c.len);
            out.extend_from_slice(&c.digest.0);
            out.push(u8::from(c.ends_trie));
        }
        match self.chunk_hash {
            ChunkHash::Blake3 => self.code.encode(&mut out),
            // Invariant: only version 3 carries code.
            ChunkHash::Keccak256 => assert!(
                self.code == CodeList::default(),
                "a manifest of keccak256 chunk names (version 1 or 2) has no code list"
            ),
        }
        out
    }

    /// True when the manifest's version has a code list (version 3): only then do a
    /// restore and a verification require the code accounts refer to. A checkpoint of
    /// versions 1 and 2 carries no code, and restores without it, as it always did.
    pub fn has_code_list(&self) -> bool {
        self.chunk_hash == ChunkHash::Blake3
    }

    /// Chunks of every kind: the state chunks, then the code chunks.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len() + self.code.chunks.len()
    }

    /// The name (digest) and length of chunk `index` of a restore's numbering: state
    /// chunks first, then code chunks (index `chunks.len() + j` is code chunk `j`).
    pub fn chunk_name(&self, index: usize) -> Option<(H256, u64)> {
        match index.checked_sub(self.chunks.len()) {
            None => self.chunks.get(index).map(|c| (c.digest, c.len)),
            Some(j) => self.code.chunks.get(j).map(|c| (c.digest, c.len)),
        }
    }

    /// Every chunk's name and length, in that numbering.
    pub fn chunk_names(&self) -> impl Iterator<Item = (H256, u64)> + '_ {
        let state = self.chunks.iter().map(|c| (c.digest, c.len));
        state.chain(self.code.chunks.iter().map(|c| (c.digest, c.len)))
    }

    /// The manifest's id: keccak256 of its encoding.
    pub fn id(&self) -> H256 {
        keccak256(&self.encode())
    }

    /// The trie layout a manifest records, reading its header only (the rest is not
    /// checked: see [`Manifest::decode`]).
    pub fn layout_of(bytes: &[u8]) -> Result<LayoutName, DecodeError> {
        read_header(&mut Reader::new(bytes)).map(|(layout, _)| layout)
    }

    /// Decode and check a manifest: framing, the layout, the rule's ranges, chunks in
    /// strictly ascending key order, lengths within the chunk limit, totals that add up,
    /// and a last chunk that ends its trie; in version 3, then the code list
    /// ([`CodeList`], checked alike).
    pub fn decode(bytes: &[u8]) -> Result<Manifest, DecodeError> {
        if bytes.len() as u64 > MANIFEST_BYTES_MAX {
            return Err(DecodeError::TooLarge { len: bytes.len() as u64, max: MANIFEST_BYTES_MAX });
        }
        let mut r = Reader::new(bytes);
        let (layout, chunk_hash) = read_header(&mut r)?;
        let block = r.u64()?;
        let root = r.h256()?;
        let rule = BoundaryRule { target_entries: r.u32()?, max_bytes: r.u32()? };
        rule.validate().map_err(|what| r.field(what))?;
        let (entries, chunk_bytes, flat_bytes) = (r.u64()?, r.u64()?, r.u64()?);
        // A chunk record is at least two key lengths, two varints, a digest and a flag.
        let n = r.count(37)?;
        if n == 0 {
            return Err(r.field("a manifest without chunks"));
        }
        let mut chunks: Vec<ChunkInfo> = Vec::with_capacity(n);
        for _ in 0..n {
            let c = read_chunk_info(&mut r)?;
            if let Some(prev) = chunks.last() {
                if prev.last >= c.first {
                    return Err(r.field("chunks overlap or are out of order"));
                }
            }
            chunks.push(c);
        }
        let code = match chunk_hash {
            ChunkHash::Blake3 => CodeList::decode(&mut r)?,
            ChunkHash::Keccak256 => CodeList::default(),
        };
        r.end()?;
        let m = Manifest {
            layout,
            chunk_hash,
            block,
            root,
            rule,
            entries,
            chunk_bytes,
            flat_bytes,
            chunks,
            code,
        };
        m.check_totals().map_err(|what| DecodeError::Field { at: bytes.len(), what })?;
        Ok(m)
    }

    fn check_totals(&self) -> Result<(), &'static str> {
        let entries: u64 = self.chunks.iter().map(|c| c.entries).sum();
        let len: u64 = self.chunks.iter().map(|c| c.len).sum();
        if entries != self.entries || len != self.chunk_bytes {
            return Err("totals do not add up");
        }
        if self.chunks.last().is_some_and(|c| !c.ends_trie) {
            return Err("the last chunk does not end its trie");
        }
        let empty_state = self.chunks.len() == 1 && self.entries == 0;
        if !empty_state && self.chunks.iter().any(|c| c.entries == 0) {
            return Err("a chunk without entries");
        }
        Ok(())
    }
}

/// A manifest's magic bytes, version and layout, and so the hash of its chunks' names:
/// version 1 is Ethereum; version 2 names any other layout (an Ethereum manifest of
/// keccak256 names is always version 1, so that each manifest has one encoding and one
/// id); version 3 names its layout, whichever it is, and names chunks by BLAKE3.
fn read_header(r: &mut Reader<'_>) -> Result<(LayoutName, ChunkHash), DecodeError> {
    if r.bytes(8).ok() != Some(&MANIFEST_MAGIC[..]) {
        return Err(DecodeError::Magic("manifest"));
    }
    match r.u8()? {
        FORMAT_VERSION => Ok((LayoutName::Ethereum, ChunkHash::Keccak256)),
        MANIFEST_LAYOUT_VERSION => {
            let at = r.pos;
            let layout = read_layout(r)?;
            if layout == LayoutName::Ethereum {
                return Err(DecodeError::Field {
                    at,
                    what: "an Ethereum manifest is version 1, without a layout",
                });
            }
            Ok((layout, ChunkHash::Keccak256))
        }
        MANIFEST_BLAKE3_VERSION => Ok((read_layout(r)?, ChunkHash::Blake3)),
        found => Err(DecodeError::Version { what: "manifest", found }),
    }
}

/// A layout's name, as a manifest records it.
fn read_layout(r: &mut Reader<'_>) -> Result<LayoutName, DecodeError> {
    let at = r.pos;
    let name = r.var_bytes(LAYOUT_NAME_BYTES_MAX)?;
    let unknown = || DecodeError::Layout { at, name: String::from_utf8_lossy(name).into_owned() };
    std::str::from_utf8(name).map_err(|_| unknown())?.parse().map_err(|_| unknown())
}

fn read_chunk_info(r: &mut Reader<'_>) -> Result<ChunkInfo, DecodeError> {
    let first = r.var_bytes(FLAT_KEY_BYTES_MAX)?.to_vec();
    let last = r.var_bytes(FLAT_KEY_BYTES_MAX)?.to_vec();
    if first > last {
        return Err(r.field("first key after last key"));
    }
    let entries = r.varint(CHUNK_BYTES_MAX)?;
    let len = r.varint(CHUNK_BYTES_MAX)?;
    if len == 0 {
        return Err(r.field("empty chunk"));
    }
    let digest = r.h256()?;
    let ends_trie = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(r.field("flag not 0 or 1")),
    };
    Ok(ChunkInfo { first, last, entries, len, digest, ends_trie })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn varints_are_minimal() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(Reader::new(&b).varint(u64::MAX), Ok(v));
        }
        assert!(Reader::new(&[0x80, 0x00]).varint(u64::MAX).is_err());
        assert!(Reader::new(&[0xff; 11]).varint(u64::MAX).is_err());
        assert!(Reader::new(&[0x05]).varint(4).is_err());
    }

    fn manifest(layout: LayoutName) -> Manifest {
        manifest_of(layout, ChunkHash::Blake3)
    }

    /// A manifest of the empty state (one empty chunk, no code) for the codec's tests.
    pub(crate) fn manifest_of(layout: LayoutName, chunk_hash: ChunkHash) -> Manifest {
        Manifest {
            layout,
            chunk_hash,
            block: 7,
            root: H256([3; 32]),
            rule: BoundaryRule::default(),
            entries: 0,
            chunk_bytes: 10,
            flat_bytes: 0,
            chunks: vec![ChunkInfo {
                first: Vec::new(),
                last: Vec::new(),
                entries: 0,
                len: 10,
                digest: H256([1; 32]),
                ends_trie: true,
            }],
            code: CodeList::default(),
        }
    }

    /// The hard bounds hold whatever a manifest's rule says: a chunk length past
    /// [`CHUNK_BYTES_MAX`] in a manifest, a chunk past it, and a value past
    /// [`VALUE_BYTES_MAX`] in a chunk are refused; a value of that size is taken.
    #[test]
    fn hard_bounds_are_refused_past_and_taken_at() {
        let mut m = manifest(LayoutName::Ethereum);
        for (len, ok) in [(CHUNK_BYTES_MAX, true), (CHUNK_BYTES_MAX + 1, false)] {
            m.chunks[0].len = len;
            m.chunk_bytes = len;
            assert_eq!(Manifest::decode(&m.encode()).is_ok(), ok, "{len}");
        }
        let big = vec![0u8; CHUNK_BYTES_MAX as usize + 1];
        assert!(matches!(Chunk::decode(&big), Err(DecodeError::TooLarge { .. })));
        for (n, ok) in [(VALUE_BYTES_MAX, true), (VALUE_BYTES_MAX + 1, false)] {
            let value = vec![1u8; n];
            let chunk = Chunk {
                block: 1,
                root: H256([2; 32]),
                segments: vec![Segment {
                    trie: TrieId::Main,
                    start: &[],
                    open: true,
                    entries: vec![(b"k", &value)],
                    proof: vec![],
                }],
            };
            let bytes = chunk.encode();
            assert_eq!(Chunk::decode(&bytes).is_ok(), ok, "{n}");
        }
    }

    #[test]
    fn manifests_record_their_layout_and_chunk_hash() {
        for layout in LayoutName::ALL {
            for (hash, version) in [(ChunkHash::Keccak256, 2), (ChunkHash::Blake3, 3)] {
                let m = manifest_of(layout, hash);
                let b = m.encode();
                assert_eq!(Manifest::decode(&b), Ok(m));
                assert_eq!(Manifest::layout_of(&b), Ok(layout));
                let keccak_eth = layout == LayoutName::Ethereum && hash == ChunkHash::Keccak256;
                assert_eq!(b[8], if keccak_eth { 1 } else { version }, "{layout}");
            }
        }
        // Version 3 is version 2's layout, then the same fields, then the code list (here
        // empty: three zero totals and no chunks).
        let v2 = manifest_of(LayoutName::SubstrateV1, ChunkHash::Keccak256).encode();
        let v3 = manifest(LayoutName::SubstrateV1).encode();
        assert_eq!((v3[8], &v3[9..v2.len()]), (3, &v2[9..]));
        assert_eq!(&v3[v2.len()..], [0u8; 25]);
        // Version 1 is Ethereum, byte for byte as before layouts were recorded.
        let eth = manifest_of(LayoutName::Ethereum, ChunkHash::Keccak256).encode();
        let v1 = v2;
        assert_eq!(&v1[..9], [&MANIFEST_MAGIC[..], &[2]].concat());
        assert_eq!(&v1[9..10], [12]);
        assert_eq!(&v1[10..22], b"substrate-v1");
        assert_eq!(&v1[22..], &eth[9..]);
    }

    #[test]
    fn chunk_hashes_are_the_standard_functions() {
        let hex = |h: H256| hex::encode(h.0);
        assert_eq!(
            hex(ChunkHash::Blake3.digest(b"")),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(
            hex(ChunkHash::Keccak256.digest(b"")),
            "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
        assert_ne!(ChunkHash::Blake3.digest(b"abc"), ChunkHash::Keccak256.digest(b"abc"));
    }

    #[test]
    fn bad_layouts_are_typed_errors() {
        let v1 = manifest_of(LayoutName::SubstrateV1, ChunkHash::Keccak256).encode();
        let with_name = |name: &[u8]| {
            let mut b = v1[..9].to_vec();
            put_var_bytes(&mut b, name);
            b.extend_from_slice(&v1[22..]);
            b
        };
        let polkadot = with_name(b"polkadot");
        assert_eq!(
            Manifest::decode(&polkadot),
            Err(DecodeError::Layout { at: 9, name: "polkadot".into() })
        );
        assert_eq!(Manifest::layout_of(&polkadot), Manifest::decode(&polkadot).map(|m| m.layout));
        assert!(matches!(
            Manifest::decode(&with_name(&[0xff, 0xfe])),
            Err(DecodeError::Layout { at: 9, .. })
        ));
        assert!(matches!(
            Manifest::decode(&with_name(b"ethereum")),
            Err(DecodeError::Field { at: 9, .. })
        ));
        assert!(matches!(Manifest::decode(&with_name(&[b'x'; 33])), Err(DecodeError::Length(9))));
        assert!(matches!(Manifest::decode(&with_name(b"")), Err(DecodeError::Layout { .. })));
        let mut v4 = v1.clone();
        v4[8] = 4;
        assert_eq!(Manifest::decode(&v4), Err(DecodeError::Version { what: "manifest", found: 4 }));
        // Version 3 takes every layout by name, Ethereum's too, and refuses unknown ones
        // (here with an empty code list after the chunks).
        let mut v3 = with_name(b"ethereum");
        v3[8] = MANIFEST_BLAKE3_VERSION;
        v3.extend_from_slice(&[0; 25]);
        assert_eq!(Manifest::decode(&v3).map(|m| m.layout), Ok(LayoutName::Ethereum));
        let mut v3 = polkadot.clone();
        v3[8] = MANIFEST_BLAKE3_VERSION;
        assert!(matches!(Manifest::decode(&v3), Err(DecodeError::Layout { at: 9, .. })));
        // The layout name edited into another known one: another manifest (another id),
        // which decodes; its chunks then fail to verify in that layout.
        let v0 = with_name(b"substrate-v0");
        assert_eq!(Manifest::decode(&v0).map(|m| m.layout), Ok(LayoutName::SubstrateV0));
        for n in 0..v1.len() {
            let _ = Manifest::decode(&v1[..n]);
            let _ = Manifest::layout_of(&v1[..n]);
        }
    }
}
