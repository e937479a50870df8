//! Ethereum's layout ([`EthLayout`]): keccak256, RLP, hex-prefix paths, extension nodes,
//! every value inline, an empty value meaning absent.
//!
//! A leaf or extension is an RLP list of its hex-prefix path and its value or child; a
//! branch is a list of its 16 children and its value (`0x80` for none). A child is `0x80`
//! (none), `0xa0` and its 32-byte hash, or its encoding itself when shorter than 32 bytes
//! (inline). The decoder is strict (canonical RLP, 2 or 17 items, a valid path, children
//! that are empty, hashes or inline lists of under 32 bytes) and never panics; the most
//! common branch (hashed or empty children, no value) is read by a fast path that gives
//! the same node as the general one (tested).

use std::convert::Infallible;

use state::H256;

use crate::hash::{keccak256, EMPTY_ROOT};
use crate::nibbles::{NibbleSlice, Nibbles};
use crate::node::{
    ChildRef, ExtensionCodec, Family, Layout, NodeError, NodeValue, NodeView, ProofSizeRule,
    INLINE_MAX,
};
use crate::rlp::{self, RlpItem, RlpListIter};

/// Ethereum's Merkle-Patricia trie: keccak256, RLP, hex-prefix paths.
#[derive(Debug, Clone, Copy, Default)]
pub struct EthLayout;

#[inline]
fn pair_payload_len(hp_len: usize, second_len: usize) -> usize {
    let hp = if hp_len == 1 { 1 } else { rlp::header_len(hp_len) + hp_len };
    // A one-byte hp of value < 0x80 encodes as itself; flags 0x00-0x3f always are.
    hp + second_len
}

#[inline]
fn write_hp_string(out: &mut Vec<u8>, hp_len: usize, write: impl FnOnce(&mut Vec<u8>)) {
    if hp_len != 1 {
        rlp::write_string_header(out, hp_len);
    }
    write(out);
}

/// Bytes a child reference occupies inside its parent's encoding.
#[inline]
fn child_len(c: &ChildRef) -> usize {
    match c.as_slice().len() {
        0 => 1,
        32 => 33,
        n => n,
    }
}

/// Append a child reference as it appears inside its parent.
#[inline]
fn write_child(c: &ChildRef, out: &mut Vec<u8>) {
    let bytes = c.as_slice();
    match bytes.len() {
        0 => out.push(0x80),
        32 => {
            out.push(0xa0);
            out.extend_from_slice(bytes);
        }
        _ => out.extend_from_slice(bytes),
    }
}

impl Layout for EthLayout {
    type Extension = Self;
    type Nibbled = Infallible;
    const FAMILY: Family<EthLayout, Infallible> = Family::Ethereum(EthLayout);
    const ALLOW_EMPTY_VALUE: bool = false;
    const PROOF_SIZE: ProofSizeRule = ProofSizeRule::EncodedBytes;

    #[inline]
    fn hash(data: &[u8]) -> H256 {
        keccak256(data)
    }

    /// Eight messages at a time where the CPU has AVX-512 ([`keccak8`]).
    fn hash_many(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
        keccak8::keccak256_many(msgs, out);
    }

    fn empty_root() -> H256 {
        EMPTY_ROOT
    }

    #[inline]
    fn encode_leaf(path: NibbleSlice<'_>, value: &[u8], out: &mut Vec<u8>) {
        let hp_len = path.hp_len();
        rlp::write_list_header(out, pair_payload_len(hp_len, rlp::string_len(value)));
        write_hp_string(out, hp_len, |o| path.write_hp(true, o));
        rlp::write_string(out, value);
    }

    fn encode_leaf_unpacked(path: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let hp_len = path.len() / 2 + 1;
        rlp::write_list_header(out, pair_payload_len(hp_len, rlp::string_len(value)));
        write_hp_string(out, hp_len, |o| Nibbles::write_hp_of(path, true, o));
        rlp::write_string(out, value);
    }

    #[inline]
    fn encode_branch(children: &[ChildRef; 16], value: Option<&[u8]>, out: &mut Vec<u8>) {
        let mut payload = value.map_or(1, rlp::string_len);
        for c in children {
            payload += child_len(c);
        }
        rlp::write_list_header(out, payload);
        for c in children {
            write_child(c, out);
        }
        match value {
            Some(v) => rlp::write_string(out, v),
            None => out.push(0x80),
        }
    }

    fn decode(bytes: &[u8]) -> Result<NodeView<'_>, NodeError> {
        match hashed_branch(bytes) {
            Some(children) => {
                Ok(NodeView::Branch { path: Nibbles::default(), children, value: None })
            }
            None => decode_rlp(bytes),
        }
    }

    fn branch_hash_offsets(encoded: &[u8], children: &[ChildRef; 16]) -> [usize; 16] {
        // An RLP list of the 16 children, then the value.
        let first = encoded.first().copied().unwrap_or(0xc0);
        let mut at = if first <= 0xf7 { 1 } else { 1 + usize::from(first - 0xf7) };
        let mut offsets = [0; 16];
        for (o, c) in offsets.iter_mut().zip(children) {
            *o = at + 1;
            at += child_len(c);
        }
        offsets
    }
}

