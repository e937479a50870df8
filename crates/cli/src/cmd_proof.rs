//! `arbor prove` and `arbor verify-proof`: eth_getProof (EIP-1186) proofs of an account
//! and its slots in a genesis state or in a database of the account model (at its head, or
//! at a recent block with `--block`), proofs of a main-trie key of a database, and their
//! verification against a state root (and, with `--address`/`--slot`, against the question
//! they answer).
//!
//! `verify-proof` separates a malformed input (not JSON, not a proof object, bad hex:
//! `error: …`, exit 1) from a well-formed proof that does not verify (`invalid: …` on
//! stdout, exit 1). Both kinds of failure come from untrusted bytes and neither panics.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use eth::{parse_address, parse_quantity, AccountProof, AccountReader, EthState};
use evm::StoreTries;
use serde::Serialize;
use serde_json::Value;
use state::{TrieId, H256};
use trie::{verify_proof, Layout, LayoutName, WithLayout};

use crate::cmd_db::{at_block, at_error};
use crate::db_args::{open_reading_as, DbArgs};
use crate::input::{display_name, read_genesis, read_text_bytes, utf8_text};

/// Arguments of `arbor prove`: `--genesis FILE --address A [--slot S…]`, `--db DIR
/// --address A [--slot S…]`, or `--db DIR KEY`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["genesis", "db"])))]
pub(crate) struct ProveArgs {
    /// The genesis whose state is proven (with --address).
    #[arg(long, value_name = "FILE", requires = "address")]
    genesis: Option<PathBuf>,
    /// The account to prove, eth_getProof's answer (with --genesis, or --db of an Ethereum
    /// database): 40 hex digits, 0x optional.
    #[arg(long, value_name = "0x…", value_parser = parse_address_arg)]
    address: Option<eth::Address>,
    /// A storage slot to prove (a quantity such as 0x0, or up to 32 bytes of hex);
    /// repeatable, proven in the order given.
    #[arg(
        long = "slot",
        value_name = "0x…",
        requires = "address",
        conflicts_with = "key",
        value_parser = parse_slot
    )]
    slots: Vec<H256>,
    /// A database whose account (--address) or main-trie KEY is proven against its head
    /// root (or --block's).
    #[arg(long, value_name = "DIR")]
    db: Option<PathBuf>,
    /// Store configuration file for --db.
    #[arg(long, value_name = "FILE", requires = "db")]
    config: Option<PathBuf>,
    /// The main-trie key to prove (hex, 0x optional; with --db).
    #[arg(
        value_name = "KEY",
        requires = "db",
        conflicts_with = "address",
        value_parser = crate::input::parse_key
    )]
    key: Option<crate::input::HexKey>,
    /// Prove at block N instead of the head (with --db): any block from head -
    /// `history.recent_blocks` (128 by default) to the head; 0 to 9,223,372,036,854,775,807.
    #[arg(
        long,
        value_name = "N",
        requires = "db",
        value_parser = crate::limits::u64_in(0, crate::limits::BLOCK_MAX)
    )]
    block: Option<u64>,
    /// Accepted for the common convention: the proof is always printed as JSON.
    #[arg(long)]
    json: bool,
    /// The layout the database must have (with --db; it records its own, which is used
    /// when this is absent): ethereum, substrate-v0, substrate-v1.
    #[arg(long, value_name = "LAYOUT", requires = "db", value_parser = crate::layout_arg::parser())]
    layout: Option<LayoutName>,
}

/// What `arbor prove --db` prints, and `verify-proof` reads back.
#[derive(Debug, Serialize, serde::Deserialize)]
struct KeyProof {
    /// The block the proof is of (`number` in proofs of earlier versions).
    #[serde(alias = "number")]
    block: u64,
    root: String,
    key: String,
    /// `None` when the proof shows the key absent.
    value: Option<String>,
    proof: Vec<String>,
    /// The trie layout (absent in proofs of earlier versions: Ethereum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layout: Option<String>,
}

