//! `arbor import --chain FILE --genesis GENESIS.json` for a file of concatenated RLP
//! Ethereum blocks (`geth export`'s format): the genesis from geth's JSON (its `config`
//! section fixes the fork schedule, [`evm::block::ChainConfig::from_geth_config`]; its
//! `alloc` the state; its header fields the genesis header, whose hash the first block
//! names), then the blocks through the import road with the EVM's executor
//! (`evm::road::import_eth`), run as the transfer chain's import is
//! (`crate::cmd_chain::run_import`).
//!
//! A new database is created with its genesis load unfinished (`open_for_load`), so a kill
//! while it is created leaves nothing a later run mistakes for a finished one; the load
//! writes the allocation, its code and the genesis header as block 0's record. An existing
//! database at block 0 must hold this genesis (root and header); one past it is checked by
//! the road (its head's record against the file's blocks).

use std::fs::File;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use eth::Genesis;
use evm::block::{genesis_header, header_rlp, ChainConfig};
use evm::road::{import_eth, RlpBlocks};
use state::H256;
use store::StateDb;
use trie::LayoutName;

use crate::cmd_chain::{run_import, ImportArgs, Workers};
use crate::db_args::open_for_load;
use crate::genesis_load::{genesis_label, load_genesis};
use crate::input::{file_usage, read_text};

/// A geth genesis as the import needs it.
struct EthGenesis {
    chain: ChainConfig,
    genesis: Genesis,
    /// The genesis header's RLP (block 0's record) and its hash.
    record: Vec<u8>,
    hash: H256,
}

/// Read the geth genesis file at `path`: any problem is a usage error naming the file.
fn read_eth_genesis(path: &Path) -> Result<EthGenesis> {
    let text = read_text(path)?;
    let bad = |e: anyhow::Error| file_usage(path, &e);
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(anyhow::Error::new(e)))?;
    let config = value
        .get("config")
        .ok_or_else(|| bad(anyhow::anyhow!("no config section: the fork schedule is needed")))?;
    let chain = ChainConfig::from_geth_config(config).map_err(|e| bad(e.into()))?;
    let genesis = Genesis::from_value(&value).map_err(|e| bad(e.into()))?;
    let header = genesis_header(&value, &chain).map_err(|e| bad(e.into()))?;
    let record = header_rlp(&header);
    let hash = trie::keccak256(&record);
    Ok(EthGenesis { chain, genesis, record, hash })
}

/// Block 0's record for the geth genesis `text`, when its `config` describes a chain this
/// executor runs (past the merge at genesis): the genesis header's RLP, which the first
/// block of an RLP import names as its parent. `None` otherwise (no `config`, a chain
/// before the merge, an unreadable header field): `arbor init --genesis` then stores none,
/// and an RLP import into that database says so.
pub(crate) fn genesis_record(text: &str) -> Option<Vec<u8>> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let chain = ChainConfig::from_geth_config(value.get("config")?).ok()?;
    genesis_header(&value, &chain).ok().map(|h| header_rlp(&h))
}

/// An empty database (or one whose creation was cut short) gets the genesis; one at
/// block 0 must hold it.
fn init_eth_genesis(db: &mut StateDb, eth: &EthGenesis) -> Result<()> {
    if db.unfinished_bulk_load().is_some() || db.is_empty()? {
        let entries = eth::genesis_entries(&eth.genesis);
        let pb = indicatif::ProgressBar::hidden();
        load_genesis(db, &eth.genesis, entries, Some(&eth.record), &pb)?;
    }
    if db.head_number() != 0 {
        return Ok(());
    }
    let recorded = db.block_record(0)?.map(|r| trie::keccak256(&r));
    match recorded {
        Some(hash) if hash == eth.hash => Ok(()),
        Some(hash) => Err(crate::rejected(&anyhow::anyhow!(
            "the database holds genesis {hash}, the genesis file's is {}: it holds another chain",
            eth.hash
        ))),
        // A state loaded from an allocation alone (`arbor init --genesis` of a file without
        // a post-merge config): the same state or not, no block can name its parent.
        None if db.head_root() == eth::genesis_state_root(&eth.genesis) => {
            Err(crate::rejected(&anyhow::anyhow!(
                "the database holds this genesis's state but no genesis header (it was loaded \
                 from an allocation without a post-merge config section), so the first block's \
                 parent cannot be checked: import into a new database, which --genesis creates \
                 with its header"
            )))
        }
        None => Err(crate::rejected(&anyhow::anyhow!(
            "the database holds root {} and no genesis header, the genesis file's root is {}: \
             it holds another chain",
            db.head_root(),
            eth::genesis_state_root(&eth.genesis)
        ))),
    }
}

/// Run `arbor import` of the RLP block file `args.chain` with the genesis at `genesis`.
pub(crate) fn import_rlp(
    args: &ImportArgs,
    genesis: &Path,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<ExitCode> {
    if args.exec_workers.is_some_and(|w| w > 1) {
        return Err(crate::usage(
            "--exec-workers: an Ethereum block's transactions execute in order, one worker",
        ));
    }
    let eth = read_eth_genesis(genesis)?;
    let file =
        File::open(&args.chain).with_context(|| format!("cannot open {}", args.chain.display()))?;
    let listener = crate::metrics::bind(args.metrics.as_ref())?;
    let root = eth::genesis_state_root(&eth.genesis);
    let mut db = open_for_load(&args.db, Some(LayoutName::Ethereum), &genesis_label(&root))?;
    init_eth_genesis(&mut db, &eth)?;
    let blocks = RlpBlocks::new(file, db.head_number().saturating_add(1));
    let chain = eth.chain;
    run_import(args, db, listener, stop, Workers::One, move |db, config, stop, on_block| {
        import_eth(db, blocks, chain, config, stop, on_block)
    })
}
