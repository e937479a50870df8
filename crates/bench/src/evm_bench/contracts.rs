//! The two contracts of `arbor bench evm`: the ERC-20 token `BenchToken` (its record, calls
//! and slots are `evm::generate`'s, shared with generated chains) and the storage-heavy
//! `SlotChurn`, compiled from `testdata/evm-bench/SlotChurn.sol` (solcjs 0.8.30, see its
//! `SOURCES.md`) and read from the JSON record there at build time. The calls' calldata
//! and the slots their mappings use are computed as Solidity lays them out (a mapping at
//! slot `p` keeps key `k` at keccak256(pad32(k) ++ pad32(p))).

use alloy_primitives::U256;
use anyhow::Result;
use evm::generate::{mapping_slot, selector, Compiled};
use state::H256;

/// `SlotChurn.json` as compiled.
const CHURN_JSON: &str = include_str!("../../../../testdata/evm-bench/SlotChurn.json");

/// Both contracts.
#[derive(Debug, Clone)]
pub(crate) struct Contracts {
    pub(crate) token: Compiled,
    pub(crate) churn: Compiled,
}

impl Contracts {
    /// The compiled contracts.
    pub(crate) fn load() -> Result<Contracts> {
        Ok(Contracts {
            token: Compiled::token()?,
            churn: Compiled::from_json(CHURN_JSON, "SlotChurn")?,
        })
    }
}

/// `SlotChurn.slots[key]`'s slot (the mapping is in slot 0).
pub(crate) fn churn_slot(key: u64) -> H256 {
    mapping_slot(U256::from(key).to_be_bytes(), 0)
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
    fn the_churn_record_holds_code_and_its_calls_their_words() {
        let c = Contracts::load().unwrap();
        assert!(c.churn.compiler.starts_with("0.8.30"), "{}", c.churn.compiler);
        assert!(c.churn.runtime.len() > 300);
        assert_eq!(churn_call(1, 2, 3, 4).len(), 4 + 4 * 32);
        assert_ne!(churn_slot(1), churn_slot(2));
    }
}
