//! Values as the mutable trie holds them, and reading them.
//!
//! A value is inline (Ethereum, Substrate V0, and V1 values under 33 bytes) or a value node
//! (Substrate V1, 33 bytes or more): its hash, which is what the leaf or branch encodes, and
//! its bytes once known. A value node read from the source is known by its hash only until
//! the value itself is read (`get`, `seek`, a proof of the key): splitting, moving or
//! re-encoding its leaf needs the hash alone, as in trie-db, so a witness holds a value node
//! only where a value was read. Reading a committed value node records it, as a node;
//! [`Trie::get_stored`] reports it by its hash without reading it.
//!
//! Invariants: a value keeps the form it was loaded in (an inline value of 33 bytes or
//! more, written before a chain moved to V1, stays inline until it is written again); new
//! values take the layout's form ([`Value::new`]). Value nodes exist only in layouts of the
//! Substrate [`Family`]: [`Value::new`] makes them only there, and [`Value::from_view`]
//! refuses one read in a layout of another family.

use state::H256;

use super::{path_hex, Kind, NodeId, NodeSource, Trie, TrieError};
use crate::nibbles::Nibbles;
use crate::node::{ChildRef, Family, Layout, NibbledCodec, NodeError, NodeValue};

/// A value in a leaf or branch. See the module docs.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// Held in the node.
    Inline(Vec<u8>),
    /// A separate value node (boxed: rare, and a hash would double an inline value's size).
    Node(Box<ValueNode>),
}

/// A value node: its hash and, once fetched or written, its bytes.
#[derive(Clone, Debug)]
pub(crate) struct ValueNode {
    /// Hash of the value (the node's reference).
    pub(crate) hash: H256,
    /// The value, once known.
    pub(crate) bytes: Option<Vec<u8>>,
    /// The node exists in the committed state (read from the source, or written by a
    /// commit): reads of it are recorded, and commits do not report it again.
    pub(crate) committed: bool,
}

impl Value {
    /// A new value in layout `L`'s form.
    pub(crate) fn new<L: Layout>(bytes: &[u8]) -> Value {
        match L::FAMILY.value_node_min() {
            Some(min) if bytes.len() >= min => Value::Node(Box::new(ValueNode {
                hash: L::hash(bytes),
                bytes: Some(bytes.to_vec()),
                committed: false,
            })),
            _ => Value::Inline(bytes.to_vec()),
        }
    }

    /// Replace the value with `bytes` (in layout `L`'s form); returns whether the node
    /// holding it changes. A value node with the same hash is unchanged; an inline value
    /// that `bytes` would store as a node changes (trie-db does the same).
    pub(crate) fn set<L: Layout>(&mut self, bytes: &[u8]) -> bool {
        if L::FAMILY.value_node_min().is_some_and(|min| bytes.len() >= min) {
            let new = Value::new::<L>(bytes);
            if let (Value::Node(old), Value::Node(n)) = (&*self, &new) {
                if old.hash == n.hash {
                    return false;
                }
            }
            *self = new;
            return true;
        }
        match self {
            Value::Inline(v) if v.as_slice() == bytes => false,
            Value::Inline(v) => {
                v.clear();
                v.extend_from_slice(bytes);
                true
            }
            Value::Node(_) => {
                *self = Value::Inline(bytes.to_vec());
                true
            }
        }
    }

    /// The value as its node encodes it.
    #[inline]
    pub(crate) fn view(&self) -> NodeValue<'_> {
        match self {
            Value::Inline(v) => NodeValue::Inline(v.as_slice()),
            Value::Node(n) => NodeValue::Node(n.hash),
        }
    }

    /// A value decoded from a committed node of layout `L`; a value node is an error in a
    /// layout without them.
    pub(crate) fn from_view<L: Layout>(v: NodeValue<'_>) -> Result<Value, NodeError> {
        match v {
            NodeValue::Inline(v) => Ok(Value::Inline(v.to_vec())),
            NodeValue::Node(_) if L::FAMILY.has_extensions() => Err(NodeError::ValueNode),
            NodeValue::Node(hash) => {
                Ok(Value::Node(Box::new(ValueNode { hash, bytes: None, committed: true })))
            }
        }
    }

    /// The bytes of a value that is held inline: every value in a layout of the Ethereum
    /// family (see the module's invariants).
    #[inline]
    fn inline(&self) -> &[u8] {
        match self {
            Value::Inline(v) => v,
            Value::Node(_) => unreachable!("a value node in a layout without value nodes"),
        }
    }

    /// The bytes, when known (always, for inline values).
    pub(crate) fn bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Inline(v) => Some(v.as_slice()),
            Value::Node(n) => n.bytes.as_deref(),
        }
    }
}

/// Encode into `out` the leaf over the unpacked `path` that holds `value`, in its form.
pub(crate) fn encode_leaf<L: Layout>(path: &[u8], value: &Value, out: &mut Vec<u8>) {
    match L::FAMILY {
        Family::Substrate(codec) => codec.encode_leaf_with(path, value.view(), out),
        Family::Ethereum(_) => L::encode_leaf_unpacked(path, value.inline(), out),
    }
}

/// Encode into `out` a branch without partial key over `refs` that holds `value`, in its
/// form.
pub(crate) fn encode_branch<L: Layout>(
    refs: &[ChildRef; 16],
    value: Option<&Value>,
    out: &mut Vec<u8>,
) {
    match L::FAMILY {
        Family::Substrate(codec) => {
            codec.encode_branch_with(&[], refs, value.map(Value::view), out)
        }
        Family::Ethereum(_) => L::encode_branch(refs, value.map(Value::inline), out),
    }
}

