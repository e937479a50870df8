//! eth_getProof (EIP-1186) responses: parse from JSON, emit as JSON, verify against a
//! state root. Verification checks the account proof (inclusion, or exclusion for an
//! account that does not exist, which must then be claimed empty) and every storage proof
//! against the proven storage root.

use alloy_primitives::U256;
use serde_json::{json, Map, Value};
use state::{decode_hex, HexError, H256};
use trie::{verify_proof, verify_value, EthLayout, ProofError, EMPTY_CODE_HASH, EMPTY_ROOT};

use crate::account::{secure_key, storage_value_rlp, Account, AccountError};
use crate::genesis::{parse_address, Address};
use crate::number::{parse_quantity, NumberError};

/// One storage slot's proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageProof {
    /// The slot (left-padded to 32 bytes).
    pub key: H256,
    /// The claimed value (zero = absent).
    pub value: U256,
    /// Storage-trie nodes, root first.
    pub proof: Vec<Vec<u8>>,
}

/// An eth_getProof result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountProof {
    /// The account's address.
    pub address: Address,
    /// The claimed account (all-empty when the account does not exist).
    pub account: Account,
    /// State-trie nodes, root first.
    pub account_proof: Vec<Vec<u8>>,
    /// Storage proofs.
    pub storage_proof: Vec<StorageProof>,
}

/// Why an eth_getProof response is malformed or does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EthProofError {
    /// The JSON is not a proof object.
    #[error("malformed proof JSON: expected a JSON object")]
    NotAnObject,
    /// A field is missing or malformed.
    #[error("proof field `{field}` is invalid: {problem}")]
    Field {
        /// JSON field name.
        field: &'static str,
        /// What is wrong.
        problem: FieldProblem,
    },
    /// The account proof does not verify.
    #[error("account proof invalid: {0}")]
    AccountProof(ProofError),
    /// The proven account leaf does not decode.
    #[error("proven account leaf is malformed: {0}")]
    AccountLeaf(AccountError),
    /// The proven account differs from the claimed fields.
    #[error("claimed {field} does not match the proven account")]
    AccountMismatch {
        /// Which field.
        field: &'static str,
    },
    /// The account is proven absent but claimed non-empty.
    #[error("account is proven absent but the response claims a non-empty account")]
    AbsentButClaimed,
    /// The proof is of another account than the one asked for.
    #[error("the proof is of account 0x{claimed}, not of the asked 0x{asked}", claimed = hex::encode(.claimed), asked = hex::encode(.asked))]
    OtherAccount {
        /// The account the proof is of.
        claimed: Address,
        /// The account asked for.
        asked: Address,
    },
    /// The storage proofs are of other slots than the ones asked for (or in another order).
    #[error("the proof holds {claimed} storage proofs and {asked} slots were asked for; they differ first at position {index}")]
    OtherSlots {
        /// How many storage proofs the proof holds.
        claimed: usize,
        /// How many slots were asked for.
        asked: usize,
        /// The first position (from 0) where the slots differ.
        index: usize,
    },
    /// A storage proof does not verify.
    #[error("storage proof for slot {key} invalid: {source}")]
    StorageProof {
        /// The slot.
        key: H256,
        /// Why.
        source: ProofError,
    },
}

