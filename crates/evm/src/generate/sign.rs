//! Signing generated transactions: legacy transactions with EIP-155 replay protection
//! (`v = chainId * 2 + 35 + yParity`), signed with secp256k1 (k256, low `s` as EIP-2
//! wants) over keccak256 of `RLP[nonce, gasPrice, gas, to, value, data, chainId, 0, 0]`,
//! in alloy's types, so that a block carries them as its decoder reads them. Cost: one
//! signature (a scalar multiplication) per transaction.

use alloy_consensus::{SignableTransaction, TxLegacy};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Signature, TxKind, U256};
use k256::ecdsa::SigningKey;

use crate::block::BlockTx;

/// A legacy transaction before signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedTx {
    /// The sender's nonce.
    pub nonce: u64,
    /// Wei per gas.
    pub gas_price: u128,
    /// The gas limit.
    pub gas_limit: u64,
    /// The recipient, or `None` for a contract creation.
    pub to: Option<eth::Address>,
    /// Wei sent.
    pub value: U256,
    /// Calldata, or the init code of a creation.
    pub data: Vec<u8>,
}

/// The key could not sign (k256 refuses only degenerate inputs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot sign a transaction: {0}")]
pub struct SignError(String);

/// `tx` signed by `key` for `chain_id`, as a block carries it.
pub fn sign_tx(tx: &UnsignedTx, key: &SigningKey, chain_id: u64) -> Result<BlockTx, SignError> {
    let legacy = TxLegacy {
        chain_id: Some(chain_id),
        nonce: tx.nonce,
        gas_price: tx.gas_price,
        gas_limit: tx.gas_limit,
        to: match tx.to {
            Some(to) => TxKind::Call(to.into()),
            None => TxKind::Create,
        },
        value: tx.value,
        input: tx.data.clone().into(),
    };
    let hash = legacy.signature_hash();
    let (sig, recid) =
        key.sign_prehash_recoverable(&hash.0).map_err(|e| SignError(e.to_string()))?;
    let r = U256::from_be_slice(&sig.r().to_bytes());
    let s = U256::from_be_slice(&sig.s().to_bytes());
    let signature = Signature::new(r, s, recid.is_y_odd());
    Ok(BlockTx::Legacy(legacy.into_signed(signature)))
}

/// The wire bytes of `tx` signed by `key` for `chain_id` (a legacy transaction's RLP list).
pub fn sign_bytes(tx: &UnsignedTx, key: &SigningKey, chain_id: u64) -> Result<Vec<u8>, SignError> {
    Ok(sign_tx(tx, key, chain_id)?.encoded_2718())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::world::key_address;

    /// The EIP's own example: key 0x46…46, its transaction and signature.
    #[test]
    fn eip155_example_signs_to_its_bytes() {
        let key = SigningKey::from_slice(&[0x46; 32]).unwrap();
        let tx = UnsignedTx {
            nonce: 9,
            gas_price: 20_000_000_000,
            gas_limit: 21_000,
            to: Some([0x35; 20]),
            value: U256::from(10u64).pow(U256::from(18u8)),
            data: Vec::new(),
        };
        let want = "f86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83";
        assert_eq!(hex::encode(sign_bytes(&tx, &key, 1).unwrap()), want);
    }

    #[test]
    fn signed_transactions_recover_their_sender_in_a_block() {
        let key = SigningKey::from_slice(&[7; 32]).unwrap();
        let tx = |to| UnsignedTx {
            nonce: 3,
            gas_price: 1,
            gas_limit: 100_000,
            to,
            value: U256::from(5u8),
            data: vec![1, 2, 3],
        };
        for to in [Some([9u8; 20]), None] {
            let signed = sign_tx(&tx(to), &key, 1).unwrap();
            assert_eq!(crate::block::sender(&signed), Ok(key_address(&key)));
        }
    }
}
