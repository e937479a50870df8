//! The JSON both Ethereum test suites write their fixtures in (`GeneralStateTests`,
//! `BlockchainTests`), read once for both runners ([`crate::statetest`],
//! [`crate::blocktest`]): the file's frame (an object of tests by name, no key twice:
//! [`parse_tests`]), the readers of one field (its JSON type, a number in decimal or `0x`
//! hex, hex bytes, an address or a hash of exactly 20 or 32 bytes, a genesis-style
//! allocation read by [`eth::Genesis`]) and the one error a malformed file gives,
//! [`FixtureError`], naming the field by its path (`test.blocks[2].rlp`) with a
//! [`FieldProblem`]. A reader takes the field's path for its error and never panics.

use alloy_primitives::U256;
use eth::{parse_quantity, Address, Genesis, GenesisError, NumberError};
use serde_json::{Map, Value};
use state::{decode_hex, HexError, H256};

/// A malformed test-suite file (a state test or a blockchain test).
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
        /// Where: `test.transaction.gasLimit[1]`, `test.blocks[2].rlp`.
        path: String,
        /// What is wrong.
        problem: FieldProblem,
    },
    /// An allocation (`pre`, a blockchain test's `postState`) does not parse.
    #[error("{path}: {source}")]
    Alloc {
        /// `test.pre` or `test.postState`.
        path: String,
        /// Why (boxed: it is large, and every parse result carries its size).
        source: Box<GenesisError>,
    },
}

/// What is wrong with one field of a fixture.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldProblem {
    /// The field is absent.
    #[error("missing")]
    Missing,
    /// The field is absent, and so is the one that may stand in its place.
    #[error("missing (and no {alternative})")]
    MissingWithAlternative {
        /// The other field's name (`postStateHash` for `postState`).
        alternative: &'static str,
    },
    /// The JSON type is wrong.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// What the field should be.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// A number does not parse or does not fit.
    #[error(transparent)]
    Number(#[from] NumberError),
    /// Hex bytes do not parse or have the wrong length.
    #[error(transparent)]
    Hex(#[from] HexError),
    /// A post entry's index is past the end of its transaction array.
    #[error("index {index} is out of range: the array has {len} entries")]
    IndexOutOfRange {
        /// The index.
        index: usize,
        /// The array's length.
        len: usize,
    },
}

/// The tests of a file's text, in file order, each read by `parse_test` (given its name,
/// the start of every path below it).
pub(crate) fn parse_tests<T>(
    text: &str,
    parse_test: impl Fn(&str, &Value) -> Result<T, FixtureError>,
) -> Result<Vec<(String, T)>, FixtureError> {
    let value = eth::parse_json_strict(text)?;
    let tests = object(&value, "the file")?;
    if tests.is_empty() {
        return Err(FixtureError::NoTests);
    }
    tests.iter().map(|(name, test)| Ok((name.clone(), parse_test(name, test)?))).collect()
}

/// `name` of `obj`, treating JSON `null` as absent.
pub(crate) fn optional<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

/// `name` of `obj` at `path` (`null` is missing).
pub(crate) fn required<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<&'a Value, FixtureError> {
    optional(obj, name).ok_or_else(|| FixtureError::Field {
        path: format!("{path}.{name}"),
        problem: FieldProblem::Missing,
    })
}

pub(crate) fn object<'a>(
    value: &'a Value,
    path: &str,
) -> Result<&'a Map<String, Value>, FixtureError> {
    value.as_object().ok_or_else(|| wrong(path.to_string(), "an object", value))
}

pub(crate) fn array<'a>(value: &'a Value, path: &str) -> Result<&'a Vec<Value>, FixtureError> {
    value.as_array().ok_or_else(|| wrong(path.to_string(), "an array", value))
}

pub(crate) fn string<'a>(value: &'a Value, path: &str) -> Result<&'a str, FixtureError> {
    value.as_str().ok_or_else(|| wrong(path.to_string(), "a string", value))
}

/// A 256-bit number: a JSON integer, or a string in decimal or `0x` hex.
pub(crate) fn number(path: &str, value: &Value) -> Result<U256, FixtureError> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .map(U256::from)
            .ok_or_else(|| wrong(path.to_string(), "a non-negative integer", value)),
        other => parse_quantity(string(other, path)?).map_err(|e| field(path, e.into())),
    }
}

/// A [`number`] that fits 64 bits.
pub(crate) fn small_number(path: &str, value: &Value) -> Result<u64, FixtureError> {
    let n = number(path, value)?;
    u64::try_from(n).map_err(|_| field(path, NumberError::Overflow { bits: 64 }.into()))
}

/// Bytes written in hex (`0x` optional).
pub(crate) fn bytes(path: &str, value: &Value) -> Result<Vec<u8>, FixtureError> {
    decode_hex(string(value, path)?).map_err(|e| field(path, e.into()))
}

fn fixed<const N: usize>(path: &str, value: &Value) -> Result<[u8; N], FixtureError> {
    let b = bytes(path, value)?;
    let len = b.len();
    b.try_into().map_err(|_| field(path, HexError::Length { expected: N, got: len }.into()))
}

pub(crate) fn address(path: &str, value: &Value) -> Result<Address, FixtureError> {
    fixed::<20>(path, value)
}

pub(crate) fn hash32(path: &str, value: &Value) -> Result<H256, FixtureError> {
    fixed::<32>(path, value).map(H256)
}

/// A genesis-style allocation (`pre`, `postState`): an object of accounts by address.
pub(crate) fn alloc(path: &str, value: &Value) -> Result<Genesis, FixtureError> {
    object(value, path)?;
    Genesis::from_value(value)
        .map_err(|e| FixtureError::Alloc { path: path.to_string(), source: Box::new(e) })
}

pub(crate) fn field(path: &str, problem: FieldProblem) -> FixtureError {
    FixtureError::Field { path: path.to_string(), problem }
}

/// The field at `path` is `found`, not `expected`.
pub(crate) fn wrong(path: String, expected: &'static str, found: &Value) -> FixtureError {
    FixtureError::Field {
        path,
        problem: FieldProblem::WrongType { expected, found: json_type(found) },
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
