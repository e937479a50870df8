//! The `BlockchainTests` JSON format, parsed into typed fixtures with typed errors.
//!
//! A file is an object of tests by name. Each test has `network` (the fork schedule's
//! name), `pre` (a genesis-style allocation, read by [`eth::Genesis`]),
//! `genesisBlockHeader` (its `hash` and `stateRoot` are read), `genesisRLP` (the genesis
//! block), `blocks` (each with `rlp`, and `expectException` when the block must be
//! refused, `blockHeader.hash` when given), `postState` (an allocation) or
//! `postStateHash` (its root), `lastblockhash`, and optionally `config.chainid`. Other
//! fields (`_info`, `sealEngine`, a block's `transactions`, `rlp_decoded`…) are ignored. A
//! block expected to be refused may carry `rlp` that is not even hex (kept as
//! [`BlockRlp::Malformed`]: refusing it is the test). Never panics: a malformed file is
//! one [`FixtureError`] naming the field.

use eth::{Genesis, GenesisError};
use serde_json::{Map, Value};
use state::{decode_hex, HexError, H256};

/// A malformed blockchain-test file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FixtureError {
    /// The text is not JSON (or has a key twice in one object).
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The file holds no test.
    #[error("the file holds no test (expected an object of tests by name)")]
    NoTests,
    /// A field is missing or malformed.
    #[error("{path}: {problem}")]
    Field {
        /// Where: `test.blocks[2].rlp`.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// An allocation (`pre` or `postState`) does not parse.
    #[error("{path}: {source}")]
    Alloc {
        /// `test.pre` or `test.postState`.
        path: String,
        /// Why (boxed: it is large).
        source: Box<GenesisError>,
    },
}

/// A parsed blockchain-test file: its tests, in file order.
#[derive(Debug, Clone)]
pub struct BlockTestFile {
    /// The tests by name.
    pub tests: Vec<(String, BlockTest)>,
}

/// One blockchain test.
#[derive(Debug, Clone)]
pub struct BlockTest {
    /// The fork schedule's name (`Cancun`, `ShanghaiToCancunAtTime15k`…).
    pub network: String,
    /// `config.chainid`, when given (else 1).
    pub chain_id: Option<u64>,
    /// The genesis allocation.
    pub pre: Genesis,
    /// `genesisBlockHeader.hash`.
    pub genesis_hash: H256,
    /// `genesisBlockHeader.stateRoot`.
    pub genesis_state_root: H256,
    /// `genesisRLP`: the genesis block.
    pub genesis_rlp: Vec<u8>,
    /// The blocks, in import order.
    pub blocks: Vec<TestBlock>,
    /// The expected state after the last block.
    pub post: PostState,
    /// `lastblockhash`: the expected head.
    pub last_block_hash: H256,
}

/// One block of a test.
#[derive(Debug, Clone)]
pub struct TestBlock {
    /// Its RLP.
    pub rlp: BlockRlp,
    /// The exception it must be refused with (`None`: it must be accepted).
    pub expect_exception: Option<String>,
    /// `blockHeader.hash`, when given.
    pub hash: Option<H256>,
}

/// A block's `rlp` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockRlp {
    /// The bytes.
    Bytes(Vec<u8>),
    /// Not hex (only in a block expected to be refused).
    Malformed(String),
}

/// The expected post-state.
#[derive(Debug, Clone)]
pub enum PostState {
    /// Every account (`postState`).
    Accounts(Genesis),
    /// Only the state root (`postStateHash`).
    Root(H256),
}

/// Parse a blockchain-test file's text.
pub fn parse_file(text: &str) -> Result<BlockTestFile, FixtureError> {
    let value = eth::parse_json_strict(text)?;
    let tests = object(&value, "the file")?;
    if tests.is_empty() {
        return Err(FixtureError::NoTests);
    }
    let tests = tests
        .iter()
        .map(|(name, test)| Ok((name.clone(), parse_test(name, test)?)))
        .collect::<Result<Vec<_>, FixtureError>>()?;
    Ok(BlockTestFile { tests })
}

