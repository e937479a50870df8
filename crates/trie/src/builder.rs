//! Streaming root builder: the root of a sorted stream of (key, value) pairs.
//!
//! Bottom-up, in one pass: each node is encoded and hashed exactly once, when the stream
//! has moved past its subtree, and only the open branches along the current key's path
//! are held (a stack at most one frame per nibble of key length). Frames are reused, so
//! the steady state allocates nothing. Every finished branch and extension is offered to
//! a [`NodeSink`] with its path, encoding and reference, so a store can persist them.
//!
//! Keys must be strictly ascending. An empty value means "absent" in Ethereum's layout and
//! is skipped; in Substrate's it is a value ([`Layout::ALLOW_EMPTY_VALUE`]).
//! [`parallel_root`] splits a sorted slice on its first nibble and builds the 16 subtrees
//! on the rayon pool; its root equals the serial one.
//!
//! Both layout families share the frame logic. When a frame closes, its node starts one
//! nibble below its parent's branch (or at the builder's depth, for the top node) and its
//! branch sits at the frame's depth; in between, Ethereum puts an extension node above the
//! branch, Substrate writes those nibbles into the branch itself as its partial key. The
//! choice is a `const` of the layout, so each monomorphised builder has only its own path.

use std::marker::PhantomData;

use rayon::prelude::*;
use state::H256;

use crate::nibbles::{common_prefix_nibbles, nibble_at, NibbleSlice};
use crate::node::{ChildRef, ExtensionCodec, Family, Layout, NibbledCodec};

/// Hash work done by a builder or trie.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HashStats {
    /// Number of hash calls.
    pub hashes: u64,
    /// Total bytes hashed.
    pub bytes: u64,
}

impl HashStats {
    /// Sum of two counters.
    pub(crate) fn merged(self, other: HashStats) -> HashStats {
        HashStats { hashes: self.hashes + other.hashes, bytes: self.bytes + other.bytes }
    }
}

/// What kind of interior node a sink receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmittedKind {
    /// A branch node.
    Branch,
    /// An extension node.
    Extension,
    /// A leaf node (only to sinks that ask for leaves, [`NodeSink::LEAVES`]).
    Leaf,
}

/// Receives every branch and extension node the builder finishes.
pub trait NodeSink {
    /// Whether the sink also receives leaves (as [`EmittedKind::Leaf`]). Off by default:
    /// a store keeps leaves in its flat state, not as nodes.
    const LEAVES: bool = false;

    /// `path` is the nibble path from the root to where the node starts (for a Substrate
    /// branch, up to its partial key); `encoded` its encoding; `reference` how its parent
    /// refers to it (hash, or inline when short).
    fn node(
        &mut self,
        kind: EmittedKind,
        path: NibbleSlice<'_>,
        encoded: &[u8],
        reference: &ChildRef,
    );
}

impl<T: NodeSink + ?Sized> NodeSink for &mut T {
    const LEAVES: bool = T::LEAVES;

    #[inline]
    fn node(
        &mut self,
        kind: EmittedKind,
        path: NibbleSlice<'_>,
        encoded: &[u8],
        reference: &ChildRef,
    ) {
        (**self).node(kind, path, encoded, reference);
    }
}

impl NodeSink for () {
    #[inline]
    fn node(&mut self, _: EmittedKind, _: NibbleSlice<'_>, _: &[u8], _: &ChildRef) {}
}

/// A builder input that breaks the ordering contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A key is not strictly greater than the one before it.
    #[error("keys must be strictly ascending: 0x{key} follows 0x{previous}")]
    NotAscending {
        /// The previous key, hex.
        previous: String,
        /// The offending key, hex.
        key: String,
    },
    /// A key does not share the builder's prefix (parallel sub-builders).
    #[error("key 0x{0} lies outside the builder's prefix")]
    OutsidePrefix(String),
}

#[derive(Clone)]
struct Frame {
    depth: usize,
    children: [ChildRef; 16],
    value: Option<Vec<u8>>,
}

