//! The `GeneralStateTests` JSON format, parsed into typed fixtures with typed errors.
//!
//! A file is an object of tests by name. Each test has `env` (the block: coinbase,
//! difficulty, gas limit, number, timestamp, `currentBaseFee`, `currentRandom`,
//! `currentExcessBlobGas`, `currentBeaconRoot`, `currentWithdrawalsRoot`, optional
//! `currentChainId`), `pre` (a genesis-style allocation, read by [`eth::Genesis`]),
//! `transaction` (`data`, `gasLimit` and `value` arrays, `nonce`, `to` (empty for a
//! creation), `secretKey` and/or `sender`, `gasPrice` or `maxFeePerGas` +
//! `maxPriorityFeePerGas`, `accessLists` (one per `data` entry), `blobVersionedHashes` +
//! `maxFeePerBlobGas`, `authorizationList`, an optional explicit `type` and `chainId`) and
//! `post`: per fork name, entries with `hash` (the state root), `logs` (keccak of the RLP
//! of the logs), `indexes` (`data`/`gas`/`value`) and `expectException`. A test's
//! `config.chainid` (execution-spec-tests) sets the chain id. Other fields (`_info`,
//! `txbytes`, the rest of `config`, `out`, a post entry's `state`) are ignored.
//!
//! Everything structural is checked here (types, hex, lengths, indexes in range), so a
//! malformed file is one [`FixtureError`] naming the field (the readers of one field and the
//! error are the test suites' shared ones, `crate::fixture_json`). Transaction numbers are
//! kept as written when they do not fit 256 bits ([`TxNumber::Unencodable`]): such a
//! transaction is one the fixture expects to be invalid, decided per post entry. Never
//! panics.

use alloy_primitives::U256;
use eth::{parse_quantity, Address, Genesis, NumberError};
use serde_json::Value;
use state::H256;

use crate::fixture_json::{
    address, alloc, array, bytes, field, hash32, number, object, optional, parse_tests, required,
    small_number, wrong, FieldProblem, FixtureError,
};

/// A parsed state-test file: its tests, in file order.
#[derive(Debug, Clone)]
pub struct StateTestFile {
    /// The tests by name.
    pub tests: Vec<(String, StateTest)>,
}

/// One test: a pre-state, a block, a transaction template and expected results per fork.
#[derive(Debug, Clone)]
pub struct StateTest {
    /// The pre-state.
    pub pre: Genesis,
    /// The block environment.
    pub env: Env,
    /// The transaction template (arrays indexed by each post entry).
    pub transaction: TxTemplate,
    /// Expected results per fork name, in file order.
    pub post: Vec<(String, Vec<PostEntry>)>,
}

/// The block a state test's transaction runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// `currentCoinbase`.
    pub coinbase: Address,
    /// `currentDifficulty`.
    pub difficulty: U256,
    /// `currentGasLimit`.
    pub gas_limit: u64,
    /// `currentNumber`.
    pub number: U256,
    /// `currentTimestamp`.
    pub timestamp: U256,
    /// `currentBaseFee` (London on).
    pub base_fee: Option<u64>,
    /// `currentRandom` (the prevrandao, Paris on).
    pub random: Option<H256>,
    /// `currentExcessBlobGas` (Cancun on).
    pub excess_blob_gas: Option<u64>,
    /// `currentBeaconRoot` (EIP-4788: a block-level system call state tests do not run).
    pub beacon_root: Option<H256>,
    /// `currentWithdrawalsRoot` (block-level; unused by a transaction).
    pub withdrawals_root: Option<H256>,
    /// `currentChainId`, or the test's `config.chainid` (1 when both are absent).
    pub chain_id: u64,
}

/// A transaction number as written: its value, or too large for 256 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxNumber {
    /// The value.
    Value(U256),
    /// More than 256 bits, or written `0x:bigint …` (retesteth's spelling of a number a
    /// transaction's RLP cannot carry): the transaction cannot exist.
    Unencodable,
}

/// One entry of an access list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessListEntry {
    /// The account.
    pub address: Address,
    /// Its slots.
    pub storage_keys: Vec<H256>,
}

