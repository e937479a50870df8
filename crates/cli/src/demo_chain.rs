//! The chain part of `arbor demo`: three transfer blocks built with proof recording on an
//! in-memory genesis of 2,000 accounts, each sent through its block and witness encodings
//! and verified statelessly from the witness alone; the first block's witness with one
//! node dropped must be refused as incomplete; the third block is filled up to a 64 KiB
//! proof-of-validity limit. The first block is also executed by Block-STM on two workers
//! from the genesis state: its writes must lead to the builder's post-state root.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use chain::{
    block_txs, build_block, decode_witness, default_author, encode_witness, funded_accounts,
    genesis, paired_transfers, verify_block, Block, BlockContext, BuildConfig, Stop, Transfer,
    TransferKind, VerifyError, EXISTENTIAL_DEPOSIT,
};
use serde::Serialize;
use state::{TrieId, H256};
use trie::{EthLayout, MemoryNodeSource, Trie};

const ACCOUNTS: u64 = 2_000;
const BALANCE: u128 = EXISTENTIAL_DEPOSIT * 1_000;
const LIMITED_POV: usize = 64 * 1024;

/// One block of the demo.
#[derive(Debug, Serialize)]
pub(crate) struct ChainBlock {
    pub(crate) label: &'static str,
    pub(crate) offered: usize,
    pub(crate) included: usize,
    pub(crate) stop: String,
    pub(crate) witness_nodes: usize,
    pub(crate) proof_size: usize,
    pub(crate) pov_limit: usize,
    pub(crate) build_ms: f64,
    pub(crate) verify_ms: f64,
    pub(crate) post_root: String,
    pub(crate) verified: bool,
    pub(crate) reason: Option<String>,
}

/// What the chain part of the demo did and found.
#[derive(Debug, Serialize)]
pub(crate) struct ChainDemo {
    pub(crate) blocks: Vec<ChainBlock>,
    pub(crate) dropped_node_refused: bool,
    pub(crate) dropped_node_reason: String,
    pub(crate) limit_respected: bool,
    pub(crate) block_stm: BlockStmCheck,
}

/// Block 1 executed by Block-STM.
#[derive(Debug, Serialize)]
pub(crate) struct BlockStmCheck {
    pub(crate) workers: usize,
    pub(crate) transactions: usize,
    pub(crate) executions: u64,
    pub(crate) validations: u64,
    pub(crate) ms: f64,
    /// The post-state root of Block-STM's writes equals the built block's.
    pub(crate) same_root: bool,
}

impl ChainDemo {
    /// Every pass/fail outcome, in report order.
    pub(crate) fn outcomes(&self) -> Vec<bool> {
        let mut v: Vec<bool> = self.blocks.iter().map(|b| b.verified).collect();
        v.push(self.dropped_node_refused);
        v.push(self.limit_respected);
        v.push(self.block_stm.same_root);
        v
    }
}

/// Execute `block`'s transfers with Block-STM on two workers over `state` (the entries of
/// the trie at `root`) and compare the post-state root with the block's.
fn block_stm_check(
    state: &BTreeMap<Vec<u8>, Vec<u8>>,
    src: &MemoryNodeSource,
    root: H256,
    block: &Block,
) -> Result<BlockStmCheck> {
    let txs =
        block_txs(BlockContext { number: block.number, author: block.author }, &block.transfers);
    let workers = 2;
    let start = Instant::now();
    let options = exec::ParallelOptions { always_parallel: true, ..Default::default() };
    let out = exec::execute_parallel_with(&txs, state, workers, options)?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let mut t: Trie<&MemoryNodeSource, EthLayout> = Trie::from_root(src, root);
    for (k, v) in &out.writes {
        t.write(k, v.as_deref())?;
    }
    Ok(BlockStmCheck {
        workers,
        transactions: txs.len(),
        executions: out.counters.executions,
        validations: out.counters.validations,
        ms,
        same_root: t.root()? == block.state_root,
    })
}

