//! Fork names as the Ethereum tests write them, mapped to revm's `SpecId`.
//!
//! The names are those of ethereum/tests and execution-spec-tests (`EIP150` and
//! `TangerineWhistle`, `EIP158` and `SpuriousDragon`, `ConstantinopleFix` and
//! `Petersburg`, `Merge` and `Paris` name one fork each). `Constantinople` is not mapped:
//! its EIP-1283 storage gas metering was withdrawn before it reached mainnet and revm
//! implements only Petersburg (Constantinople without it). A name not mapped here is a
//! fork revm does not support; its entries are skipped and the name reported, never
//! guessed at (transition forks such as `CancunToPragueAtTime15k` are block-test names;
//! the blob-parameter forks `BPO1`… have no spec in revm 43; its `AMSTERDAM` is a spec still
//! being written, left unmapped until the tests and revm agree on it).

use revm::primitives::hardfork::SpecId;

/// revm's spec for a fork name, or `None` when revm does not support the fork.
pub fn spec_of(fork: &str) -> Option<SpecId> {
    Some(match fork {
        "Frontier" => SpecId::FRONTIER,
        "Homestead" => SpecId::HOMESTEAD,
        "EIP150" | "TangerineWhistle" => SpecId::TANGERINE,
        "EIP158" | "SpuriousDragon" => SpecId::SPURIOUS_DRAGON,
        "Byzantium" => SpecId::BYZANTIUM,
        "ConstantinopleFix" | "Petersburg" => SpecId::PETERSBURG,
        "Istanbul" => SpecId::ISTANBUL,
        "Berlin" => SpecId::BERLIN,
        "London" => SpecId::LONDON,
        "Merge" | "Paris" => SpecId::MERGE,
        "Shanghai" => SpecId::SHANGHAI,
        "Cancun" => SpecId::CANCUN,
        "Prague" => SpecId::PRAGUE,
        "Osaka" => SpecId::OSAKA,
        _ => return None,
    })
}

/// The most blobs one transaction may carry at `spec` (EIP-4844: six; EIP-7691 raised the
/// block's limit, and so the transaction's, to nine in Prague; EIP-7594 caps a
/// transaction at six from Osaka).
pub(crate) fn max_blobs_per_tx(spec: SpecId) -> u64 {
    if spec.is_enabled_in(SpecId::OSAKA) {
        6
    } else if spec.is_enabled_in(SpecId::PRAGUE) {
        9
    } else {
        6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_specs_in_order() {
        let names = [
            "Frontier",
            "Homestead",
            "EIP150",
            "EIP158",
            "Byzantium",
            "ConstantinopleFix",
            "Istanbul",
            "Berlin",
            "London",
            "Paris",
            "Shanghai",
            "Cancun",
            "Prague",
            "Osaka",
        ];
        let specs: Vec<SpecId> = names.iter().map(|n| spec_of(n).unwrap()).collect();
        assert!(specs.windows(2).all(|w| w[0] < w[1]), "{specs:?}");
        assert_eq!(spec_of("Merge"), spec_of("Paris"));
        for unsupported in ["Constantinople", "cancun", "CancunToPragueAtTime15k", ""] {
            assert_eq!(spec_of(unsupported), None, "{unsupported}");
        }
        assert_eq!(max_blobs_per_tx(SpecId::CANCUN), 6);
        assert_eq!(max_blobs_per_tx(SpecId::PRAGUE), 9);
    }
}
