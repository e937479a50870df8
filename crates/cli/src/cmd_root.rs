//! `arbor root`: the Merkle-Patricia root of a genesis allocation (`--genesis`) or of a
//! JSON object of hex keys to hex values (`--kv`, optionally a secure trie).
//!
//! The key/value input is checked strictly before anything is hashed: keys and values
//! must be even-length hex, and two entries that decode (or hash) to the same key are an
//! error rather than a silent last-one-wins, because a root over an ambiguous input
//! proves nothing. An empty value means the key is absent, as in the Ethereum tests.
//! Cost: one sort plus the streaming builder, each node hashed once.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use serde::de::{Deserializer, MapAccess, Visitor};
use trie::{decode_hex, keccak256, EthLayout, H256};

use crate::input::{display_name, read_genesis, read_text};

/// Arguments of `arbor root`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["genesis", "kv"])))]
pub(crate) struct RootArgs {
    /// A genesis file (full genesis with "alloc", or a bare alloc object).
    #[arg(long, value_name = "FILE")]
    genesis: Option<PathBuf>,
    /// A JSON object {"0x<key hex>": "0x<value hex>", …}; an empty value means absent.
    #[arg(long, value_name = "FILE")]
    kv: Option<PathBuf>,
    /// Hash each key with keccak256 before inserting it (Ethereum's secure trie).
    #[arg(long, conflicts_with = "genesis")]
    secure: bool,
    /// Print {"root": "0x…"} instead of the bare root.
    #[arg(long)]
    json: bool,
}

/// Run `arbor root`.
pub(crate) fn run(args: &RootArgs) -> Result<ExitCode> {
    let root = match (&args.genesis, &args.kv) {
        (Some(path), None) => eth::genesis_state_root(&read_genesis(path)?),
        (None, Some(path)) => kv_root(path, args.secure)?,
        // clap's "input" group makes exactly one of them present.
        _ => bail!("give exactly one of --genesis FILE or --kv FILE"),
    };
    if args.json {
        println!("{}", serde_json::json!({ "root": root.to_string() }));
    } else {
        println!("{root}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The root of a `--kv` file.
fn kv_root(path: &Path, secure: bool) -> Result<H256> {
    let text = read_text(path)?;
    let pairs = parse_pairs(&text).with_context(|| display_name(path))?;
    let leaves = decode_pairs(&pairs, secure).with_context(|| display_name(path))?;
    let (root, _stats) = trie::root_from_sorted::<EthLayout, _, _>(&leaves)
        .with_context(|| format!("{}: cannot build the trie", display_name(path)))?;
    Ok(root)
}

/// Decode, optionally hash, sort and deduplicate-check the entries; drop empty values.
fn decode_pairs(pairs: &[(String, String)], secure: bool) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    // Each decoded entry keeps its index so that a duplicate can name both spellings.
    let mut entries = Vec::with_capacity(pairs.len());
    for (i, (key, value)) in pairs.iter().enumerate() {
        let raw = decode_hex(key).with_context(|| format!("key {key:?}"))?;
        let value = decode_hex(value).with_context(|| format!("value of key {key:?}"))?;
        let key_bytes = if secure { keccak256(&raw).as_bytes().to_vec() } else { raw };
        entries.push((key_bytes, value, i));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for w in entries.windows(2) {
        if w[0].0 == w[1].0 {
            let (first, second) = (&pairs[w[0].2].0, &pairs[w[1].2].0);
            bail!("keys {first:?} and {second:?} decode to the same key; keep one");
        }
    }
    Ok(entries.into_iter().filter(|e| !e.1.is_empty()).map(|(k, v, _)| (k, v)).collect())
}

/// The entries of a JSON object in file order, keeping literal duplicates (which a
/// `serde_json::Map` would silently merge) so that `decode_pairs` can reject them.
fn parse_pairs(text: &str) -> Result<Vec<(String, String)>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let pairs = de.deserialize_map(PairsVisitor).context("invalid key/value JSON")?;
    de.end().context("invalid key/value JSON")?;
    Ok(pairs)
}

struct PairsVisitor;

impl<'de> Visitor<'de> for PairsVisitor {
    type Value = Vec<(String, String)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of hex-string keys to hex-string values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value: serde_json::Value = map.next_value()?;
            let serde_json::Value::String(value) = value else {
                let found = json_type(&value);
                return Err(serde::de::Error::custom(format!(
                    "value of key {key:?} must be a hex string, found {found}"
                )));
            };
            out.push((key, value));
        }
        Ok(out)
    }
}

/// A JSON value's type, for messages (the value itself may be huge).
fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_in_order_and_keeps_literal_duplicates() {
        let p = parse_pairs(r#"{"0x02": "0x01", "0x01": "", "0x02": "0x03"}"#).unwrap();
        assert_eq!(p, pairs(&[("0x02", "0x01"), ("0x01", ""), ("0x02", "0x03")]));
        let err = decode_pairs(&p, false).unwrap_err().to_string();
        assert!(err.contains("same key"), "{err}");
    }

    #[test]
    fn rejects_non_objects_and_non_string_values() {
        assert!(parse_pairs("[1, 2]").is_err());
        assert!(parse_pairs(r#"{"0x01": 5}"#).is_err());
        assert!(parse_pairs(r#"{"0x01": "0x02"} trailing"#).is_err());
    }

    #[test]
    fn spellings_of_one_key_collide_and_empty_values_are_absent() {
        let err = decode_pairs(&pairs(&[("0x0a", "0x01"), ("0A", "0x02")]), true).unwrap_err();
        assert!(format!("{err:#}").contains("\"0A\""), "{err:#}");
        let leaves = decode_pairs(&pairs(&[("0x02", "0x"), ("0x01", "0xff")]), false).unwrap();
        assert_eq!(leaves, vec![(vec![1u8], vec![0xffu8])]);
    }

    #[test]
    fn odd_hex_names_the_key() {
        let err = decode_pairs(&pairs(&[("0x123", "0x01")]), false).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("\"0x123\"") && msg.contains("odd"), "{msg}");
    }
}
