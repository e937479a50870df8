//! Substrate's trie layouts ([`SubstrateV0`], [`SubstrateV1`]): Blake2-256, SCALE, no
//! extension nodes, keys as they are (not hashed), empty values are values.
//!
//! A node is a header, a partial key and the rest of its kind (see `docs/design.md`,
//! "Node encoding (Substrate layouts)"): the header's top bits give the kind (`01` leaf,
//! `10` branch, `11` branch with value, `001` leaf with hashed value, `0001` branch with
//! hashed value; `0x00` alone is the empty node), its low bits the partial key's nibble
//! count, with continuation bytes when they are all ones. A branch holds its partial key, a
//! little-endian u16 bitmap of its children, its value if any, then each child as a SCALE
//! byte vector (an encoding under 32 bytes inline, else its 32-byte hash). The root is the
//! hash of the root node whatever its length.
//!
//! V1 differs from V0 in one rule: a value of 33 bytes or more is stored as a separate
//! value node (the value's bytes) and the leaf or branch holds its Blake2-256 hash. The
//! decoder is shared (V0 tries can hold no hashed values, but reading one is harmless: its
//! hash must still match) and strict: truncation, a bad header, padding or compact length,
//! an empty bitmap, a child reference of 0 or more than 32 bytes and trailing bytes are
//! typed [`NodeError`]s, never panics.

use std::convert::Infallible;

use state::H256;

use crate::hash::{blake2_256, SUBSTRATE_EMPTY_ROOT};
use crate::nibbles::{NibbleSlice, Nibbles};
use crate::node::{
    ChildKind, ChildRef, Family, Layout, NibbledCodec, NodeError, NodeValue, NodeView,
    ProofSizeRule,
};
use crate::scale::{compact_len, write_compact, Reader};

/// Values this long or longer are value nodes in [`SubstrateV1`] (`sp-trie`'s
/// `TRIE_VALUE_NODE_THRESHOLD`).
pub const SUBSTRATE_V1_VALUE_NODE_MIN: usize = 33;

/// Substrate's `LayoutV0`: every value inline.
#[derive(Debug, Clone, Copy, Default)]
pub struct SubstrateV0;

/// Substrate's `LayoutV1` (state version 1): values of [`SUBSTRATE_V1_VALUE_NODE_MIN`]
/// bytes or more stored as separate value nodes, referenced by hash.
#[derive(Debug, Clone, Copy, Default)]
pub struct SubstrateV1;

/// The node kinds as (header prefix, prefix bits).
const LEAF: (u8, u32) = (0b0100_0000, 2);
const BRANCH_NO_VALUE: (u8, u32) = (0b1000_0000, 2);
const BRANCH_WITH_VALUE: (u8, u32) = (0b1100_0000, 2);
const LEAF_HASHED_VALUE: (u8, u32) = (0b0010_0000, 3);
const BRANCH_HASHED_VALUE: (u8, u32) = (0b0001_0000, 4);
/// The empty node's only byte.
const EMPTY_NODE: u8 = 0x00;

/// Append a header: `prefix` with the nibble count in its low `8 - bits` bits, or all ones
/// there and the rest in continuation bytes (each 255 adds 255 and continues, a byte below
/// 255 adds itself and ends).
fn write_header((prefix, bits): (u8, u32), count: usize, out: &mut Vec<u8>) {
    let max = 0xffu8 >> bits;
    if count < usize::from(max) {
        out.push(prefix | count as u8);
        return;
    }
    out.push(prefix | max);
    let mut rest = count - usize::from(max);
    while rest >= 255 {
        out.push(255);
        rest -= 255;
    }
    out.push(rest as u8);
}

/// The nibble count of a header whose first byte is `first` and kind has `bits` prefix bits.
fn read_count(first: u8, bits: u32, r: &mut Reader<'_>) -> Result<usize, NodeError> {
    let max = 0xffu8 >> bits;
    let mut count = usize::from(first & max);
    if count < usize::from(max) {
        return Ok(count);
    }
    loop {
        // Each continuation byte is one byte of input, so the count stays below 256 times
        // the node's length: no overflow.
        let b = r.byte()?;
        count += usize::from(b);
        if b < 255 {
            return Ok(count);
        }
    }
}

