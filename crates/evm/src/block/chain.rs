//! Chain configuration: which fork rules a block follows ([`Fork`], chosen by the block's
//! timestamp through [`ChainConfig::fork_at`]), the chain id, the blob parameters of each
//! fork and the deposit contract (EIP-6110).
//!
//! Only chains that are past the merge at genesis are configured (Paris from block 0, the
//! later forks by timestamp, as on mainnet since Shanghai): the executor runs the forks
//! revm supports from Paris on. A configuration comes from a blockchain test's `network`
//! name ([`ChainConfig::for_network`], transition networks included) or from the `config`
//! section of a geth genesis file ([`ChainConfig::from_geth_config`]); a fork this executor
//! does not implement (Osaka and later) is recorded by its activation time, and a block
//! at or after it is refused with [`UnsupportedFork`], never run under older rules.

use alloy_eips::eip6110::MAINNET_DEPOSIT_CONTRACT_ADDRESS;
use alloy_eips::eip7840::BlobParams;
use eth::Address;
use revm::primitives::hardfork::SpecId;
use serde_json::{Map, Value};

/// The fork rules a block follows (Paris and later; older forks are not executed here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Fork {
    /// The merge (proof of stake; no ommers, difficulty 0, PREVRANDAO).
    Paris,
    /// Withdrawals (EIP-4895), PUSH0, the init-code limit.
    Shanghai,
    /// Blobs (EIP-4844), the beacon-roots contract (EIP-4788), transient storage,
    /// SELFDESTRUCT only in the creating transaction.
    Cancun,
    /// EIP-7702 transactions, the history contract (EIP-2935), execution requests
    /// (EIP-6110/7002/7251/7685), more blobs (EIP-7691), calldata floor (EIP-7623).
    Prague,
}

impl Fork {
    /// revm's spec for the fork.
    pub fn spec(self) -> SpecId {
        match self {
            Fork::Paris => SpecId::MERGE,
            Fork::Shanghai => SpecId::SHANGHAI,
            Fork::Cancun => SpecId::CANCUN,
            Fork::Prague => SpecId::PRAGUE,
        }
    }

    /// The fork's name as the Ethereum tests write it.
    pub fn name(self) -> &'static str {
        match self {
            Fork::Paris => "Paris",
            Fork::Shanghai => "Shanghai",
            Fork::Cancun => "Cancun",
            Fork::Prague => "Prague",
        }
    }
}

/// A block at or after the activation of a fork this executor does not implement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the block's timestamp {timestamp} is in fork {fork}, which this executor does not implement"
)]
pub struct UnsupportedFork {
    /// The fork's name.
    pub fork: String,
    /// The block's timestamp.
    pub timestamp: u64,
}

/// Why a geth genesis `config` section cannot configure a chain here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A field has the wrong JSON type or an unreadable value.
    #[error("config.{field}: {problem}")]
    Field {
        /// The field.
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// The chain is not past the merge at genesis (`terminalTotalDifficulty` absent or not
    /// zero): only proof-of-stake chains from block 0 are executed here.
    #[error("the chain is not past the merge at genesis (terminalTotalDifficulty must be 0): only post-merge chains are executed")]
    PreMerge,
    /// A fork activates at a block number after genesis (pre-merge forks must all be at 0).
    #[error("config.{0} is not 0: forks before the merge must be active at genesis")]
    LateBlockFork(String),
    /// Forks are not activated in order.
    #[error("config.{later} ({later_time}) comes before config.{earlier} ({earlier_time})")]
    OutOfOrder {
        /// The earlier fork's field.
        earlier: &'static str,
        /// Its time.
        earlier_time: u64,
        /// The later fork's field.
        later: &'static str,
        /// Its time.
        later_time: u64,
    },
}