fn parse_test(name: &str, value: &Value) -> Result<BlockTest, FixtureError> {
    let test = object(value, name)?;
    let at = |field: &str| format!("{name}.{field}");
    let genesis_path = at("genesisBlockHeader");
    let genesis = object(required(test, name, "genesisBlockHeader")?, &genesis_path)?;
    let blocks_path = at("blocks");
    let blocks = array(required(test, name, "blocks")?, &blocks_path)?
        .iter()
        .enumerate()
        .map(|(i, b)| parse_block(&format!("{blocks_path}[{i}]"), b))
        .collect::<Result<Vec<_>, _>>()?;
    let post = match (test.get("postState"), test.get("postStateHash")) {
        (Some(state), _) if !state.is_null() => {
            PostState::Accounts(alloc(state, &at("postState"))?)
        }
        (_, Some(root)) if !root.is_null() => PostState::Root(hash32(root, &at("postStateHash"))?),
        _ => return Err(field(at("postState"), "missing (and no postStateHash)")),
    };
    let chain_id = match test.get("config").filter(|c| !c.is_null()) {
        None => None,
        Some(config) => {
            let config = object(config, &at("config"))?;
            config.get("chainid").map(|id| chain_id(id, &at("config.chainid"))).transpose()?
        }
    };
    Ok(BlockTest {
        network: string(required(test, name, "network")?, &at("network"))?.to_string(),
        chain_id,
        pre: alloc(required(test, name, "pre")?, &at("pre"))?,
        genesis_hash: hash32(
            required(genesis, &genesis_path, "hash")?,
            &format!("{genesis_path}.hash"),
        )?,
        genesis_state_root: hash32(
            required(genesis, &genesis_path, "stateRoot")?,
            &format!("{genesis_path}.stateRoot"),
        )?,
        genesis_rlp: bytes(required(test, name, "genesisRLP")?, &at("genesisRLP"))?,
        blocks,
        post,
        last_block_hash: hash32(required(test, name, "lastblockhash")?, &at("lastblockhash"))?,
    })
}

fn parse_block(path: &str, value: &Value) -> Result<TestBlock, FixtureError> {
    let block = object(value, path)?;
    let expect_exception = match block.get("expectException") {
        None | Some(Value::Null) => None,
        Some(e) => Some(string(e, &format!("{path}.expectException"))?.to_string()),
    };
    let rlp_path = format!("{path}.rlp");
    let text = string(required(block, path, "rlp")?, &rlp_path)?;
    let rlp = match decode_hex(text) {
        Ok(b) => BlockRlp::Bytes(b),
        Err(_) if expect_exception.is_some() => BlockRlp::Malformed(text.to_string()),
        Err(e) => return Err(field(rlp_path, e)),
    };
    let hash = match block.get("blockHeader").filter(|h| !h.is_null()) {
        None => None,
        Some(header) => {
            let header_path = format!("{path}.blockHeader");
            let header = object(header, &header_path)?;
            let hash = required(header, &header_path, "hash")?;
            Some(hash32(hash, &format!("{header_path}.hash"))?)
        }
    };
    Ok(TestBlock { rlp, expect_exception, hash })
}

fn alloc(value: &Value, path: &str) -> Result<Genesis, FixtureError> {
    object(value, path)?;
    Genesis::from_value(value)
        .map_err(|e| FixtureError::Alloc { path: path.to_string(), source: Box::new(e) })
}

fn chain_id(value: &Value, path: &str) -> Result<u64, FixtureError> {
    let n = match value {
        Value::Number(n) => {
            n.as_u64().ok_or_else(|| field(path.to_string(), "not a 64-bit integer"))?
        }
        other => {
            let text = string(other, path)?;
            let n = eth::parse_quantity(text).map_err(|e| field(path.to_string(), e))?;
            u64::try_from(n).map_err(|_| field(path.to_string(), "does not fit 64 bits"))?
        }
    };
    Ok(n)
}

fn required<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<&'a Value, FixtureError> {
    obj.get(name).filter(|v| !v.is_null()).ok_or_else(|| field(format!("{path}.{name}"), "missing"))
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, FixtureError> {
    value.as_object().ok_or_else(|| wrong(path, "an object", value))
}

fn array<'a>(value: &'a Value, path: &str) -> Result<&'a Vec<Value>, FixtureError> {
    value.as_array().ok_or_else(|| wrong(path, "an array", value))
}

fn string<'a>(value: &'a Value, path: &str) -> Result<&'a str, FixtureError> {
    value.as_str().ok_or_else(|| wrong(path, "a string", value))
}

fn bytes(value: &Value, path: &str) -> Result<Vec<u8>, FixtureError> {
    decode_hex(string(value, path)?).map_err(|e| field(path.to_string(), e))
}

fn hash32(value: &Value, path: &str) -> Result<H256, FixtureError> {
    let b = bytes(value, path)?;
    let len = b.len();
    let array: [u8; 32] = b
        .try_into()
        .map_err(|_| field(path.to_string(), HexError::Length { expected: 32, got: len }))?;
    Ok(H256(array))
}

fn field(path: String, problem: impl ToString) -> FixtureError {
    FixtureError::Field { path, problem: problem.to_string() }
}

fn wrong(path: &str, expected: &str, found: &Value) -> FixtureError {
    let found = match found {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    field(path.to_string(), format!("expected {expected}, found {found}"))
}
