//! The genesis block's header from a geth genesis file, as geth's `Genesis.ToBlock` builds
//! it, so that its hash (the first block's parent hash) can be computed.
//!
//! The file's header fields (`nonce`, `timestamp`, `extraData`, `gasLimit`, `difficulty`,
//! `mixHash`, `coinbase`, `number`, `gasUsed`, `parentHash`, `baseFeePerGas`,
//! `excessBlobGas`, `blobGasUsed`) are taken as written, absent ones as geth defaults them
//! (gas limit 4,712,388; the base fee 1 gwei; difficulty 0, the chain being past the
//! merge), the state root is the allocation's root, the list roots those of empty lists,
//! and per the fork active at the genesis timestamp ([`ChainConfig`]): the withdrawals root
//! (Shanghai), blob gas used, excess blob gas and a zero parent beacon root (Cancun), the
//! empty requests hash (Prague). Numbers are JSON integers, decimal or `0x` strings.

use alloy_consensus::{Header, EMPTY_OMMER_ROOT_HASH, EMPTY_ROOT_HASH};
use alloy_eips::eip1559::INITIAL_BASE_FEE;
use alloy_eips::eip7685::EMPTY_REQUESTS_HASH;
use alloy_primitives::{Address as RevmAddress, Bytes, B256, B64, U256};
use eth::Genesis;
use serde_json::{Map, Value};
use state::{decode_hex, H256};

use super::chain::{ChainConfig, Fork, UnsupportedFork};

/// geth's gas limit for a genesis that names none.
const GENESIS_GAS_LIMIT: u64 = 4_712_388;

/// Why a genesis file does not give a header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenesisHeaderError {
    /// The file is not a JSON object.
    #[error("the genesis is not a JSON object")]
    NotAnObject,
    /// A header field is malformed.
    #[error("genesis field {field}: {problem}")]
    Field {
        /// The field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The allocation does not parse.
    #[error("genesis alloc: {0}")]
    Alloc(String),
    /// The genesis timestamp is in a fork this executor does not implement.
    #[error(transparent)]
    UnsupportedFork(#[from] UnsupportedFork),
}

/// The genesis header of the geth genesis `genesis` under `chain`.
pub fn genesis_header(genesis: &Value, chain: &ChainConfig) -> Result<Header, GenesisHeaderError> {
    let fields = genesis.as_object().ok_or(GenesisHeaderError::NotAnObject)?;
    let alloc =
        Genesis::from_value(genesis).map_err(|e| GenesisHeaderError::Alloc(e.to_string()))?;
    let timestamp = number(fields, "timestamp")?.unwrap_or_default();
    let fork = chain.fork_at(timestamp)?;
    let mut header = Header {
        parent_hash: fixed::<32>(fields, "parentHash")?.map(B256::from).unwrap_or_default(),
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        beneficiary: fixed::<20>(fields, "coinbase")?.map(RevmAddress::from).unwrap_or_default(),
        state_root: B256::from(eth::genesis_state_root(&alloc).0),
        transactions_root: EMPTY_ROOT_HASH,
        receipts_root: EMPTY_ROOT_HASH,
        difficulty: word(fields, "difficulty")?.unwrap_or_default(),
        number: number(fields, "number")?.unwrap_or_default(),
        gas_limit: number(fields, "gasLimit")?.filter(|g| *g != 0).unwrap_or(GENESIS_GAS_LIMIT),
        gas_used: number(fields, "gasUsed")?.unwrap_or_default(),
        timestamp,
        extra_data: Bytes::from(bytes(fields, "extraData")?.unwrap_or_default()),
        mix_hash: fixed::<32>(fields, "mixHash")?.map(B256::from).unwrap_or_default(),
        nonce: B64::from(number(fields, "nonce")?.unwrap_or_default()),
        base_fee_per_gas: Some(number(fields, "baseFeePerGas")?.unwrap_or(INITIAL_BASE_FEE)),
        ..Header::default()
    };
    if fork >= Fork::Shanghai {
        header.withdrawals_root = Some(EMPTY_ROOT_HASH);
    }
    if fork >= Fork::Cancun {
        header.excess_blob_gas = Some(number(fields, "excessBlobGas")?.unwrap_or_default());
        header.blob_gas_used = Some(number(fields, "blobGasUsed")?.unwrap_or_default());
        header.parent_beacon_block_root = Some(B256::ZERO);
    }
    if fork >= Fork::Prague {
        header.requests_hash = Some(EMPTY_REQUESTS_HASH);
    }
    Ok(header)
}

/// The hash of `header`.
pub fn header_hash(header: &Header) -> H256 {
    H256(header.hash_slow().0)
}

/// The RLP of `header` (what [`header_hash`] hashes): the record a store keeps for it.
pub fn header_rlp(header: &Header) -> Vec<u8> {
    alloy_rlp::encode(header)
}

fn field_error(field: &'static str, problem: impl ToString) -> GenesisHeaderError {
    GenesisHeaderError::Field { field, problem: problem.to_string() }
}

fn word(
    fields: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<U256>, GenesisHeaderError> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(|n| Some(U256::from(n)))
            .ok_or_else(|| field_error(field, "not an unsigned integer")),
        Some(Value::String(s)) => {
            eth::parse_quantity(s).map(Some).map_err(|e| field_error(field, e))
        }
        Some(_) => Err(field_error(field, "expected a number")),
    }
}

fn number(
    fields: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<u64>, GenesisHeaderError> {
    match word(fields, field)? {
        None => Ok(None),
        Some(n) => {
            u64::try_from(n).map(Some).map_err(|_| field_error(field, "does not fit 64 bits"))
        }
    }
}

fn bytes(
    fields: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<Vec<u8>>, GenesisHeaderError> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => decode_hex(s).map(Some).map_err(|e| field_error(field, e)),
        Some(_) => Err(field_error(field, "expected a hex string")),
    }
}

fn fixed<const N: usize>(
    fields: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<[u8; N]>, GenesisHeaderError> {
    let Some(b) = bytes(fields, field)? else { return Ok(None) };
    let len = b.len();
    b.try_into().map(Some).map_err(|_| field_error(field, format!("{len} bytes, expected {N}")))
}
