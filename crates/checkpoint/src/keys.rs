//! The rules about flat keys and values that creation, restore and verification must apply
//! byte for byte alike, so they live here, below all three: where a key range right after
//! a key starts ([`successor`]: a chunk's first segment starts there when the chunk before
//! it did not end its trie), and which storage trie a main-trie entry commits to
//! ([`binding`], found where [`binding_place`] says). Both are cheap: a copy of the key,
//! one RLP decode or a prefix test.
//!
//! The storage rule depends on the layout's family (an exhaustive match: a new family must
//! state its rule):
//! - Ethereum: the main-trie key is the account key hash (32 bytes), the value an account
//!   `RLP[nonce, balance, storage_root, code_hash]`; its storage trie is
//!   `TrieId::Storage(key)` with root `storage_root`.
//! - Substrate (V0, V1): the main-trie key is `:child_storage:default: ‖ child key`, the
//!   value the child trie's root (32 bytes); the child trie is
//!   `TrieId::Storage(blake2_256(child key))` (as `arbor init --chain-spec` stores it).
//!
//! In both, a root equal to the layout's empty root commits to no trie.
//!
//! Contract code ([`code_ref`]): an Ethereum account whose code hash is not the empty
//! code's refers to the code stored under that hash (the store's `code` family), which a
//! checkpoint carries in its code chunks; a Substrate entry refers to none.

use state::H256;
use trie::{Family, LayoutName};

/// The main-trie key prefix under which a Substrate chain keeps each default child trie's
/// root.
pub(crate) const CHILD_STORAGE_PREFIX: &[u8] = b":child_storage:default:";

/// The smallest key after `k`.
pub(crate) fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.extend_from_slice(k);
    s.push(0);
    s
}

/// The storage trie the main-trie entry `(key, value)` commits to in `layout`: the trie's
/// key hash (its `TrieId::Storage`) and its root; `None` for any other entry (and for a
/// root that is the empty trie's). The one rule creation, restore and verification share.
pub(crate) fn binding(layout: LayoutName, key: &[u8], value: &[u8]) -> Option<(H256, H256)> {
    let bound = match layout.family() {
        Family::Ethereum(()) => {
            let account = H256::from_slice(key)?;
            (account, eth::Account::decode(value).ok()?.storage_root)
        }
        Family::Substrate(()) => {
            let child = key.strip_prefix(CHILD_STORAGE_PREFIX)?;
            (trie::blake2_256(child), H256::from_slice(value)?)
        }
    };
    Some(bound).filter(|(_, root)| *root != layout.empty_root())
}

/// The contract code the main-trie entry `(key, value)` refers to in `layout`: an
/// Ethereum account's code hash when it is not the empty code's; `None` for any other
/// entry. The one rule creation, restore and verification share.
pub(crate) fn code_ref(layout: LayoutName, key: &[u8], value: &[u8]) -> Option<H256> {
    match layout.family() {
        Family::Ethereum(()) => {
            if key.len() != 32 {
                return None;
            }
            let hash = eth::Account::decode(value).ok()?.code_hash;
            (hash != trie::EMPTY_CODE_HASH).then_some(hash)
        }
        Family::Substrate(()) => None,
    }
}

/// Where in the main trie the entry that commits to storage trie `trie` lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// Under this key (Ethereum: the account key is the trie's id).
    Key(Vec<u8>),
    /// Somewhere in the keys `[start, end)` (Substrate: the trie's id is a hash of the
    /// child key, which cannot be inverted; the child-storage entries are few and adjacent).
    Range(Vec<u8>, Vec<u8>),
}

/// Where the entry committing to storage trie `trie` lies in `layout`'s main trie.
pub(crate) fn binding_place(layout: LayoutName, trie: &H256) -> Place {
    match layout.family() {
        Family::Ethereum(()) => Place::Key(trie.0.to_vec()),
        Family::Substrate(()) => {
            let mut end = CHILD_STORAGE_PREFIX.to_vec();
            // ':' + 1: the first key after every key under the prefix.
            if let Some(last) = end.last_mut() {
                *last += 1;
            }
            Place::Range(CHILD_STORAGE_PREFIX.to_vec(), end)
        }
    }
}

/// Why no entry of the main trie commits to storage trie `trie` (for errors).
pub(crate) fn unbound(layout: LayoutName, trie: &H256) -> String {
    match layout.family() {
        Family::Ethereum(()) => format!("storage trie {trie} has no account with storage"),
        Family::Substrate(()) => format!(
            "storage trie {trie} has no child-trie entry ({}…) in the main trie",
            String::from_utf8_lossy(CHILD_STORAGE_PREFIX)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_follow_the_layout() {
        let root = H256([7; 32]);
        let mut key = CHILD_STORAGE_PREFIX.to_vec();
        key.extend_from_slice(b"child");
        for l in [LayoutName::SubstrateV0, LayoutName::SubstrateV1] {
            assert_eq!(binding(l, &key, &root.0), Some((trie::blake2_256(b"child"), root)));
            assert_eq!(binding(l, &key, &l.empty_root().0), None);
            assert_eq!(binding(l, &key, &[7; 33]), None);
            assert_eq!(binding(l, b":child_storage:other:x", &root.0), None);
            let Place::Range(start, end) = binding_place(l, &root) else { panic!() };
            assert!(start.as_slice() <= key.as_slice() && key.as_slice() < end.as_slice());
            assert!(end.as_slice() > [CHILD_STORAGE_PREFIX, &[0xff; 200][..]].concat().as_slice());
        }
        assert_eq!(binding(LayoutName::Ethereum, &key, &root.0), None);
        let account = eth::Account { storage_root: root, ..eth::Account::default() };
        assert_eq!(
            binding(LayoutName::Ethereum, &[9; 32], &account.rlp()),
            Some((H256([9; 32]), root))
        );
        assert_eq!(binding(LayoutName::Ethereum, &[9; 31], &account.rlp()), None);
        assert_eq!(binding(LayoutName::SubstrateV1, &[9; 32], &account.rlp()), None);
        assert_eq!(binding_place(LayoutName::Ethereum, &root), Place::Key(root.0.to_vec()));
    }

    #[test]
    fn code_refs_are_ethereum_accounts_with_code() {
        let code = H256([5; 32]);
        let with = eth::Account { code_hash: code, ..eth::Account::default() }.rlp();
        let without = eth::Account::default().rlp();
        assert_eq!(code_ref(LayoutName::Ethereum, &[9; 32], &with), Some(code));
        assert_eq!(code_ref(LayoutName::Ethereum, &[9; 32], &without), None);
        assert_eq!(code_ref(LayoutName::Ethereum, &[9; 31], &with), None);
        assert_eq!(code_ref(LayoutName::Ethereum, &[9; 32], b"not an account"), None);
        assert_eq!(code_ref(LayoutName::SubstrateV1, &[9; 32], &with), None);
    }
}
