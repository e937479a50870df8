//! Hostile input: the account and storage leaf decoders and the JSON parsers (genesis,
//! eth_getProof) return an error or a value, never panic.

use eth::{decode_storage_value, parse_quantity, Account, AccountProof, Genesis};
use proptest::prelude::*;

/// Noise, or plausible list and string headers followed by noise.
fn leaf_like() -> impl Strategy<Value = Vec<u8>> {
    test_support::rlp_like(&[0xc0, 0xd1, 0xe2, 0xf8, 0xf9, 0xb8, 0xa0, 0x80, 0xa1], 120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(2000)))]

    #[test]
    fn leaf_decoders_never_panic(bytes in leaf_like()) {
        if let Ok(account) = Account::decode(&bytes) {
            // Only canonical encodings decode, so they re-encode to the same bytes.
            prop_assert_eq!(account.rlp(), bytes.clone());
        }
        let _ = decode_storage_value(&bytes);
    }

    #[test]
    fn json_decoders_never_panic(s in "\\PC{0,200}") {
        let _ = Genesis::from_json_str(&s);
        let _ = parse_quantity(&s);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&s) {
            let _ = AccountProof::from_json(&v);
        }
    }
}
