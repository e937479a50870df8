//! `arbor build-block` and `arbor verify-block`: produce a transfer block with its witness
//! from an in-memory chain genesis, and verify a block statelessly from its witness.
//!
//! `build-block` checks its outputs before building (see [`crate::output`]) and refuses a
//! `--pov-limit` below the witness of an empty block on the genesis, the smallest block
//! the builder can produce, so the witness it writes always fits the limit.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use chain::{
    build_block, decode_witness, default_author, encode_witness, funded_accounts, genesis,
    paired_transfers, verify_block_within, Block, BlockContext, BlockLimits, BuildConfig,
    BuildError, Built, Transfer, TransferKind, EXISTENTIAL_DEPOSIT,
};
use clap::Args;
use state::H256;
use trie::{Layout, LayoutName, MemoryNodeSource, WithLayout};

use crate::input::read_bytes;
use crate::limits;
use crate::output::{self, Output};
use crate::usage;

/// Arguments of `arbor build-block`.
#[derive(Debug, Args)]
pub(crate) struct BuildArgs {
    /// Funded accounts in the genesis (half send, half receive); 2 to 1,000,000.
    #[arg(
        long,
        default_value_t = 1_000,
        value_parser = limits::u64_in(2, limits::BUILD_ACCOUNTS_MAX)
    )]
    accounts: u64,
    /// Transfers offered to the builder (a block takes at most 10,000); 1 to 1,000,000.
    #[arg(
        long,
        default_value_t = 200,
        value_parser = limits::u64_in(1, limits::BUILD_TRANSFERS_MAX)
    )]
    transfers: u64,
    /// Use transfer_allow_death, moving each sender's whole balance (accounts are deleted).
    #[arg(long)]
    allow_death: bool,
    #[command(flatten)]
    pov: PovLimitArg,
    /// Write the block here (a new file unless --force).
    #[arg(long, value_name = "FILE")]
    block: PathBuf,
    /// Write the witness here (a new file unless --force; not the block's file).
    #[arg(long, value_name = "FILE")]
    witness: PathBuf,
    /// Overwrite existing output files.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    layout: LayoutArg,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// `--layout` of `build-block` and `verify-block`.
#[derive(Debug, Args)]
pub(crate) struct LayoutArg {
    /// The state's trie layout: ethereum (the default), substrate-v0 or substrate-v1 (the
    /// witness's nodes and its size, counted by the layout's rule, are that layout's).
    #[arg(long, value_name = "LAYOUT", default_value = "ethereum", value_parser = crate::layout_arg::parser())]
    layout: LayoutName,
}

/// `--pov-limit` of `build-block` and `verify-block`.
#[derive(Debug, Args)]
pub(crate) struct PovLimitArg {
    /// Proof-of-validity limit: the most bytes of witness nodes (units allowed: 5MiB); 1 to
    /// 1,073,741,824. build-block refuses a limit below the witness of an empty block on the
    /// genesis (the error names it); verify-block refuses a witness over it (and a block of
    /// more than 10,000 transfers, the builder's weight limit).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = chain::DEFAULT_POV_LIMIT as u64,
        value_parser = limits::size_in(1, limits::POV_LIMIT_MAX as u64)
    )]
    pov_limit: u64,
}

impl PovLimitArg {
    /// The limit in bytes (a `usize` on this machine).
    fn bytes(&self) -> usize {
        usize::try_from(self.pov_limit).unwrap_or(usize::MAX)
    }
}

/// Arguments of `arbor verify-block`.
#[derive(Debug, Args)]
pub(crate) struct VerifyBlockArgs {
    /// The parent state root the block builds on (0x + 64 hex digits).
    #[arg(long, value_name = "ROOT", value_parser = crate::input::parse_h256)]
    parent_root: H256,
    /// The block file.
    block: PathBuf,
    /// The witness file.
    witness: PathBuf,
    #[command(flatten)]
    pov: PovLimitArg,
    #[command(flatten)]
    layout: LayoutArg,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// A block built in a layout chosen at run time: the genesis of `accounts` funded
/// accounts in memory, then the block over `pool`.
struct BuildIn<'a> {
    accounts: u64,
    balance: u128,
    pool: &'a [Transfer],
    config: &'a BuildConfig,
}

impl WithLayout for BuildIn<'_> {
    type Output = Result<(H256, std::result::Result<Built, BuildError>)>;
    fn run<L: Layout>(self) -> Self::Output {
        let entries = genesis(&funded_accounts(self.accounts), self.balance);
        let (src, root) = MemoryNodeSource::committed::<L, _, _>(entries)?;
        let ctx = BlockContext { number: 1, author: default_author() };
        Ok((root, build_block::<L, _>(&src, root, ctx, self.pool, self.config)))
    }
}