/// What is wrong with one field of an eth_getProof response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldProblem {
    /// Absent, or not a JSON string.
    #[error("missing or not a string")]
    NotAString,
    /// Absent, or not a JSON array.
    #[error("missing or not an array")]
    NotAnArray,
    /// An item of an array is not a string.
    #[error("item {0} is not a string")]
    ItemNotAString(usize),
    /// An item of an array is not an object.
    #[error("item {0} is not an object")]
    ItemNotAnObject(usize),
    /// An item of an array is not hex.
    #[error("item {index}: {source}")]
    ItemHex {
        /// The item.
        index: usize,
        /// The decoder's complaint.
        source: HexError,
    },
    /// Not hex of the right length.
    #[error(transparent)]
    Hex(#[from] HexError),
    /// Not a JSON-RPC quantity.
    #[error(transparent)]
    Number(#[from] NumberError),
    /// A quantity wider than the field.
    #[error("exceeds {0} bits")]
    TooWide(u32),
}

fn field_err(field: &'static str, problem: impl Into<FieldProblem>) -> EthProofError {
    EthProofError::Field { field, problem: problem.into() }
}

fn get_str<'a>(obj: &'a Map<String, Value>, field: &'static str) -> Result<&'a str, EthProofError> {
    obj.get(field).and_then(Value::as_str).ok_or_else(|| field_err(field, FieldProblem::NotAString))
}

fn get_nodes(obj: &Map<String, Value>, field: &'static str) -> Result<Vec<Vec<u8>>, EthProofError> {
    let arr = obj
        .get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| field_err(field, FieldProblem::NotAnArray))?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| {
            let s = v.as_str().ok_or_else(|| field_err(field, FieldProblem::ItemNotAString(i)))?;
            decode_hex(s)
                .map_err(|source| field_err(field, FieldProblem::ItemHex { index: i, source }))
        })
        .collect()
}

fn get_hash(obj: &Map<String, Value>, field: &'static str) -> Result<H256, EthProofError> {
    H256::from_hex(get_str(obj, field)?).map_err(|e| field_err(field, e))
}

fn get_quantity(obj: &Map<String, Value>, field: &'static str) -> Result<U256, EthProofError> {
    parse_quantity(get_str(obj, field)?).map_err(|e| field_err(field, e))
}

/// A storage key as JSON-RPC gives it: a quantity or data of at most 32 bytes.
fn parse_slot(s: &str) -> Result<H256, EthProofError> {
    let v = parse_quantity(s).map_err(|e| field_err("key", e))?;
    Ok(H256(v.to_be_bytes()))
}

fn hex_nodes(nodes: &[Vec<u8>]) -> Value {
    Value::Array(nodes.iter().map(|n| Value::String(format!("0x{}", hex::encode(n)))).collect())
}