impl ExtensionCodec for EthLayout {
    #[inline]
    fn encode_extension(self, path: NibbleSlice<'_>, child: &ChildRef, out: &mut Vec<u8>) {
        let hp_len = path.hp_len();
        rlp::write_list_header(out, pair_payload_len(hp_len, child_len(child)));
        write_hp_string(out, hp_len, |o| path.write_hp(false, o));
        write_child(child, out);
    }

    fn encode_extension_unpacked(self, path: &[u8], child: &ChildRef, out: &mut Vec<u8>) {
        let hp_len = path.len() / 2 + 1;
        rlp::write_list_header(out, pair_payload_len(hp_len, child_len(child)));
        write_hp_string(out, hp_len, |o| Nibbles::write_hp_of(path, false, o));
        write_child(child, out);
    }
}

/// Any Ethereum node, by the general RLP walk.
fn decode_rlp(bytes: &[u8]) -> Result<NodeView<'_>, NodeError> {
    let payload = match RlpItem::decode_exact(bytes)? {
        RlpItem::String([]) => return Ok(NodeView::Empty),
        RlpItem::String(_) => return Err(NodeError::NotAList),
        RlpItem::List(p) => p,
    };
    let mut items: [RlpItem<'_>; 17] = [RlpItem::String(&[]); 17];
    let mut count = 0;
    for item in RlpListIter::new(payload) {
        let item = item?;
        if count == 17 {
            return Err(NodeError::ItemCount(18));
        }
        items[count] = item;
        count += 1;
    }
    match count {
        2 => {
            let hp = items[0].string()?;
            let (path, leaf) = Nibbles::from_hp(hp).ok_or(NodeError::BadPath)?;
            if leaf {
                Ok(NodeView::Leaf { path, value: NodeValue::Inline(items[1].string()?) })
            } else {
                let child = decode_child(items[1])?;
                if path.is_empty() || child.is_empty() {
                    return Err(NodeError::BadExtension);
                }
                Ok(NodeView::Extension { path, child })
            }
        }
        17 => {
            let mut children = [ChildRef::EMPTY; 16];
            for (slot, item) in children.iter_mut().zip(items.iter()) {
                *slot = decode_child(*item)?;
            }
            let v = items[16].string()?;
            let value = (!v.is_empty()).then_some(NodeValue::Inline(v));
            Ok(NodeView::Branch { path: Nibbles::default(), children, value })
        }
        n => Err(NodeError::ItemCount(n)),
    }
}

/// The children of the most common Ethereum branch, read without the general RLP walk: a
/// list (canonical 1- or 2-byte length) of 16 children that are each empty or a 32-byte
/// hash, then an empty value, and nothing after it. `None` for anything else, which the
/// general decoder then reads (or rejects); on the bytes it accepts, both give the same
/// branch (tested).
fn hashed_branch(bytes: &[u8]) -> Option<[ChildRef; 16]> {
    let (header, payload) = match *bytes {
        [0xf8, len, ..] if len >= 56 => (2, usize::from(len)),
        [0xf9, hi, lo, ..] if hi != 0 => (3, usize::from(u16::from_be_bytes([hi, lo]))),
        _ => return None,
    };
    if header + payload != bytes.len() {
        return None;
    }
    let mut children = [ChildRef::EMPTY; 16];
    let mut at = header;
    for child in &mut children {
        match bytes.get(at)? {
            0x80 => at += 1,
            0xa0 => {
                let hash: [u8; 32] = bytes.get(at + 1..at + 33)?.try_into().ok()?;
                *child = ChildRef::hash(H256(hash));
                at += 33;
            }
            _ => return None,
        }
    }
    (bytes.get(at) == Some(&0x80) && at + 1 == bytes.len()).then_some(children)
}

