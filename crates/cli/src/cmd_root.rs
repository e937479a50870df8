//! `arbor root`: the Merkle-Patricia root of a genesis allocation (`--genesis`), of a
//! JSON object of hex keys to hex values (`--kv`, optionally a secure trie), or of a raw
//! Substrate chain spec's genesis storage (`--chain-spec`), in the layout `--layout` names
//! (Ethereum's by default; Substrate's V0 by default for a chain spec).
//!
//! The key/value input is checked strictly before anything is hashed: keys and values
//! must be even-length hex, and two entries that decode (or hash) to the same key are an
//! error rather than a silent last-one-wins, because a root over an ambiguous input
//! proves nothing. An empty value means the key is absent in Ethereum's layout, as in the
//! Ethereum tests, and is a value in Substrate's. Problems in the content of any of the
//! three inputs (not JSON, not a raw spec, bad hex, duplicate keys) are usage errors naming
//! the file: exit 2, one line; a file that cannot be read is exit 3.
//! Cost: one sort plus the streaming builder, each node hashed once.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use state::{decode_hex, H256};
use trie::{keccak256, Layout, LayoutName, WithLayout};

use crate::input::{display_name, file_usage, read_genesis, read_text};
use crate::usage;

/// The root of sorted, distinct `entries` in `layout` (the layout is chosen here, at the
/// edge; the builder below is monomorphised per layout).
pub(crate) fn layout_root(
    layout: LayoutName,
    entries: &[(Vec<u8>, Vec<u8>)],
) -> Result<H256, trie::BuildError> {
    /// `root_from_sorted` over `entries`, in the layout dispatched to.
    struct RootOf<'a>(&'a [(Vec<u8>, Vec<u8>)]);
    impl WithLayout for RootOf<'_> {
        type Output = Result<H256, trie::BuildError>;
        fn run<L: Layout>(self) -> Self::Output {
            trie::root_from_sorted::<L, _, _>(self.0).map(|(root, _stats)| root)
        }
    }
    layout.dispatch(RootOf(entries))
}

/// Arguments of `arbor root`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["genesis", "kv", "chain_spec"])))]
pub(crate) struct RootArgs {
    /// A genesis file (full genesis with "alloc", or a bare alloc object); Ethereum layout.
    #[arg(long, value_name = "FILE")]
    genesis: Option<PathBuf>,
    /// A JSON object {"0x<key hex>": "0x<value hex>", …}; an empty value means absent in
    /// the Ethereum layout and is a value in the Substrate layouts.
    #[arg(long, value_name = "FILE")]
    kv: Option<PathBuf>,
    /// A raw Substrate chain spec: the root of its genesis storage (`genesis.raw.top` or
    /// `genesis.top`, plus one `:child_storage:default:<key>` entry holding the root of
    /// each non-empty child trie of `childrenDefault`). Layout substrate-v0 unless
    /// --layout says otherwise.
    #[arg(long, value_name = "FILE")]
    chain_spec: Option<PathBuf>,
    /// Trie layout: ethereum (the default), substrate-v0 or substrate-v1. With
    /// --chain-spec the default is substrate-v0 (state version 0), the layout of
    /// Westend's genesis state.
    #[arg(long, value_name = "LAYOUT", value_parser = crate::layout_arg::parser())]
    layout: Option<LayoutName>,
    /// Hash each key with keccak256 before inserting it (Ethereum's secure trie).
    #[arg(long, conflicts_with_all = ["genesis", "chain_spec"])]
    secure: bool,
    /// Print {"root": "0x…", "layout": "…"} instead of the bare root.
    #[arg(long)]
    json: bool,
}