/// How a new value appears in a node under a layout whose value-node threshold is `min`
/// (`usize::MAX` for none): inline, or by the hash of its value node.
#[inline]
fn stored(value: &[u8], min: usize) -> NodeValue<'_> {
    if value.len() >= min {
        NodeValue::Node(blake2_256(value))
    } else {
        NodeValue::Inline(value)
    }
}

/// Append a value: compact length and bytes, or the value node's hash.
#[inline]
fn write_value(value: NodeValue<'_>, out: &mut Vec<u8>) {
    match value {
        NodeValue::Node(h) => out.extend_from_slice(h.as_bytes()),
        NodeValue::Inline(value) => {
            write_compact(value.len(), out);
            out.extend_from_slice(value);
        }
    }
}

/// Append a child reference as a SCALE byte vector.
#[inline]
fn write_child(child: &ChildRef, out: &mut Vec<u8>) {
    match child.kind() {
        ChildKind::Empty => {}
        ChildKind::Inline(bytes) => {
            write_compact(bytes.len(), out);
            out.extend_from_slice(bytes);
        }
        ChildKind::Hash(h) => {
            write_compact(32, out);
            out.extend_from_slice(h.as_bytes());
        }
    }
}

/// Where each hashed child's hash sits in a branch encoding: the children come last, each
/// as a SCALE byte vector, so they are found from the end.
fn child_hash_offsets(encoded: &[u8], children: &[ChildRef; 16]) -> [usize; 16] {
    let mut offsets = [0; 16];
    let mut end = encoded.len();
    for (o, c) in offsets.iter_mut().zip(children).rev() {
        match c.kind() {
            ChildKind::Empty => {}
            ChildKind::Inline(bytes) => end -= compact_len(bytes.len()) + bytes.len(),
            ChildKind::Hash(_) => {
                *o = end - 32;
                end -= 33;
            }
        }
    }
    offsets
}

/// Where a partial key comes from: a window of packed nibbles or an unpacked path.
#[derive(Clone, Copy)]
enum Partial<'a> {
    Slice(NibbleSlice<'a>),
    Unpacked(&'a [u8]),
}

impl Partial<'_> {
    fn len(&self) -> usize {
        match self {
            Partial::Slice(s) => s.len(),
            Partial::Unpacked(p) => p.len(),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Partial::Slice(s) => s.write_packed(out),
            Partial::Unpacked(p) => Nibbles::write_packed_of(p, out),
        }
    }
}

fn encode_leaf(path: Partial<'_>, value: NodeValue<'_>, out: &mut Vec<u8>) {
    let kind = match value {
        NodeValue::Inline(_) => LEAF,
        NodeValue::Node(_) => LEAF_HASHED_VALUE,
    };
    write_header(kind, path.len(), out);
    path.write(out);
    write_value(value, out);
}

fn encode_branch(
    path: Partial<'_>,
    children: &[ChildRef; 16],
    value: Option<NodeValue<'_>>,
    out: &mut Vec<u8>,
) {
    let kind = match value {
        None => BRANCH_NO_VALUE,
        Some(NodeValue::Inline(_)) => BRANCH_WITH_VALUE,
        Some(NodeValue::Node(_)) => BRANCH_HASHED_VALUE,
    };
    write_header(kind, path.len(), out);
    path.write(out);
    let mut bitmap = 0u16;
    for (i, c) in children.iter().enumerate() {
        if !c.is_empty() {
            bitmap |= 1 << i;
        }
    }
    out.extend_from_slice(&bitmap.to_le_bytes());
    if let Some(v) = value {
        write_value(v, out);
    }
    for c in children {
        write_child(c, out);
    }
}

/// The kind a header byte starts, with its prefix bit count.
#[derive(Clone, Copy)]
enum Kind {
    Leaf { hashed: bool },
    Branch { value: Option<bool> },
}

fn header_kind(first: u8) -> Result<(Kind, u32), NodeError> {
    Ok(match first >> 6 {
        0b01 => (Kind::Leaf { hashed: false }, 2),
        0b10 => (Kind::Branch { value: None }, 2),
        0b11 => (Kind::Branch { value: Some(false) }, 2),
        _ if first >> 5 == 0b001 => (Kind::Leaf { hashed: true }, 3),
        _ if first >> 4 == 0b0001 => (Kind::Branch { value: Some(true) }, 4),
        // 0x01..=0x0f: 0x01 is trie-db's escape header of compact proofs, the rest unused.
        _ => return Err(NodeError::BadHeader(first)),
    })
}

