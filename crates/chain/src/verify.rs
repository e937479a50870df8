//! Stateless block verification: re-execute a block on a partial trie built from its
//! witness alone and check the post-state root.
//!
//! The witness is untrusted. Its nodes carry no hashes (they are addressed by their own
//! hash: keccak, or the layout's), so an altered node cannot be told from a missing one by
//! itself: it no longer hashes to the reference its parent holds, so the parent's
//! reference finds nothing ("witness incomplete", naming the path), and the altered bytes
//! become a node nothing refers to. The error then also counts the witness nodes that no
//! other node and not the parent root refer to. A witness that verifies but holds nodes
//! the block never needed is refused too, so every altered byte fails verification.
//!
//! Layouts: [`verify_block`] and [`verify_block_within`] verify in the trie layout their
//! caller names (nodes addressed by the layout's hash, sizes by its proof-size rule). The block's writes are applied to the trie as they are, without
//! reading the values they replace, as the builder's session does: in Substrate V1 a value
//! node is needed only where the block reads a value.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use overlay::{ChangeSetError, Overlay};
use state::{TransactionError, TrieId, H256};
use trie::{
    ChildKind, ChildRef, Layout, NodeError, NodeValue, NodeView, Trie, TrieError, UsedNodes,
};

use crate::block::{Block, CodecError};
use crate::builder::{DEFAULT_POV_LIMIT, DEFAULT_WEIGHT_LIMIT};
use crate::runtime::{
    self, ApplyError, BlockContext, CorruptState, InvalidTransaction, TRANSFER_WEIGHT,
};