/// A chain's fork schedule and parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainConfig {
    /// The chain id (EIP-155).
    pub chain_id: u64,
    /// Activation timestamps of Shanghai, Cancun and Prague (`None`: not scheduled).
    pub shanghai_time: Option<u64>,
    /// See `shanghai_time`.
    pub cancun_time: Option<u64>,
    /// See `shanghai_time`.
    pub prague_time: Option<u64>,
    /// The first fork this executor does not implement, with its activation timestamp.
    pub unsupported: Option<(String, u64)>,
    /// Blob parameters from Cancun (EIP-4844) and from Prague (EIP-7691).
    pub blob_cancun: BlobParams,
    /// See `blob_cancun`.
    pub blob_prague: BlobParams,
    /// The deposit contract whose logs are EIP-6110's deposit requests.
    pub deposit_contract: Address,
}

impl ChainConfig {
    /// Paris from genesis, no later fork scheduled, mainnet's parameters.
    pub fn paris(chain_id: u64) -> ChainConfig {
        ChainConfig {
            chain_id,
            shanghai_time: None,
            cancun_time: None,
            prague_time: None,
            unsupported: None,
            blob_cancun: BlobParams::cancun(),
            blob_prague: BlobParams::prague(),
            deposit_contract: MAINNET_DEPOSIT_CONTRACT_ADDRESS.into_array(),
        }
    }

    /// The configuration of a blockchain test's `network` (chain id 1), or `None` for a
    /// network this executor does not run (forks before Paris, transitions into them, forks
    /// after Prague).
    pub fn for_network(network: &str) -> Option<ChainConfig> {
        let at = |s: Option<u64>, c: Option<u64>, p: Option<u64>| ChainConfig {
            shanghai_time: s,
            cancun_time: c,
            prague_time: p,
            ..ChainConfig::paris(1)
        };
        Some(match network {
            "Merge" | "Paris" => at(None, None, None),
            "Shanghai" => at(Some(0), None, None),
            "Cancun" => at(Some(0), Some(0), None),
            "Prague" => at(Some(0), Some(0), Some(0)),
            "ParisToShanghaiAtTime15k" => at(Some(15_000), None, None),
            "ShanghaiToCancunAtTime15k" => at(Some(0), Some(15_000), None),
            "CancunToPragueAtTime15k" => at(Some(0), Some(0), Some(15_000)),
            _ => return None,
        })
    }

    /// The fork of a block with `timestamp`.
    pub fn fork_at(&self, timestamp: u64) -> Result<Fork, UnsupportedFork> {
        if let Some((fork, time)) = &self.unsupported {
            if timestamp >= *time {
                return Err(UnsupportedFork { fork: fork.clone(), timestamp });
            }
        }
        let active = |t: Option<u64>| t.is_some_and(|t| timestamp >= t);
        Ok(if active(self.prague_time) {
            Fork::Prague
        } else if active(self.cancun_time) {
            Fork::Cancun
        } else if active(self.shanghai_time) {
            Fork::Shanghai
        } else {
            Fork::Paris
        })
    }

    /// The blob parameters at `fork` (`None` before Cancun).
    pub fn blob_params(&self, fork: Fork) -> Option<BlobParams> {
        match fork {
            Fork::Paris | Fork::Shanghai => None,
            Fork::Cancun => Some(self.blob_cancun),
            Fork::Prague => Some(self.blob_prague),
        }
    }

