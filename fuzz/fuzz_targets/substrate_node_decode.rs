//! Substrate's node decoder on arbitrary bytes: errors are fine, panics are not, and a node
//! that decodes with its values inline re-encodes (in LayoutV0, which never hashes values)
//! to exactly the same bytes: the format has one encoding per node.
#![no_main]
use libfuzzer_sys::fuzz_target;
use trie::{Layout, NibbleSlice, NibbledCodec, NodeValue, NodeView, SubstrateV0, SubstrateV1};

/// Unpacked nibbles as packed bytes and the window over them.
fn packed(path: &[u8]) -> (Vec<u8>, usize) {
    let pad = path.len() % 2;
    let mut nibbles = vec![0u8; pad];
    nibbles.extend_from_slice(path);
    (nibbles.chunks(2).map(|c| (c[0] << 4) | c[1]).collect(), pad)
}

fuzz_target!(|data: &[u8]| {
    let _ = SubstrateV1::decode(data);
    let Ok(node) = SubstrateV0::decode(data) else { return };
    let mut out = Vec::new();
    match node {
        NodeView::Leaf { path, value: NodeValue::Inline(v) } => {
            SubstrateV0::encode_leaf_unpacked(path.as_slice(), v, &mut out);
        }
        NodeView::Branch { path, children, value } => {
            let value = match value {
                None => None,
                Some(NodeValue::Inline(v)) => Some(v),
                Some(NodeValue::Node(_)) => return,
            };
            let (bytes, pad) = packed(path.as_slice());
            let slice = NibbleSlice::range(&bytes, pad, pad + path.len());
            SubstrateV0.encode_nibbled_branch(slice, &children, value, &mut out);
        }
        _ => return,
    }
    assert_eq!(out, data, "a decoded node re-encodes to other bytes");
});