fn decode_child(item: RlpItem<'_>) -> Result<ChildRef, NodeError> {
    match item {
        RlpItem::String([]) => Ok(ChildRef::EMPTY),
        RlpItem::String(s) if s.len() == 32 => {
            Ok(ChildRef::hash(H256(s.try_into().expect("32 bytes"))))
        }
        RlpItem::String(s) => Err(NodeError::BadChild(s.len())),
        RlpItem::List(p) => {
            let len = rlp::header_len(p.len()) + p.len();
            if len > INLINE_MAX {
                return Err(NodeError::InlineTooLong(len));
            }
            // Re-create the encoding from the payload: the header is canonical, so this is
            // exactly the bytes that appeared in the parent.
            let mut buf = Vec::with_capacity(len);
            rlp::write_list_header(&mut buf, p.len());
            buf.extend_from_slice(p);
            Ok(ChildRef::inline(&buf))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_round_trip() {
        let key = [0x12u8, 0x34];
        let mut out = Vec::new();
        EthLayout::encode_leaf(NibbleSlice::range(&key, 1, 4), b"dog", &mut out);
        let mut out2 = Vec::new();
        EthLayout::encode_leaf_unpacked(&[2, 3, 4], b"dog", &mut out2);
        assert_eq!(out, out2);
        match EthLayout::decode(&out).unwrap() {
            NodeView::Leaf { path, value } => {
                assert_eq!(path.as_slice(), &[2, 3, 4]);
                assert_eq!(value, NodeValue::Inline(b"dog"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn branch_round_trip() {
        let mut children = [ChildRef::EMPTY; 16];
        children[3] = ChildRef::hash(H256([7u8; 32]));
        let mut leaf = Vec::new();
        EthLayout::encode_leaf_unpacked(&[1], b"x", &mut leaf);
        children[9] = ChildRef::inline(&leaf);
        let mut out = Vec::new();
        EthLayout::encode_branch(&children, Some(b"value"), &mut out);
        match EthLayout::decode(&out).unwrap() {
            NodeView::Branch { path, children: c, value } => {
                assert!(path.is_empty());
                assert_eq!(c, children);
                assert_eq!(value, Some(NodeValue::Inline(&b"value"[..])));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn rejects_garbage() {
        assert!(EthLayout::decode(&[0xc1, 0x80]).is_err());
        assert!(EthLayout::decode(&[0x82, 0x01, 0x02]).is_err());
        assert!(EthLayout::decode(&[]).is_err());
        assert!(EthLayout::decode(&[0xc3, 0x80, 0x81]).is_err());
        assert_eq!(EthLayout::decode(&[0x80]).unwrap(), NodeView::Empty);
    }

    /// A branch of hashed and empty children (`mask` bit `i`: child `i` is a hash) with an
    /// optional value, encoded.
    fn branch_bytes(mask: u16, seed: u8, value: Option<&[u8]>) -> Vec<u8> {
        let children: [ChildRef; 16] = std::array::from_fn(|i| match mask >> i & 1 {
            1 => ChildRef::hash(H256([seed.wrapping_add(i as u8); 32])),
            _ => ChildRef::EMPTY,
        });
        let mut out = Vec::new();
        EthLayout::encode_branch(&children, value, &mut out);
        out
    }

    #[test]
    fn hashed_branches_take_the_fast_path_and_decode_alike() {
        for mask in [0b11u16, 0b1000_0000_0000_0001, 0xffff, 0x0f0f, 0b111] {
            let bytes = branch_bytes(mask, 9, None);
            assert!(hashed_branch(&bytes).is_some(), "mask {mask:#x}: fast path not taken");
            assert_eq!(EthLayout::decode(&bytes), decode_rlp(&bytes), "mask {mask:#x}");
            // A value or an inline child sends it to the general decoder.
            assert!(hashed_branch(&branch_bytes(mask, 9, Some(b"v"))).is_none());
        }
        let mut inline = [ChildRef::EMPTY; 16];
        inline[0] = ChildRef::hash(H256([1; 32]));
        inline[1] = ChildRef::hash(H256([2; 32]));
        inline[2] = ChildRef::inline(&[0xc2, 0x20, 0x01]);
        let mut bytes = Vec::new();
        EthLayout::encode_branch(&inline, None, &mut bytes);
        assert!(hashed_branch(&bytes).is_none());
        assert_eq!(EthLayout::decode(&bytes), decode_rlp(&bytes));
    }

    proptest::proptest! {
        /// Wherever the fast path accepts bytes (valid branches, and the same bytes with
        /// any byte changed, cut or extended), the general decoder reads the same branch;
        /// where it declines, `decode` is the general decoder's answer.
        #[test]
        fn the_fast_branch_decoder_agrees_with_rlp(
            mask in proptest::prelude::any::<u16>(),
            seed in proptest::prelude::any::<u8>(),
            at in proptest::prelude::any::<usize>(),
            byte in proptest::prelude::any::<u8>(),
            edit in 0u8..4,
        ) {
            let mut bytes = branch_bytes(mask, seed, None);
            let i = at % bytes.len();
            match edit {
                0 => bytes[i] = byte,
                1 => bytes.truncate(i),
                2 => bytes.push(byte),
                _ => {}
            }
            match hashed_branch(&bytes) {
                Some(children) => {
                    let general = decode_rlp(&bytes);
                    let path = Nibbles::default();
                    proptest::prop_assert_eq!(
                        general,
                        Ok(NodeView::Branch { path, children, value: None })
                    );
                }
                None => proptest::prop_assert_eq!(EthLayout::decode(&bytes), decode_rlp(&bytes)),
            }
        }
    }
}