/// A value as read: its value node's hash when it is one, and its bytes.
pub(crate) type ValueRef<'a> = (Option<H256>, &'a [u8]);

/// A key's value as the trie holds it, read without reading a committed value node (see
/// [`Trie::get_stored`]).
// Not `#[non_exhaustive]`: a value is held either way, and callers match on both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredValue {
    /// The value's bytes: held in its node, or written since the last commit.
    Bytes(Vec<u8>),
    /// A committed value node (Substrate V1), known by its hash: reading it
    /// ([`Trie::read_value_node`]) fetches and records it.
    Node(H256),
}

impl Value {
    /// This value as [`Trie::get_stored`] reports it.
    fn stored(&self) -> StoredValue {
        match self {
            Value::Inline(v) => StoredValue::Bytes(v.clone()),
            Value::Node(n) => match &n.bytes {
                Some(b) if !n.committed => StoredValue::Bytes(b.clone()),
                _ => StoredValue::Node(n.hash),
            },
        }
    }
}

/// The value node of slot `kind` (a leaf, or a branch with a value), if it holds one.
pub(crate) fn value_node_mut(kind: &mut Kind) -> Option<&mut ValueNode> {
    match kind {
        Kind::Leaf { value: Value::Node(n), .. }
        | Kind::Branch { value: Some(Value::Node(n)), .. } => Some(n),
        _ => None,
    }
}

impl<S: NodeSource, L: Layout> Trie<S, L> {
    /// The value `id` (a leaf or branch) holds, whose key has the nibbles `key_path`:
    /// `None` if it holds none. Fetches a value node's bytes the first time and records
    /// every read of a committed value node.
    pub(crate) fn read_value(
        &mut self,
        id: NodeId,
        key_path: &[u8],
    ) -> Result<Option<Vec<u8>>, TrieError> {
        Ok(self.value_ref(id, key_path)?.map(|(_, v)| v.to_vec()))
    }

    /// The value `id` holds as (its value node's hash if it is one, bytes), fetched and
    /// recorded as [`Trie::read_value`] does; `None` if `id` holds no value.
    pub(crate) fn value_ref(
        &mut self,
        id: NodeId,
        key_path: &[u8],
    ) -> Result<Option<ValueRef<'_>>, TrieError> {
        let fetch = match value_node_mut(&mut self.slots[id as usize].kind) {
            Some(n) if n.bytes.is_none() => Some(n.hash),
            _ => None,
        };
        if let Some(hash) = fetch {
            let bytes = self.fetch_value(&hash, key_path)?;
            if let Some(n) = value_node_mut(&mut self.slots[id as usize].kind) {
                n.bytes = Some(bytes);
            }
        }
        let slot = &self.slots[id as usize];
        let value = match &slot.kind {
            Kind::Leaf { value, .. } => value,
            Kind::Branch { value: Some(value), .. } => value,
            _ => return Ok(None),
        };
        let Value::Node(n) = value else {
            return Ok(value.bytes().map(|b| (None, b)));
        };
        let bytes = n.bytes.as_deref().expect("fetched above");
        if n.committed {
            if let Some(r) = self.recorder.as_mut() {
                r.record(n.hash, bytes);
            }
        }
        Ok(Some((Some(n.hash), bytes)))
    }

    /// The value under `key` as the trie holds it, loading (and recording) the nodes on its
    /// path but not a committed value node: writing a key, as Substrate's trie does, needs
    /// its old value's hash only, so a witness holds a value node only where a value was
    /// read. `None` when the key is absent.
    pub fn get_stored(&mut self, key: &[u8]) -> Result<Option<StoredValue>, TrieError> {
        let path = Nibbles::from_bytes(key).0;
        let Some(id) = self.with_hint(key, |t| t.holder(&path))? else { return Ok(None) };
        Ok(match &self.slots[id as usize].kind {
            Kind::Leaf { value, .. } | Kind::Branch { value: Some(value), .. } => {
                Some(value.stored())
            }
            _ => None,
        })
    }

    /// Read the committed value node `hash` of `key` (a [`StoredValue::Node`]) as a read of
    /// the key reads it: fetched from the source, checked against its hash unless the
    /// source is trusted, and recorded if recording.
    pub fn read_value_node(&mut self, key: &[u8], hash: &H256) -> Result<Vec<u8>, TrieError> {
        let path = Nibbles::from_bytes(key).0;
        let bytes = self.with_hint(key, |t| t.fetch_value(hash, &path))?;
        if let Some(r) = self.recorder.as_mut() {
            r.record(*hash, &bytes);
        }
        Ok(bytes)
    }

    /// Load the value node `hash` of the key with nibbles `key_path`, checked against
    /// its hash unless the source is trusted.
    fn fetch_value(&mut self, hash: &H256, key_path: &[u8]) -> Result<Vec<u8>, TrieError> {
        let loaded = if self.has_hint {
            self.source.load_for_key(key_path, hash, &self.key_hint)?
        } else {
            self.source.load(key_path, hash)?
        };
        let bytes = loaded
            .ok_or_else(|| TrieError::MissingNode { path: path_hex(key_path), hash: *hash })?;
        if !self.source.trusted() {
            let actual = L::hash(&bytes);
            if actual != *hash {
                return Err(TrieError::HashMismatch {
                    path: path_hex(key_path),
                    expected: *hash,
                    actual,
                });
            }
        }
        Ok(bytes)
    }
}