/// Builds a root from strictly ascending keys. See the module docs.
pub struct RootBuilder<L: Layout, S: NodeSink = ()> {
    /// Nibbles every key shares (0 for a whole trie); the result is the node at this depth.
    depth0: usize,
    frames: Vec<Frame>,
    open: usize,
    prev_key: Vec<u8>,
    prev_value: Vec<u8>,
    has_prev: bool,
    buf: Vec<u8>,
    /// Reference of the finished top node (valid after the final flush).
    top: ChildRef,
    stats: HashStats,
    leaves: u64,
    sink: S,
    _layout: PhantomData<L>,
}

impl<L: Layout> Default for RootBuilder<L, ()> {
    fn default() -> Self {
        Self::with_sink(())
    }
}

impl<L: Layout> RootBuilder<L, ()> {
    /// A builder for a whole trie.
    pub fn new() -> Self {
        Self::with_sink(())
    }
}

impl<L: Layout, S: NodeSink> RootBuilder<L, S> {
    /// A builder for a whole trie that reports interior nodes to `sink`.
    pub fn with_sink(sink: S) -> Self {
        Self::subtree(0, sink)
    }

    /// A builder for the subtree at nibble depth `depth0`: every key must share its first
    /// `depth0` nibbles; [`RootBuilder::finish_ref`] gives the reference to that subtree.
    pub fn subtree(depth0: usize, sink: S) -> Self {
        RootBuilder {
            depth0,
            frames: Vec::new(),
            open: 0,
            prev_key: Vec::new(),
            prev_value: Vec::new(),
            has_prev: false,
            buf: Vec::with_capacity(600),
            top: ChildRef::EMPTY,
            stats: HashStats::default(),
            leaves: 0,
            sink,
            _layout: PhantomData,
        }
    }

    /// Hash work so far.
    pub fn stats(&self) -> HashStats {
        self.stats
    }

