//! Node references, the [`Layout`] seam and the Ethereum node codec.
//!
//! A layout fixes how nodes are encoded and hashed. Everything above this module (builder,
//! mutable trie, proofs) is written against [`Layout`], so a second commitment scheme is
//! one more impl, not a fork of the algorithms. The seam's associated constants say how a
//! layout's trie is shaped (extension nodes or branches with partial keys, empty values,
//! values stored out of line, how a proof's size is counted); they are compile-time
//! constants, so a generic algorithm's branches on them vanish when it is monomorphised and
//! the Ethereum path pays nothing for the others. Substrate's layouts live in `substrate`.
//!
//! Two decoded shapes: [`DecodedNode`] is Ethereum's (extension nodes, inline values), kept
//! for the callers written against it; [`NodeView`] is any layout's, with a branch's
//! partial key and values stored by hash.
//!
//! Invariant: a [`ChildRef`] holds either nothing, an inline encoding shorter than
//! [`INLINE_MAX`] + 1 bytes, or a 32-byte hash; its length tells which.

use state::H256;

use crate::hash::{keccak256, EMPTY_ROOT};
use crate::nibbles::{NibbleSlice, Nibbles};
use crate::rlp::{self, RlpError, RlpItem, RlpListIter};
use crate::scale::{compact_len, ScaleError};

/// Longest node encoding that is inlined in its parent instead of hashed.
pub const INLINE_MAX: usize = 31;

/// How a parent refers to a child: empty, an inline encoding, or a hash.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ChildRef {
    len: u8,
    buf: [u8; 32],
}

impl Default for ChildRef {
    fn default() -> Self {
        ChildRef::EMPTY
    }
}

impl std::fmt::Debug for ChildRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind() {
            ChildKind::Empty => write!(f, "Empty"),
            ChildKind::Inline(b) => write!(f, "Inline(0x{})", hex::encode(b)),
            ChildKind::Hash(h) => write!(f, "Hash({h})"),
        }
    }
}

/// A borrowed view of a [`ChildRef`].
// Exhaustive on purpose: by `ChildRef`'s invariant a reference is empty, inline or a hash,
// and walkers must not skip a new kind of child through a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildKind<'a> {
    /// No child.
    Empty,
    /// The child's full encoding (shorter than 32 bytes).
    Inline(&'a [u8]),
    /// The child's hash.
    Hash(H256),
}

impl ChildRef {
    /// No child.
    pub const EMPTY: ChildRef = ChildRef { len: 0, buf: [0u8; 32] };

    /// A hash reference.
    #[inline]
    pub fn hash(h: H256) -> Self {
        ChildRef { len: 32, buf: h.0 }
    }

    /// An inline reference; `bytes` must be a node encoding of at most [`INLINE_MAX`] bytes.
    #[inline]
    pub(crate) fn inline(bytes: &[u8]) -> Self {
        assert!(
            !bytes.is_empty() && bytes.len() <= INLINE_MAX,
            "inline node of {} bytes",
            bytes.len()
        );
        let mut buf = [0u8; 32];
        buf[..bytes.len()].copy_from_slice(bytes);
        ChildRef { len: bytes.len() as u8, buf }
    }

    /// True for no child.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The hash, if this is a hash reference.
    #[inline]
    pub fn as_hash(&self) -> Option<H256> {
        (self.len == 32).then_some(H256(self.buf))
    }

    /// Borrowed view.
    #[inline]
    pub fn kind(&self) -> ChildKind<'_> {
        match self.len {
            0 => ChildKind::Empty,
            32 => ChildKind::Hash(H256(self.buf)),
            n => ChildKind::Inline(&self.buf[..n as usize]),
        }
    }

    /// Bytes this reference occupies inside its parent's encoding.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        match self.len {
            0 => 1,
            32 => 33,
            n => n as usize,
        }
    }

    /// Append this reference as it appears inside a parent.
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>) {
        match self.len {
            0 => out.push(0x80),
            32 => {
                out.push(0xa0);
                out.extend_from_slice(&self.buf);
            }
            n => out.extend_from_slice(&self.buf[..n as usize]),
        }
    }
}

