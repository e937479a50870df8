//! Ethereum account leaves: `RLP[nonce, balance, storage_root, code_hash]`, and storage
//! values (`RLP(trimmed big-endian word)`), both under keccak256 ("secure") keys.

use alloy_primitives::U256;
use state::H256;
use trie::{
    keccak256, rlp_encode_list, rlp_encode_string, RlpError, RlpItem, RlpListIter, EMPTY_CODE_HASH,
    EMPTY_ROOT,
};

/// An account as committed to by the state trie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    /// Transaction count / contract creation count.
    pub nonce: u64,
    /// Balance in wei.
    pub balance: U256,
    /// Root of the account's storage trie.
    pub storage_root: H256,
    /// keccak256 of the account's code.
    pub code_hash: H256,
}

impl Default for Account {
    fn default() -> Self {
        Account {
            nonce: 0,
            balance: U256::ZERO,
            storage_root: EMPTY_ROOT,
            code_hash: EMPTY_CODE_HASH,
        }
    }
}

/// Why bytes are not an account leaf.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AccountError {
    /// Not valid RLP.
    #[error("account is not valid RLP: {0}")]
    Rlp(#[from] RlpError),
    /// Not a list of four items.
    #[error("account must be an RLP list of 4 items")]
    Shape,
    /// A field has the wrong size or leading zeros.
    #[error("account field {0} is malformed")]
    Field(&'static str),
}

impl Account {
    /// The leaf value: `RLP[nonce, balance, storage_root, code_hash]`.
    pub fn rlp(&self) -> Vec<u8> {
        let nonce = self.nonce.to_be_bytes();
        let balance = self.balance.to_be_bytes::<32>();
        rlp_encode_list(&[
            trim_leading_zeros(&nonce),
            trim_leading_zeros(&balance),
            &self.storage_root.0,
            &self.code_hash.0,
        ])
    }

    /// Decode a leaf value.
    pub fn decode(bytes: &[u8]) -> Result<Account, AccountError> {
        let RlpItem::List(payload) = RlpItem::decode_exact(bytes)? else {
            return Err(AccountError::Shape);
        };
        let items: Vec<RlpItem<'_>> = RlpListIter::new(payload).collect::<Result<_, _>>()?;
        let [n, b, s, c] = items.as_slice() else { return Err(AccountError::Shape) };
        let int =
            |item: &RlpItem<'_>, name: &'static str, max: usize| -> Result<Vec<u8>, AccountError> {
                let s = item.string().map_err(|_| AccountError::Field(name))?;
                if s.len() > max || s.first() == Some(&0) {
                    return Err(AccountError::Field(name));
                }
                Ok(s.to_vec())
            };
        let nonce = int(n, "nonce", 8)?.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let balance = U256::try_from_be_slice(&int(b, "balance", 32)?)
            .ok_or(AccountError::Field("balance"))?;
        let hash = |item: &RlpItem<'_>, name: &'static str| {
            item.string().ok().and_then(H256::from_slice).ok_or(AccountError::Field(name))
        };
        Ok(Account {
            nonce,
            balance,
            storage_root: hash(s, "storageRoot")?,
            code_hash: hash(c, "codeHash")?,
        })
    }
}

/// Secure-trie key: keccak256 of the plain key.
pub fn secure_key(key: &[u8]) -> H256 {
    keccak256(key)
}

/// [`secure_key`] of each of `keys`, in order: several keys per Keccak-f call where the CPU
/// has SIMD lanes (a block's addresses and slots are hashed this way when it is committed).
pub(crate) fn secure_keys<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Vec<H256> {
    let msgs: Vec<&[u8]> = keys.collect();
    let mut out = vec![[0u8; 32]; msgs.len()];
    <trie::EthLayout as trie::Layout>::hash_many(&msgs, &mut out);
    out.into_iter().map(H256).collect()
}

/// A storage slot's leaf value: the RLP string of the word without leading zeros.
pub fn storage_value_rlp(value: &U256) -> Vec<u8> {
    rlp_encode_string(trim_leading_zeros(&value.to_be_bytes::<32>()))
}

/// Big-endian bytes without leading zeros (empty for zero): an RLP integer payload.
fn trim_leading_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

/// Decode a storage leaf value back into a word.
pub fn decode_storage_value(bytes: &[u8]) -> Result<U256, AccountError> {
    let s = RlpItem::decode_exact(bytes)?.string()?;
    if s.len() > 32 || s.first() == Some(&0) {
        return Err(AccountError::Field("storage value"));
    }
    U256::try_from_be_slice(s).ok_or(AccountError::Field("storage value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_secure_keys_are_the_keys_one_at_a_time() {
        // Addresses and slots, in batches that fill the SIMD lanes, leave some empty, or
        // none at all.
        for n in [0usize, 1, 3, 4, 5, 8, 9, 17] {
            for len in [20usize, 32] {
                let keys: Vec<Vec<u8>> =
                    (0..n).map(|i| (0..len).map(|j| (i * 37 + j * 11) as u8).collect()).collect();
                let batched = secure_keys(keys.iter().map(Vec::as_slice));
                let one: Vec<H256> = keys.iter().map(|k| secure_key(k)).collect();
                assert_eq!(batched, one, "{n} keys of {len} bytes");
            }
        }
    }

    #[test]
    fn account_round_trip() {
        let a = Account { nonce: 7, balance: U256::from(1_000_000u64), ..Account::default() };
        assert_eq!(Account::decode(&a.rlp()).unwrap(), a);
        let empty = Account::default();
        assert_eq!(Account::decode(&empty.rlp()).unwrap(), empty);
        assert!(Account::decode(&[0xc0]).is_err());
        assert!(Account::decode(&[0x80]).is_err());
        let v = storage_value_rlp(&U256::from(0x38u64));
        assert_eq!(v, vec![0x38]);
        assert_eq!(decode_storage_value(&v).unwrap(), U256::from(0x38u64));
        assert_eq!(storage_value_rlp(&U256::from(0x80u64)), vec![0x81, 0x80]);
        assert_eq!(storage_value_rlp(&U256::ZERO), vec![0x80]);
        assert_eq!(Account::default().rlp().len(), 70);
        let max = Account { nonce: u64::MAX, balance: U256::MAX, ..Account::default() };
        assert_eq!(Account::decode(&max.rlp()).unwrap(), max);
        assert!(decode_storage_value(&[0x81, 0x00]).is_err(), "leading zero");
    }
}