impl AccountProof {
    /// Parse an eth_getProof result object (the `result` of the JSON-RPC response).
    pub fn from_json(v: &Value) -> Result<AccountProof, EthProofError> {
        let obj = v.as_object().ok_or(EthProofError::NotAnObject)?;
        let address =
            parse_address(get_str(obj, "address")?).map_err(|e| field_err("address", e))?;
        let nonce = u64::try_from(get_quantity(obj, "nonce")?)
            .map_err(|_| field_err("nonce", FieldProblem::TooWide(64)))?;
        let account = Account {
            nonce,
            balance: get_quantity(obj, "balance")?,
            storage_root: get_hash(obj, "storageHash")?,
            code_hash: get_hash(obj, "codeHash")?,
        };
        let account_proof = get_nodes(obj, "accountProof")?;
        let sp = obj
            .get("storageProof")
            .and_then(Value::as_array)
            .ok_or_else(|| field_err("storageProof", FieldProblem::NotAnArray))?;
        let storage_proof = sp
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let o = item
                    .as_object()
                    .ok_or_else(|| field_err("storageProof", FieldProblem::ItemNotAnObject(i)))?;
                Ok(StorageProof {
                    key: parse_slot(get_str(o, "key")?)?,
                    value: get_quantity(o, "value")?,
                    proof: get_nodes(o, "proof")?,
                })
            })
            .collect::<Result<_, EthProofError>>()?;
        Ok(AccountProof { address, account, account_proof, storage_proof })
    }

    /// The eth_getProof JSON shape.
    pub fn to_json(&self) -> Value {
        json!({
            "address": format!("0x{}", hex::encode(self.address)),
            "accountProof": hex_nodes(&self.account_proof),
            "balance": format!("{:#x}", self.account.balance),
            "codeHash": self.account.code_hash.to_string(),
            "nonce": format!("{:#x}", self.account.nonce),
            "storageHash": self.account.storage_root.to_string(),
            "storageProof": self.storage_proof.iter().map(|s| json!({
                "key": s.key.to_string(),
                "value": format!("{:#x}", s.value),
                "proof": hex_nodes(&s.proof),
            })).collect::<Vec<_>>(),
        })
    }

    /// Check that this is the answer to the question asked: the proof of `address` with
    /// a storage proof for each of `slots`, in that order. Verification alone cannot tell:
    /// an exclusion proof of an absent slot often proves other slots absent too, so a
    /// changed `key` (or the address of an absent account) still verifies.
    pub fn check_query(&self, address: &Address, slots: &[H256]) -> Result<(), EthProofError> {
        if self.address != *address {
            return Err(EthProofError::OtherAccount { claimed: self.address, asked: *address });
        }
        let claimed = self.storage_proof.iter().map(|s| &s.key);
        if let Some(index) = claimed.zip(slots).position(|(c, a)| c != a).or_else(|| {
            (self.storage_proof.len() != slots.len())
                .then(|| slots.len().min(self.storage_proof.len()))
        }) {
            return Err(EthProofError::OtherSlots {
                claimed: self.storage_proof.len(),
                asked: slots.len(),
                index,
            });
        }
        Ok(())
    }

    /// Verify against `state_root`.
    pub fn verify(&self, state_root: &H256) -> Result<(), EthProofError> {
        let key = secure_key(&self.address);
        let proven = verify_proof::<EthLayout>(state_root, key.as_bytes(), &self.account_proof)
            .map_err(EthProofError::AccountProof)?;
        let storage_root = match proven {
            Some(leaf) => {
                let acc = Account::decode(&leaf).map_err(EthProofError::AccountLeaf)?;
                let c = &self.account;
                for (same, field) in [
                    (acc.nonce == c.nonce, "nonce"),
                    (acc.balance == c.balance, "balance"),
                    (acc.storage_root == c.storage_root, "storageHash"),
                    (acc.code_hash == c.code_hash, "codeHash"),
                ] {
                    if !same {
                        return Err(EthProofError::AccountMismatch { field });
                    }
                }
                acc.storage_root
            }
            None => {
                let c = &self.account;
                let empty = c.nonce == 0
                    && c.balance.is_zero()
                    && (c.storage_root == EMPTY_ROOT || c.storage_root == H256::ZERO)
                    && (c.code_hash == EMPTY_CODE_HASH || c.code_hash == H256::ZERO);
                if !empty {
                    return Err(EthProofError::AbsentButClaimed);
                }
                EMPTY_ROOT
            }
        };
        for sp in &self.storage_proof {
            let expected = (!sp.value.is_zero()).then(|| storage_value_rlp(&sp.value));
            verify_value::<EthLayout>(
                &storage_root,
                secure_key(&sp.key.0).as_bytes(),
                expected.as_deref(),
                &sp.proof,
            )
            .map_err(|source| EthProofError::StorageProof { key: sp.key, source })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_answers_only_its_own_question() {
        let slot = |i: u8| H256([i; 32]);
        let proof = |slots: &[u8]| AccountProof {
            address: [1; 20],
            account: Account::default(),
            account_proof: Vec::new(),
            storage_proof: slots
                .iter()
                .map(|&i| StorageProof { key: slot(i), value: U256::ZERO, proof: Vec::new() })
                .collect(),
        };
        let p = proof(&[1, 2]);
        p.check_query(&[1; 20], &[slot(1), slot(2)]).unwrap();
        let other = p.check_query(&[2; 20], &[slot(1), slot(2)]).unwrap_err();
        assert!(matches!(other, EthProofError::OtherAccount { .. }), "{other}");
        for (asked, index) in [(&[1, 3][..], 1), (&[2, 1], 0), (&[1], 1), (&[1, 2, 3], 2), (&[], 0)]
        {
            let asked: Vec<H256> = asked.iter().map(|&i| slot(i)).collect();
            match p.check_query(&[1; 20], &asked) {
                Err(EthProofError::OtherSlots { index: i, .. }) => {
                    assert_eq!(i, index, "{asked:?}")
                }
                r => panic!("{asked:?}: {r:?}"),
            }
        }
        proof(&[]).check_query(&[1; 20], &[]).unwrap();
    }
}
