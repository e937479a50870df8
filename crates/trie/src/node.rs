//! Node references, decoded nodes and the [`Layout`] seam, which no family's behaviour
//! leaks into.
//!
//! A layout fixes how nodes are encoded and hashed. Everything above this module (builder,
//! mutable trie, update pass, proofs) is written against [`Layout`], so a second commitment
//! scheme is one more impl, not a fork of the algorithms. Each layout belongs to a
//! [`Family`], which says how a run of nibbles shared by every key below a node is held:
//! in an extension node above a plain branch (Ethereum's), or in the branch itself as its
//! partial key, with long values possibly in value nodes (Substrate's). What only one
//! family has, only that family's codec offers ([`ExtensionCodec`], [`NibbledCodec`]), and
//! a layout reaches it through the matching variant of [`Layout::FAMILY`]; the other
//! variant holds an uninhabited type, so a generic algorithm cannot call the other family's
//! encoder. The constants are compile-time, so a generic algorithm's branches on them
//! vanish when it is monomorphised and each layout pays nothing for the others. Ethereum's
//! codec lives in `ethereum`, Substrate's in `substrate`; every layout decodes into the one
//! [`NodeView`].
//!
//! Invariant: a [`ChildRef`] holds either nothing, an inline encoding shorter than
//! [`INLINE_MAX`] + 1 bytes, or a 32-byte hash; its length tells which.

use std::convert::Infallible;

use state::H256;

use crate::nibbles::{NibbleSlice, Nibbles};
use crate::rlp::RlpError;
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

    /// The reference's bytes: the inline encoding, the hash, or nothing.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
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
    /// A value stored by hash (a value node) in a layout whose family holds every value
    /// inline.
    #[error("value node in a layout without value nodes")]
    ValueNode,
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

/// A value as a leaf or branch holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeValue<'a> {
    /// The value itself.
    Inline(&'a [u8]),
    /// The hash of a separate value node (Substrate V1, values of 33 bytes or more).
    Node(H256),
}

/// A decoded node of any layout, borrowing from its encoding.
// Decoded nodes are short-lived stack values; boxing the branch would allocate per decode.
// Exhaustive on purpose: walkers (proof checks, stateless replay) must reach every child of
// every node kind, so a layout with another kind has to break their matches at compile time.
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

/// A layout's family: how a run of nibbles that every key below a node shares is held, and
/// with it the codec only that family has. [`Layout::FAMILY`] holds the layout's codec in
/// its variant and an uninhabited type ([`Infallible`]) in the other, so matching on it is
/// how a generic algorithm reaches a family's encoder, and the other family's cannot be
/// called. Without type arguments ([`Family::name`]) it only names the family.
// Exhaustive on purpose: an algorithm that branches on the family must handle each one,
// and a new family has to break those matches at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family<E = (), S = ()> {
    /// Ethereum's: extension nodes over plain branches, every value inline.
    Ethereum(E),
    /// Substrate's: branches that carry their own partial key (no extension nodes), values
    /// inline or (from a threshold on) in value nodes referenced by hash.
    Substrate(S),
}

impl<E, S> Family<E, S> {
    /// True in the family with extension nodes.
    #[inline]
    pub const fn has_extensions(&self) -> bool {
        matches!(self, Family::Ethereum(_))
    }

    /// The family without its codec.
    #[inline]
    pub const fn name(&self) -> Family {
        match self {
            Family::Ethereum(_) => Family::Ethereum(()),
            Family::Substrate(_) => Family::Substrate(()),
        }
    }
}

impl<E, S: NibbledCodec> Family<E, S> {
    /// Values of at least this many bytes are stored as value nodes, referenced by their
    /// hash ([`NibbledCodec::VALUE_NODE_MIN`]); `None`: every value is inline.
    #[inline]
    pub fn value_node_min(&self) -> Option<usize> {
        match self {
            Family::Ethereum(_) => None,
            Family::Substrate(_) => S::VALUE_NODE_MIN,
        }
    }
}

/// The encoder of extension nodes, which only [`Family::Ethereum`] layouts have.
pub trait ExtensionCodec: Copy + Send + Sync + 'static {
    /// Encode an extension over `path` to `child` (a branch).
    fn encode_extension(self, path: NibbleSlice<'_>, child: &ChildRef, out: &mut Vec<u8>);
    /// Encode an extension from an unpacked path.
    fn encode_extension_unpacked(self, path: &[u8], child: &ChildRef, out: &mut Vec<u8>);
}

