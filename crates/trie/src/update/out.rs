//! A task's output: node writes, and the encodings whose hashes wait for one batch.

use std::marker::PhantomData;
use std::sync::Arc;

use state::H256;

use crate::builder::{EmittedKind, NodeSink};
use crate::nibbles::{nibble_at, NibbleSlice};
use crate::node::{ChildRef, Family, Layout, NibbledCodec, NodeValue, INLINE_MAX};

use super::{NodeWrite, Ref, Val};

/// A node write whose value may still wait for its node's hash.
pub(super) enum Write {
    Ready(NodeWrite),
    /// `hash ‖ encoding` of `Out::pending[id]` at this path.
    Pending(Vec<u8>, u32),
}

/// A node encoded in this task, hashed when the task resolves.
struct Pending {
    /// Its encoding: `Out::arena[start..end]`, after 32 bytes that take its hash (so that
    /// `arena[start - 32..end]` is its stored value, `hash ‖ encoding`).
    start: u32,
    end: u32,
    /// 0 for a node with no pending child, else one more than its highest pending child:
    /// nodes are hashed level by level, so a parent's slots are filled before it is hashed.
    level: u32,
    /// Where its hash goes: the pending parent and the offset of the 32-byte slot in the
    /// parent's encoding.
    parent: Option<(u32, u32)>,
}

/// A claimed old value's leaf, checked when the task resolves: the pending node of its
/// encoding, the hash its parent refers to, and the key (`Out::arena[key.0..key.1]`).
struct Check {
    id: u32,
    expected: H256,
    key: (u32, u32),
}

/// Writes and hash count of one task.
///
/// Node hashes are not computed where a node is encoded: the encoding goes into `arena`
/// as a pending node and its parent gets a 32-byte slot for the hash. [`Out::resolve`]
/// then hashes the pending nodes level by level, a batch per level ([`Layout::hash_many`]:
/// eight at a time for keccak), filling each parent's slot before the parent's level is
/// hashed.
pub(super) struct Out<L> {
    pub(super) writes: Vec<Write>,
    pub(super) hashes: u64,
    pub(super) leaf_scans: u64,
    pub(super) known: u64,
    pub(super) probes: u64,
    pub(super) buf: Vec<u8>,
    arena: Vec<u8>,
    pending: Vec<Pending>,
    checks: Vec<Check>,
    /// The hashes of `pending`, once resolved.
    resolved: Vec<H256>,
    _layout: PhantomData<fn() -> L>,
}

impl<L> Default for Out<L> {
    fn default() -> Self {
        Out {
            writes: Vec::new(),
            hashes: 0,
            leaf_scans: 0,
            known: 0,
            probes: 0,
            buf: Vec::new(),
            arena: Vec::new(),
            pending: Vec::new(),
            checks: Vec::new(),
            resolved: Vec::new(),
            _layout: PhantomData,
        }
    }
}

impl<L: Layout> Out<L> {
    /// Encode into `self.buf` the leaf of `key` with `value`, hanging `start` nibbles deep.
    pub(super) fn encode_leaf(&mut self, key: &[u8], start: usize, value: &[u8]) {
        self.buf.clear();
        L::encode_leaf(NibbleSlice::range(key, start, key.len() * 2), value, &mut self.buf);
    }

    /// [`Out::encode_leaf`] with the value as the walk carries it.
    pub(super) fn encode_leaf_val(&mut self, key: &[u8], start: usize, value: &Val<'_>) {
        match value {
            Val::Bytes(v) => self.encode_leaf(key, start, v),
            Val::Hashed(h) => {
                let Family::Substrate(codec) = L::FAMILY else {
                    unreachable!("only layouts with value nodes hold hashed values")
                };
                let rest: Vec<u8> = (start..key.len() * 2).map(|i| nibble_at(key, i)).collect();
                self.buf.clear();
                codec.encode_leaf_with(&rest, NodeValue::Node(*h), &mut self.buf);
            }
        }
    }

    pub(super) fn delete(&mut self, path: &[u8]) {
        self.writes.push(Write::Ready((path.to_vec(), None)));
    }

    /// The reference to the encoding in `self.buf`: inline when short (unless `force`),
    /// else a pending node. `children` are the pending nodes it refers to, each with the
    /// offset of its hash slot in `self.buf`. A hashed node that is stored at `stored_at`
    /// gets its write here, in order, with the value filled in when resolved.
    pub(super) fn pend(
        &mut self,
        children: &[(u32, u32)],
        stored_at: Option<&[u8]>,
        force: bool,
    ) -> Ref {
        if self.buf.len() <= INLINE_MAX && !force {
            debug_assert!(children.is_empty(), "a node with a hashed child is not inline");
            return Ref::Ready(L::child_ref(&self.buf));
        }
        let id = self.pending.len() as u32;
        self.arena.extend_from_slice(&[0u8; 32]);
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(&self.buf);
        let mut level = 0;
        for &(child, offset) in children {
            let c = &mut self.pending[child as usize];
            c.parent = Some((id, offset));
            level = level.max(c.level + 1);
        }
        self.pending.push(Pending { start, end: self.arena.len() as u32, level, parent: None });
        if let Some(path) = stored_at {
            self.writes.push(Write::Pending(path.to_vec(), id));
        }
        self.hashes += 1;
        Ref::Pending(id)
    }