/// Arguments of `arbor verify-proof`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The account an eth_getProof result must be of: the proof answers this question
    /// (40 hex digits, 0x optional). A proof of another account is invalid.
    #[arg(long, value_name = "0x…", value_parser = parse_address_arg)]
    address: Option<eth::Address>,
    /// With --address: a slot the result must prove, repeatable, in the order of its
    /// storage proofs (none: it must hold no storage proof).
    #[arg(long = "slot", value_name = "0x…", requires = "address", value_parser = parse_slot)]
    slots: Vec<H256>,
    /// The state root to verify against: 0x + 64 hex digits.
    #[arg(long, value_name = "0x…", value_parser = crate::input::parse_h256)]
    root: H256,
    /// An eth_getProof result object, a whole JSON-RPC response, or `-` for stdin.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The layout to verify a key proof in [default: the one the proof names, else
    /// ethereum]; a proof that names another layout is invalid.
    #[arg(long, value_name = "LAYOUT", value_parser = crate::layout_arg::parser())]
    layout: Option<LayoutName>,
    /// Print {"valid": bool, "reason": …} instead of `valid` / `invalid: …`.
    #[arg(long)]
    json: bool,
}

/// Run `arbor prove`.
pub(crate) fn prove(args: &ProveArgs) -> Result<ExitCode> {
    // clap waives `requires = "db"` once --genesis is given (the two exclude each other), so
    // the flags of a database are checked here.
    if args.genesis.is_some() {
        let db_flags = [
            ("--block", args.block.is_some()),
            ("--config", args.config.is_some()),
            ("--layout", args.layout.is_some()),
        ];
        if let Some((flag, _)) = db_flags.into_iter().find(|(_, given)| *given) {
            return Err(crate::usage(format!(
                "{flag} needs --db: a genesis is proven in memory, without blocks or a store"
            )));
        }
    }
    match (&args.genesis, &args.address, &args.db, &args.key) {
        (Some(genesis), Some(address), None, None) => prove_genesis(genesis, address, &args.slots),
        (None, Some(address), Some(db), None) => prove_account_db(args, db, address),
        (None, None, Some(db), Some(key)) => prove_db(args, db, &key.0),
        // clap's group and conflicts rule out the rest but for --db without a KEY or an
        // --address.
        _ => Err(crate::usage(
            "give --genesis FILE --address ADDRESS, --db DIR --address ADDRESS or --db DIR KEY",
        )),
    }
}

/// The eth_getProof answer for an account (and slots) of a database, at the head or at
/// `--block`; `eth::AccountReader` checks it against the block's root before it is printed.
/// The block and its root go to stderr: the answer itself has no field for them.
fn prove_account_db(args: &ProveArgs, db: &Path, address: &eth::Address) -> Result<ExitCode> {
    if let Some(layout) = args.layout.filter(|l| *l != LayoutName::Ethereum) {
        return Err(crate::usage(format!(
            "--address proves an Ethereum account; --layout {layout} names another layout"
        )));
    }
    let db_args = DbArgs { db: db.to_path_buf(), config: args.config.clone() };
    let db = open_reading_as(&db_args, Some(LayoutName::Ethereum))?;
    let what = "cannot build the proof";
    let (block, root, proof) = match args.block {
        None => {
            let reader = AccountReader::new(StoreTries(&db));
            let proof = reader.prove(address, &args.slots).context(what)?;
            (db.head_number(), db.head_root(), proof)
        }
        Some(n) => {
            let view = at_block(&db, n)?;
            let (block, root) = (view.number(), view.root());
            let proof =
                AccountReader::new(StoreTries(view)).prove(address, &args.slots).map_err(|e| {
                    match e {
                        eth::ReadError::Source(e) => at_error(e, what),
                        e => anyhow::Error::new(e).context(what),
                    }
                })?;
            (block, root, proof)
        }
    };
    outln!("{}", serde_json::to_string_pretty(&proof.to_json())?)?;
    errln!("proof of block {block}, state root {root}");
    Ok(ExitCode::SUCCESS)
}

