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

/// Parse `path` (or stdin for `-`) as JSON.
pub(crate) fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = read_text(path)?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", display_name(path)))
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