fn pool(first: u64, n: u64, kind: TransferKind) -> Vec<Transfer> {
    paired_transfers(ACCOUNTS, first, n, kind, BALANCE)
}

/// Apply a block's changes to the in-memory state; returns the new root.
fn apply(src: &mut MemoryNodeSource, root: H256, changes: &chain::Built) -> Result<H256> {
    let mut t: Trie<&MemoryNodeSource, EthLayout> = Trie::from_root(&*src, root);
    for (k, v) in changes.changes.get(&TrieId::Main).into_iter().flatten() {
        t.write(k, v.as_deref())?;
    }
    let u = t.commit()?;
    drop(t);
    let root = u.root;
    src.apply(u);
    Ok(root)
}

pub(crate) fn run() -> Result<ChainDemo> {
    let state: BTreeMap<Vec<u8>, Vec<u8>> =
        genesis(&funded_accounts(ACCOUNTS), BALANCE).into_iter().collect();
    let (mut src, mut root) = MemoryNodeSource::committed::<EthLayout, _, _>(&state)?;
    let author = default_author();
    let plan = [
        ("300 x transfer_keep_alive", pool(0, 300, TransferKind::KeepAlive), usize::MAX),
        ("300 x transfer_allow_death", pool(300, 300, TransferKind::AllowDeath), usize::MAX),
        ("keep-alive up to a 64 KiB PoV", pool(600, 400, TransferKind::KeepAlive), LIMITED_POV),
    ];
    let mut blocks = Vec::new();
    let (mut dropped_node_refused, mut dropped_node_reason) = (false, String::new());
    let mut limit_respected = false;
    let mut block_stm = None;
    for (number, (label, txs, limit)) in (1u64..).zip(plan) {
        let ctx = BlockContext { number, author };
        let config = BuildConfig {
            pov_limit: limit.min(chain::DEFAULT_POV_LIMIT),
            ..BuildConfig::default()
        };
        let start = Instant::now();
        let built = build_block::<EthLayout, _>(&src, root, ctx, &txs, &config)
            .context("demo block production")?;
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let block_bytes = built.block.encode();
        let witness_bytes = encode_witness(&built.witness);
        let start = Instant::now();
        let result = Block::decode(&block_bytes).map_err(VerifyError::from).and_then(|b| {
            verify_block::<EthLayout>(root, &b, decode_witness::<EthLayout>(&witness_bytes)?)
        });
        let verify_ms = start.elapsed().as_secs_f64() * 1e3;
        if number == 1 {
            block_stm = Some(block_stm_check(&state, &src, root, &built.block)?);
            let mut w = decode_witness::<EthLayout>(&witness_bytes)?;
            w.remove(w.len() / 2);
            match verify_block::<EthLayout>(root, &built.block, w) {
                Err(e @ VerifyError::Incomplete { .. }) => {
                    dropped_node_refused = true;
                    dropped_node_reason = e.to_string();
                }
                Err(e) => dropped_node_reason = format!("wrong error: {e}"),
                Ok(_) => dropped_node_reason = "accepted (bug)".into(),
            }
        }
        if limit == LIMITED_POV {
            limit_respected = built.proof_size <= LIMITED_POV && built.stop == Stop::PovLimit;
        }
        blocks.push(ChainBlock {
            label,
            offered: txs.len(),
            included: built.block.transfers.len(),
            stop: format!("{:?}", built.stop),
            witness_nodes: built.witness.len(),
            proof_size: built.proof_size,
            pov_limit: config.pov_limit,
            build_ms,
            verify_ms,
            post_root: built.block.state_root.to_string(),
            verified: matches!(result, Ok(r) if r == built.block.state_root),
            reason: result.err().map(|e| e.to_string()),
        });
        root = apply(&mut src, root, &built)?;
        anyhow::ensure!(
            root == built.block.state_root,
            "applying block {number} gave another root"
        );
    }
    let block_stm = block_stm.context("the demo plan has a first block")?;
    Ok(ChainDemo { blocks, dropped_node_refused, dropped_node_reason, limit_respected, block_stm })
}