/// Read `count` nibbles of partial key.
fn read_partial(count: usize, r: &mut Reader<'_>) -> Result<Nibbles, NodeError> {
    let bytes = r.take(count.div_ceil(2))?;
    let mut v = Vec::with_capacity(count);
    let pairs = if count % 2 == 1 {
        if bytes[0] >> 4 != 0 {
            return Err(NodeError::BadPadding);
        }
        v.push(bytes[0]);
        &bytes[1..]
    } else {
        bytes
    };
    for b in pairs {
        v.push(b >> 4);
        v.push(b & 0x0f);
    }
    Ok(Nibbles(v))
}

fn read_value<'a>(hashed: bool, r: &mut Reader<'a>) -> Result<NodeValue<'a>, NodeError> {
    if hashed {
        let mut h = [0u8; 32];
        h.copy_from_slice(r.take(32)?);
        Ok(NodeValue::Node(H256(h)))
    } else {
        let len = r.compact()?;
        Ok(NodeValue::Inline(r.take(len)?))
    }
}

fn read_child(r: &mut Reader<'_>) -> Result<ChildRef, NodeError> {
    let len = r.compact()?;
    let bytes = r.take(len.min(33))?;
    match len {
        32 => {
            let mut h = [0u8; 32];
            h.copy_from_slice(bytes);
            Ok(ChildRef::hash(H256(h)))
        }
        1..=31 => Ok(ChildRef::inline(bytes)),
        n => Err(NodeError::BadChild(n)),
    }
}

/// Decode a Substrate node (either layout). Never panics; see the module docs.
pub(crate) fn decode(bytes: &[u8]) -> Result<NodeView<'_>, NodeError> {
    let mut r = Reader::new(bytes);
    let first = r.byte()?;
    if first == EMPTY_NODE {
        r.finish()?;
        return Ok(NodeView::Empty);
    }
    let (kind, bits) = header_kind(first)?;
    let count = read_count(first, bits, &mut r)?;
    let path = read_partial(count, &mut r)?;
    let node = match kind {
        Kind::Leaf { hashed } => NodeView::Leaf { path, value: read_value(hashed, &mut r)? },
        Kind::Branch { value } => {
            let bitmap = u16::from_le_bytes([r.byte()?, r.byte()?]);
            if bitmap == 0 {
                return Err(NodeError::NoChildren);
            }
            let value = match value {
                None => None,
                Some(hashed) => Some(read_value(hashed, &mut r)?),
            };
            let mut children = [ChildRef::EMPTY; 16];
            for (i, c) in children.iter_mut().enumerate() {
                if bitmap & (1 << i) != 0 {
                    *c = read_child(&mut r)?;
                }
            }
            NodeView::Branch { path, children, value }
        }
    };
    r.finish()?;
    Ok(node)
}

