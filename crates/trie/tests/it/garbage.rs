//! Hostile bytes: every decoder and verifier returns an error or a value, never panics.

use proptest::prelude::*;
use trie::{
    keccak256, verify_multiproof, verify_proof, verify_range_proof, EthLayout, Layout, RlpError,
    RlpItem, H256,
};

/// Noise, or plausible list headers followed by noise.
fn node_like() -> impl Strategy<Value = Vec<u8>> {
    test_support::rlp_like(&[0xc0, 0xd1, 0xe2, 0xf8, 0xf9, 0xb8, 0xa0, 0x80], 600)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(2000)))]

    #[test]
    fn decoders_never_panic(bytes in node_like()) {
        let _ = EthLayout::decode(&bytes);
        let _ = RlpItem::decode_exact(&bytes);
    }

    #[test]
    fn verifiers_never_panic(nodes in prop::collection::vec(node_like(), 0..5), key in prop::collection::vec(any::<u8>(), 0..40), anchor in any::<bool>()) {
        let root = if anchor && !nodes.is_empty() { keccak256(&nodes[0]) } else { H256([7; 32]) };
        let _ = verify_proof::<EthLayout>(&root, &key, &nodes);
        let _ = verify_multiproof::<EthLayout>(&root, std::slice::from_ref(&key), &nodes);
        let entries = vec![(key.clone(), vec![1u8])];
        let _ = verify_range_proof::<EthLayout>(&root, &key, &entries, &nodes);
        let _ = verify_range_proof::<EthLayout>(&root, &[], &[], &nodes);
    }
}

#[test]
fn truncated_and_overflowing_rlp_are_typed_errors() {
    assert!(matches!(RlpItem::decode_exact(&[0xb8]), Err(RlpError::Truncated { .. })));
    assert!(matches!(RlpItem::decode_exact(&[0xf9, 0x01]), Err(RlpError::Truncated { .. })));
    let overflow = [0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    assert!(matches!(
        RlpItem::decode_exact(&overflow),
        Err(RlpError::LengthOverflow | RlpError::Truncated { .. })
    ));
    let err = EthLayout::decode(&[0xc3, 0x82, 0x20]).unwrap_err();
    assert!(!err.to_string().is_empty());
}