/// Run `arbor root`.
pub(crate) fn run(args: &RootArgs) -> Result<ExitCode> {
    let default =
        if args.chain_spec.is_some() { LayoutName::SubstrateV0 } else { LayoutName::Ethereum };
    let layout = args.layout.unwrap_or(default);
    let root = match (&args.genesis, &args.kv, &args.chain_spec) {
        (Some(path), None, None) => {
            if layout != LayoutName::Ethereum {
                return Err(usage("--genesis takes an Ethereum genesis: --layout ethereum only"));
            }
            eth::genesis_state_root(&read_genesis(path)?)
        }
        (None, Some(path), None) => {
            if args.secure && layout != LayoutName::Ethereum {
                return Err(usage("--secure hashes keys for Ethereum's layout only"));
            }
            kv_root(path, args.secure, layout)?
        }
        (None, None, Some(path)) => chain_spec_root(path, layout)?,
        // clap's "input" group makes exactly one of them present.
        _ => bail!("give exactly one of --genesis FILE, --kv FILE or --chain-spec FILE"),
    };
    if args.json {
        let out = serde_json::json!({ "root": root.to_string(), "layout": layout.as_str() });
        outln!("{out}")?;
    } else {
        outln!("{root}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The root of a `--kv` file; problems in its content are usage errors naming the file,
/// as a chain spec's are.
fn kv_root(path: &Path, secure: bool, layout: LayoutName) -> Result<H256> {
    let text = read_text(path)?;
    let pairs = parse_pairs(&text).map_err(|e| file_usage(path, &e))?;
    let keep_empty = layout != LayoutName::Ethereum;
    let leaves = decode_pairs(&pairs, secure, keep_empty).map_err(|e| file_usage(path, &e))?;
    file_root(path, layout, &leaves)
}

/// [`layout_root`] of `entries` read from input file `path`; a failure is a usage error
/// naming the file.
pub(crate) fn file_root(path: &Path, layout: LayoutName, entries: &[Entry]) -> Result<H256> {
    layout_root(layout, entries)
        .map_err(|e| usage(format!("{}: cannot build the trie: {e}", display_name(path))))
}

/// The key under which Substrate's top trie holds a default child trie's root.
pub(crate) const CHILD_STORAGE_DEFAULT_PREFIX: &[u8] = b":child_storage:default:";

/// The prefix of every child trie's key in Substrate's top trie (default or other kinds).
const CHILD_STORAGE_PREFIX: &[u8] = b":child_storage:";

/// The genesis root of a raw chain spec. Its content's problems are usage errors.
fn chain_spec_root(path: &Path, layout: LayoutName) -> Result<H256> {
    let spec = read_chain_spec(path, layout)?;
    file_root(path, layout, &spec.top)
}

/// A key and its value.
pub(crate) type Entry = (Vec<u8>, Vec<u8>);

/// A raw chain spec's genesis storage, decoded and checked.
pub(crate) struct SpecStorage {
    /// The top trie's entries, sorted, with one `:child_storage:default:<key>` entry
    /// holding each non-empty child trie's root (as Substrate keeps them).
    pub(crate) top: Vec<Entry>,
    /// Each non-empty child trie: its key (without the prefix) and its sorted entries.
    pub(crate) children: Vec<(Vec<u8>, Vec<Entry>)>,
}

/// Read the raw chain spec at `path` for `layout`; its content's problems are usage
/// errors naming the file.
pub(crate) fn read_chain_spec(path: &Path, layout: LayoutName) -> Result<SpecStorage> {
    let text = read_text(path)?;
    chain_spec_entries(&text, layout).map_err(|e| file_usage(path, &e))
}

/// The top trie's entries of a raw chain spec's genesis, with the child tries' roots, and
/// the child tries.
fn chain_spec_entries(text: &str, layout: LayoutName) -> Result<SpecStorage> {
    let spec: ChainSpec = serde_json::from_str(text).context("invalid chain spec JSON")?;
    let storage = match (spec.genesis.raw, spec.genesis.top) {
        (Some(raw), None) => raw,
        (None, Some(top)) => RawStorage { top, children_default: spec.genesis.children_default },
        (Some(_), Some(_)) => bail!("genesis has both \"raw\" and \"top\"; keep one"),
        (None, None) => bail!(
            "not a raw chain spec: genesis has neither \"raw.top\" nor \"top\" \
             (convert it with the node's `build-spec --raw`)"
        ),
    };
    let keep_empty = layout != LayoutName::Ethereum;
    let mut entries = decode_pairs(&storage.top.0, false, keep_empty).context("genesis.top")?;
    // Child tries' roots are derived from `childrenDefault`, never given: Substrate refuses a
    // genesis whose top trie holds a child storage key (`InvalidState`).
    if let Some((key, _)) = entries.iter().find(|(k, _)| k.starts_with(CHILD_STORAGE_PREFIX)) {
        bail!(
            "genesis.top: key 0x{} is a child trie's key (`:child_storage:`); a child trie's \
             entries belong under \"childrenDefault\"",
            hex::encode(key)
        );
    }
    let mut children = Vec::new();
    for (child_key, child) in storage.children_default.map(|c| c.0).unwrap_or_default() {
        let key =
            decode_hex(&child_key).with_context(|| format!("child trie key {child_key:?}"))?;
        let at = || format!("childrenDefault {child_key:?}");
        let child_entries = decode_pairs(&child.0, false, keep_empty).with_context(at)?;
        // Substrate keeps no entry for an empty child trie.
        if child_entries.is_empty() {
            continue;
        }
        let root = layout_root(layout, &child_entries).with_context(at)?;
        let prefixed = [CHILD_STORAGE_DEFAULT_PREFIX, &key].concat();
        entries.push((prefixed, root.as_bytes().to_vec()));
        children.push((key, child_entries));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
        bail!(
            "key 0x{} appears twice (a child trie's root and a top entry, or two child tries)",
            hex::encode(&w[0].0)
        );
    }
    Ok(SpecStorage { top: entries, children })
}

/// The parts of a chain spec `arbor root` reads (other fields are ignored).
#[derive(Deserialize)]
struct ChainSpec {
    genesis: SpecGenesis,
}

/// `genesis`: raw storage under `raw`, or (older raw specs) `top` and `childrenDefault`
/// directly. A spec with a runtime genesis config has neither.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecGenesis {
    raw: Option<RawStorage>,
    top: Option<Pairs>,
    children_default: Option<Children>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawStorage {
    top: Pairs,
    children_default: Option<Children>,
}

/// A JSON object of hex strings, in file order, literal duplicates kept.
struct Pairs(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PairsVisitor).map(Pairs)
    }
}

/// `childrenDefault`: child trie key → its entries, in file order, duplicates kept.
struct Children(Vec<(String, Pairs)>);

impl<'de> Deserialize<'de> for Children {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ChildrenVisitor).map(Children)
    }
}

