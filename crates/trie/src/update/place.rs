//! Placement: shapes encoded where they land, collapses, and the root.

use state::H256;

use super::out::Out;
use super::{PreState, Ref, Shape, Unplaced, Val, WalkError, Walker};
use crate::node::{ChildKind, ChildRef, ExtensionCodec, Family, Layout, NibbledCodec, NodeValue};

impl<P: PreState, L: Layout> Walker<'_, P, L> {
    /// The single child `n` (at `path`, already extended by `n`) absorbs its collapsing
    /// parent: the result describes the node at the parent's path.
    pub(super) fn collapse<'a>(
        &self,
        path: &[u8],
        n: u8,
        below: Shape<'a>,
        below_stored: bool,
        out: &mut Out<L>,
    ) -> Shape<'a> {
        match below {
            Shape::Placed(r) => Shape::Extension { path: vec![n], child: r },
            other => {
                if below_stored {
                    out.delete(path);
                }
                match other {
                    Shape::Leaf { key, start, value } => {
                        Shape::Leaf { key, start: start - 1, value }
                    }
                    Shape::Extension { path: deeper, child } => {
                        Shape::Extension { path: prefixed(n, &deeper), child }
                    }
                    Shape::Branch(mut b) => {
                        b.partial = prefixed(n, &b.partial);
                        Shape::Branch(b)
                    }
                    Shape::Empty | Shape::Placed(_) => {
                        unreachable!("a live child is not empty; placed is handled above")
                    }
                }
            }
        }
    }

    /// Encode `shape` at `path` where its parent refers to it; write it when it is a hashed
    /// node that is stored (extensions), delete a stored node it replaces.
    pub(super) fn place(
        &self,
        path: &[u8],
        shape: Shape<'_>,
        stored: bool,
        out: &mut Out<L>,
    ) -> Ref {
        match shape {
            Shape::Empty => {
                if stored {
                    out.delete(path);
                }
                Ref::Ready(ChildRef::EMPTY)
            }
            Shape::Leaf { key, start, value } => {
                out.encode_leaf_val(&key, start, &value);
                if stored {
                    out.delete(path);
                }
                out.pend(&[], None, false)
            }
            Shape::Branch(b) => {
                let r = encode_unplaced(&b, Some(path), false, out);
                if stored && matches!(r, Ref::Ready(_)) {
                    out.delete(path);
                }
                r
            }
            Shape::Extension { path: ext, child } => {
                let r = encode_extension(&ext, child, Some(path), false, out);
                if stored && matches!(r, Ref::Ready(_)) {
                    out.delete(path);
                }
                r
            }
            Shape::Placed(r) => {
                let inline = matches!(r, Ref::Ready(c) if c.as_hash().is_none());
                if stored && inline {
                    out.delete(path);
                }
                r
            }
        }
    }

    /// Resolve a task's pending hashes (a failed check is the claimed key's error) and
    /// give its shape ready references.
    pub(super) fn settle<'a>(
        &self,
        shape: Shape<'a>,
        out: &mut Out<L>,
    ) -> Result<Shape<'a>, WalkError<P>> {
        out.resolve().map_err(|key| self.old_value_error(&key))?;
        Ok(match shape {
            Shape::Placed(r) => Shape::Placed(out.settled(r)),
            Shape::Extension { path, child } => {
                Shape::Extension { path, child: out.settled(child) }
            }
            Shape::Branch(mut b) => {
                b.refs = b.refs.map(|r| out.settled(r));
                Shape::Branch(b)
            }
            other => other,
        })
    }

    /// The root: stored whatever its size, and always committed to by its hash. Resolves
    /// every pending hash of the top task.
    pub(super) fn place_root(
        &self,
        shape: Shape<'_>,
        stored: bool,
        out: &mut Out<L>,
    ) -> Result<H256, WalkError<P>> {
        let root = match shape {
            Shape::Empty => {
                if stored {
                    out.delete(&[]);
                }
                None
            }
            Shape::Placed(Ref::Pending(id)) => Some(Ref::Pending(id)),
            Shape::Placed(Ref::Ready(r)) => match r.kind() {
                ChildKind::Hash(h) => Some(Ref::Ready(ChildRef::hash(h))),
                ChildKind::Inline(bytes) => {
                    out.buf.clear();
                    out.buf.extend_from_slice(bytes);
                    Some(out.pend(&[], Some(&[]), true))
                }
                ChildKind::Empty => None,
            },
            Shape::Leaf { key, start, value } => {
                out.encode_leaf_val(&key, start, &value);
                Some(out.pend(&[], Some(&[]), true))
            }
            Shape::Branch(b) => Some(encode_unplaced(&b, Some(&[]), true, out)),
            Shape::Extension { path, child } => {
                Some(encode_extension(&path, child, Some(&[]), true, out))
            }
        };
        out.resolve().map_err(|key| self.old_value_error(&key))?;
        Ok(match root.map(|r| out.settled(r)) {
            Some(Ref::Ready(r)) => {
                r.as_hash().unwrap_or_else(|| unreachable!("the root is hashed"))
            }
            Some(Ref::Pending(_)) => unreachable!("resolved"),
            None => L::empty_root(),
        })
    }
}