/// One EIP-7702 authorization as the fixture writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationEntry {
    /// `chainId`.
    pub chain_id: TxNumber,
    /// `address`: the code the authority delegates to.
    pub address: Address,
    /// `nonce`.
    pub nonce: TxNumber,
    /// `v` or `yParity`.
    pub y_parity: TxNumber,
    /// `r`.
    pub r: TxNumber,
    /// `s`.
    pub s: TxNumber,
}

/// The transaction template of a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxTemplate {
    /// `data`: call data (or init code), one per data index.
    pub data: Vec<Vec<u8>>,
    /// `gasLimit`, one per gas index.
    pub gas_limit: Vec<TxNumber>,
    /// `value`, one per value index.
    pub value: Vec<TxNumber>,
    /// `nonce`.
    pub nonce: TxNumber,
    /// `to`: `None` for a contract creation.
    pub to: Option<Address>,
    /// `secretKey`.
    pub secret_key: Option<H256>,
    /// `sender`.
    pub sender: Option<Address>,
    /// `gasPrice` (legacy and EIP-2930).
    pub gas_price: Option<TxNumber>,
    /// `maxFeePerGas` (EIP-1559 on).
    pub max_fee_per_gas: Option<TxNumber>,
    /// `maxPriorityFeePerGas`.
    pub max_priority_fee_per_gas: Option<TxNumber>,
    /// `accessLists`, one per data index (`None` entries: no list for that data).
    pub access_lists: Option<Vec<Option<Vec<AccessListEntry>>>>,
    /// `blobVersionedHashes` (EIP-4844).
    pub blob_versioned_hashes: Option<Vec<H256>>,
    /// `maxFeePerBlobGas`.
    pub max_fee_per_blob_gas: Option<TxNumber>,
    /// `authorizationList` (EIP-7702).
    pub authorization_list: Option<Vec<AuthorizationEntry>>,
    /// An explicit `type`.
    pub tx_type: Option<u8>,
    /// An explicit `chainId`.
    pub chain_id: Option<TxNumber>,
}

/// Which entries of the transaction template a post entry uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Indexes {
    /// Index into `data` (and `accessLists`).
    pub data: usize,
    /// Index into `gasLimit`.
    pub gas: usize,
    /// Index into `value`.
    pub value: usize,
}

/// The expected result of one transaction at one fork.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostEntry {
    /// The transaction's parts.
    pub indexes: Indexes,
    /// The state root after the transaction.
    pub hash: H256,
    /// keccak256 of the RLP list of the transaction's logs.
    pub logs: H256,
    /// The exception the transaction must be rejected with (a name; `None`: valid).
    pub expect_exception: Option<String>,
}

/// Parse a state-test file's text.
pub fn parse_file(text: &str) -> Result<StateTestFile, FixtureError> {
    Ok(StateTestFile { tests: parse_tests(text, parse_test)? })
}

fn parse_test(name: &str, value: &Value) -> Result<StateTest, FixtureError> {
    let test = object(value, name)?;
    let pre = alloc(&format!("{name}.pre"), required(test, name, "pre")?)?;
    let mut env = parse_env(&format!("{name}.env"), required(test, name, "env")?)?;
    // execution-spec-tests write the chain id in the test's `config`.
    if let Some(config) = optional(test, "config") {
        let path = format!("{name}.config");
        if let Some(id) = optional(object(config, &path)?, "chainid") {
            env.chain_id = small_number(&format!("{path}.chainid"), id)?;
        }
    }
    let tx_path = format!("{name}.transaction");
    let transaction = parse_template(&tx_path, required(test, name, "transaction")?)?;
    let post_path = format!("{name}.post");
    let mut post = Vec::new();
    for (fork, entries) in object(required(test, name, "post")?, &post_path)? {
        let path = format!("{post_path}.{fork}");
        let entries = array(entries, &path)?
            .iter()
            .enumerate()
            .map(|(i, e)| parse_post_entry(&format!("{path}[{i}]"), e, &transaction))
            .collect::<Result<Vec<_>, _>>()?;
        post.push((fork.clone(), entries));
    }
    Ok(StateTest { pre, env, transaction, post })
}