struct ChildrenVisitor;

impl<'de> Visitor<'de> for ChildrenVisitor {
    type Value = Vec<(String, Pairs)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of child trie keys to objects of hex keys to hex values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            out.push((key, map.next_value::<Pairs>()?));
        }
        Ok(out)
    }
}

/// Decode, optionally hash, sort and deduplicate-check the entries; drop empty values
/// unless `keep_empty` (Substrate layouts, where an empty value is a value).
fn decode_pairs(
    pairs: &[(String, String)],
    secure: bool,
    keep_empty: bool,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
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
    Ok(entries
        .into_iter()
        .filter(|e| keep_empty || !e.1.is_empty())
        .map(|(k, v, _)| (k, v))
        .collect())
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
        let err = decode_pairs(&p, false, false).unwrap_err().to_string();
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
        let err =
            decode_pairs(&pairs(&[("0x0a", "0x01"), ("0A", "0x02")]), true, false).unwrap_err();
        assert!(format!("{err:#}").contains("\"0A\""), "{err:#}");
        let leaves =
            decode_pairs(&pairs(&[("0x02", "0x"), ("0x01", "0xff")]), false, false).unwrap();
        assert_eq!(leaves, vec![(vec![1u8], vec![0xffu8])]);
    }

    #[test]
    fn odd_hex_names_the_key() {
        let err = decode_pairs(&pairs(&[("0x123", "0x01")]), false, false).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("\"0x123\"") && msg.contains("odd"), "{msg}");
    }
}
