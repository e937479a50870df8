//! `arbor gen-chain --evm --out DIR`: a chain of real Ethereum blocks from
//! `evm::generate::ChainGenerator` (deterministic from the seed), written as
//! `DIR/genesis.json` (geth's genesis format, what `arbor import --genesis` reads) and
//! `DIR/blocks.rlp` (the blocks' RLP one after the other, as `geth export` writes).
//!
//! Both outputs are checked before any work (an existing file without `--force`, a path
//! that is a directory: usage errors), each written to a staged file beside it and moved
//! into place when whole, so a failed or killed run leaves no partial file under either
//! name. Memory: the generator's state (the genesis's accounts and everything the blocks
//! created) and one block at a time.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use evm::generate::{ChainGenerator, ChainSpec};
use state::H256;

use crate::limits;
use crate::output::{self, Output};

/// What `gen-chain --evm` generates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EthChainParams {
    pub(crate) accounts: u64,
    pub(crate) blocks: u64,
    pub(crate) txs_per_block: u64,
    pub(crate) seed: u64,
}

/// The staged file beside `target` (created exclusively), for [`output::place`].
fn staged_beside(target: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = target.parent().unwrap_or(Path::new("/"));
    tempfile::Builder::new()
        .prefix(".arbor-gen-chain-")
        .suffix(".partial")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))
}

/// The output directory: an existing directory, or one created now (its parent must
/// exist); anything else is a usage error.
fn out_dir(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(crate::usage(format!(
            "--out {} is not a directory: with --evm it names the directory for genesis.json \
             and blocks.rlp",
            dir.display()
        ))),
        Err(_) => std::fs::create_dir(dir)
            .map_err(|e| crate::usage(format!("cannot create --out {}: {e}", dir.display()))),
    }
}

/// What was written.
struct Written {
    transactions: u64,
    gas: u64,
    /// The last block's number, hash and state root (the genesis's root for no blocks).
    head: (u64, H256, H256),
}

/// Write `blocks` blocks of `generator` to the staged file beside `target` and move it
/// there.
fn write_blocks(
    generator: &mut ChainGenerator,
    blocks: u64,
    (out, target): (Output<'_>, &Path),
    force: bool,
    show: bool,
) -> Result<Written> {
    let staged = staged_beside(target)?;
    let mut w = BufWriter::new(staged.as_file());
    let pb = crate::progress::counter(show, Some(blocks), "generating", "blocks");
    let genesis_root = H256(generator.head().state_root.0);
    let mut written = Written { transactions: 0, gas: 0, head: (0, H256::default(), genesis_root) };
    for _ in 0..blocks {
        let block = generator.next_block().context("cannot generate the chain")?;
        w.write_all(&block.rlp).with_context(|| format!("cannot write {}", out.path.display()))?;
        written.transactions += block.transactions;
        written.gas += block.gas_used;
        written.head = (block.number, block.hash, block.state_root);
        pb.inc(1);
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    output::place(out, staged, target, force)?;
    pb.finish_and_clear();
    Ok(written)
}

/// Run `arbor gen-chain --evm` (see the module docs).
pub(crate) fn gen_eth_chain(
    dir: &Path,
    params: &EthChainParams,
    force: bool,
    json: bool,
) -> Result<ExitCode> {
    if params.accounts > limits::EVM_CHAIN_ACCOUNTS_MAX {
        return Err(crate::usage(format!(
            "--accounts {} with --evm: at most {} (the generator holds the state in memory)",
            params.accounts,
            limits::EVM_CHAIN_ACCOUNTS_MAX
        )));
    }
    out_dir(dir)?;
    let (genesis_path, blocks_path) = (dir.join("genesis.json"), dir.join("blocks.rlp"));
    let outs = [
        Output { flag: "--out", path: &genesis_path },
        Output { flag: "--out", path: &blocks_path },
    ];
    let targets = output::check(&outs, force)?;
    let start = Instant::now();
    let spec = ChainSpec {
        seed: params.seed,
        accounts: params.accounts,
        txs_per_block: params.txs_per_block,
    };
    let mut generator = ChainGenerator::new(&spec).context("cannot make the genesis")?;
    let genesis_root = H256(generator.head().state_root.0);
    let staged = staged_beside(&targets[0])?;
    std::fs::write(staged.path(), serde_json::to_vec(generator.genesis_json())?)
        .with_context(|| format!("cannot write {}", genesis_path.display()))?;
    staged.as_file().sync_all()?;
    output::place(outs[0], staged, &targets[0], force)?;
    let written =
        write_blocks(&mut generator, params.blocks, (outs[1], &targets[1]), force, !json)?;
    let (number, hash, root) = written.head;
    let (txs, gas) = (written.transactions, written.gas);
    let elapsed = start.elapsed().as_secs_f64();
    if json {
        let v = serde_json::json!({
            "genesis": genesis_path.display().to_string(),
            "chain": blocks_path.display().to_string(),
            "accounts": params.accounts,
            "genesis_root": genesis_root.to_string(),
            "blocks": params.blocks,
            "transactions": txs,
            "gas_used": gas,
            "block": number,
            "hash": hash.to_string(),
            "root": root.to_string(),
            "elapsed_s": elapsed,
        });
        outln!("{v}")?;
    }
    errln!(
        "wrote {} and {}: genesis of {} accounts ({genesis_root}), {} blocks, {txs} \
         transactions, {gas} gas in {elapsed:.2} s; head {number} {root}",
        genesis_path.display(),
        blocks_path.display(),
        params.accounts,
        params.blocks,
    );
    Ok(ExitCode::SUCCESS)
}
