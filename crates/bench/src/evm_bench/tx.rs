//! The benchmark's transactions on the wire: legacy transactions with EIP-155 replay
//! protection, RLP `[nonce, gasPrice, gas, to, value, data, v, r, s]` with
//! `v = chainId * 2 + 35 + yParity`, signed with secp256k1 over keccak256 of
//! `RLP[nonce, gasPrice, gas, to, value, data, chainId, 0, 0]`.
//!
//! Signing (`evm::generate::sign_bytes`, k256) happens when the blocks are made, before
//! any timing. Decoding and recovering the sender ([`decode`]: libsecp256k1 through revm's
//! `ecrecover`) happen inside the measured block time, as a node does for every
//! transaction it imports. The
//! decoder takes canonical encodings only, checks every field's width, the chain id and
//! EIP-2's low `s`, and returns a typed error ([`TxError`]), never a panic.

use alloy_primitives::{Address as RevmAddress, Bytes, TxKind, B256, B512, U256};
use revm::context::TxEnv;
use trie::{keccak256, rlp_encode_string, RlpItem, RlpListIter};

/// Half the secp256k1 group order: EIP-2 refuses signatures with a larger `s`.
const HALF_ORDER: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
];

/// Why transaction bytes are not a valid signed transaction of this chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TxError {
    /// Not canonical RLP, or not a list of byte strings.
    #[error("transaction is not valid RLP: {0}")]
    Rlp(#[from] trie::RlpError),
    /// Not nine fields.
    #[error("a legacy transaction has 9 fields, not {0}")]
    Fields(usize),
    /// A number with leading zeros or wider than its field.
    #[error("field {0} is not a canonical number of its width")]
    Number(&'static str),
    /// The recipient is not 20 bytes (the benchmark creates no contracts).
    #[error("the recipient is {0} bytes, not 20")]
    Recipient(usize),
    /// `v` names another chain, or no EIP-155 chain.
    #[error("v = {v} is not an EIP-155 signature for chain {chain_id}")]
    ChainId {
        /// The transaction's `v`.
        v: u64,
        /// The chain's id.
        chain_id: u64,
    },
    /// `s` above half the group order (EIP-2), or `r` or `s` zero.
    #[error("the signature is not canonical (EIP-2)")]
    Signature,
    /// No public key recovers from the signature.
    #[error("no sender recovers from the signature")]
    Recovery,
}

/// A number's minimal big-endian bytes (zero is empty), as RLP writes integers.
fn trimmed(bytes: &[u8]) -> &[u8] {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    &bytes[zeros..]
}

/// The header of an RLP list whose payload is `len` bytes.
fn list_header(len: usize) -> Vec<u8> {
    if len < 56 {
        return vec![0xc0 + len as u8];
    }
    let be = len.to_be_bytes();
    let n = trimmed(&be);
    let mut out = vec![0xf7 + n.len() as u8];
    out.extend_from_slice(n);
    out
}

/// The bytes a canonical string item takes in its list.
fn encoded_len(s: &[u8]) -> usize {
    match s.len() {
        1 if s[0] < 0x80 => 1,
        n if n < 56 => 1 + n,
        n => 1 + trimmed(&n.to_be_bytes()).len() + n,
    }
}

/// A canonical big-endian number of at most `width` bytes.
fn number(bytes: &[u8], width: usize, field: &'static str) -> Result<U256, TxError> {
    if bytes.len() > width || bytes.first() == Some(&0) {
        return Err(TxError::Number(field));
    }
    Ok(U256::from_be_slice(bytes))
}

/// Decode `bytes` as a transaction of `chain_id` and recover its sender: revm's
/// transaction, ready to execute.
pub(crate) fn decode(bytes: &[u8], chain_id: u64) -> Result<TxEnv, TxError> {
    let payload = match RlpItem::decode_exact(bytes)? {
        RlpItem::List(p) => p,
        RlpItem::String(_) => {
            return Err(trie::RlpError::UnexpectedKind { expected: "list" }.into())
        }
    };
    let mut f: Vec<&[u8]> = Vec::with_capacity(9);
    for item in RlpListIter::new(payload) {
        f.push(item?.string()?);
    }
    let [nonce, price, gas, to, value, data, v, r, s] = f.as_slice() else {
        return Err(TxError::Fields(f.len()));
    };
    if to.len() != 20 {
        return Err(TxError::Recipient(to.len()));
    }
    let v = number(v, 8, "v")?.to::<u64>();
    let parity = v
        .checked_sub(chain_id * 2 + 35)
        .filter(|p| *p <= 1)
        .ok_or(TxError::ChainId { v, chain_id })?;
    let (r, s) = (number(r, 32, "r")?, number(s, 32, "s")?);
    if r.is_zero() || s.is_zero() || s > U256::from_be_bytes(HALF_ORDER) {
        return Err(TxError::Signature);
    }
    // The signing payload: the first six items as they are, then chainId, 0, 0.
    let head: usize = f[..6].iter().map(|x| encoded_len(x)).sum();
    let chain = rlp_encode_string(trimmed(&chain_id.to_be_bytes()));
    let mut message = list_header(head + chain.len() + 2);
    message.extend_from_slice(&payload[..head]);
    message.extend_from_slice(&chain);
    message.extend_from_slice(&[0x80, 0x80]);
    let hash = B256::from(keccak256(&message).0);
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&r.to_be_bytes::<32>());
    sig[32..].copy_from_slice(&s.to_be_bytes::<32>());
    let recovered = revm::precompile::secp256k1::ecrecover(&B512::from(sig), parity as u8, &hash)
        .map_err(|_| TxError::Recovery)?;
    Ok(TxEnv {
        tx_type: 0,
        caller: RevmAddress::from_slice(&recovered[12..]),
        gas_limit: number(gas, 8, "gas")?.to::<u64>(),
        gas_price: number(price, 16, "gasPrice")?.to::<u128>(),
        kind: TxKind::Call(RevmAddress::from_slice(to)),
        value: number(value, 32, "value")?,
        data: Bytes::copy_from_slice(data),
        nonce: number(nonce, 8, "nonce")?.to::<u64>(),
        chain_id: Some(chain_id),
        ..TxEnv::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use evm::generate::{sign_bytes, UnsignedTx};
    use k256::ecdsa::SigningKey;
    use trie::rlp_encode_list;

    fn key(i: u8) -> SigningKey {
        SigningKey::from_slice(&[i; 32]).unwrap()
    }

    fn address_of(key: &SigningKey) -> RevmAddress {
        let point = key.verifying_key().to_encoded_point(false);
        RevmAddress::from_slice(&keccak256(&point.as_bytes()[1..]).0[12..])
    }

    fn tx() -> UnsignedTx {
        UnsignedTx {
            nonce: 7,
            gas_price: 2_000_000_000,
            gas_limit: 21_000,
            to: Some([0x35; 20]),
            value: U256::from(10u64).pow(U256::from(18u8)),
            data: vec![1, 2, 3],
        }
    }

    #[test]
    fn signed_transactions_decode_with_their_sender() {
        for i in 1..20u8 {
            let mut t = tx();
            t.nonce = u64::from(i) * 1000;
            t.data = vec![i; usize::from(i) * 5];
            let bytes = sign_bytes(&t, &key(i), 1).unwrap();
            let env = decode(&bytes, 1).unwrap();
            assert_eq!(env.caller, address_of(&key(i)), "key {i}");
            assert_eq!((env.nonce, env.gas_limit, env.gas_price), (t.nonce, 21_000, 2_000_000_000));
            assert_eq!(env.kind, TxKind::Call(RevmAddress::from([0x35; 20])));
            assert_eq!((env.value, env.data.to_vec()), (t.value, t.data));
        }
    }

    /// A known EIP-155 vector (the EIP's own example): its sender.
    #[test]
    fn eip155_example_recovers_its_sender() {
        let bytes = hex::decode(
            "f86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83",
        )
        .unwrap();
        let env = decode(&bytes, 1).unwrap();
        let want: [u8; 20] =
            hex::decode("9d8a62f656a8d1615c1294fd71e9cfb3e4855a4f").unwrap().try_into().unwrap();
        assert_eq!(env.caller, RevmAddress::from(want));
        assert_eq!(env.nonce, 9);
        assert_eq!(env.gas_price, 20_000_000_000);
    }

    #[test]
    fn bad_transactions_are_refused() {
        let bytes = sign_bytes(&tx(), &key(1), 1).unwrap();
        assert!(matches!(decode(&bytes, 5), Err(TxError::ChainId { .. })));
        assert!(decode(&bytes[..bytes.len() - 1], 1).is_err(), "truncated");
        assert!(matches!(decode(&[0x80], 1), Err(TxError::Rlp(_))));
        assert!(matches!(decode(&rlp_encode_list(&[b"a"]), 1), Err(TxError::Fields(1))));
        // A changed recipient signs another message: another sender, or none.
        let to = bytes.windows(20).position(|w| w == [0x35; 20]).unwrap();
        let mut changed = bytes.clone();
        changed[to + 7] ^= 1;
        match decode(&changed, 1) {
            Ok(env) => {
                assert_ne!(env.caller, address_of(&key(1)));
                assert_eq!(env.kind.to().map(|a| a.0[7]), Some(0x35 ^ 1));
            }
            Err(e) => assert!(matches!(e, TxError::Recovery), "{e}"),
        }
        // A changed length header breaks the list: a typed error.
        let mut header = bytes.clone();
        header[3] ^= 1;
        assert!(decode(&header, 1).is_err());
        for i in 0..bytes.len() {
            for bit in [1u8, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                let _ = decode(&b, 1);
            }
        }
    }
}
