//! Genesis allocations: the accounts (balance, nonce, code, storage) a chain starts with,
//! parsed from the JSON spellings that geth, reth and the ethereum/tests fixtures use.
//!
//! Accepted input is either a full genesis object with an `"alloc"` map, or a bare alloc
//! map of address to account. The quirks handled, all seen in real files: addresses with
//! or without `0x` and in any case (EIP-55 checksums are not verified); balances and
//! nonces as `0x` hex strings, decimal strings or JSON integers, or absent (zero); the
//! legacy `"wei"` field as the balance; code as hex with or without `0x`, possibly empty;
//! storage keys and values as hex with or without `0x` (geth reads `"10"` as sixteen),
//! short ones left-padded to 32 bytes. Unknown account fields are ignored, except ones
//! that differ from a known field only in case, which are an error rather than a silently
//! zero balance; so are a key written twice in one JSON object (JSON maps keep the last) and
//! an address among a full genesis's header fields (beside `"alloc"`, where it would be
//! ignored). Invariants of the result: addresses are unique (an address spelled twice
//! is an error) and `storage` holds no zero values (a zero slot is an absent slot in the
//! trie). This module computes no roots; it costs one pass over the parsed JSON.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use serde_json::{Map, Value};
use state::{decode_hex, HexError, H256};

use crate::number::{parse_hex_word, parse_quantity, to_u64, NumberError};

/// A 20-byte account address.
pub type Address = [u8; 20];

/// One account of a genesis allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GenesisAccount {
    /// The account nonce (0 when absent).
    pub nonce: u64,
    /// The balance in wei (0 when absent).
    pub balance: U256,
    /// The contract code; empty for an externally owned account.
    pub code: Vec<u8>,
    /// Storage slots, keys left-padded to 32 bytes. Invariant: no value is zero.
    pub storage: BTreeMap<H256, U256>,
}

/// A parsed genesis allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Genesis {
    /// The accounts by address. Invariant: each address occurs once in the input.
    pub alloc: BTreeMap<Address, GenesisAccount>,
}

/// A genesis file that cannot be read as an allocation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenesisError {
    /// The text is not JSON.
    #[error("genesis is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The genesis or its `"alloc"` is not a JSON object.
    #[error("expected {what} to be a JSON object, found {found}")]
    NotAnObject {
        /// Which value: the genesis or its alloc.
        what: &'static str,
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A full genesis object (it has header fields) without an `"alloc"` map.
    #[error("genesis has header field {field:?} but no \"alloc\"; add an \"alloc\" object mapping addresses to accounts")]
    MissingAlloc {
        /// A header field that shows this is a full genesis, not a bare alloc.
        field: String,
    },
    /// A full genesis (it has `"alloc"`) with an account address among its header fields,
    /// where it would be ignored.
    #[error("genesis has account address {address:?} beside \"alloc\"; move it into \"alloc\"")]
    AddressOutsideAlloc {
        /// The key as written.
        address: String,
    },
    /// An alloc key is not a 20-byte hex address.
    #[error("invalid account address {address:?}: {source}; expected 40 hex digits, 0x optional")]
    Address {
        /// The key as written.
        address: String,
        /// What is wrong with it.
        source: HexError,
    },
    /// Two alloc keys name the same address (they differ only in case or `0x`).
    #[error("account address {second:?} is a duplicate of {first:?}; addresses are case-insensitive, keep one entry")]
    DuplicateAddress {
        /// The spelling seen first.
        first: String,
        /// The duplicate spelling.
        second: String,
    },
    /// An account's value is not a JSON object.
    #[error(
        "account {address}: expected an object with balance/nonce/code/storage, found {found}"
    )]
    AccountNotAnObject {
        /// The address as written.
        address: String,
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A field of an account is malformed.
    #[error("account {address}: field {field:?}: {source}")]
    Account {
        /// The address as written.
        address: String,
        /// The field: `"balance"`, `"wei"`, `"nonce"`, `"code"` or `"storage"`.
        field: &'static str,
        /// What is wrong with it.
        source: FieldError,
    },
}