    /// Number of (non-empty) leaves added.
    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    /// Add the next pair. Empty values are skipped unless the layout allows them.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), BuildError> {
        if value.is_empty() && !L::ALLOW_EMPTY_VALUE {
            return Ok(());
        }
        if self.has_prev {
            if key <= self.prev_key.as_slice() {
                return Err(BuildError::NotAscending {
                    previous: hex::encode(&self.prev_key),
                    key: hex::encode(key),
                });
            }
            let c = common_prefix_nibbles(&self.prev_key, key);
            if c < self.depth0 {
                return Err(BuildError::OutsidePrefix(hex::encode(key)));
            }
            self.flush_prev(Some(c));
        } else if key.len() * 2 < self.depth0 {
            return Err(BuildError::OutsidePrefix(hex::encode(key)));
        }
        self.prev_key.clear();
        self.prev_key.extend_from_slice(key);
        self.prev_value.clear();
        self.prev_value.extend_from_slice(value);
        self.has_prev = true;
        self.leaves += 1;
        Ok(())
    }

    /// Finish and return the root hash (depth 0 builders).
    pub fn finish(mut self) -> H256 {
        assert_eq!(self.depth0, 0, "finish() is for whole tries; use finish_ref()");
        let (root, _) = self.finish_inner();
        root
    }

    /// Finish and return the root hash with the sink and hash statistics.
    pub fn finish_with(mut self) -> (H256, S, HashStats) {
        assert_eq!(self.depth0, 0, "finish_with() is for whole tries; use finish_ref()");
        let (root, _) = self.finish_inner();
        (root, self.sink, self.stats)
    }

    /// Finish a subtree builder: the reference its parent holds (empty if no keys).
    pub fn finish_ref(mut self) -> (ChildRef, S, HashStats) {
        let (_, r) = self.finish_inner();
        (r, self.sink, self.stats)
    }

    fn finish_inner(&mut self) -> (H256, ChildRef) {
        if !self.has_prev {
            return (L::empty_root(), ChildRef::EMPTY);
        }
        self.flush_prev(None);
        self.has_prev = false;
        // flush_prev(None) leaves the top node's encoding in `buf` and its reference in
        // `top`; a long top node is already hashed, a short one is hashed once here
        // because a root is always committed to by its hash.
        let r = self.top;
        let root = match r.as_hash() {
            Some(h) => h,
            None => {
                self.count(self.buf.len());
                L::hash(&self.buf)
            }
        };
        (root, r)
    }

    #[inline]
    fn count(&mut self, len: usize) {
        self.stats.hashes += 1;
        self.stats.bytes += len as u64;
    }

    /// Count the hash of a value node, if the layout stores `value` as one.
    #[inline]
    fn count_value(&mut self, value_len: usize) {
        if L::FAMILY.value_node_min().is_some_and(|min| value_len >= min) {
            self.count(value_len);
        }
    }

    /// Encode the pending key's leaf (its remaining path starts at nibble `start`) into
    /// `self.buf`, report it to sinks that take leaves, and return its reference.
    #[inline]
    fn encode_leaf(&mut self, start: usize) -> ChildRef {
        self.buf.clear();
        let key_nibbles = self.prev_key.len() * 2;
        let path = NibbleSlice::range(&self.prev_key, start, key_nibbles);
        L::encode_leaf(path, &self.prev_value, &mut self.buf);
        self.count_value(self.prev_value.len());
        let r = self.seal();
        if S::LEAVES {
            let at = NibbleSlice::range(&self.prev_key, 0, start);
            self.sink.node(EmittedKind::Leaf, at, &self.buf, &r);
        }
        r
    }

    /// Reference for the encoding in `self.buf`, hashing it when long.
    #[inline]
    fn seal(&mut self) -> ChildRef {
        let r = L::child_ref(&self.buf);
        if r.as_hash().is_some() {
            self.count(self.buf.len());
        }
        r
    }

    fn push_frame(&mut self, depth: usize) {
        if self.open == self.frames.len() {
            self.frames.push(Frame { depth, children: [ChildRef::EMPTY; 16], value: None });
        } else {
            let f = &mut self.frames[self.open];
            f.depth = depth;
            f.children = [ChildRef::EMPTY; 16];
            f.value = None;
        }
        self.open += 1;
    }

    fn top_depth(&self) -> Option<usize> {
        self.open.checked_sub(1).map(|i| self.frames[i].depth)
    }

    /// Place the pending key now that the next key's divergence depth `next` is known
    /// (`None` at the end of the stream), then close every branch deeper than it.
    fn flush_prev(&mut self, next: Option<usize>) {
        let key_nibbles = self.prev_key.len() * 2;
        if next == Some(key_nibbles) {
            // The pending key is a prefix of the next one: it is the value of the branch
            // at its own depth (deeper than any open frame).
            self.push_frame(key_nibbles);
            let v = std::mem::take(&mut self.prev_value);
            self.frames[self.open - 1].value = Some(v);
            return;
        }
        let top = self.top_depth();
        let leaf_depth = match (top, next) {
            (Some(t), Some(c)) => t.max(c),
            (None, Some(c)) => c,
            (Some(t), None) => t,
            (None, None) => {
                // A single key: the whole subtree is one leaf.
                self.top = self.encode_leaf(self.depth0);
                return;
            }
        };
        if top != Some(leaf_depth) {
            self.push_frame(leaf_depth);
        }
        let leaf_ref = self.encode_leaf(leaf_depth + 1);
        let nib = nibble_at(&self.prev_key, leaf_depth) as usize;
        self.frames[self.open - 1].children[nib] = leaf_ref;
        self.close_frames(next);
    }

    /// Pop frames deeper than `next` (all of them at the end), attaching each to its parent.
    fn close_frames(&mut self, next: Option<usize>) {
        loop {
            let Some(depth) = self.top_depth() else { return };
            if next.is_some_and(|c| depth <= c) {
                return;
            }
            self.open -= 1;
            let parent = self.top_depth();
            let parent_depth = match (parent, next) {
                (Some(p), Some(c)) => Some(p.max(c)),
                (None, Some(c)) => Some(c),
                (Some(p), None) => Some(p),
                (None, None) => None,
            };
            // The node starts one nibble below its parent's branch, or at the builder's
            // depth when it is the subtree's top node.
            let start = parent_depth.map_or(self.depth0, |p| p + 1);
            // Encoded before `push_frame`, which may reuse the slot of the frame just popped.
            let node_ref = self.encode_node(self.open, start);
            let Some(parent_depth) = parent_depth else {
                // The last frame: `self.buf` holds the top node's encoding.
                self.top = node_ref;
                return;
            };
            if parent != Some(parent_depth) {
                self.push_frame(parent_depth);
            }
            let nib = nibble_at(&self.prev_key, parent_depth) as usize;
            self.frames[self.open - 1].children[nib] = node_ref;
        }
    }

    /// Encode frame `i`, whose node starts at nibble `start`, into `self.buf`, report it
    /// and return its reference: with extensions, the branch and, when it sits below
    /// `start`, an extension over it; without, one branch with the partial key in between.
    fn encode_node(&mut self, i: usize, start: usize) -> ChildRef {
        let depth = self.frames[i].depth;
        let ext = match L::FAMILY {
            Family::Ethereum(ext) => ext,
            Family::Substrate(nibbled) => {
                self.buf.clear();
                let f = &self.frames[i];
                let path = NibbleSlice::range(&self.prev_key, start, depth);
                nibbled.encode_nibbled_branch(path, &f.children, f.value.as_deref(), &mut self.buf);
                let value_len = f.value.as_ref().map(Vec::len);
                if let Some(len) = value_len {
                    self.count_value(len);
                }
                let r = self.seal();
                let at = NibbleSlice::range(&self.prev_key, 0, start);
                self.sink.node(EmittedKind::Branch, at, &self.buf, &r);
                return r;
            }
        };
        let child_ref = self.encode_frame(i);
        if depth == start {
            return child_ref;
        }
        let path = NibbleSlice::range(&self.prev_key, start, depth);
        self.buf.clear();
        ext.encode_extension(path, &child_ref, &mut self.buf);
        let ext_ref = self.seal();
        let at = NibbleSlice::range(&self.prev_key, 0, start);
        self.sink.node(EmittedKind::Extension, at, &self.buf, &ext_ref);
        ext_ref
    }

    /// Encode frame `i` as a branch without partial key into `self.buf`, report it, and
    /// return its reference.
    fn encode_frame(&mut self, i: usize) -> ChildRef {
        self.buf.clear();
        let f = &self.frames[i];
        L::encode_branch(&f.children, f.value.as_deref(), &mut self.buf);
        let depth = f.depth;
        let r = self.seal();
        let path = NibbleSlice::range(&self.prev_key, 0, depth);
        self.sink.node(EmittedKind::Branch, path, &self.buf, &r);
        r
    }
}

