//! The two rules about flat keys and values that creation, restore and verification must
//! apply byte for byte alike, so they live here, below all three: where a key range right
//! after a key starts ([`successor`]: a chunk's first segment starts there when the chunk
//! before it did not end its trie), and which storage trie a main-trie value commits to
//! ([`storage_root_of`]). Both are cheap: a copy of the key, one RLP decode.

use trie::{EMPTY_ROOT, H256};

/// The smallest key after `k`.
pub(crate) fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.extend_from_slice(k);
    s.push(0);
    s
}

/// The storage trie a main-trie value commits to: the `storage_root` of an Ethereum
/// account (`RLP[nonce, balance, storage_root, code_hash]`) with storage; `None` for any
/// other value. The one rule creation, restore and verification share.
pub(crate) fn storage_root_of(value: &[u8]) -> Option<H256> {
    eth::Account::decode(value).ok().map(|a| a.storage_root).filter(|r| *r != EMPTY_ROOT)
}