/// A malformed account field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// A number string does not parse or is out of range.
    #[error(transparent)]
    Number(#[from] NumberError),
    /// Hex bytes (code) do not parse.
    #[error(transparent)]
    Hex(#[from] HexError),
    /// The JSON type is wrong.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// What the field should be.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// A JSON number that is not a non-negative integer representable exactly.
    #[error("JSON number {0} is not an exact non-negative integer; write it as a decimal or 0x-hex string")]
    InexactNumber(String),
    /// Both `"balance"` and the legacy `"wei"` are present.
    #[error("both \"balance\" and the legacy \"wei\" are set; keep only one")]
    BalanceAndWei,
    /// A field name that matches a known one only case-insensitively.
    #[error("unknown field {0:?} differs from a known field only in case; rename it")]
    MisspelledField(String),
    /// A storage key is not hex or longer than 32 bytes.
    #[error("storage key {key:?}: {source}; expected up to 64 hex digits, 0x optional")]
    StorageKey {
        /// The key as written.
        key: String,
        /// What is wrong with it.
        source: NumberError,
    },
    /// A storage value is not hex or longer than 32 bytes.
    #[error("storage value at key {key:?}: {source}; expected up to 64 hex digits, 0x optional")]
    StorageValue {
        /// The key as written.
        key: String,
        /// What is wrong with it.
        source: NumberError,
    },
    /// A storage value is not a string.
    #[error("storage value at key {key:?}: expected a hex string, found {found}")]
    StorageValueType {
        /// The key as written.
        key: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// Two storage keys name the same slot once left-padded.
    #[error("storage keys {first:?} and {second:?} both name slot {slot}; keep one")]
    DuplicateStorageKey {
        /// One spelling.
        first: String,
        /// The other spelling.
        second: String,
        /// The 32-byte slot they share.
        slot: H256,
    },
}

/// Account fields this parser reads; anything else is ignored.
const ACCOUNT_FIELDS: [&str; 5] = ["balance", "wei", "nonce", "code", "storage"];

/// Fields that mark a full genesis object (as opposed to a bare alloc map).
const HEADER_FIELDS: [&str; 9] = [
    "config",
    "nonce",
    "timestamp",
    "extraData",
    "gasLimit",
    "difficulty",
    "mixHash",
    "coinbase",
    "parentHash",
];

impl Genesis {
    /// Parse a genesis file's text: a full genesis with `"alloc"`, or a bare alloc map.
    pub fn from_json_str(s: &str) -> Result<Genesis, GenesisError> {
        // A `Value` keeps the last of a key written twice in one object; a genesis that
        // gives an account or a slot two values is refused instead.
        Genesis::from_value(&parse_json_strict(s)?)
    }

    /// Parse an already-decoded JSON value (see [`Genesis::from_json_str`]).
    pub fn from_value(v: &Value) -> Result<Genesis, GenesisError> {
        let top = v
            .as_object()
            .ok_or(GenesisError::NotAnObject { what: "the genesis", found: json_type(v) })?;
        let alloc = match top.get("alloc") {
            Some(alloc) => {
                if let Some(key) = top.keys().find(|k| parse_address(k).is_ok()) {
                    return Err(GenesisError::AddressOutsideAlloc { address: key.clone() });
                }
                alloc.as_object().ok_or(GenesisError::NotAnObject {
                    what: "\"alloc\"",
                    found: json_type(alloc),
                })?
            }
            None => {
                if let Some(field) = HEADER_FIELDS.iter().find(|f| top.contains_key(**f)) {
                    return Err(GenesisError::MissingAlloc { field: (*field).to_string() });
                }
                top
            }
        };
        parse_alloc(alloc)
    }
}

/// Parse JSON text into a [`Value`], refusing any object that has the same key twice
/// (`duplicate key "…" at line L column C`): a `Value` would keep the last one silently, so
/// a file could show one value to a reader and give another to Arbor. Cost: the text is
/// parsed twice (a check pass, then the value).
pub fn parse_json_strict(s: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<NoDuplicateKeys>(s)?;
    serde_json::from_str(s)
}

/// Any JSON document in which no object has the same key twice (deserializing it fails
/// with `duplicate key "…"` otherwise); holds nothing.
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicateKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeys {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<NoDuplicateKeys>()?;
            if !keys.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
        }
        Ok(NoDuplicateKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(NoDuplicateKeys)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(NoDuplicateKeys)
    }
}

/// Parse an address: 40 hex digits, `0x`/`0X` optional, any case.
pub fn parse_address(s: &str) -> Result<Address, HexError> {
    let bytes = decode_hex(s)?;
    bytes.as_slice().try_into().map_err(|_| HexError::Length { expected: 20, got: bytes.len() })
}

fn parse_alloc(alloc: &Map<String, Value>) -> Result<Genesis, GenesisError> {
    let mut genesis = Genesis::default();
    let mut spellings: BTreeMap<Address, &str> = BTreeMap::new();
    for (key, value) in alloc {
        let address = parse_address(key)
            .map_err(|source| GenesisError::Address { address: key.clone(), source })?;
        if let Some(first) = spellings.insert(address, key) {
            return Err(GenesisError::DuplicateAddress {
                first: first.to_string(),
                second: key.clone(),
            });
        }
        genesis.alloc.insert(address, parse_account(key, value)?);
    }
    Ok(genesis)
}

fn parse_account(address: &str, value: &Value) -> Result<GenesisAccount, GenesisError> {
    let obj = value.as_object().ok_or_else(|| GenesisError::AccountNotAnObject {
        address: address.to_string(),
        found: json_type(value),
    })?;
    let fail = |field: &'static str, source: FieldError| GenesisError::Account {
        address: address.to_string(),
        field,
        source,
    };
    check_field_names(obj).map_err(|(field, e)| fail(field, e))?;

    let nonce = match get(obj, "nonce") {
        None => 0,
        Some(v) => json_u64(v).map_err(|e| fail("nonce", e))?,
    };
    let balance = match (get(obj, "balance"), get(obj, "wei")) {
        (Some(_), Some(_)) => return Err(fail("wei", FieldError::BalanceAndWei)),
        (Some(v), None) => json_u256(v).map_err(|e| fail("balance", e))?,
        (None, Some(v)) => json_u256(v).map_err(|e| fail("wei", e))?,
        (None, None) => U256::ZERO,
    };
    let code = match get(obj, "code") {
        None => Vec::new(),
        Some(Value::String(s)) => decode_hex(s).map_err(|e| fail("code", e.into()))?,
        Some(v) => return Err(fail("code", wrong_type("a hex string", v))),
    };
    let storage = match get(obj, "storage") {
        None => BTreeMap::new(),
        Some(v) => parse_storage(v).map_err(|e| fail("storage", e))?,
    };
    Ok(GenesisAccount { nonce, balance, code, storage })
}

