//! The contract code a checkpoint carries (manifest version 3): the store's `code` family
//! (code by its keccak256) in code chunks, after the state chunks. A state without code
//! (Substrate, the transfer runtime) has none.
//!
//! A code chunk holds codes in strictly ascending hash order; the codes of a checkpoint
//! are cut into chunks by the manifest rule's `max_bytes` alone (a code weighs its 32-byte
//! hash plus its length; a chunk ends before a code that would take it past `max_bytes`;
//! a code larger than that goes alone), so, like the state chunks, they follow from the
//! content. Nothing but keccak256 binds a code to the state: a restore checks each code
//! against its hash ([`CodeError::Hash`]), the chunk against the manifest's description
//! of it ([`check_code_chunk`]) and the cuts between chunks ([`check_code_ends`]); that
//! every code an account refers to (`keys::code_ref`) was restored is checked once all
//! chunks are in. Costs: one keccak256 per code, at restore and verification.

use state::H256;
use trie::keccak256;

use crate::boundary::ChunkBytes;
use crate::format::{
    chunk_head, put_var_bytes, put_varint, DecodeError, Manifest, VALUE_BYTES_MAX,
};

/// Magic bytes opening a code chunk.
pub const CODE_CHUNK_MAGIC: &[u8; 8] = b"ARBCODES";
/// The code chunk format version this build writes and reads.
pub const CODE_CHUNK_VERSION: u8 = 1;

/// What one code weighs for the boundary rule's `max_bytes` and the manifest's
/// [`crate::CodeList::bytes`]: its hash and its bytes.
pub(crate) fn code_weight(code: &[u8]) -> u64 {
    32 + code.len() as u64
}

/// A decoded code chunk: the checkpoint it belongs to (block and root) and its codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChunk<'a> {
    /// The checkpoint's block.
    pub block: u64,
    /// The checkpoint's state root.
    pub root: H256,
    /// (hash, code), hashes strictly ascending.
    pub codes: Vec<(H256, &'a [u8])>,
}

impl CodeChunk<'_> {
    /// Encode (the inverse of [`CodeChunk::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let bytes: u64 = self.codes.iter().map(|(_, c)| code_weight(c) + 4).sum();
        let mut out = Vec::with_capacity(64 + bytes as usize);
        out.extend_from_slice(CODE_CHUNK_MAGIC);
        out.push(CODE_CHUNK_VERSION);
        out.extend_from_slice(&self.block.to_be_bytes());
        out.extend_from_slice(&self.root.0);
        put_varint(&mut out, self.codes.len() as u64);
        for (hash, code) in &self.codes {
            out.extend_from_slice(&hash.0);
            put_var_bytes(&mut out, code);
        }
        out
    }

    /// Decode a code chunk: framing, at least one code, each at most
    /// [`VALUE_BYTES_MAX`], hashes strictly ascending. Whether each code hashes to its key
    /// and how the chunk fits its checkpoint are checked by [`check_code_chunk`].
    pub fn decode(bytes: &[u8]) -> Result<CodeChunk<'_>, DecodeError> {
        let (mut r, block, root) =
            chunk_head(bytes, CODE_CHUNK_MAGIC, CODE_CHUNK_VERSION, "code chunk")?;
        // A code is at least its hash and a length.
        let n = r.count(33)?;
        if n == 0 {
            return Err(r.field("a code chunk without codes"));
        }
        let mut codes: Vec<(H256, &[u8])> = Vec::with_capacity(n);
        for _ in 0..n {
            let hash = r.h256()?;
            if codes.last().is_some_and(|(prev, _)| *prev >= hash) {
                return Err(r.field("code hashes not strictly ascending"));
            }
            codes.push((hash, r.var_bytes(VALUE_BYTES_MAX)?));
        }
        r.end()?;
        Ok(CodeChunk { block, root, codes })
    }
}