/// `Layout` and `NibbledCodec` for a Substrate layout whose value-node threshold is `$min`.
macro_rules! substrate_layout {
    ($layout:ident, $min:expr, $value_node_min:expr) => {
        impl Layout for $layout {
            type Extension = Infallible;
            type Nibbled = $layout;
            const FAMILY: Family<Infallible, $layout> = Family::Substrate($layout);
            const ALLOW_EMPTY_VALUE: bool = true;
            const PROOF_SIZE: ProofSizeRule = ProofSizeRule::ScaleEncoded;

            #[inline]
            fn hash(data: &[u8]) -> H256 {
                blake2_256(data)
            }

            fn empty_root() -> H256 {
                SUBSTRATE_EMPTY_ROOT
            }

            #[inline]
            fn encode_leaf(path: NibbleSlice<'_>, value: &[u8], out: &mut Vec<u8>) {
                encode_leaf(Partial::Slice(path), stored(value, $min), out);
            }

            fn encode_leaf_unpacked(path: &[u8], value: &[u8], out: &mut Vec<u8>) {
                encode_leaf(Partial::Unpacked(path), stored(value, $min), out);
            }

            #[inline]
            fn encode_branch(children: &[ChildRef; 16], value: Option<&[u8]>, out: &mut Vec<u8>) {
                let value = value.map(|v| stored(v, $min));
                encode_branch(Partial::Unpacked(&[]), children, value, out);
            }

            fn decode(bytes: &[u8]) -> Result<NodeView<'_>, NodeError> {
                decode(bytes)
            }

            fn branch_hash_offsets(encoded: &[u8], children: &[ChildRef; 16]) -> [usize; 16] {
                child_hash_offsets(encoded, children)
            }
        }

        impl NibbledCodec for $layout {
            const VALUE_NODE_MIN: Option<usize> = $value_node_min;

            #[inline]
            fn encode_nibbled_branch(
                self,
                path: NibbleSlice<'_>,
                children: &[ChildRef; 16],
                value: Option<&[u8]>,
                out: &mut Vec<u8>,
            ) {
                let value = value.map(|v| stored(v, $min));
                encode_branch(Partial::Slice(path), children, value, out);
            }

            #[inline]
            fn encode_leaf_with(self, path: &[u8], value: NodeValue<'_>, out: &mut Vec<u8>) {
                encode_leaf(Partial::Unpacked(path), value, out);
            }

            #[inline]
            fn encode_branch_with(
                self,
                path: &[u8],
                children: &[ChildRef; 16],
                value: Option<NodeValue<'_>>,
                out: &mut Vec<u8>,
            ) {
                encode_branch(Partial::Unpacked(path), children, value, out);
            }
        }
    };
}