    /// The configuration a geth genesis file's `config` object describes. The chain must be
    /// past the merge at genesis (`terminalTotalDifficulty` 0, every pre-merge block fork at
    /// 0 or absent); `shanghaiTime`, `cancunTime`, `pragueTime` schedule the later forks,
    /// `osakaTime` (and later) marks where this executor stops; `blobSchedule.cancun` and
    /// `.prague` (`target`, `max`, `baseFeeUpdateFraction`) override the blob parameters,
    /// `depositContractAddress` the deposit contract.
    pub fn from_geth_config(config: &Value) -> Result<ChainConfig, ConfigError> {
        let fields = config.as_object().ok_or_else(|| ConfigError::Field {
            field: String::new(),
            problem: "expected an object".into(),
        })?;
        let chain_id = number(fields, "chainId")?.unwrap_or(1);
        // Any other value (absent, a mainnet-sized difficulty, unreadable) is a chain that
        // starts before the merge.
        if !matches!(number(fields, "terminalTotalDifficulty"), Ok(Some(0))) {
            return Err(ConfigError::PreMerge);
        }
        for (name, value) in fields {
            if name.ends_with("Block") && !value.is_null() && number(fields, name)? != Some(0) {
                return Err(ConfigError::LateBlockFork(name.clone()));
            }
        }
        let mut chain = ChainConfig::paris(chain_id);
        chain.shanghai_time = number(fields, "shanghaiTime")?;
        chain.cancun_time = number(fields, "cancunTime")?;
        chain.prague_time = number(fields, "pragueTime")?;
        chain.unsupported = first_unsupported(fields)?;
        check_order(&chain)?;
        if let Some(schedule) = fields.get("blobSchedule").filter(|v| !v.is_null()) {
            let schedule = schedule.as_object().ok_or_else(|| ConfigError::Field {
                field: "blobSchedule".into(),
                problem: "expected an object".into(),
            })?;
            if let Some(p) = blob_entry(schedule, "cancun", chain.blob_cancun)? {
                chain.blob_cancun = p;
            }
            if let Some(p) = blob_entry(schedule, "prague", chain.blob_prague)? {
                chain.blob_prague = p;
            }
        }
        if let Some(v) = fields.get("depositContractAddress").filter(|v| !v.is_null()) {
            let text = v.as_str().unwrap_or_default();
            chain.deposit_contract = eth::parse_address(text).map_err(|e| ConfigError::Field {
                field: "depositContractAddress".into(),
                problem: e.to_string(),
            })?;
        }
        Ok(chain)
    }
}

/// The forks after Prague whose activation a geth config may name.
const UNSUPPORTED_TIMES: [(&str, &str); 4] = [
    ("osakaTime", "Osaka"),
    ("bpo1Time", "BPO1"),
    ("bpo2Time", "BPO2"),
    ("amsterdamTime", "Amsterdam"),
];

fn first_unsupported(fields: &Map<String, Value>) -> Result<Option<(String, u64)>, ConfigError> {
    let mut first: Option<(String, u64)> = None;
    for (field, fork) in UNSUPPORTED_TIMES {
        if let Some(t) = number(fields, field)? {
            if first.as_ref().is_none_or(|(_, f)| t < *f) {
                first = Some((fork.to_string(), t));
            }
        }
    }
    Ok(first)
}

fn check_order(chain: &ChainConfig) -> Result<(), ConfigError> {
    let times = [
        ("shanghaiTime", chain.shanghai_time),
        ("cancunTime", chain.cancun_time),
        ("pragueTime", chain.prague_time),
    ];
    for pair in times.windows(2) {
        let ((earlier, e), (later, l)) = (pair[0], pair[1]);
        match (e, l) {
            (Some(e), Some(l)) if l < e => {
                return Err(ConfigError::OutOfOrder {
                    earlier,
                    earlier_time: e,
                    later,
                    later_time: l,
                })
            }
            (None, Some(l)) => {
                return Err(ConfigError::OutOfOrder {
                    earlier,
                    earlier_time: u64::MAX,
                    later,
                    later_time: l,
                })
            }
            _ => {}
        }
    }
    Ok(())
}

fn blob_entry(
    schedule: &Map<String, Value>,
    fork: &str,
    base: BlobParams,
) -> Result<Option<BlobParams>, ConfigError> {
    let Some(entry) = schedule.get(fork).filter(|v| !v.is_null()) else { return Ok(None) };
    let path = format!("blobSchedule.{fork}");
    let entry = entry.as_object().ok_or_else(|| ConfigError::Field {
        field: path.clone(),
        problem: "expected an object".into(),
    })?;
    let get = |name: &str| -> Result<Option<u64>, ConfigError> {
        number(entry, name).map_err(|e| match e {
            ConfigError::Field { field, problem } => {
                ConfigError::Field { field: format!("{path}.{field}"), problem }
            }
            other => other,
        })
    };
    let mut params = base;
    if let Some(t) = get("target")? {
        params.target_blob_count = t;
    }
    if let Some(m) = get("max")? {
        params.max_blob_count = m;
        params.max_blobs_per_tx = m;
    }
    if let Some(f) = get("baseFeeUpdateFraction")? {
        params.update_fraction = u128::from(f);
    }
    Ok(Some(params))
}