/// Why a block did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The block or witness bytes do not decode.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The block names another parent.
    #[error("the block's parent root is {block}, expected {expected}")]
    Parent {
        /// The block's.
        block: H256,
        /// The one given.
        expected: H256,
    },
    /// Execution or the root computation needs a node the witness does not have (or has
    /// only altered: see the module docs).
    #[error(
        "witness incomplete: node {hash} at path {path} is missing{}",
        if *orphans > 0 {
            format!(" ({orphans} witness node(s) are referenced by no other witness node)")
        } else {
            String::new()
        }
    )]
    Incomplete {
        /// Nibble path, hex.
        path: String,
        /// The hash its parent refers to.
        hash: H256,
        /// Witness nodes that neither another witness node nor the parent root refers to.
        orphans: usize,
    },
    /// A loaded node does not hash to its parent's reference (a source that serves nodes
    /// by another key than their hash).
    #[error("hash mismatch at path {path}: the witness node does not hash to {hash}")]
    HashMismatch {
        /// Nibble path, hex.
        path: String,
        /// The expected hash.
        hash: H256,
    },
    /// A witness node does not decode as a trie node.
    #[error("corrupt witness node at path {path}: {source}")]
    Corrupt {
        /// Nibble path, hex.
        path: String,
        /// The decoder's complaint.
        source: NodeError,
    },
    /// The witness's node source failed otherwise.
    #[error("the witness trie failed: {0}")]
    Trie(#[source] TrieError),
    /// A transaction in the block is not valid against its pre-state.
    #[error("transaction {index} is invalid: {reason}")]
    InvalidTransaction {
        /// Its position.
        index: usize,
        /// Why.
        reason: InvalidTransaction,
    },
    /// A transaction read a value of the parent state that does not decode (the witness
    /// proves it, so the parent state itself holds it).
    #[error("transaction {index} read corrupt state: {source}")]
    CorruptState {
        /// Its position.
        index: usize,
        /// What does not decode.
        source: CorruptState,
    },
    /// The runtime's nested transactions did not balance (a bug in the runtime, not the
    /// block's fault).
    #[error("re-executing the block failed: {0}")]
    Runtime(#[source] TransactionError),
    /// The re-executed block's changes could not be taken (a bug in the runtime, not the
    /// block's fault).
    #[error("cannot take the re-executed block's changes: {0}")]
    Changes(#[source] ChangeSetError<TrieError>),
    /// The re-executed block ends at another root.
    #[error("post-state root mismatch: the block says {block}, re-execution gives {computed}")]
    Root {
        /// The block's.
        block: H256,
        /// Computed.
        computed: H256,
    },
    /// The witness holds nodes the block never needed.
    #[error("the witness holds {0} node(s) the block never needed")]
    Unused(usize),
    /// The block weighs more than the limit (its transfers' weight).
    #[error("the block's {transfers} transfers weigh {weight}, over the limit of {limit}")]
    Overweight {
        /// Transfers in the block.
        transfers: usize,
        /// Their weight.
        weight: u64,
        /// The limit.
        limit: u64,
    },
    /// The witness is larger than the proof-of-validity limit.
    #[error(
        "the witness holds {bytes} bytes of nodes, over the proof-of-validity limit of {limit}"
    )]
    PovTooLarge {
        /// Its size by the layout's proof-size rule (what the builder measures).
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

/// The limits a block and its witness must keep: the builder's ([`crate::BuildConfig`]),
/// which a validator enforces too (a block over them is invalid however it executes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLimits {
    /// Largest witness, by the layout's proof-size rule (the sum of its nodes' encoded
    /// bytes in Ethereum's layout).
    pub pov_limit: usize,
    /// Largest block weight.
    pub weight_limit: u64,
}

impl Default for BlockLimits {
    fn default() -> Self {
        Self { pov_limit: DEFAULT_POV_LIMIT, weight_limit: DEFAULT_WEIGHT_LIMIT }
    }
}

/// Refuse a block or witness over `limits` (checked before anything executes); the
/// witness's size is counted by layout `L`'s proof-size rule.
fn check_limits<L: Layout>(
    block: &Block,
    witness: &[(H256, Vec<u8>)],
    limits: &BlockLimits,
) -> Result<(), VerifyError> {
    let transfers = block.transfers.len();
    let weight = (transfers as u64).saturating_mul(TRANSFER_WEIGHT);
    if weight > limits.weight_limit {
        return Err(VerifyError::Overweight { transfers, weight, limit: limits.weight_limit });
    }
    let bytes = witness
        .iter()
        .fold(0usize, |sum, (_, node)| sum.saturating_add(L::PROOF_SIZE.item_size(node.len())));
    if bytes > limits.pov_limit {
        return Err(VerifyError::PovTooLarge { bytes, limit: limits.pov_limit });
    }
    Ok(())
}

/// Re-execute `block` from `parent_root` in trie layout `L` using only `witness` (`L`'s
/// nodes keyed by `L`'s hash, as [`crate::decode_witness`] gives them), within the default
/// [`BlockLimits`]; returns the verified post-state root.
pub fn verify_block<L: Layout>(
    parent_root: H256,
    block: &Block,
    witness: Vec<(H256, Vec<u8>)>,
) -> Result<H256, VerifyError> {
    verify_block_within::<L>(parent_root, block, witness, &BlockLimits::default())
}

/// [`verify_block`] within `limits` (a chain built with other limits than the defaults);
/// the witness's size is counted by `L`'s proof-size rule.
pub fn verify_block_within<L: Layout>(
    parent_root: H256,
    block: &Block,
    witness: Vec<(H256, Vec<u8>)>,
    limits: &BlockLimits,
) -> Result<H256, VerifyError> {
    check_limits::<L>(block, &witness, limits)?;
    if block.parent_root != parent_root {
        return Err(VerifyError::Parent { block: block.parent_root, expected: parent_root });
    }
    let source = UsedNodes::new(witness.into_iter().collect());
    let result = execute::<L>(&source, parent_root, block);
    let computed = result.map_err(|e| match e {
        VerifyError::Incomplete { path, hash, .. } => {
            let orphans = orphans::<L>(source.nodes(), parent_root);
            VerifyError::Incomplete { path, hash, orphans }
        }
        e => e,
    })?;
    let stray = source.unused();
    if computed != block.state_root {
        return Err(VerifyError::Root { block: block.state_root, computed });
    }
    if stray > 0 {
        return Err(VerifyError::Unused(stray));
    }
    Ok(computed)
}

fn execute<L: Layout>(source: &UsedNodes, root: H256, block: &Block) -> Result<H256, VerifyError> {
    let t: Trie<_, L> = Trie::from_root(source, root);
    let mut o = Overlay::new(RefCell::new(t)).keep_empty_values(L::ALLOW_EMPTY_VALUE);
    let ctx = BlockContext { number: block.number, author: block.author };
    // Hook failures are charged to the transaction next to them (0 before the first).
    let fail = |index: usize| {
        move |e| match e {
            ApplyError::Invalid(reason) => VerifyError::InvalidTransaction { index, reason },
            ApplyError::State(e) => trie_error(e),
            ApplyError::Corrupt(source) => VerifyError::CorruptState { index, source },
            ApplyError::Transaction(e) => VerifyError::Runtime(e),
        }
    };
    runtime::start_block(&mut o, &ctx).map_err(fail(0))?;
    for (index, tx) in block.transfers.iter().enumerate() {
        runtime::apply(&mut o, &ctx, index as u32, tx).map_err(fail(index))?;
    }
    let last = block.transfers.len().saturating_sub(1);
    runtime::finish_block(&mut o, &ctx).map_err(fail(last))?;
    let depth = o.transaction_depth();
    if depth > 0 {
        return Err(VerifyError::Changes(ChangeSetError::TransactionsOpen { depth }));
    }
    // The surviving writes as they are: a change set would read the value each write
    // replaces (to drop no-op writes), which needs value nodes no witness holds.
    let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = o
        .pending_writes()
        .into_iter()
        .filter(|(trie, _, _)| *trie == TrieId::Main)
        .map(|(_, k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
        .collect();
    let mut t = o.into_backend().into_inner();
    for (k, v) in &writes {
        t.write(k, v.as_deref()).map_err(trie_error)?;
    }
    t.root().map_err(trie_error)
}

fn trie_error(e: TrieError) -> VerifyError {
    match e {
        TrieError::MissingNode { path, hash } => VerifyError::Incomplete { path, hash, orphans: 0 },
        TrieError::HashMismatch { path, expected, .. } => {
            VerifyError::HashMismatch { path, hash: expected }
        }
        TrieError::Corrupt { path, source } => VerifyError::Corrupt { path, source },
        other => VerifyError::Trie(other),
    }
}

/// Witness nodes that no other witness node and not `root` refers to by hash.
fn orphans<L: Layout>(nodes: &HashMap<H256, Vec<u8>>, root: H256) -> usize {
    let mut referenced = HashSet::from([root]);
    for n in nodes.values() {
        collect_refs::<L>(n, &mut referenced);
    }
    nodes.keys().filter(|h| !referenced.contains(h)).count()
}

/// Every hash reference inside an encoded node of layout `L` (and its inline children):
/// children, and value nodes (Substrate V1).
fn collect_refs<L: Layout>(encoded: &[u8], out: &mut HashSet<H256>) {
    let visit = |r: ChildRef, out: &mut HashSet<H256>| match r.kind() {
        ChildKind::Hash(h) => {
            out.insert(h);
        }
        ChildKind::Inline(bytes) => collect_refs::<L>(bytes, out),
        ChildKind::Empty => {}
    };
    let value = match L::decode(encoded) {
        Ok(NodeView::Leaf { value, .. }) => Some(value),
        Ok(NodeView::Extension { child, .. }) => {
            visit(child, out);
            None
        }
        Ok(NodeView::Branch { children, value, .. }) => {
            for c in children {
                visit(c, out);
            }
            value
        }
        _ => None,
    };
    if let Some(NodeValue::Node(h)) = value {
        out.insert(h);
    }
}