fn parse_env(path: &str, value: &Value) -> Result<Env, FixtureError> {
    let env = object(value, path)?;
    let word = |name: &str| -> Result<U256, FixtureError> {
        number(&format!("{path}.{name}"), required(env, path, name)?)
    };
    let small = |name: &str| -> Result<Option<u64>, FixtureError> {
        optional(env, name).map(|v| small_number(&format!("{path}.{name}"), v)).transpose()
    };
    let hash = |name: &str| -> Result<Option<H256>, FixtureError> {
        optional(env, name).map(|v| word_hash(&format!("{path}.{name}"), v)).transpose()
    };
    Ok(Env {
        coinbase: address(
            &format!("{path}.currentCoinbase"),
            required(env, path, "currentCoinbase")?,
        )?,
        difficulty: word("currentDifficulty")?,
        gas_limit: small_number(
            &format!("{path}.currentGasLimit"),
            required(env, path, "currentGasLimit")?,
        )?,
        number: word("currentNumber")?,
        timestamp: word("currentTimestamp")?,
        base_fee: small("currentBaseFee")?,
        random: hash("currentRandom")?,
        excess_blob_gas: small("currentExcessBlobGas")?,
        beacon_root: hash("currentBeaconRoot")?,
        withdrawals_root: hash("currentWithdrawalsRoot")?,
        chain_id: small("currentChainId")?.unwrap_or(1),
    })
}

fn parse_template(path: &str, value: &Value) -> Result<TxTemplate, FixtureError> {
    let tx = object(value, path)?;
    let at = |name: &str| format!("{path}.{name}");
    let list = |name: &str| -> Result<&Vec<Value>, FixtureError> {
        array(required(tx, path, name)?, &at(name))
    };
    let numbers = |name: &str| -> Result<Vec<TxNumber>, FixtureError> {
        let items = list(name)?.iter().enumerate();
        items.map(|(i, v)| tx_number(&format!("{}[{i}]", at(name)), v)).collect()
    };
    let opt_number = |name: &str| -> Result<Option<TxNumber>, FixtureError> {
        optional(tx, name).map(|v| tx_number(&at(name), v)).transpose()
    };
    let data = list("data")?
        .iter()
        .enumerate()
        .map(|(i, v)| bytes(&format!("{}[{i}]", at("data")), v))
        .collect::<Result<Vec<_>, _>>()?;
    let to = match optional(tx, "to") {
        None => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(address(&at("to"), v)?),
    };
    Ok(TxTemplate {
        data,
        gas_limit: numbers("gasLimit")?,
        value: numbers("value")?,
        nonce: tx_number(&at("nonce"), required(tx, path, "nonce")?)?,
        to,
        secret_key: optional(tx, "secretKey").map(|v| hash32(&at("secretKey"), v)).transpose()?,
        sender: optional(tx, "sender").map(|v| address(&at("sender"), v)).transpose()?,
        gas_price: opt_number("gasPrice")?,
        max_fee_per_gas: opt_number("maxFeePerGas")?,
        max_priority_fee_per_gas: opt_number("maxPriorityFeePerGas")?,
        access_lists: optional(tx, "accessLists")
            .map(|v| access_lists(&at("accessLists"), v))
            .transpose()?,
        blob_versioned_hashes: optional(tx, "blobVersionedHashes")
            .map(|v| hash_list(&at("blobVersionedHashes"), v))
            .transpose()?,
        max_fee_per_blob_gas: opt_number("maxFeePerBlobGas")?,
        authorization_list: optional(tx, "authorizationList")
            .map(|v| authorizations(&at("authorizationList"), v))
            .transpose()?,
        tx_type: optional(tx, "type").map(|v| tx_type(&at("type"), v)).transpose()?,
        chain_id: opt_number("chainId")?,
    })
}

