//! Hostile bytes: every decoder and verifier returns an error or a value, never panics.

use proptest::prelude::*;
use state::H256;
use trie::{
    blake2_256, keccak256, verify_key_range, verify_multiproof, verify_proof, verify_range_proof,
    EthLayout, Layout, NibbleSlice, NibbledCodec, NodeError, NodeValue, NodeView, RlpError,
    RlpItem, SubstrateV0, SubstrateV1,
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

/// Noise, or Substrate node headers (leaf, branch, hashed-value kinds, with and without
/// continuation bytes) followed by noise.
fn substrate_node_like() -> impl Strategy<Value = Vec<u8>> {
    test_support::rlp_like(
        &[0x00, 0x42, 0x7f, 0x80, 0x81, 0xbf, 0xc2, 0xff, 0x20, 0x3f, 0x10, 0x1f],
        200,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(2000)))]

    #[test]
    fn substrate_decoders_never_panic(bytes in substrate_node_like()) {
        let _ = SubstrateV1::decode(&bytes);
        if let Some(again) = SubstrateV0::decode(&bytes).ok().and_then(|n| reencode_v0(&n)) {
            prop_assert_eq!(again, bytes, "a decoded node re-encodes to other bytes");
        }
    }

    #[test]
    fn substrate_verifiers_never_panic(
        nodes in prop::collection::vec(substrate_node_like(), 0..5),
        key in prop::collection::vec(any::<u8>(), 0..40),
        anchor in any::<bool>(),
    ) {
        let root = if anchor && !nodes.is_empty() { blake2_256(&nodes[0]) } else { H256([7; 32]) };
        let _ = verify_proof::<SubstrateV0>(&root, &key, &nodes);
        let _ = verify_multiproof::<SubstrateV1>(&root, std::slice::from_ref(&key), &nodes);
        let entries = vec![(key.clone(), vec![1u8])];
        let _ = verify_range_proof::<SubstrateV1>(&root, &key, &entries, &nodes);
        let _ = verify_range_proof::<SubstrateV0>(&root, &[], &[], &nodes);
        let _ = verify_key_range::<SubstrateV1, _, _, _>(&root, &key, None, &entries, &nodes, &mut ());
    }
}

/// A decoded node without hashed values, encoded again in Substrate's V0 layout (which
/// never hashes values); `None` for the empty node and nodes with hashed values.
fn reencode_v0(node: &NodeView<'_>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match node {
        NodeView::Leaf { path, value: NodeValue::Inline(v) } => {
            SubstrateV0::encode_leaf_unpacked(path.as_slice(), v, &mut out);
        }
        NodeView::Branch { path, children, value } => {
            let value = match value {
                None => None,
                Some(NodeValue::Inline(v)) => Some(*v),
                Some(NodeValue::Node(_)) => return None,
            };
            // Pack the nibbles behind one padding nibble when odd, and window past it.
            let pad = path.len() % 2;
            let nibbles: Vec<u8> =
                std::iter::repeat_n(0, pad).chain(path.0.iter().copied()).collect();
            let bytes: Vec<u8> = nibbles.chunks(2).map(|c| (c[0] << 4) | c[1]).collect();
            let slice = NibbleSlice::range(&bytes, pad, pad + path.len());
            SubstrateV0.encode_nibbled_branch(slice, children, value, &mut out);
        }
        _ => return None,
    }
    Some(out)
}

#[test]
fn substrate_decoder_errors_are_typed() {
    assert_eq!(SubstrateV0::decode(&[]), Err(NodeError::Truncated));
    assert_eq!(SubstrateV0::decode(&[0x01]), Err(NodeError::BadHeader(0x01)));
    assert_eq!(SubstrateV1::decode(&[0x80, 0, 0]), Err(NodeError::NoChildren));
    // A leaf claiming 2^16 nibbles in a few bytes: truncated, no allocation of that size.
    let mut huge = vec![0x7f];
    huge.extend(std::iter::repeat_n(0xff, 300));
    assert_eq!(SubstrateV1::decode(&huge), Err(NodeError::Truncated));
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