substrate_layout!(SubstrateV0, usize::MAX, None);
substrate_layout!(SubstrateV1, SUBSTRATE_V1_VALUE_NODE_MIN, Some(SUBSTRATE_V1_VALUE_NODE_MIN));

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf<L: Layout>(path: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        L::encode_leaf_unpacked(path, value, &mut out);
        out
    }

    #[test]
    fn single_tuple_vector() {
        // sp-trie `codec_trie_single_tuple`: key 0xaa, value 0xbb.
        let key = [0xaau8];
        let mut out = Vec::new();
        SubstrateV0::encode_leaf(NibbleSlice::new(&key), &[0xbb], &mut out);
        assert_eq!(out, [0x42, 0xaa, 0x04, 0xbb]);
        assert_eq!(leaf::<SubstrateV1>(&[0xa, 0xa], &[0xbb]), out);
    }

    /// `branch_hash_offsets` finds every hashed child's hash in both families' branches,
    /// among inline and empty children, with and without a value and a partial key.
    #[test]
    fn branch_hash_offsets_find_each_hash() {
        /// A branch of `L` over `children`: with the partial key `path` and `value` as held
        /// (Substrate), or with `value`'s bytes and no partial key (Ethereum).
        fn encode<L: Layout>(
            path: &[u8],
            children: &[ChildRef; 16],
            value: Option<NodeValue<'_>>,
        ) -> Vec<u8> {
            let mut enc = Vec::new();
            match L::FAMILY {
                Family::Substrate(s) => s.encode_branch_with(path, children, value, &mut enc),
                Family::Ethereum(_) => {
                    assert!(path.is_empty(), "an Ethereum branch has no partial key");
                    let bytes = value.map(|v| match v {
                        NodeValue::Inline(v) => v,
                        NodeValue::Node(_) => panic!("an Ethereum branch holds its value"),
                    });
                    L::encode_branch(children, bytes, &mut enc);
                }
            }
            enc
        }
        fn check<L: Layout>(path: &[u8], value: Option<NodeValue<'_>>) {
            let mut children = [ChildRef::EMPTY; 16];
            for (i, c) in children.iter_mut().enumerate() {
                *c = match i % 3 {
                    0 => ChildRef::hash(H256([i as u8 + 1; 32])),
                    1 => ChildRef::inline(&[0x41, 0x00, i as u8][..(i % 4).max(2)]),
                    _ => ChildRef::EMPTY,
                };
            }
            let enc = encode::<L>(path, &children, value);
            let offsets = L::branch_hash_offsets(&enc, &children);
            for (i, c) in children.iter().enumerate() {
                if let Some(h) = c.as_hash() {
                    assert_eq!(&enc[offsets[i]..offsets[i] + 32], h.as_bytes(), "child {i}");
                }
            }
        }
        for value in [None, Some(NodeValue::Inline(&[7; 40][..])), Some(NodeValue::Inline(&[]))] {
            check::<crate::EthLayout>(&[], value.filter(|v| v != &NodeValue::Inline(&[])));
            check::<SubstrateV0>(&[], value);
            check::<SubstrateV1>(&[1, 2, 3], value);
        }
        check::<SubstrateV1>(&[4; 70], Some(NodeValue::Node(H256([9; 32]))));
    }

    #[test]
    fn header_continuation_bytes() {
        for (count, expect) in [
            (62usize, vec![0x40 | 62]),
            (63, vec![0x7f, 0]),
            (64, vec![0x7f, 1]),
            (317, vec![0x7f, 254]),
            (318, vec![0x7f, 255, 0]),
            (573, vec![0x7f, 255, 255, 0]),
        ] {
            let mut out = Vec::new();
            write_header(LEAF, count, &mut out);
            assert_eq!(out, expect, "{count}");
            let mut r = Reader::new(&out[1..]);
            assert_eq!(read_count(out[0], 2, &mut r), Ok(count));
            r.finish().unwrap();
        }
        let mut out = Vec::new();
        write_header(BRANCH_HASHED_VALUE, 15, &mut out);
        assert_eq!(out, [0x1f, 0]);
    }

    #[test]
    fn round_trips_every_kind() {
        let big = [7u8; 40];
        let small = [1u8, 2, 3];
        for path in [vec![], vec![5], vec![1, 2], vec![3; 63], vec![4; 319]] {
            for value in [&[][..], &small, &big] {
                for enc in [leaf::<SubstrateV0>(&path, value), leaf::<SubstrateV1>(&path, value)] {
                    let NodeView::Leaf { path: p, value: v } = decode(&enc).unwrap() else {
                        panic!("not a leaf")
                    };
                    assert_eq!(p.as_slice(), path.as_slice());
                    match v {
                        NodeValue::Inline(v) => assert_eq!(v, value),
                        NodeValue::Node(h) => assert_eq!(h, blake2_256(value)),
                    }
                }
            }
        }
        let mut children = [ChildRef::EMPTY; 16];
        children[0] = ChildRef::inline(&leaf::<SubstrateV0>(&[1], b"x"));
        children[15] = ChildRef::hash(H256([9; 32]));
        for value in [None, Some(&small[..]), Some(&big[..]), Some(&[][..])] {
            let mut out = Vec::new();
            SubstrateV1.encode_branch_with(
                &[1, 2, 3],
                &children,
                value.map(|v| stored(v, 33)),
                &mut out,
            );
            let NodeView::Branch { path, children: c, value: v } = decode(&out).unwrap() else {
                panic!("not a branch")
            };
            assert_eq!((path.as_slice(), c), (&[1u8, 2, 3][..], children));
            assert_eq!(v.is_some(), value.is_some());
        }
    }

    #[test]
    fn rejects_garbage() {
        let cases: &[(&[u8], NodeError)] = &[
            (&[], NodeError::Truncated),
            (&[0x00, 0x00], NodeError::TrailingBytes(1)),
            (&[0x01], NodeError::BadHeader(0x01)),
            (&[0x0f], NodeError::BadHeader(0x0f)),
            (&[0x41, 0x1a, 0x00], NodeError::BadPadding),
            (&[0x42, 0xaa, 0x04], NodeError::Truncated),
            (&[0x42, 0xaa, 0x04, 0xbb, 0x00], NodeError::TrailingBytes(1)),
            (&[0x80, 0x00, 0x00], NodeError::NoChildren),
            (&[0x80, 0x01, 0x00, 0x00], NodeError::BadChild(0)),
            (&[0x80, 0x01, 0x00, 0x84, 0], NodeError::Truncated),
            (&[0x7f, 0xff, 0xff], NodeError::Truncated),
            (&[0x42, 0xaa, 0x05, 0x00], NodeError::BadCompact),
        ];
        for (bytes, err) in cases {
            assert_eq!(decode(bytes).as_ref().err(), Some(err), "{bytes:02x?}");
        }
        let mut long_child = vec![0x80, 0x01, 0x00, 33 << 2];
        long_child.extend_from_slice(&[0u8; 33]);
        assert_eq!(decode(&long_child).err(), Some(NodeError::BadChild(33)));
        assert_eq!(decode(&[0x00]), Ok(NodeView::Empty));
    }
}