/// Why bytes are not a valid node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The bytes are not valid RLP.
    #[error("node is not valid RLP: {0}")]
    Rlp(#[from] RlpError),
    /// A list with a number of items that is neither 2 nor 17.
    #[error("node is a list of {0} items (expected 2 or 17)")]
    ItemCount(usize),
    /// The node is an RLP string, not a list.
    #[error("node is an RLP string, not a list")]
    NotAList,
    /// A bad hex-prefix path.
    #[error("invalid hex-prefix path encoding")]
    BadPath,
    /// A child reference that is neither empty, a 32-byte hash nor an inline list.
    #[error("invalid child reference of {0} bytes")]
    BadChild(usize),
    /// An inline child whose encoding is 32 bytes or longer.
    #[error("inline child of {0} bytes (must be shorter than 32)")]
    InlineTooLong(usize),
    /// An extension with an empty path or a child that is empty.
    #[error("malformed extension node")]
    BadExtension,
    /// A leaf or extension path that is empty where it must not be.
    #[error("malformed leaf node")]
    BadLeaf,
    /// The node ends before its header, partial key, bitmap, value or children do.
    #[error("node is truncated")]
    Truncated,
    /// A first byte that starts no Substrate node kind.
    #[error("invalid node header byte 0x{0:02x}")]
    BadHeader(u8),
    /// An odd-length partial key whose padding nibble (the first byte's high half) is not 0.
    #[error("partial key has a non-zero padding nibble")]
    BadPadding,
    /// A Substrate branch whose children bitmap is empty.
    #[error("branch node without children")]
    NoChildren,
    /// A SCALE compact length in a non-canonical or over-long form.
    #[error("non-canonical SCALE compact length")]
    BadCompact,
    /// Bytes left over after the node's last field.
    #[error("{0} trailing byte(s) after the node")]
    TrailingBytes(usize),
    /// A valid node of a kind Ethereum's shape ([`DecodedNode`]) cannot hold: a branch with
    /// a partial key or a value stored by hash. [`Layout::decode_node`] decodes it.
    #[error("node has no extension-layout form (decode it with Layout::decode_node)")]
    Unrepresentable,
}

impl From<ScaleError> for NodeError {
    fn from(e: ScaleError) -> Self {
        match e {
            ScaleError::Truncated => NodeError::Truncated,
            ScaleError::BadCompact => NodeError::BadCompact,
            ScaleError::Trailing(n) => NodeError::TrailingBytes(n),
        }
    }
}

/// A decoded node borrowing from its encoding.
// Decoded nodes are short-lived stack values; boxing the branch would allocate per decode.
// Exhaustive on purpose: walkers (proof checks, stateless replay) must reach every child of
// every node kind, so a layout with another kind has to break their matches at compile time.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodedNode<'a> {
    /// The empty node (`0x80`).
    Empty,
    /// A leaf: the rest of the key and the value.
    Leaf {
        /// Remaining key nibbles.
        path: Nibbles,
        /// The value.
        value: &'a [u8],
    },
    /// An extension: shared nibbles and the child below them.
    Extension {
        /// Shared nibbles (never empty).
        path: Nibbles,
        /// The child (a branch).
        child: ChildRef,
    },
    /// A branch: 16 children and an optional value.
    Branch {
        /// Children by nibble.
        children: [ChildRef; 16],
        /// The value stored at this path, if any.
        value: Option<&'a [u8]>,
    },
}

/// A value as a leaf or branch holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeValue<'a> {
    /// The value itself.
    Inline(&'a [u8]),
    /// The hash of a separate value node (Substrate V1, values of 33 bytes or more).
    Node(H256),
}

/// A decoded node of any layout, borrowing from its encoding.
// Exhaustive on purpose, like `DecodedNode`. Boxing the branch would allocate per decode.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeView<'a> {
    /// The empty node (the empty trie's root).
    Empty,
    /// A leaf: the rest of the key and the value.
    Leaf {
        /// Remaining key nibbles.
        path: Nibbles,
        /// The value.
        value: NodeValue<'a>,
    },
    /// An extension (layouts with extensions only): shared nibbles and the branch below.
    Extension {
        /// Shared nibbles (never empty).
        path: Nibbles,
        /// The child (a branch).
        child: ChildRef,
    },
    /// A branch: its partial key (always empty in layouts with extensions), 16 children
    /// and an optional value.
    Branch {
        /// Nibbles between the parent's slot and this branch's children.
        path: Nibbles,
        /// Children by nibble.
        children: [ChildRef; 16],
        /// The value stored at this path, if any.
        value: Option<NodeValue<'a>>,
    },
}

impl<'a> From<DecodedNode<'a>> for NodeView<'a> {
    fn from(node: DecodedNode<'a>) -> Self {
        match node {
            DecodedNode::Empty => NodeView::Empty,
            DecodedNode::Leaf { path, value } => {
                NodeView::Leaf { path, value: NodeValue::Inline(value) }
            }
            DecodedNode::Extension { path, child } => NodeView::Extension { path, child },
            DecodedNode::Branch { children, value } => NodeView::Branch {
                path: Nibbles::default(),
                children,
                value: value.map(NodeValue::Inline),
            },
        }
    }
}