/// A proof of a key at one block, with the value the store reads there.
struct BlockProof {
    block: u64,
    root: H256,
    value: Option<Vec<u8>>,
    proof: Vec<Vec<u8>>,
}

/// A proof of `key` in the main trie of a database, at the head or at `block`, checked
/// against that block's root before it is printed.
fn prove_db(args: &ProveArgs, db: &Path, key: &[u8]) -> Result<ExitCode> {
    let db_args = DbArgs { db: db.to_path_buf(), config: args.config.clone() };
    let db = open_reading_as(&db_args, args.layout)?;
    let p = match args.block {
        None => prove_at_head(&db, key)?,
        Some(n) => prove_at_block(&db, n, key)?,
    };
    let proven = verify_in(db.layout(), &p.root, key, &p.proof)
        .context("the database produced a proof that does not verify (corrupt store?)")?;
    if proven != p.value {
        bail!("the proof shows a value other than the stored one (corrupt store?)");
    }
    let out = KeyProof {
        block: p.block,
        root: p.root.to_string(),
        key: format!("0x{}", hex::encode(key)),
        value: p.value.map(|v| format!("0x{}", hex::encode(v))),
        proof: p.proof.iter().map(|n| format!("0x{}", hex::encode(n))).collect(),
        layout: Some(db.layout().as_str().to_string()),
    };
    outln!("{}", serde_json::to_string_pretty(&out)?)?;
    Ok(ExitCode::SUCCESS)
}

/// `verify_proof` in `layout`: the value the proof shows for `key` (`None`: absent).
fn verify_in(
    layout: LayoutName,
    root: &H256,
    key: &[u8],
    nodes: &[Vec<u8>],
) -> Result<Option<Vec<u8>>, trie::ProofError> {
    struct Verify<'a>(&'a H256, &'a [u8], &'a [Vec<u8>]);
    impl WithLayout for Verify<'_> {
        type Output = Result<Option<Vec<u8>>, trie::ProofError>;
        fn run<L: Layout>(self) -> Self::Output {
            verify_proof::<L>(self.0, self.1, self.2)
        }
    }
    layout.dispatch(Verify(root, key, nodes))
}

/// A proof at the head.
fn prove_at_head(db: &store::StateDb, key: &[u8]) -> Result<BlockProof> {
    let proof = db.prove(TrieId::Main, key).context("cannot build the proof")?;
    let value = db.get(&TrieId::Main, key).context("cannot read the key")?;
    Ok(BlockProof { block: db.head_number(), root: db.head_root(), value, proof })
}

/// A proof at recent block `n` (a block outside the window is a usage error).
fn prove_at_block(db: &store::StateDb, n: u64, key: &[u8]) -> Result<BlockProof> {
    let view = at_block(db, n)?;
    let proof = view.prove(TrieId::Main, key).map_err(|e| at_error(e, "cannot build the proof"))?;
    let value = view.get(&TrieId::Main, key).map_err(|e| at_error(e, "cannot read the key"))?;
    Ok(BlockProof { block: view.number(), root: view.root(), value, proof })
}

/// An eth_getProof-shaped proof of an account (and slots) of a genesis state.
fn prove_genesis(genesis: &Path, address: &eth::Address, slots: &[H256]) -> Result<ExitCode> {
    let genesis = read_genesis(genesis)?;
    let mut state = EthState::from_genesis(&genesis).context("cannot build the genesis state")?;
    let proof = state.prove(address, slots).context("cannot build the proof")?;
    outln!("{}", serde_json::to_string_pretty(&proof.to_json())?)?;
    Ok(ExitCode::SUCCESS)
}

/// A slot as JSON-RPC spells it: a quantity (`0x0`) or up to 32 bytes of hex.
/// clap's parser of `--address`.
fn parse_address_arg(s: &str) -> Result<eth::Address, String> {
    parse_address(s).map_err(|e| format!("{s:?} is not an address: {e}"))
}

