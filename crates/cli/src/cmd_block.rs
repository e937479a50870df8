//! `arbor build-block` and `arbor verify-block`: produce a transfer block with its witness
//! from an in-memory chain genesis, and verify a block statelessly from its witness.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use chain::runtime::{
    default_author, funded_accounts, genesis, paired_transfers, EXISTENTIAL_DEPOSIT,
};
use chain::{
    build_block, decode_witness, encode_witness, verify_block, Block, BlockContext, BuildConfig,
    TransferKind,
};
use clap::Args;
use trie::{MemoryNodeSource, H256};

/// Arguments of `arbor build-block`.
#[derive(Debug, Args)]
pub(crate) struct BuildArgs {
    /// Funded accounts in the genesis (half send, half receive).
    #[arg(long, default_value_t = 1_000)]
    accounts: u64,
    /// Transfers offered to the builder.
    #[arg(long, default_value_t = 200)]
    transfers: u64,
    /// Use transfer_allow_death, moving each sender's whole balance (accounts are deleted).
    #[arg(long)]
    allow_death: bool,
    /// Proof-of-validity limit in bytes.
    #[arg(long, default_value_t = chain::builder::DEFAULT_POV_LIMIT)]
    pov_limit: usize,
    /// Write the block here.
    #[arg(long, value_name = "FILE")]
    block: PathBuf,
    /// Write the witness here.
    #[arg(long, value_name = "FILE")]
    witness: PathBuf,
}

/// Arguments of `arbor verify-block`.
#[derive(Debug, Args)]
pub(crate) struct VerifyBlockArgs {
    /// The parent state root the block builds on (0x + 64 hex digits).
    #[arg(long, value_name = "ROOT")]
    parent_root: String,
    /// The block file.
    block: PathBuf,
    /// The witness file.
    witness: PathBuf,
}

/// The genesis of `accounts` funded accounts plus the author, in memory.
pub(crate) fn chain_genesis(accounts: u64, balance: u128) -> Result<(MemoryNodeSource, H256)> {
    Ok(MemoryNodeSource::committed(genesis(&funded_accounts(accounts), balance))?)
}

/// Run `arbor build-block`.
pub(crate) fn build(args: &BuildArgs) -> Result<ExitCode> {
    if args.accounts < 2 {
        bail!("--accounts must be at least 2");
    }
    let balance = EXISTENTIAL_DEPOSIT * 1_000;
    let (src, root) = chain_genesis(args.accounts, balance)?;
    let kind = if args.allow_death { TransferKind::AllowDeath } else { TransferKind::KeepAlive };
    let pool = paired_transfers(args.accounts, 0, args.transfers, kind, balance);
    let ctx = BlockContext { number: 1, author: default_author() };
    let config = BuildConfig { pov_limit: args.pov_limit, ..BuildConfig::default() };
    let built = build_block(&src, root, ctx, &pool, &config).context("block production failed")?;
    std::fs::write(&args.block, built.block.encode())
        .with_context(|| format!("cannot write {}", args.block.display()))?;
    std::fs::write(&args.witness, encode_witness(&built.witness))
        .with_context(|| format!("cannot write {}", args.witness.display()))?;
    println!("parent {root}");
    println!("post   {}", built.block.state_root);
    eprintln!(
        "{} of {} transfers included ({:?}), witness {} nodes, {} bytes (limit {})",
        built.block.transfers.len(),
        pool.len(),
        built.stop,
        built.witness.len(),
        built.proof_size,
        args.pov_limit
    );
    Ok(ExitCode::SUCCESS)
}

/// Run `arbor verify-block`: prints `ok <post root>` or the reason, exit 0/1.
pub(crate) fn verify(args: &VerifyBlockArgs) -> Result<ExitCode> {
    let parent = H256::from_hex(&args.parent_root)
        .with_context(|| format!("bad --parent-root {:?}", args.parent_root))?;
    let read =
        |p: &PathBuf| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    let block = match Block::decode(&read(&args.block)?) {
        Ok(b) => b,
        Err(e) => return fail(&format!("{}: {e}", args.block.display())),
    };
    let witness = match decode_witness(&read(&args.witness)?) {
        Ok(w) => w,
        Err(e) => return fail(&format!("{}: {e}", args.witness.display())),
    };
    match verify_block(parent, &block, witness) {
        Ok(root) => {
            println!("ok {root}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(reason: &str) -> Result<ExitCode> {
    println!("invalid: {reason}");
    Ok(ExitCode::FAILURE)
}