/// How a witness's size is counted (see [`crate::Recorder`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProofSizeRule {
    /// The sum of the nodes' encoded lengths.
    #[default]
    EncodedBytes,
    /// The sum of their SCALE encodings as a `Vec<u8>` (compact length, then the bytes), as
    /// a Substrate parachain's proof recorder counts a storage proof.
    ScaleEncoded,
}

impl ProofSizeRule {
    /// The size one node or value of `len` bytes adds to a proof.
    #[inline]
    pub fn item_size(self, len: usize) -> usize {
        match self {
            ProofSizeRule::EncodedBytes => len,
            ProofSizeRule::ScaleEncoded => compact_len(len) + len,
        }
    }
}

/// The commitment scheme: node encoding and hashing.
///
/// The constants have Ethereum's values by default; the methods that only one family uses
/// have defaults that refuse the other family's calls (with an `assert!`: calling them is a
/// bug in the algorithm, never a consequence of input bytes).
pub trait Layout: Send + Sync + 'static {
    /// True when the trie has extension nodes (Ethereum); false when a branch carries its
    /// own partial key instead (Substrate's "nibbled branch").
    const USES_EXTENSION: bool = true;
    /// True when an empty value is a value (Substrate); false when it means "absent"
    /// (Ethereum), so that builders skip it.
    const ALLOW_EMPTY_VALUE: bool = false;
    /// Values of at least this many bytes are stored as separate value nodes and referenced
    /// by their hash (Substrate V1: 33); `None`: every value is inline.
    const VALUE_NODE_MIN: Option<usize> = None;
    /// How the size of a witness (a storage proof) is counted.
    const PROOF_SIZE: ProofSizeRule = ProofSizeRule::EncodedBytes;

    /// Hash a node encoding.
    fn hash(data: &[u8]) -> H256;
    /// The root of the empty trie.
    fn empty_root() -> H256;
    /// Encode a leaf whose remaining key is `path`.
    fn encode_leaf(path: NibbleSlice<'_>, value: &[u8], out: &mut Vec<u8>);
    /// Encode a leaf from an unpacked path.
    fn encode_leaf_unpacked(path: &[u8], value: &[u8], out: &mut Vec<u8>);
    /// Encode an extension.
    fn encode_extension(path: NibbleSlice<'_>, child: &ChildRef, out: &mut Vec<u8>);
    /// Encode an extension from an unpacked path.
    fn encode_extension_unpacked(path: &[u8], child: &ChildRef, out: &mut Vec<u8>);
    /// Encode a branch.
    fn encode_branch(children: &[ChildRef; 16], value: Option<&[u8]>, out: &mut Vec<u8>);
    /// Decode a node into Ethereum's shape; never panics on hostile bytes. A layout without
    /// extensions returns [`NodeError::Unrepresentable`] for nodes that shape cannot hold.
    fn decode(bytes: &[u8]) -> Result<DecodedNode<'_>, NodeError>;

    /// Encode a branch that carries the partial key `path` (layouts without extensions).
    /// The default, for layouts with extensions, takes only an empty `path`.
    #[inline]
    fn encode_nibbled_branch(
        path: NibbleSlice<'_>,
        children: &[ChildRef; 16],
        value: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) {
        assert!(path.is_empty(), "a layout with extension nodes has no branch partial keys");
        Self::encode_branch(children, value, out);
    }

    /// Encode a leaf from an unpacked path with its value as the node holds it: inline,
    /// or (layouts with value nodes) by the value node's hash, whatever the layout's
    /// threshold would choose for new values (a node written before a layout change keeps
    /// its form). The default, for layouts without value nodes, takes inline values only.
    #[inline]
    fn encode_leaf_with(path: &[u8], value: NodeValue<'_>, out: &mut Vec<u8>) {
        match value {
            NodeValue::Inline(v) => Self::encode_leaf_unpacked(path, v, out),
            NodeValue::Node(_) => panic!("a layout without value nodes holds no hashed value"),
        }
    }

    /// Encode a branch carrying the unpacked partial key `path` (empty in layouts with
    /// extensions) with its value as the node holds it (see [`Layout::encode_leaf_with`]).
    #[inline]
    fn encode_branch_with(
        path: &[u8],
        children: &[ChildRef; 16],
        value: Option<NodeValue<'_>>,
        out: &mut Vec<u8>,
    ) {
        assert!(path.is_empty(), "a layout with extension nodes has no branch partial keys");
        match value {
            None => Self::encode_branch(children, None, out),
            Some(NodeValue::Inline(v)) => Self::encode_branch(children, Some(v), out),
            Some(NodeValue::Node(_)) => {
                panic!("a layout without value nodes holds no hashed value")
            }
        }
    }

    /// Decode a node of any kind this layout has; never panics on hostile bytes.
    fn decode_node(bytes: &[u8]) -> Result<NodeView<'_>, NodeError> {
        Self::decode(bytes).map(NodeView::from)
    }

    /// Hash each of `msgs` into the matching slot of `out` (same length). The default
    /// hashes one at a time; a layout with a multi-lane hash overrides it.
    fn hash_many(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
        debug_assert_eq!(msgs.len(), out.len());
        for (m, o) in msgs.iter().zip(out.iter_mut()) {
            *o = Self::hash(m).0;
        }
    }

    /// Where each hashed child's 32 hash bytes sit in `encoded`, a branch this layout
    /// encoded over `children` (with any partial key and value): `offsets[i]` for every `i`
    /// whose child is a hash; the other entries are unspecified. How a caller fills a hash
    /// into a branch it encoded before the child's hash was known.
    fn branch_hash_offsets(encoded: &[u8], children: &[ChildRef; 16]) -> [usize; 16] {
        // An RLP list of the 16 children, then the value.
        let first = encoded.first().copied().unwrap_or(0xc0);
        let mut at = if first <= 0xf7 { 1 } else { 1 + usize::from(first - 0xf7) };
        let mut offsets = [0; 16];
        for (o, c) in offsets.iter_mut().zip(children) {
            *o = at + 1;
            at += c.encoded_len();
        }
        offsets
    }

    /// Reference to a node by its encoding: inline when short, else its hash.
    #[inline]
    fn child_ref(encoded: &[u8]) -> ChildRef {
        if encoded.len() <= INLINE_MAX {
            ChildRef::inline(encoded)
        } else {
            ChildRef::hash(Self::hash(encoded))
        }
    }
}

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

