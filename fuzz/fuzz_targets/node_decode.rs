//! Node and RLP decoders on arbitrary bytes: errors are fine, panics are not.
#![no_main]
use libfuzzer_sys::fuzz_target;
use trie::{EthLayout, Layout};

fuzz_target!(|data: &[u8]| {
    let _ = EthLayout::decode(data);
    let _ = trie::RlpItem::decode_exact(data);
    let _ = eth::Account::decode(data);
    let _ = eth::decode_storage_value(data);
});