/// Why a code chunk whose bytes the manifest names does not belong to the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeError {
    /// A code's keccak256 is not the hash it is stored under.
    #[error("the code under {key} hashes to {actual}")]
    Hash {
        /// The hash it is stored under.
        key: H256,
        /// Its keccak256.
        actual: H256,
    },
    /// The chunk is not the one the manifest describes (block, root, count, first or
    /// last hash, or a cut the rule does not make).
    #[error("{0}")]
    Mismatch(String),
}

/// Check that `chunk` is code chunk `j` of `manifest` (which has it): its block and root,
/// its count, first and last hashes, the rule inside it (with several codes, their weight
/// within `max_bytes`), and every code against its hash. Returns what its codes weigh.
pub(crate) fn check_code_chunk(
    manifest: &Manifest,
    j: usize,
    chunk: &CodeChunk<'_>,
) -> Result<ChunkBytes, CodeError> {
    let info = &manifest.code.chunks[j];
    let fit = |what: String| Err(CodeError::Mismatch(what));
    if chunk.block != manifest.block || chunk.root != manifest.root {
        return fit(format!("belongs to block {} root {}", chunk.block, chunk.root));
    }
    if chunk.codes.len() as u64 != info.entries {
        return fit(format!("{} codes, the manifest says {}", chunk.codes.len(), info.entries));
    }
    let (first, last) = (chunk.codes.first().map(|c| c.0), chunk.codes.last().map(|c| c.0));
    if first != Some(info.first) || last != Some(info.last) {
        return fit("first or last code hash differs from the manifest".into());
    }
    let mut bytes = ChunkBytes::default();
    for (i, (_, code)) in chunk.codes.iter().enumerate() {
        let weight = code_weight(code);
        if i == 0 {
            bytes.first = weight;
        }
        bytes.flat += weight;
    }
    let max = u64::from(manifest.rule.max_bytes);
    if chunk.codes.len() > 1 && bytes.flat > max {
        return fit(format!("{} bytes of codes, over the manifest's rule of {max}", bytes.flat));
    }
    for (key, code) in &chunk.codes {
        let actual = keccak256(code);
        if actual != *key {
            return Err(CodeError::Hash { key: *key, actual });
        }
    }
    Ok(bytes)
}