fn parse_post_entry(path: &str, value: &Value, tx: &TxTemplate) -> Result<PostEntry, FixtureError> {
    let entry = object(value, path)?;
    let at = |name: &str| format!("{path}.{name}");
    let indexes_path = at("indexes");
    let indexes = object(required(entry, path, "indexes")?, &indexes_path)?;
    let index = |name: &str, len: usize| -> Result<usize, FixtureError> {
        let field = format!("{indexes_path}.{name}");
        let i = small_number(&field, required(indexes, &indexes_path, name)?)?;
        match usize::try_from(i) {
            Ok(i) if i < len => Ok(i),
            _ => Err(FixtureError::Field {
                path: field,
                problem: FieldProblem::IndexOutOfRange { index: i as usize, len },
            }),
        }
    };
    let indexes = Indexes {
        data: index("data", tx.data.len())?,
        gas: index("gas", tx.gas_limit.len())?,
        value: index("value", tx.value.len())?,
    };
    let expect_exception = match optional(entry, "expectException") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(wrong(at("expectException"), "a string", other)),
    };
    Ok(PostEntry {
        indexes,
        hash: hash32(&at("hash"), required(entry, path, "hash")?)?,
        logs: hash32(&at("logs"), required(entry, path, "logs")?)?,
        expect_exception,
    })
}

fn access_lists(
    path: &str,
    value: &Value,
) -> Result<Vec<Option<Vec<AccessListEntry>>>, FixtureError> {
    let lists = array(value, path)?;
    let mut out = Vec::with_capacity(lists.len());
    for (i, list) in lists.iter().enumerate() {
        let list_path = format!("{path}[{i}]");
        if list.is_null() {
            out.push(None);
            continue;
        }
        let mut entries = Vec::new();
        for (j, item) in array(list, &list_path)?.iter().enumerate() {
            let item_path = format!("{list_path}[{j}]");
            let fields = object(item, &item_path)?;
            let keys_path = format!("{item_path}.storageKeys");
            entries.push(AccessListEntry {
                address: address(
                    &format!("{item_path}.address"),
                    required(fields, &item_path, "address")?,
                )?,
                storage_keys: hash_list(&keys_path, required(fields, &item_path, "storageKeys")?)?,
            });
        }
        out.push(Some(entries));
    }
    Ok(out)
}

fn authorizations(path: &str, value: &Value) -> Result<Vec<AuthorizationEntry>, FixtureError> {
    let mut out = Vec::new();
    for (i, item) in array(value, path)?.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let fields = object(item, &item_path)?;
        let num = |name: &str| -> Result<TxNumber, FixtureError> {
            tx_number(&format!("{item_path}.{name}"), required(fields, &item_path, name)?)
        };
        let y_parity = match optional(fields, "yParity") {
            Some(v) => tx_number(&format!("{item_path}.yParity"), v)?,
            None => num("v")?,
        };
        out.push(AuthorizationEntry {
            chain_id: num("chainId")?,
            address: address(
                &format!("{item_path}.address"),
                required(fields, &item_path, "address")?,
            )?,
            nonce: num("nonce")?,
            y_parity,
            r: num("r")?,
            s: num("s")?,
        });
    }
    Ok(out)
}

fn hash_list(path: &str, value: &Value) -> Result<Vec<H256>, FixtureError> {
    let items = array(value, path)?.iter().enumerate();
    items.map(|(i, v)| hash32(&format!("{path}[{i}]"), v)).collect()
}

fn tx_type(path: &str, value: &Value) -> Result<u8, FixtureError> {
    let n = small_number(path, value)?;
    u8::try_from(n).map_err(|_| FixtureError::Field {
        path: path.to_string(),
        problem: FieldProblem::Number(NumberError::Overflow { bits: 8 }),
    })
}

fn tx_number(path: &str, value: &Value) -> Result<TxNumber, FixtureError> {
    let written = match value {
        // retesteth's spelling of a number the transaction's RLP cannot carry.
        Value::String(s) => s.strip_prefix("0x:bigint "),
        _ => None,
    };
    let parsed = match written {
        Some(rest) => parse_quantity(rest).map(|_| TxNumber::Unencodable),
        None => match value {
            Value::String(s) => parse_quantity(s).map(TxNumber::Value),
            other => return number(path, other).map(TxNumber::Value),
        },
    };
    match parsed {
        Ok(n) => Ok(n),
        Err(NumberError::Overflow { .. }) => Ok(TxNumber::Unencodable),
        Err(e) => Err(field(path, e.into())),
    }
}

/// A 32-byte word written as a number (`currentRandom` is sometimes written short).
fn word_hash(path: &str, value: &Value) -> Result<H256, FixtureError> {
    Ok(H256(number(path, value)?.to_be_bytes::<32>()))
}