/// A block re-executed from its witness in a layout chosen at run time.
struct VerifyIn<'a> {
    parent: H256,
    block: &'a Block,
    witness: &'a [u8],
    /// The witness file, named by a decoding error.
    witness_file: &'a std::path::Path,
    limits: &'a BlockLimits,
}

impl WithLayout for VerifyIn<'_> {
    type Output = std::result::Result<H256, String>;
    fn run<L: Layout>(self) -> Self::Output {
        let witness = decode_witness::<L>(self.witness)
            .map_err(|e| format!("{}: {e}", self.witness_file.display()))?;
        verify_block_within::<L>(self.parent, self.block, witness, self.limits)
            .map_err(|e| e.to_string())
    }
}

/// Run `arbor build-block`.
pub(crate) fn build(args: &BuildArgs) -> Result<ExitCode> {
    let outputs = [
        Output { flag: "--block", path: &args.block },
        Output { flag: "--witness", path: &args.witness },
    ];
    output::check(&outputs, args.force)?;
    let balance = EXISTENTIAL_DEPOSIT * 1_000;
    let kind = if args.allow_death { TransferKind::AllowDeath } else { TransferKind::KeepAlive };
    let pool = paired_transfers(args.accounts, 0, args.transfers, kind, balance);
    let config = BuildConfig { pov_limit: args.pov.bytes(), ..BuildConfig::default() };
    let job = BuildIn { accounts: args.accounts, balance, pool: &pool, config: &config };
    let (root, built) = args.layout.layout.dispatch(job).context("cannot build the genesis")?;
    let built = match built {
        Err(BuildError::PovLimitTooSmall { limit, min }) => {
            return Err(usage(format!(
                "--pov-limit {limit} is below {min} bytes, the witness of an empty block on \
                 this genesis of {} accounts: use --pov-limit {min} or more",
                args.accounts
            )));
        }
        built => built.context("block production failed")?,
    };
    output::write(outputs[0], &built.block.encode(), args.force)?;
    output::write(outputs[1], &encode_witness(&built.witness), args.force)?;
    if args.json {
        let v = serde_json::json!({
            "parent_root": root.to_string(),
            "root": built.block.state_root.to_string(),
            "transfers": built.block.transfers.len(),
            "offered": pool.len(),
            "stop": format!("{:?}", built.stop),
            "witness_nodes": built.witness.len(),
            "witness_bytes": built.proof_size,
            "pov_limit_bytes": args.pov.pov_limit,
            "layout": args.layout.layout.as_str(),
        });
        outln!("{v}")?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!("parent {root}")?;
    outln!("post   {}", built.block.state_root)?;
    errln!(
        "{} of {} transfers included ({:?}), witness {} nodes, {} bytes (limit {})",
        built.block.transfers.len(),
        pool.len(),
        built.stop,
        built.witness.len(),
        built.proof_size,
        args.pov.pov_limit
    );
    Ok(ExitCode::SUCCESS)
}

/// Run `arbor verify-block`: prints `ok <post root>` or the reason, exit 0/1.
pub(crate) fn verify(args: &VerifyBlockArgs) -> Result<ExitCode> {
    let parent = args.parent_root;
    let (block, witness) = (read_bytes(&args.block)?, read_bytes(&args.witness)?);
    let verdict = check_block(args, parent, &block, &witness);
    match (&verdict, args.json) {
        (_, true) => {
            let (root, reason) = match &verdict {
                Ok(root) => (Some(root.to_string()), None),
                Err(reason) => (None, Some(reason.as_str())),
            };
            let v = serde_json::json!({
                "valid": verdict.is_ok(),
                "reason": reason,
                "parent_root": parent.to_string(),
                "root": root,
            });
            outln!("{v}")?;
        }
        (Ok(root), false) => outln!("ok {root}")?,
        (Err(reason), false) => outln!("invalid: {reason}")?,
    }
    Ok(if verdict.is_ok() { ExitCode::SUCCESS } else { crate::negative() })
}

/// Decode the block and its witness and re-execute it: the post-state root, or why not.
fn check_block(
    args: &VerifyBlockArgs,
    parent: H256,
    block: &[u8],
    witness: &[u8],
) -> std::result::Result<H256, String> {
    let block = Block::decode(block).map_err(|e| format!("{}: {e}", args.block.display()))?;
    let limits = BlockLimits { pov_limit: args.pov.bytes(), ..BlockLimits::default() };
    let job =
        VerifyIn { parent, block: &block, witness, witness_file: &args.witness, limits: &limits };
    args.layout.layout.dispatch(job)
}