/// clap's parser of `--slot`: a quantity (0x0, 42) up to 2^256 - 1.
fn parse_slot(s: &str) -> Result<H256, String> {
    let v = parse_quantity(s).map_err(|e| format!("{s:?} is not a slot: {e}"))?;
    Ok(H256(v.to_be_bytes()))
}

/// Run `arbor verify-proof`.
pub(crate) fn verify(args: &VerifyArgs) -> Result<ExitCode> {
    let root = args.root;
    // A file that cannot be read is exit 3; one that is not a proof (not even UTF-8 text)
    // is a negative verdict (exit 1), like a proof that fails.
    let bytes = read_text_bytes(&args.file)?;
    let query = args.address.as_ref().map(|a| (a, args.slots.as_slice()));
    let verdict = utf8_text(&args.file, bytes)
        .and_then(|text| check_proof(&text, &args.file, &root, args.layout, query))
        .map_err(|e| crate::rejected(&e))?;
    if args.json {
        let reason = verdict.as_ref().err().map(ToString::to_string);
        outln!("{}", serde_json::json!({ "valid": verdict.is_ok(), "reason": reason }))?;
    } else {
        match &verdict {
            Ok(()) => outln!("valid")?,
            Err(e) => outln!("invalid: {e}")?,
        }
    }
    Ok(if verdict.is_ok() { ExitCode::SUCCESS } else { crate::negative() })
}

/// The question an eth_getProof result must answer: an account and its slots, in order.
type Query<'a> = (&'a eth::Address, &'a [H256]);

/// Decode `text` as either proof shape and check it against `root` (and an eth_getProof
/// result against `query` when given): the verdict, or why the text is no proof at all.
fn check_proof(
    text: &str,
    file: &Path,
    root: &H256,
    layout: Option<LayoutName>,
    query: Option<Query<'_>>,
) -> Result<Result<(), String>> {
    // A key given twice in one object (a second "balance" or "value") is refused: the
    // verdict must be about the values a reader of the file sees.
    let json: Value = eth::parse_json_strict(text)
        .with_context(|| format!("{} is not valid JSON", display_name(file)))?;
    let obj = proof_object(&json)?;
    if obj.get("accountProof").is_none() && obj.get("proof").is_some() {
        // The shape `arbor prove --db` prints: a main-trie key, its value, the nodes.
        let proof = KeyProof::from_json(obj).with_context(|| {
            format!("{} is neither an eth_getProof result nor a key proof", display_name(file))
        })?;
        if query.is_some() {
            return Ok(Err("--address asks for an eth_getProof result, not a key proof".into()));
        }
        Ok(proof.verify(root, layout))
    } else {
        if layout.is_some_and(|l| l != LayoutName::Ethereum) {
            return Ok(Err("an eth_getProof result is in the ethereum layout".into()));
        }
        let proof = AccountProof::from_json(obj)
            .with_context(|| format!("{} is not an eth_getProof result", display_name(file)))?;
        let asked = match query {
            Some((address, slots)) => proof.check_query(address, slots),
            None => Ok(()),
        };
        Ok(asked.and_then(|()| proof.verify(root)).map_err(|e| e.to_string()))
    }
}

/// Largest key proof `verify-proof` reads: nodes of a 127-byte key's path.
const KEY_PROOF_NODES_MAX: usize = 2 * 127 + 1;

impl KeyProof {
    fn from_json(v: &Value) -> Result<KeyProof> {
        let p: KeyProof = serde_json::from_value(v.clone()).context("not a key proof")?;
        if p.proof.len() > KEY_PROOF_NODES_MAX {
            bail!("{} proof nodes exceed the {KEY_PROOF_NODES_MAX}-node limit", p.proof.len());
        }
        Ok(p)
    }