/// `n` followed by `nibbles`.
fn prefixed(n: u8, nibbles: &[u8]) -> Vec<u8> {
    let mut joined = Vec::with_capacity(nibbles.len() + 1);
    joined.push(n);
    joined.extend_from_slice(nibbles);
    joined
}

/// `refs` as the children of an encoding, a zero hash standing in for each pending one.
fn with_slots(refs: &[Ref; 16]) -> [ChildRef; 16] {
    refs.map(|r| match r {
        Ref::Ready(r) => r,
        Ref::Pending(_) => ChildRef::hash(H256::ZERO),
    })
}

/// Make the branch encoded in `out.buf` over `refs` (as [`with_slots`] gave them) a
/// reference: pending, with its pending children's hash slots, and stored at `stored_at`
/// when hashed (or always with `force`).
fn pend_branch<L: Layout>(
    refs: &[Ref; 16],
    children: &[ChildRef; 16],
    stored_at: Option<&[u8]>,
    force: bool,
    out: &mut Out<L>,
) -> Ref {
    let offsets = L::branch_hash_offsets(&out.buf, children);
    let mut waiting = [(0u32, 0u32); 16];
    let mut count = 0;
    for (r, at) in refs.iter().zip(offsets) {
        if let Ref::Pending(id) = r {
            waiting[count] = (*id, at as u32);
            count += 1;
        }
    }
    out.pend(&waiting[..count], stored_at, force)
}

/// Encode a branch over `refs` (pending children get a slot for their hash) and make it a
/// reference: pending and stored at `path` when hashed (layouts with extensions).
pub(super) fn encode_branch<L: Layout>(
    refs: &[Ref; 16],
    value: Option<&[u8]>,
    path: &[u8],
    out: &mut Out<L>,
) -> Ref {
    let children = with_slots(refs);
    out.buf.clear();
    L::encode_branch(&children, value, &mut out.buf);
    pend_branch(refs, &children, Some(path), false, out)
}

/// Encode an unplaced branch with its partial key where it lands (layouts without
/// extensions), as [`encode_branch`] does.
fn encode_unplaced<L: Layout>(
    b: &Unplaced<'_>,
    stored_at: Option<&[u8]>,
    force: bool,
    out: &mut Out<L>,
) -> Ref {
    let Family::Substrate(codec) = L::FAMILY else {
        unreachable!("a branch waits for its partial key only in layouts without extensions")
    };
    let children = with_slots(&b.refs);
    let value: Option<NodeValue<'_>> = b.value.as_ref().map(Val::in_node::<L>);
    out.buf.clear();
    codec.encode_branch_with(&b.partial, &children, value, &mut out.buf);
    pend_branch(&b.refs, &children, stored_at, force, out)
}

/// Encode an extension over `ext` to `child` and make it a reference (pending and stored at
/// `stored_at` when hashed, or always with `force`).
fn encode_extension<L: Layout>(
    ext: &[u8],
    child: Ref,
    stored_at: Option<&[u8]>,
    force: bool,
    out: &mut Out<L>,
) -> Ref {
    let Family::Ethereum(codec) = L::FAMILY else {
        unreachable!("only layouts with extension nodes place an extension")
    };
    let (r, pending) = match child {
        Ref::Ready(r) => (r, None),
        Ref::Pending(id) => (ChildRef::hash(H256::ZERO), Some(id)),
    };
    out.buf.clear();
    codec.encode_extension_unpacked(ext, &r, &mut out.buf);
    match pending {
        // The child's hash is the encoding's last 32 bytes.
        Some(id) => out.pend(&[(id, (out.buf.len() - 32) as u32)], stored_at, force),
        None => out.pend(&[], stored_at, force),
    }
}
