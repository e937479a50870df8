//! Reading user-supplied files: every failure names the file and what is wrong with it.
//!
//! Inputs are read whole into memory; the largest expected input (mainnet's genesis) is
//! under a megabyte.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use eth::Genesis;

/// The text of `path`, or of stdin when `path` is `-`.
pub(crate) fn read_text(path: &Path) -> Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read stdin")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// clap's parser of a 32-byte hash argument (a root, a checkpoint id): 0x optional.
pub(crate) fn parse_h256(s: &str) -> Result<trie::H256, String> {
    let bytes = trie::decode_hex(s).map_err(|e| format!("{s:?} is not hex: {e}"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{s:?} is {} bytes; expected 32 (64 hex digits)", b.len()))?;
    Ok(trie::H256(bytes))
}

/// A trie key given on the command line.
#[derive(Debug, Clone)]
pub(crate) struct HexKey(pub(crate) Vec<u8>);

/// clap's parser of a trie key argument: hex digits, 0x optional.
pub(crate) fn parse_key(s: &str) -> Result<HexKey, String> {
    trie::decode_hex(s).map(HexKey).map_err(|e| format!("{s:?} is not a hex key: {e}"))
}

/// Parse `path` as a genesis allocation (a full genesis with `alloc`, or a bare alloc).
pub(crate) fn read_genesis(path: &Path) -> Result<Genesis> {
    let text = read_text(path)?;
    Genesis::from_json_str(&text).with_context(|| display_name(path))
}

/// How a path is named in messages (`stdin` for `-`).
pub(crate) fn display_name(path: &Path) -> String {
    if path == Path::new("-") {
        "stdin".to_string()
    } else {
        path.display().to_string()
    }
}
