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
//! one [`FixtureError`] naming the field (the readers of one field and the error are the
//! test suites' shared ones, `crate::fixture_json`).

use eth::Genesis;
use serde_json::Value;
use state::{decode_hex, H256};

use crate::fixture_json::{
    alloc, array, bytes, field, hash32, object, optional, parse_tests, required, small_number,
    string, FieldProblem, FixtureError,
};

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
    Ok(BlockTestFile { tests: parse_tests(text, parse_test)? })
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
    let post = match (optional(test, "postState"), optional(test, "postStateHash")) {
        (Some(state), _) => PostState::Accounts(alloc(&at("postState"), state)?),
        (None, Some(root)) => PostState::Root(hash32(&at("postStateHash"), root)?),
        (None, None) => {
            let problem = FieldProblem::MissingWithAlternative { alternative: "postStateHash" };
            return Err(field(&at("postState"), problem));
        }
    };
    let chain_id = match optional(test, "config") {
        None => None,
        Some(config) => {
            let config = object(config, &at("config"))?;
            let path = at("config.chainid");
            config.get("chainid").map(|id| small_number(&path, id)).transpose()?
        }
    };
    Ok(BlockTest {
        network: string(required(test, name, "network")?, &at("network"))?.to_string(),
        chain_id,
        pre: alloc(&at("pre"), required(test, name, "pre")?)?,
        genesis_hash: hash32(
            &format!("{genesis_path}.hash"),
            required(genesis, &genesis_path, "hash")?,
        )?,
        genesis_state_root: hash32(
            &format!("{genesis_path}.stateRoot"),
            required(genesis, &genesis_path, "stateRoot")?,
        )?,
        genesis_rlp: bytes(&at("genesisRLP"), required(test, name, "genesisRLP")?)?,
        blocks,
        post,
        last_block_hash: hash32(&at("lastblockhash"), required(test, name, "lastblockhash")?)?,
    })
}

fn parse_block(path: &str, value: &Value) -> Result<TestBlock, FixtureError> {
    let block = object(value, path)?;
    let expect_exception = match optional(block, "expectException") {
        None => None,
        Some(e) => Some(string(e, &format!("{path}.expectException"))?.to_string()),
    };
    let rlp_path = format!("{path}.rlp");
    let text = string(required(block, path, "rlp")?, &rlp_path)?;
    let rlp = match decode_hex(text) {
        Ok(b) => BlockRlp::Bytes(b),
        Err(_) if expect_exception.is_some() => BlockRlp::Malformed(text.to_string()),
        Err(e) => return Err(field(&rlp_path, e.into())),
    };
    let hash = match optional(block, "blockHeader") {
        None => None,
        Some(header) => {
            let header_path = format!("{path}.blockHeader");
            let header = object(header, &header_path)?;
            let hash = required(header, &header_path, "hash")?;
            Some(hash32(&format!("{header_path}.hash"), hash)?)
        }
    };
    Ok(TestBlock { rlp, expect_exception, hash })
}