    /// The layout to check in: `asked` (from the command line), which the proof's own
    /// must not contradict, else the proof's, else Ethereum.
    fn layout(&self, asked: Option<LayoutName>) -> Result<LayoutName, String> {
        let named = match &self.layout {
            None => None,
            Some(name) => Some(name.parse::<LayoutName>().map_err(|e| e.to_string())?),
        };
        match (asked, named) {
            (Some(a), Some(n)) if a != n => {
                Err(format!("the proof is in the {n} layout, not in {a} (--layout)"))
            }
            (Some(l), _) | (None, Some(l)) => Ok(l),
            (None, None) => Ok(LayoutName::Ethereum),
        }
    }

    /// Check the proof against `root`: it must show the claimed value (or absence).
    fn verify(&self, root: &H256, layout: Option<LayoutName>) -> Result<(), String> {
        let layout = self.layout(layout)?;
        let hex = |s: &str, what: &str| {
            state::decode_hex(s).map_err(|e| format!("{what} is not hex: {e}"))
        };
        // The file names the root it proves against; another root is no proof of it.
        let named = crate::input::parse_h256(&self.root).map_err(|e| format!("root: {e}"))?;
        if named != *root {
            return Err(format!("the proof is of root {named}, not of the given root {root}"));
        }
        let key = hex(&self.key, "key")?;
        if key.len() > store::KEY_BYTES_MAX {
            return Err(format!("key of {} bytes exceeds {}", key.len(), store::KEY_BYTES_MAX));
        }
        let claimed = self.value.as_deref().map(|v| hex(v, "value")).transpose()?;
        let nodes =
            self.proof.iter().map(|n| hex(n, "proof node")).collect::<Result<Vec<_>, _>>()?;
        let proven = verify_in(layout, root, &key, &nodes).map_err(|e| e.to_string())?;
        if proven != claimed {
            return Err("the proof shows another value for the key".into());
        }
        Ok(())
    }
}

/// The eth_getProof result inside `json`: the object itself, or a JSON-RPC response's
/// `result`. A JSON-RPC error response is reported as such.
fn proof_object(json: &Value) -> Result<&Value> {
    let Some(obj) = json.as_object() else {
        bail!("expected a JSON object (an eth_getProof result or a JSON-RPC response)");
    };
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        bail!("the file is a JSON-RPC error response: {err}");
    }
    if let Some(result) = obj.get("result") {
        return Ok(result);
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_quantities_or_data() {
        assert_eq!(parse_slot("0x0").unwrap(), H256::ZERO);
        let mut one = [0u8; 32];
        one[31] = 1;
        assert_eq!(parse_slot(&format!("0x{}", "0".repeat(63) + "1")).unwrap(), H256(one));
        assert!(parse_slot("0xzz").is_err());
        assert!(parse_slot(&format!("0x1{}", "0".repeat(64))).is_err(), "more than 32 bytes");
    }

    #[test]
    fn finds_the_result_of_a_response() {
        let inner = serde_json::json!({ "address": "0x00" });
        let rpc = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "result": inner.clone() });
        assert_eq!(proof_object(&rpc).unwrap(), &inner);
        assert_eq!(proof_object(&inner).unwrap(), &inner);
        let err = serde_json::json!({ "jsonrpc": "2.0", "error": { "code": -32000 } });
        assert!(proof_object(&err).is_err());
        assert!(proof_object(&serde_json::json!([1])).is_err());
        let null = serde_json::json!({ "result": null, "error": { "code": -32000 } });
        let e = proof_object(&null).unwrap_err().to_string();
        assert!(e.contains("error response"), "{e}");
    }

    #[test]
    fn a_key_given_twice_is_no_proof() {
        let file = Path::new("p.json");
        let text = r#"{"address": "0x00", "balance": "0x1", "balance": "0x0"}"#;
        let e = check_proof(text, file, &H256::ZERO, None, None).unwrap_err();
        assert!(format!("{e:#}").contains("duplicate key \"balance\""), "{e:#}");
    }
}