/// Reject `"Balance"` and friends: ignoring them would silently zero the field.
fn check_field_names(obj: &Map<String, Value>) -> Result<(), (&'static str, FieldError)> {
    for key in obj.keys() {
        if ACCOUNT_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if let Some(known) = ACCOUNT_FIELDS.iter().find(|f| f.eq_ignore_ascii_case(key)) {
            return Err((*known, FieldError::MisspelledField(key.clone())));
        }
    }
    Ok(())
}

fn parse_storage(value: &Value) -> Result<BTreeMap<H256, U256>, FieldError> {
    let obj =
        value.as_object().ok_or_else(|| wrong_type("an object of hex key to hex value", value))?;
    let mut storage = BTreeMap::new();
    let mut spellings: BTreeMap<H256, &str> = BTreeMap::new();
    for (key, value) in obj {
        let slot = parse_hex_word(key)
            .map_err(|source| FieldError::StorageKey { key: key.clone(), source })?;
        let slot = H256(slot.to_be_bytes());
        let word = match value {
            Value::String(s) => parse_hex_word(s)
                .map_err(|source| FieldError::StorageValue { key: key.clone(), source })?,
            other => {
                return Err(FieldError::StorageValueType {
                    key: key.clone(),
                    found: json_type(other),
                })
            }
        };
        if let Some(first) = spellings.insert(slot, key) {
            return Err(FieldError::DuplicateStorageKey {
                first: first.to_string(),
                second: key.clone(),
                slot,
            });
        }
        // A zero word is how the trie spells "no slot": keep it out.
        if !word.is_zero() {
            storage.insert(slot, word);
        }
    }
    Ok(storage)
}