    /// Check, when resolved, that the leaf encoded in `self.buf` hashes to `expected`;
    /// false when it cannot (an inline leaf under a hash reference).
    pub(super) fn check(&mut self, expected: H256, key: &[u8]) -> bool {
        if self.buf.len() <= INLINE_MAX {
            return false;
        }
        let Ref::Pending(id) = self.pend(&[], None, false) else {
            unreachable!("a long encoding is pending")
        };
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(key);
        self.checks.push(Check { id, expected, key: (start, self.arena.len() as u32) });
        true
    }

    /// Hash every pending node, level by level, filling the parents' slots; then give the
    /// pending writes their values and run the checks. `Err` names the key of the first
    /// failed check.
    pub(super) fn resolve(&mut self) -> Result<(), Vec<u8>> {
        let mut order: Vec<u32> = (0..self.pending.len() as u32).collect();
        order.sort_by_key(|&id| self.pending[id as usize].level);
        self.resolved.resize(self.pending.len(), H256::ZERO);
        let mut digests: Vec<[u8; 32]> = Vec::new();
        for level in order
            .chunk_by(|a, b| self.pending[*a as usize].level == self.pending[*b as usize].level)
        {
            let msgs: Vec<&[u8]> = level
                .iter()
                .map(|&id| {
                    let p = &self.pending[id as usize];
                    &self.arena[p.start as usize..p.end as usize]
                })
                .collect();
            digests.clear();
            digests.resize(msgs.len(), [0u8; 32]);
            L::hash_many(&msgs, &mut digests);
            for (&id, d) in level.iter().zip(&digests) {
                self.resolved[id as usize] = H256(*d);
                let p = &self.pending[id as usize];
                let own = p.start as usize - 32;
                self.arena[own..own + 32].copy_from_slice(d);
                if let Some((parent, offset)) = p.parent {
                    let at = (self.pending[parent as usize].start + offset) as usize;
                    self.arena[at..at + 32].copy_from_slice(d);
                }
            }
        }
        if let Some(c) = self.checks.iter().find(|c| self.resolved[c.id as usize] != c.expected) {
            return Err(self.arena[c.key.0 as usize..c.key.1 as usize].to_vec());
        }
        for w in &mut self.writes {
            if let Write::Pending(path, id) = w {
                let p = &self.pending[*id as usize];
                let value = Arc::from(&self.arena[p.start as usize - 32..p.end as usize]);
                *w = Write::Ready((std::mem::take(path), Some(value)));
            }
        }
        self.checks.clear();
        Ok(())
    }

    /// `r` with a resolved pending node replaced by its hash.
    pub(super) fn settled(&self, r: Ref) -> Ref {
        match r {
            Ref::Pending(id) => Ref::Ready(ChildRef::hash(self.resolved[id as usize])),
            ready => ready,
        }
    }

    /// The writes, once resolved.
    pub(super) fn into_writes(self) -> Vec<NodeWrite> {
        self.writes
            .into_iter()
            .map(|w| match w {
                Write::Ready(w) => w,
                Write::Pending(..) => unreachable!("writes are taken once resolved"),
            })
            .collect()
    }

    pub(super) fn absorb(&mut self, other: Out<L>) {
        self.hashes += other.hashes;
        self.leaf_scans += other.leaf_scans;
        self.known += other.known;
        self.probes += other.probes;
        self.writes.extend(other.writes);
    }
}

/// A stored node's value, `hash ‖ encoding`: assembled in `scratch` (two memcpys), then
/// copied into one allocation (`Arc::from_iter` would write it byte by byte).
fn stored_value(scratch: &mut Vec<u8>, hash: &H256, encoding: &[u8]) -> Arc<[u8]> {
    scratch.clear();
    scratch.extend_from_slice(&hash.0);
    scratch.extend_from_slice(encoding);
    Arc::from(scratch.as_slice())
}

/// Collects the builder's hashed nodes as writes (with a scratch buffer).
pub(super) struct BuilderSink<'o>(pub(super) &'o mut Vec<Write>, pub(super) Vec<u8>);

impl NodeSink for BuilderSink<'_> {
    fn node(&mut self, _: EmittedKind, path: NibbleSlice<'_>, encoded: &[u8], r: &ChildRef) {
        if let Some(h) = r.as_hash() {
            let value = stored_value(&mut self.1, &h, encoded);
            self.0.push(Write::Ready((path.to_nibbles().0, Some(value))));
        }
    }
}