/// A number field written as a JSON integer, a decimal string or a `0x` quantity.
fn number(fields: &Map<String, Value>, name: &str) -> Result<Option<u64>, ConfigError> {
    let bad = |problem: String| ConfigError::Field { field: name.to_string(), problem };
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_u64().map(Some).ok_or_else(|| bad(format!("{n} is not a 64-bit unsigned integer")))
        }
        Some(Value::String(s)) => {
            let n = eth::parse_quantity(s).map_err(|e| bad(e.to_string()))?;
            u64::try_from(n).map(Some).map_err(|_| bad(format!("{s} does not fit 64 bits")))
        }
        Some(other) => Err(bad(format!("expected a number, found {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn networks_choose_forks_by_timestamp() {
        let c = ChainConfig::for_network("ShanghaiToCancunAtTime15k").unwrap();
        assert_eq!(c.fork_at(14_999), Ok(Fork::Shanghai));
        assert_eq!(c.fork_at(15_000), Ok(Fork::Cancun));
        let p = ChainConfig::for_network("CancunToPragueAtTime15k").unwrap();
        assert_eq!((p.fork_at(0), p.fork_at(15_000)), (Ok(Fork::Cancun), Ok(Fork::Prague)));
        assert_eq!(ChainConfig::for_network("Paris").unwrap().fork_at(u64::MAX), Ok(Fork::Paris));
        for skipped in
            ["London", "Osaka", "ArrowGlacierToParisAtDiffC0000", "PragueToOsakaAtTime15k"]
        {
            assert!(ChainConfig::for_network(skipped).is_none(), "{skipped}");
        }
        assert_eq!(p.blob_params(Fork::Prague).unwrap().max_blob_count, 9);
        assert!(p.blob_params(Fork::Shanghai).is_none());
    }

    #[test]
    fn geth_configs_are_read_and_checked() {
        let config = json!({
            "chainId": 1337, "londonBlock": 0, "terminalTotalDifficulty": 0,
            "shanghaiTime": 0, "cancunTime": "0x10", "pragueTime": 100, "osakaTime": 200,
            "blobSchedule": {"prague": {"target": 6, "max": 9, "baseFeeUpdateFraction": 5007716}}
        });
        let c = ChainConfig::from_geth_config(&config).unwrap();
        assert_eq!((c.chain_id, c.cancun_time, c.prague_time), (1337, Some(16), Some(100)));
        assert_eq!(c.fork_at(15), Ok(Fork::Shanghai));
        assert_eq!(c.fork_at(199), Ok(Fork::Prague));
        assert_eq!(c.fork_at(200).unwrap_err().fork, "Osaka");

        let pre_merge = json!({"chainId": 1, "terminalTotalDifficulty": 5.875e22});
        assert_eq!(ChainConfig::from_geth_config(&pre_merge), Err(ConfigError::PreMerge));
        let late = json!({"terminalTotalDifficulty": 0, "londonBlock": 5});
        assert_eq!(
            ChainConfig::from_geth_config(&late),
            Err(ConfigError::LateBlockFork("londonBlock".into()))
        );
        let order = json!({"terminalTotalDifficulty": 0, "shanghaiTime": 10, "cancunTime": 5});
        assert!(matches!(
            ChainConfig::from_geth_config(&order),
            Err(ConfigError::OutOfOrder { .. })
        ));
        let bad = json!({"terminalTotalDifficulty": 0, "cancunTime": "soon"});
        assert!(matches!(ChainConfig::from_geth_config(&bad), Err(ConfigError::Field { .. })));
    }
}