/// A field's value, treating JSON `null` as absent (as geth and alloy do).
fn get<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

/// A balance: `0x` hex or decimal string, or a JSON integer.
fn json_u256(value: &Value) -> Result<U256, FieldError> {
    match value {
        Value::String(s) => Ok(parse_quantity(s)?),
        Value::Number(n) => match n.as_u64() {
            Some(v) => Ok(U256::from(v)),
            // Exact only if serde_json keeps the digits (`arbitrary_precision`); a float
            // prints with `.` or `e` and is refused rather than rounded.
            None => {
                parse_quantity(&n.to_string()).map_err(|_| FieldError::InexactNumber(n.to_string()))
            }
        },
        other => Err(wrong_type("a decimal or 0x-hex string, or an integer", other)),
    }
}

/// A nonce: as [`json_u256`], but it must fit in 64 bits.
fn json_u64(value: &Value) -> Result<u64, FieldError> {
    Ok(to_u64(json_u256(value)?)?)
}

fn wrong_type(expected: &'static str, found: &Value) -> FieldError {
    FieldError::WrongType { expected, found: json_type(found) }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors: `ARBOR_TESTDATA`, else the repository's `testdata/ethereum`. `cargo
    /// test` sets `CARGO_MANIFEST_DIR` when it runs the tests too: read at run time, it
    /// stays right when a target directory holds a test binary built from another checkout.
    fn testdata() -> String {
        if let Ok(dir) = std::env::var("ARBOR_TESTDATA") {
            return dir;
        }
        let dir = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
        format!("{dir}/../../testdata/ethereum")
    }

    fn addr(s: &str) -> Address {
        parse_address(s).unwrap()
    }

    fn slot(n: u64) -> H256 {
        H256(U256::from(n).to_be_bytes())
    }

    fn account<'a>(g: &'a Genesis, a: &str) -> &'a GenesisAccount {
        &g.alloc[&addr(a)]
    }

    #[test]
    fn parses_every_quirk() {
        let json = r#"{
          "config": {"chainId": 1}, "nonce": "0x42",
          "alloc": {
            "9ca0e998df92c5351cecbbb6dba82ac2266f7e0c": {
              "code": "0x606060", "storage": {"0x03": "0x07", "10": "ff", "0x04": "0x00",
              "0x0000000000000000000000000000000000000000000000000000000000000005":
              "0x0000000000000000000000000000000000000000000000000000000000000000"}
            },
            "0x7dcd17433742F4C0CA53122AB541D0BA67FC27DF": {"balance": "0x1", "nonce": "0x2a", "code": "6001"},
            "0XCD2A3D9F938E13CD947EC05ABC7FE734DF8DD826": {"balance": "1234567000000000000000", "nonce": "7"},
            "0x0000000000000000000000000000000000000001": {"wei": "1", "privateKey": "0xab", "comment": "x"},
            "0x0000000000000000000000000000000000000002": {"balance": 12, "nonce": 3, "code": "0x"},
            "0x0000000000000000000000000000000000000003": {"balance": null, "code": "", "storage": {}},
            "0x0000000000000000000000000000000000000004": {}
          }
        }"#;
        let g = Genesis::from_json_str(json).unwrap();
        assert_eq!(g.alloc.len(), 7);

        let c = account(&g, "9ca0e998df92c5351cecbbb6dba82ac2266f7e0c");
        assert_eq!((c.nonce, c.balance, c.code.clone()), (0, U256::ZERO, vec![0x60, 0x60, 0x60]));
        let want: BTreeMap<H256, U256> =
            [(slot(3), U256::from(7)), (slot(16), U256::from(255))].into();
        assert_eq!(c.storage, want, "short keys padded, no-0x is hex, zero values dropped");

        let a = account(&g, "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df");
        assert_eq!((a.nonce, a.balance, a.code.clone()), (42, U256::from(1), vec![0x60, 0x01]));
        let b = account(&g, "cd2a3d9f938e13cd947ec05abc7fe734df8dd826");
        assert_eq!(b.balance, parse_quantity("0x42ed0f117bd3ad8000").unwrap());
        assert_eq!(b.nonce, 7);
        assert_eq!(
            account(&g, "0x0000000000000000000000000000000000000001").balance,
            U256::from(1)
        );
        let n = account(&g, "0x0000000000000000000000000000000000000002");
        assert_eq!((n.nonce, n.balance, n.code.is_empty()), (3, U256::from(12), true));
        assert_eq!(
            account(&g, "0x0000000000000000000000000000000000000003"),
            &GenesisAccount::default()
        );
        assert_eq!(
            account(&g, "0x0000000000000000000000000000000000000004"),
            &GenesisAccount::default()
        );
    }

    #[test]
    fn bare_alloc_and_empty() {
        let g = Genesis::from_json_str(
            r#"{"0x0000000000000000000000000000000000000001": {"balance": "0x10"}}"#,
        )
        .unwrap();
        assert_eq!(g.alloc.len(), 1);
        assert_eq!(Genesis::from_json_str("{}").unwrap(), Genesis::default());
        assert_eq!(Genesis::from_json_str(r#"{"alloc": {}}"#).unwrap(), Genesis::default());
    }

    fn field_err(json: &str) -> (&'static str, FieldError) {
        match Genesis::from_json_str(json) {
            Err(GenesisError::Account { field, source, .. }) => (field, source),
            other => panic!("expected an account error for {json}, got {other:?}"),
        }
    }

    fn one(account: &str) -> String {
        format!(r#"{{"alloc": {{"0x0000000000000000000000000000000000000001": {account}}}}}"#)
    }

    #[test]
    fn rejects_malformed_documents() {
        assert!(matches!(Genesis::from_json_str("not json"), Err(GenesisError::Json(_))));
        // A key written twice in one object: an account, a slot, a field.
        let a = "0x0000000000000000000000000000000000000001";
        for twice in [
            format!(r#"{{"alloc":{{"{a}":{{"balance":"1"}},"{a}":{{"balance":"2"}}}}}}"#),
            format!(r#"{{"{a}":{{"storage":{{"0x01":"0x01","0x01":"0x02"}}}}}}"#),
            format!(r#"{{"{a}":{{"balance":"1","balance":"2"}}}}"#),
        ] {
            let e = Genesis::from_json_str(&twice).unwrap_err();
            assert!(e.to_string().contains("duplicate key"), "{twice}: {e}");
        }
        // An address beside "alloc" would be ignored: refused.
        let beside = format!(r#"{{"alloc":{{}},"{a}":{{"balance":"1"}}}}"#);
        let e = Genesis::from_json_str(&beside).unwrap_err();
        assert!(matches!(e, GenesisError::AddressOutsideAlloc { .. }), "{e}");
        // The same key in different objects is fine.
        let b = "0x0000000000000000000000000000000000000002";
        let ok = format!(r#"{{"{a}":{{"balance":"1"}},"{b}":{{"balance":"1"}}}}"#);
        assert_eq!(Genesis::from_json_str(&ok).unwrap().alloc.len(), 2);
        assert!(matches!(Genesis::from_json_str(r#"{"alloc": {"#), Err(GenesisError::Json(_))));
        assert!(matches!(
            Genesis::from_json_str("[1, 2]"),
            Err(GenesisError::NotAnObject { found: "an array", .. })
        ));
        assert!(matches!(
            Genesis::from_json_str(r#"{"alloc": []}"#),
            Err(GenesisError::NotAnObject { what: "\"alloc\"", .. })
        ));
        assert!(matches!(
            Genesis::from_json_str(r#"{"config": {}, "gasLimit": "0x1"}"#),
            Err(GenesisError::MissingAlloc { .. })
        ));
        assert!(matches!(
            Genesis::from_json_str(r#"{"alloc": {"0x01": {}}}"#),
            Err(GenesisError::Address { source: HexError::Length { expected: 20, got: 1 }, .. })
        ));
        assert!(matches!(
            Genesis::from_json_str(
                r#"{"alloc": {"0xzz00000000000000000000000000000000000001": {}}}"#
            ),
            Err(GenesisError::Address { source: HexError::InvalidChar { .. }, .. })
        ));
        assert!(matches!(
            Genesis::from_json_str(&one("\"0x10\"")),
            Err(GenesisError::AccountNotAnObject { found: "a string", .. })
        ));
    }

    #[test]
    fn rejects_duplicate_addresses() {
        let json = r#"{"alloc": {
            "0xabcdef0000000000000000000000000000000001": {"balance": "1"},
            "ABCDEF0000000000000000000000000000000001": {"balance": "2"}}}"#;
        let err = Genesis::from_json_str(json).unwrap_err();
        assert!(matches!(err, GenesisError::DuplicateAddress { .. }), "{err}");
        assert!(err.to_string().contains("ABCDEF0000000000000000000000000000000001"), "{err}");
    }

    #[test]
    fn rejects_malformed_fields() {
        assert_eq!(
            field_err(&one(r#"{"code": "0x606"}"#)),
            ("code", FieldError::Hex(HexError::OddLength(3)))
        );
        assert!(matches!(field_err(&one(r#"{"code": "0xzz"}"#)), ("code", FieldError::Hex(_))));
        assert!(matches!(
            field_err(&one(r#"{"code": 5}"#)),
            ("code", FieldError::WrongType { .. })
        ));
        let over = format!(r#"{{"balance": "0x1{}"}}"#, "0".repeat(64));
        assert_eq!(field_err(&one(&over)), ("balance", NumberError::Overflow { bits: 256 }.into()));
        assert!(matches!(
            field_err(&one(r#"{"balance": "12ab"}"#)),
            ("balance", FieldError::Number(_))
        ));
        assert_eq!(field_err(&one(r#"{"balance": ""}"#)), ("balance", NumberError::Empty.into()));
        assert!(matches!(
            field_err(&one(r#"{"balance": 1e30}"#)),
            ("balance", FieldError::InexactNumber(_))
        ));
        assert!(matches!(
            field_err(&one(r#"{"balance": 1.5}"#)),
            ("balance", FieldError::InexactNumber(_))
        ));
        assert!(matches!(
            field_err(&one(r#"{"balance": true}"#)),
            ("balance", FieldError::WrongType { .. })
        ));
        assert_eq!(
            field_err(&one(r#"{"balance": "1", "wei": "1"}"#)),
            ("wei", FieldError::BalanceAndWei)
        );
        assert!(matches!(field_err(&one(r#"{"wei": "x"}"#)), ("wei", FieldError::Number(_))));
        assert!(matches!(
            field_err(&one(r#"{"nonce": -1}"#)),
            ("nonce", FieldError::InexactNumber(_))
        ));
        assert_eq!(
            field_err(&one(r#"{"nonce": "0x10000000000000000"}"#)),
            ("nonce", NumberError::Overflow { bits: 64 }.into())
        );
        assert!(matches!(
            field_err(&one(r#"{"Balance": "0x1"}"#)),
            ("balance", FieldError::MisspelledField(_))
        ));
    }

    #[test]
    fn rejects_malformed_storage() {
        let cases = [
            r#"{"storage": []}"#,
            r#"{"storage": {"0xg1": "0x01"}}"#,
            r#"{"storage": {"": "0x01"}}"#,
            r#"{"storage": {"0x01": "zz"}}"#,
            r#"{"storage": {"0x01": 7}}"#,
            r#"{"storage": {"0x03": "0x01", "0x0003": "0x02"}}"#,
        ];
        for case in cases {
            let (field, _) = field_err(&one(case));
            assert_eq!(field, "storage", "{case}");
        }
        let long_key = format!(r#"{{"storage": {{"0x1{}": "0x01"}}}}"#, "0".repeat(64));
        assert!(matches!(
            field_err(&one(&long_key)),
            ("storage", FieldError::StorageKey { source: NumberError::Overflow { bits: 256 }, .. })
        ));
        let err =
            Genesis::from_json_str(&one(r#"{"storage": {"0x03": "0x01", "0x0003": "0x02"}}"#))
                .unwrap_err()
                .to_string();
        assert!(
            err.contains("0x0000000000000000000000000000000000000001") && err.contains("0x0003"),
            "{err}"
        );
    }

    fn read(rel: &str) -> String {
        let path = format!("{}/{rel}", testdata());
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
    }

    /// (accounts, accounts with storage, accounts with code) for one file.
    fn counts(g: &Genesis) -> (usize, usize, usize) {
        let storage = g.alloc.values().filter(|a| !a.storage.is_empty()).count();
        let code = g.alloc.values().filter(|a| !a.code.is_empty()).count();
        (g.alloc.len(), storage, code)
    }

    #[test]
    fn parses_reference_genesis_files() {
        // Counts from testdata/ethereum/SOURCES.md.
        let files = [
            ("genesis/mainnet.json", (8893, 0, 0)),
            ("genesis/sepolia.json", (15, 0, 0)),
            ("genesis/holesky.json", (317, 1, 1)),
            ("genesis/hoodi.json", (335, 3, 5)),
            ("genesis/goerli.json", (260, 0, 0)),
            ("genesis/dev.json", (20, 0, 0)),
            ("execution-apis/genesis.json", (27, 1, 6)),
        ];
        for (rel, want) in files {
            let g = Genesis::from_json_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            assert_eq!(counts(&g), want, "{rel}");
        }
        let g = Genesis::from_json_str(&read("execution-apis/genesis.json")).unwrap();
        let a = account(&g, "8bebc8ba651aee624937e7d897853ac30c95a067");
        assert_eq!((a.nonce, a.storage.len()), (1, 3));
        assert_eq!(a.storage[&slot(2)], U256::from(2));
    }

    #[test]
    fn parses_basic_genesis_tests() {
        let text = read("ethereum-tests/GenesisTests/basic_genesis_tests.json");
        let tests: Value = serde_json::from_str(&text).unwrap();
        let parse = |name: &str| Genesis::from_value(&tests[name]).unwrap();

        let g1 = parse("test1");
        assert_eq!(g1.alloc.len(), 2);
        let c = account(&g1, "9ca0e998df92c5351cecbbb6dba82ac2266f7e0c");
        assert_eq!(c.code, vec![0x60; 9]);
        assert_eq!(c.storage, [(slot(3), U256::from(7))].into());
        let b = account(&g1, "cd2a3d9f938e13cd947ec05abc7fe734df8dd826");
        assert_eq!(b.balance.to_string(), "1234567000000000000000");

        let g2 = parse("test2");
        assert_eq!(g2.alloc.len(), 12);
        let w = account(&g2, "b9c015918bdaba24b4ff057a92a3873d6eb201be");
        // 2^200, in decimal in the file.
        assert_eq!(w.balance, parse_quantity(&format!("0x1{}", "0".repeat(50))).unwrap());
        assert_eq!(account(&g2, "0000000000000000000000000000000000000001").balance, U256::from(1));

        assert!(parse("test3").alloc.is_empty());
    }
}