/// Once every code chunk is verified (`bytes[j]` is code chunk `j`'s): their weight adds
/// up to the manifest's code bytes, and every code chunk but the last ends where the rule
/// cuts (before a code that would take it past `max_bytes`).
pub(crate) fn check_code_ends(manifest: &Manifest, bytes: &[ChunkBytes]) -> Result<(), String> {
    let total = bytes.iter().fold(0u64, |a, b| a.saturating_add(b.flat));
    if total != manifest.code.bytes {
        return Err(format!(
            "its code chunks hold {total} bytes of hashes and code, the manifest says {}",
            manifest.code.bytes
        ));
    }
    let max = u64::from(manifest.rule.max_bytes);
    for (j, pair) in bytes.windows(2).enumerate() {
        if pair[0].flat + pair[1].first <= max {
            return Err(format!("code chunk {j} ends where the manifest's rule does not cut"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{ChunkHash, CodeChunkInfo, CodeList, CHUNK_BYTES_MAX};
    use trie::LayoutName;

    const CODES: [&[u8]; 3] = [b"\x60\x00", b"\x60\x01\x60\x02", b"\x00"];

    fn sorted() -> Vec<(H256, &'static [u8])> {
        let mut codes: Vec<(H256, &[u8])> = CODES.iter().map(|c| (keccak256(c), *c)).collect();
        codes.sort();
        codes
    }

    /// A manifest whose one code chunk is `codes`.
    fn manifest(codes: &[(H256, &[u8])]) -> Manifest {
        let bytes = codes.iter().map(|(_, c)| code_weight(c)).sum();
        let chunk = CodeChunk { block: 7, root: H256([3; 32]), codes: codes.to_vec() };
        let info = CodeChunkInfo {
            first: codes[0].0,
            last: codes[codes.len() - 1].0,
            entries: codes.len() as u64,
            len: chunk.encode().len() as u64,
            digest: ChunkHash::Blake3.digest(&chunk.encode()),
        };
        let code =
            CodeList { entries: info.entries, chunk_bytes: info.len, bytes, chunks: vec![info] };
        Manifest { code, ..base() }
    }

    /// A version 3 manifest of the empty state, without code.
    fn base() -> Manifest {
        crate::format::tests::manifest_of(LayoutName::Ethereum, ChunkHash::Blake3)
    }

    fn with_code(n: u8) -> Manifest {
        let mut m = base();
        for i in 0..n {
            let c = CodeChunkInfo {
                first: H256([2 * i + 1; 32]),
                last: H256([2 * i + 2; 32]),
                entries: 2,
                len: 100,
                digest: H256([9; 32]),
            };
            m.code.entries += c.entries;
            m.code.chunk_bytes += c.len;
            m.code.bytes += 2 * 40;
            m.code.chunks.push(c);
        }
        m
    }

    #[test]
    fn code_lists_round_trip_and_bad_ones_are_typed_errors() {
        let m = with_code(3);
        let b = m.encode();
        assert_eq!(Manifest::decode(&b), Ok(m.clone()));
        assert_eq!(m.chunk_count(), 4);
        assert_eq!(m.chunk_name(0), Some((H256([1; 32]), 10)));
        assert_eq!(m.chunk_name(3), Some((H256([9; 32]), 100)));
        assert_eq!(m.chunk_name(4), None);
        assert_eq!(m.chunk_names().count(), 4);
        let refused = |edit: &dyn Fn(&mut Manifest)| {
            let mut m = with_code(3);
            edit(&mut m);
            Manifest::decode(&m.encode())
        };
        let field = |r: Result<Manifest, DecodeError>| matches!(r, Err(DecodeError::Field { .. }));
        assert!(field(refused(&|m| m.code.entries += 1)));
        assert!(field(refused(&|m| m.code.chunk_bytes -= 1)));
        assert!(field(refused(&|m| m.code.bytes = 32 * m.code.entries - 1)));
        assert!(field(refused(&|m| m.code.chunks.swap(0, 1))));
        assert!(field(refused(&|m| m.code.chunks[1].first = m.code.chunks[0].last)));
        assert!(field(refused(&|m| m.code.chunks[0].first = H256([3; 32]))));
        assert!(field(refused(&|m| {
            m.code.entries -= m.code.chunks[0].entries;
            m.code.chunks[0].entries = 0;
        })));
        assert!(field(refused(&|m| {
            m.code = CodeList { bytes: 5, ..CodeList::default() };
        })));
        // A code chunk past the chunk limit; a count claiming more chunks than bytes hold.
        assert!(matches!(
            refused(&|m| {
                m.code.chunk_bytes += CHUNK_BYTES_MAX;
                m.code.chunks[0].len += CHUNK_BYTES_MAX;
            }),
            Err(DecodeError::Length(_))
        ));
        let at = b.len() - 3 * 98 - 1;
        assert_eq!(b[at], 3);
        let mut more = b.clone();
        more[at] = 4;
        assert!(matches!(Manifest::decode(&more), Err(DecodeError::Length(_))));
        // Versions 1 and 2 carry no code list: bytes after their chunks are trailing.
        let v1 = Manifest { chunk_hash: ChunkHash::Keccak256, ..base() }.encode();
        let tail = &b[base().encode().len() - 25..];
        let mut v1_code = v1.clone();
        v1_code.extend_from_slice(tail);
        assert!(matches!(Manifest::decode(&v1_code), Err(DecodeError::Trailing(_))));
        for n in 0..b.len() {
            assert!(Manifest::decode(&b[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    #[should_panic(expected = "has no code list")]
    fn a_keccak_manifest_with_code_is_a_broken_invariant() {
        let mut m = with_code(1);
        m.chunk_hash = ChunkHash::Keccak256;
        let _ = m.encode();
    }

    #[test]
    fn code_chunks_round_trip_and_check() {
        let codes = sorted();
        let m = manifest(&codes);
        assert_eq!(Manifest::decode(&m.encode()), Ok(m.clone()));
        let chunk = CodeChunk { block: 7, root: H256([3; 32]), codes: codes.clone() };
        let bytes = chunk.encode();
        assert_eq!(CodeChunk::decode(&bytes), Ok(chunk.clone()));
        let weight = check_code_chunk(&m, 0, &chunk).unwrap();
        assert_eq!(weight.flat, m.code.bytes);
        assert_eq!(weight.first, code_weight(codes[0].1));
        assert_eq!(check_code_ends(&m, &[weight]), Ok(()));
        assert!(check_code_ends(&m, &[ChunkBytes { flat: 1, first: 1 }]).is_err());
        for n in 0..bytes.len() {
            assert!(CodeChunk::decode(&bytes[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn bad_code_chunks_are_typed_errors() {
        let codes = sorted();
        let m = manifest(&codes);
        let good = CodeChunk { block: 7, root: H256([3; 32]), codes: codes.clone() };
        // A code that does not hash to its key.
        let mut other = good.clone();
        other.codes[1].1 = b"\x60\x03";
        let e = check_code_chunk(&m, 0, &other).unwrap_err();
        assert_eq!(e, CodeError::Hash { key: codes[1].0, actual: keccak256(b"\x60\x03") });
        // Another block, fewer codes, another first hash.
        let mut block = good.clone();
        block.block = 8;
        assert!(matches!(check_code_chunk(&m, 0, &block), Err(CodeError::Mismatch(_))));
        let mut fewer = good.clone();
        fewer.codes.pop();
        assert!(matches!(check_code_chunk(&m, 0, &fewer), Err(CodeError::Mismatch(_))));
        // Framing: magic, version, order, no codes, trailing bytes.
        let bytes = good.encode();
        let mut magic = bytes.clone();
        magic[0] = b'X';
        assert_eq!(CodeChunk::decode(&magic), Err(DecodeError::Magic("code chunk")));
        let mut version = bytes.clone();
        version[8] = 2;
        assert!(matches!(CodeChunk::decode(&version), Err(DecodeError::Version { .. })));
        let mut swapped = good.clone();
        swapped.codes.swap(0, 1);
        assert!(matches!(CodeChunk::decode(&swapped.encode()), Err(DecodeError::Field { .. })));
        let empty = CodeChunk { codes: Vec::new(), ..good.clone() };
        assert!(matches!(CodeChunk::decode(&empty.encode()), Err(DecodeError::Field { .. })));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(CodeChunk::decode(&trailing), Err(DecodeError::Trailing(1)));
        // A state chunk is not a code chunk.
        assert!(matches!(crate::Chunk::decode(&bytes), Err(DecodeError::Magic("chunk"))));
    }

    #[test]
    fn code_chunks_are_cut_by_the_rule() {
        let codes = sorted();
        let mut m = manifest(&codes);
        // Three codes of 33 to 36 bytes under a rule of 60: one chunk of all three is over
        // it; two chunks of one code each end where the rule cuts, under 4096 they do not.
        m.rule.max_bytes = 60;
        let chunk = CodeChunk { block: 7, root: H256([3; 32]), codes: codes.clone() };
        assert!(matches!(check_code_chunk(&m, 0, &chunk), Err(CodeError::Mismatch(_))));
        let w = |c: &[u8]| ChunkBytes { flat: code_weight(c), first: code_weight(c) };
        let (a, b) = (w(codes[0].1), w(codes[1].1));
        m.code.bytes = a.flat + b.flat;
        assert_eq!(check_code_ends(&m, &[a, b]), Ok(()));
        m.rule.max_bytes = 4096;
        assert!(check_code_ends(&m, &[a, b]).is_err());
    }
}
