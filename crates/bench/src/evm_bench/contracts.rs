//! The two contracts of `arbor bench evm`, compiled from the sources in
//! `testdata/evm-bench/` (solcjs 0.8.30, see its `SOURCES.md`) and read from the JSON
//! records there at build time: the ERC-20 token `BenchToken` and the storage-heavy
//! `SlotChurn`. Their calls' calldata and the storage slots their mappings use are
//! computed here as Solidity lays them out (a mapping at slot `p` keeps key `k` at
//! keccak256(pad32(k) ++ pad32(p))).

use alloy_primitives::U256;
use anyhow::{ensure, Context, Result};
use eth::Address;
use state::H256;
use trie::keccak256;

/// `BenchToken.json` as compiled.
const TOKEN_JSON: &str = include_str!("../../../../testdata/evm-bench/BenchToken.json");
/// `SlotChurn.json` as compiled.
const CHURN_JSON: &str = include_str!("../../../../testdata/evm-bench/SlotChurn.json");

/// One compiled contract.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    /// The code a deployment leaves at the contract's address.
    pub(crate) runtime: Vec<u8>,
    /// The deployment code (constructor), with no arguments appended (the tests deploy
    /// it; loading checks that it holds the runtime code).
    #[cfg(test)]
    pub(crate) creation: Vec<u8>,
    /// `solc` and its version, as recorded.
    pub(crate) compiler: String,
}

/// Both contracts.
#[derive(Debug, Clone)]
pub(crate) struct Contracts {
    pub(crate) token: Compiled,
    pub(crate) churn: Compiled,
}

fn compiled(json: &str, name: &str) -> Result<Compiled> {
    let v: serde_json::Value =
        serde_json::from_str(json).with_context(|| format!("{name}.json is not JSON"))?;
    ensure!(v["contract"] == name, "{name}.json holds another contract");
    let code = |field: &str| -> Result<Vec<u8>> {
        let text = v[field].as_str().with_context(|| format!("{name}.json lacks {field}"))?;
        let bytes =
            hex::decode(text).with_context(|| format!("{name}.json: {field} is not hex"))?;
        ensure!(!bytes.is_empty(), "{name}.json: {field} is empty");
        Ok(bytes)
    };
    let compiler = v["compiler_version"].as_str().unwrap_or("unknown").to_string();
    let (runtime, creation) = (code("runtime_bytecode")?, code("creation_bytecode")?);
    // solc's deployment code copies the runtime code out of itself.
    let holds = creation.windows(runtime.len()).any(|w| w == runtime.as_slice());
    ensure!(holds, "{name}.json: the creation code does not hold the runtime code");
    Ok(Compiled {
        runtime,
        #[cfg(test)]
        creation,
        compiler,
    })
}

impl Contracts {
    /// The compiled contracts.
    pub(crate) fn load() -> Result<Contracts> {
        Ok(Contracts {
            token: compiled(TOKEN_JSON, "BenchToken")?,
            churn: compiled(CHURN_JSON, "SlotChurn")?,
        })
    }
}

/// The first four bytes of keccak256 of a function's signature.
fn selector(signature: &str) -> [u8; 4] {
    let mut s = [0u8; 4];
    s.copy_from_slice(&keccak256(signature.as_bytes()).0[..4]);
    s
}

/// A 32-byte ABI word of an address.
fn address_word(address: &Address) -> [u8; 32] {
    let mut w = [0u8; 32];
    w[12..].copy_from_slice(address);
    w
}

/// The slot of key `key` (a 32-byte word) of the mapping at `slot`.
fn mapping_slot(key: [u8; 32], slot: u64) -> H256 {
    let mut input = [0u8; 64];
    input[..32].copy_from_slice(&key);
    input[32..].copy_from_slice(&U256::from(slot).to_be_bytes::<32>());
    keccak256(&input)
}

/// `BenchToken.balanceOf[holder]`'s slot (the mapping is in slot 1).
pub(crate) fn token_balance_slot(holder: &Address) -> H256 {
    mapping_slot(address_word(holder), 1)
}

/// `SlotChurn.slots[key]`'s slot (the mapping is in slot 0).
pub(crate) fn churn_slot(key: u64) -> H256 {
    mapping_slot(U256::from(key).to_be_bytes(), 0)
}

/// Calldata of `BenchToken.transfer(to, value)`.
pub(crate) fn transfer_call(to: &Address, value: u64) -> Vec<u8> {
    let mut data = selector("transfer(address,uint256)").to_vec();
    data.extend_from_slice(&address_word(to));
    data.extend_from_slice(&U256::from(value).to_be_bytes::<32>());
    data
}

/// Calldata of `SlotChurn.churn(freshFrom, fresh, existingFrom, existing)`.
pub(crate) fn churn_call(
    fresh_from: u64,
    fresh: u64,
    existing_from: u64,
    existing: u64,
) -> Vec<u8> {
    let mut data = selector("churn(uint256,uint256,uint256,uint256)").to_vec();
    for word in [fresh_from, fresh, existing_from, existing] {
        data.extend_from_slice(&U256::from(word).to_be_bytes::<32>());
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_hold_code_and_the_known_selectors() {
        let c = Contracts::load().unwrap();
        assert!(c.token.compiler.starts_with("0.8.30"), "{}", c.token.compiler);
        assert!(c.token.runtime.len() > 1000 && c.churn.runtime.len() > 300);
        // The ERC-20 selector everybody knows.
        assert_eq!(transfer_call(&[1; 20], 5)[..4], [0xa9, 0x05, 0x9c, 0xbb]);
        assert_eq!(transfer_call(&[1; 20], 5).len(), 68);
        assert_eq!(churn_call(1, 2, 3, 4).len(), 4 + 4 * 32);
        assert_ne!(token_balance_slot(&[1; 20]), token_balance_slot(&[2; 20]));
        assert!(compiled("{}", "BenchToken").is_err());
        let wrong =
            r#"{"contract": "BenchToken", "runtime_bytecode": "zz", "creation_bytecode": "00"}"#;
        assert!(compiled(wrong, "BenchToken").is_err());
    }
}