/// Root of a sorted slice of pairs, serially.
pub fn root_from_sorted<L: Layout, K: AsRef<[u8]>, V: AsRef<[u8]>>(
    items: &[(K, V)],
) -> Result<(H256, HashStats), BuildError> {
    let mut b = RootBuilder::<L>::new();
    for (k, v) in items {
        b.add(k.as_ref(), v.as_ref())?;
    }
    let (root, (), stats) = b.finish_with();
    Ok((root, stats))
}

/// Root of a sorted slice of pairs, building the 16 first-nibble subtrees in parallel.
///
/// Falls back to the serial builder when the split cannot apply (fewer than two
/// populated first nibbles, an empty key, or, where empty values mean absent, empty values
/// that would hide a subtree).
pub fn parallel_root<L: Layout, K: AsRef<[u8]> + Sync, V: AsRef<[u8]> + Sync>(
    items: &[(K, V)],
) -> Result<(H256, HashStats), BuildError> {
    let (root, _, stats) = parallel_root_with_sinks::<L, K, V, ()>(items, || ())?;
    Ok((root, stats))
}

/// [`parallel_root`] with one sink per subtree (plus one for the root branch, first).
pub(crate) fn parallel_root_with_sinks<L, K, V, S>(
    items: &[(K, V)],
    make_sink: impl Fn() -> S + Sync,
) -> Result<(H256, Vec<S>, HashStats), BuildError>
where
    L: Layout,
    K: AsRef<[u8]> + Sync,
    V: AsRef<[u8]> + Sync,
    S: NodeSink + Send,
{
    let splittable = items.first().is_some_and(|(k, _)| !k.as_ref().is_empty())
        && (L::ALLOW_EMPTY_VALUE || items.iter().all(|(_, v)| !v.as_ref().is_empty()))
        && items.first().map(|(k, _)| k.as_ref()[0] >> 4)
            != items.last().map(|(k, _)| k.as_ref()[0] >> 4);
    if !splittable {
        let mut b = RootBuilder::<L, S>::with_sink(make_sink());
        for (k, v) in items {
            b.add(k.as_ref(), v.as_ref())?;
        }
        let (root, sink, stats) = b.finish_with();
        return Ok((root, vec![sink], stats));
    }
    let mut bounds = [0usize; 17];
    for n in 1..16u8 {
        bounds[n as usize] = items.partition_point(|(k, _)| k.as_ref()[0] >> 4 < n);
    }
    bounds[16] = items.len();
    let parts: Vec<Result<(ChildRef, S, HashStats), BuildError>> = (0..16)
        .into_par_iter()
        .map(|n| {
            let mut b = RootBuilder::<L, S>::subtree(1, make_sink());
            for (k, v) in &items[bounds[n]..bounds[n + 1]] {
                b.add(k.as_ref(), v.as_ref())?;
            }
            Ok(b.finish_ref())
        })
        .collect();
    let mut children = [ChildRef::EMPTY; 16];
    let mut sinks = Vec::with_capacity(17);
    let mut root_sink = make_sink();
    let mut stats = HashStats::default();
    for (n, part) in parts.into_iter().enumerate() {
        let (r, sink, s) = part?;
        children[n] = r;
        sinks.push(sink);
        stats = stats.merged(s);
    }
    let mut buf = Vec::with_capacity(600);
    L::encode_branch(&children, None, &mut buf);
    let root = L::hash(&buf);
    stats.hashes += 1;
    stats.bytes += buf.len() as u64;
    root_sink.node(EmittedKind::Branch, NibbleSlice::new(&[]), &buf, &ChildRef::hash(root));
    sinks.insert(0, root_sink);
    Ok((root, sinks, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethereum::EthLayout;
    use crate::hash::EMPTY_ROOT;

    fn root(items: &[(&[u8], &[u8])]) -> H256 {
        root_from_sorted::<EthLayout, _, _>(items).unwrap().0
    }

    #[test]
    fn empty_and_single() {
        assert_eq!(root(&[]), EMPTY_ROOT);
        // Known vector: a single "A" x 40 leaf is not needed here; see the TrieTests suite.
        let one = root(&[(b"do", b"verb")]);
        assert_ne!(one, EMPTY_ROOT);
    }

    #[test]
    fn rejects_unsorted() {
        let mut b = RootBuilder::<EthLayout>::new();
        b.add(b"b", b"1").unwrap();
        assert!(matches!(b.add(b"a", b"1"), Err(BuildError::NotAscending { .. })));
        assert!(matches!(b.add(b"b", b"1"), Err(BuildError::NotAscending { .. })));
    }

    #[test]
    fn dogs_vector() {
        // From ethereum/tests TrieTests trieanyorder.json "dogs".
        let r = root(&[(b"doe", b"reindeer"), (b"dog", b"puppy"), (b"dogglesworth", b"cat")]);
        assert_eq!(
            r,
            H256::from_hex("0x8aad789dff2f538bca5d8ea56e8abe10f4c7ba3a5dea95fea4cd6e7c3a1168d3")
                .unwrap()
        );
    }
}