impl Layout for EthLayout {
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
    fn encode_extension(path: NibbleSlice<'_>, child: &ChildRef, out: &mut Vec<u8>) {
        let hp_len = path.hp_len();
        rlp::write_list_header(out, pair_payload_len(hp_len, child.encoded_len()));
        write_hp_string(out, hp_len, |o| path.write_hp(false, o));
        child.write(out);
    }

    fn encode_extension_unpacked(path: &[u8], child: &ChildRef, out: &mut Vec<u8>) {
        let hp_len = path.len() / 2 + 1;
        rlp::write_list_header(out, pair_payload_len(hp_len, child.encoded_len()));
        write_hp_string(out, hp_len, |o| Nibbles::write_hp_of(path, false, o));
        child.write(out);
    }

    #[inline]
    fn encode_branch(children: &[ChildRef; 16], value: Option<&[u8]>, out: &mut Vec<u8>) {
        let mut payload = value.map_or(1, rlp::string_len);
        for c in children {
            payload += c.encoded_len();
        }
        rlp::write_list_header(out, payload);
        for c in children {
            c.write(out);
        }
        match value {
            Some(v) => rlp::write_string(out, v),
            None => out.push(0x80),
        }
    }

    fn decode(bytes: &[u8]) -> Result<DecodedNode<'_>, NodeError> {
        match hashed_branch(bytes) {
            Some(children) => Ok(DecodedNode::Branch { children, value: None }),
            None => decode_rlp(bytes),
        }
    }
}

/// Any Ethereum node, by the general RLP walk.
fn decode_rlp(bytes: &[u8]) -> Result<DecodedNode<'_>, NodeError> {
    let payload = match RlpItem::decode_exact(bytes)? {
        RlpItem::String([]) => return Ok(DecodedNode::Empty),
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
                Ok(DecodedNode::Leaf { path, value: items[1].string()? })
            } else {
                let child = decode_child(items[1])?;
                if path.is_empty() || child.is_empty() {
                    return Err(NodeError::BadExtension);
                }
                Ok(DecodedNode::Extension { path, child })
            }
        }
        17 => {
            let mut children = [ChildRef::EMPTY; 16];
            for (slot, item) in children.iter_mut().zip(items.iter()) {
                *slot = decode_child(*item)?;
            }
            let v = items[16].string()?;
            Ok(DecodedNode::Branch { children, value: (!v.is_empty()).then_some(v) })
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
            DecodedNode::Leaf { path, value } => {
                assert_eq!(path.as_slice(), &[2, 3, 4]);
                assert_eq!(value, b"dog");
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
            DecodedNode::Branch { children: c, value } => {
                assert_eq!(c, children);
                assert_eq!(value, Some(&b"value"[..]));
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
        assert_eq!(EthLayout::decode(&[0x80]).unwrap(), DecodedNode::Empty);
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
                    proptest::prop_assert_eq!(
                        general,
                        Ok(DecodedNode::Branch { children, value: None })
                    );
                }
                None => proptest::prop_assert_eq!(EthLayout::decode(&bytes), decode_rlp(&bytes)),
            }
        }
    }
}
