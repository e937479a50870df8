//! `arbor import`: which road a chain file takes, by its first bytes. An Arbor chain file
//! (`arbor gen-chain`; it opens with "ARBCHAIN") carries its genesis and runs the transfer
//! runtime (`crate::cmd_chain`); a file of concatenated RLP Ethereum blocks (its first byte
//! opens an RLP list) needs its geth genesis (`--genesis`) and runs the EVM
//! (`crate::cmd_eth_import`). Anything else is left to the Arbor reader to refuse.

use std::fs::File;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cmd_chain::{import_arbor, ImportArgs};
use crate::cmd_eth_import::import_rlp;

/// What a chain file holds, by its first bytes.
enum ChainFormat {
    /// An Arbor chain file (its reader refuses anything that is not one).
    Arbor,
    /// Concatenated RLP Ethereum blocks: the first byte opens an RLP list.
    Rlp,
}

/// The format of the chain file at `path`: RLP when its first byte opens an RLP list (an
/// Arbor chain file opens with "ARBCHAIN"), else Arbor's.
fn chain_format(path: &Path) -> Result<ChainFormat> {
    let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut first = [0u8; 1];
    let n = std::io::Read::read(&mut f, &mut first)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(if n == 1 && first[0] >= 0xc0 { ChainFormat::Rlp } else { ChainFormat::Arbor })
}

/// Run `arbor import`.
pub(crate) fn import(args: &ImportArgs) -> Result<ExitCode> {
    // First: a stop asked for from here on ends the run at a clean boundary.
    let stop = crate::signals::stop_flag()?;
    match (chain_format(&args.chain)?, &args.genesis) {
        (ChainFormat::Rlp, Some(genesis)) => import_rlp(args, genesis, &stop),
        (ChainFormat::Rlp, None) => Err(crate::usage(
            "the chain file holds RLP Ethereum blocks: give its genesis with --genesis FILE",
        )),
        (ChainFormat::Arbor, Some(_)) => Err(crate::usage(
            "--genesis is for files of RLP Ethereum blocks: an Arbor chain file carries its genesis",
        )),
        (ChainFormat::Arbor, None) => import_arbor(args, &stop),
    }
}