/// The encoder of branches that carry a partial key and of values held by hash, which only
/// [`Family::Substrate`] layouts have.
pub trait NibbledCodec: Copy + Send + Sync + 'static {
    /// Values of at least this many bytes are stored as separate value nodes and referenced
    /// by their hash (Substrate V1: 33); `None`: every new value is inline.
    const VALUE_NODE_MIN: Option<usize>;

    /// Encode a branch that carries the partial key `path`, with a new value in the
    /// layout's form.
    fn encode_nibbled_branch(
        self,
        path: NibbleSlice<'_>,
        children: &[ChildRef; 16],
        value: Option<&[u8]>,
        out: &mut Vec<u8>,
    );

    /// Encode a leaf from an unpacked path with its value as the node holds it: inline, or
    /// by the value node's hash, whatever the threshold would choose for a new value (a
    /// node written before a layout change keeps its form).
    fn encode_leaf_with(self, path: &[u8], value: NodeValue<'_>, out: &mut Vec<u8>);

    /// Encode a branch carrying the unpacked partial key `path` (possibly empty) with its
    /// value as the node holds it (see [`NibbledCodec::encode_leaf_with`]).
    fn encode_branch_with(
        self,
        path: &[u8],
        children: &[ChildRef; 16],
        value: Option<NodeValue<'_>>,
        out: &mut Vec<u8>,
    );
}

/// The other family's codec in a layout: no value of it exists.
impl ExtensionCodec for Infallible {
    fn encode_extension(self, _: NibbleSlice<'_>, _: &ChildRef, _: &mut Vec<u8>) {
        match self {}
    }

    fn encode_extension_unpacked(self, _: &[u8], _: &ChildRef, _: &mut Vec<u8>) {
        match self {}
    }
}

/// The other family's codec in a layout: no value of it exists.
impl NibbledCodec for Infallible {
    const VALUE_NODE_MIN: Option<usize> = None;

    fn encode_nibbled_branch(
        self,
        _: NibbleSlice<'_>,
        _: &[ChildRef; 16],
        _: Option<&[u8]>,
        _: &mut Vec<u8>,
    ) {
        match self {}
    }

    fn encode_leaf_with(self, _: &[u8], _: NodeValue<'_>, _: &mut Vec<u8>) {
        match self {}
    }

    fn encode_branch_with(
        self,
        _: &[u8],
        _: &[ChildRef; 16],
        _: Option<NodeValue<'_>>,
        _: &mut Vec<u8>,
    ) {
        match self {}
    }
}

/// The commitment scheme: node encoding and hashing, in a way every family has; what one
/// family alone has is its [`Family`]'s codec. Nothing here has a default that belongs to
/// one family.
pub trait Layout: Send + Sync + 'static {
    /// The extension-node codec ([`Family::Ethereum`] layouts), else [`Infallible`].
    type Extension: ExtensionCodec;
    /// The nibbled-branch codec ([`Family::Substrate`] layouts), else [`Infallible`].
    type Nibbled: NibbledCodec;
    /// The layout's family, holding its codec.
    const FAMILY: Family<Self::Extension, Self::Nibbled>;
    /// True when an empty value is a value (Substrate); false when it means "absent"
    /// (Ethereum), so that builders skip it.
    const ALLOW_EMPTY_VALUE: bool;
    /// How the size of a witness (a storage proof) is counted.
    const PROOF_SIZE: ProofSizeRule;

    /// Hash a node encoding.
    fn hash(data: &[u8]) -> H256;
    /// The root of the empty trie.
    fn empty_root() -> H256;
    /// Encode a leaf whose remaining key is `path`, with a new value in the layout's form.
    fn encode_leaf(path: NibbleSlice<'_>, value: &[u8], out: &mut Vec<u8>);
    /// Encode a leaf from an unpacked path, with a new value in the layout's form.
    fn encode_leaf_unpacked(path: &[u8], value: &[u8], out: &mut Vec<u8>);
    /// Encode a branch without a partial key, with a new value in the layout's form.
    fn encode_branch(children: &[ChildRef; 16], value: Option<&[u8]>, out: &mut Vec<u8>);
    /// Decode a node of any kind this layout has; never panics on hostile bytes.
    fn decode(bytes: &[u8]) -> Result<NodeView<'_>, NodeError>;
    /// Where each hashed child's 32 hash bytes sit in `encoded`, a branch this layout
    /// encoded over `children` (with any partial key and value): `offsets[i]` for every `i`
    /// whose child is a hash; the other entries are unspecified. How a caller fills a hash
    /// into a branch it encoded before the child's hash was known.
    fn branch_hash_offsets(encoded: &[u8], children: &[ChildRef; 16]) -> [usize; 16];

    /// Hash each of `msgs` into the matching slot of `out` (same length). The default
    /// hashes one at a time; a layout with a multi-lane hash overrides it.
    fn hash_many(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
        debug_assert_eq!(msgs.len(), out.len());
        for (m, o) in msgs.iter().zip(out.iter_mut()) {
            *o = Self::hash(m).0;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethereum::EthLayout;
    use crate::substrate::{SubstrateV0, SubstrateV1};

    #[test]
    fn each_layout_names_its_family() {
        assert_eq!(EthLayout::FAMILY.name(), Family::Ethereum(()));
        assert_eq!(SubstrateV0::FAMILY.name(), Family::Substrate(()));
        assert_eq!(SubstrateV1::FAMILY.name(), Family::Substrate(()));
        assert!(EthLayout::FAMILY.has_extensions() && !SubstrateV1::FAMILY.has_extensions());
        assert_eq!(EthLayout::FAMILY.value_node_min(), None);
        assert_eq!(SubstrateV0::FAMILY.value_node_min(), None);
        assert_eq!(SubstrateV1::FAMILY.value_node_min(), Some(33));
    }
}
