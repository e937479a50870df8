//! An Ethereum block from its RLP ([`decode_block`]): `[header, [transaction…], [ommer…],
//! [withdrawal…]?]`, with typed errors ([`DecodeError`]) on any malformed input and the
//! senders recovered.
//!
//! Formats are alloy's (`alloy-consensus`), which decode strictly (canonical integers, no
//! trailing bytes inside a list, known transaction types): legacy transactions as RLP
//! lists, typed ones (EIP-2930, 1559, 4844, 7702) as RLP strings holding `type ‖ payload`
//! (each held here to its string's declared length, which alloy's decoder does not check).
//! A blob transaction in a block carries no sidecar (the network form with blobs is an
//! error). Header fields after the Paris fifteen are read while the list has bytes left
//! (base fee, withdrawals root, blob gas used, excess blob gas, parent beacon root,
//! requests hash, and Amsterdam's two, which validation refuses); which must be present
//! is the fork's rule and checked by validation, not here. The block hash is keccak256
//! of the header's bytes as given.
//!
//! Senders are recovered from the signatures (secp256k1, through revm's ecrecover), in
//! parallel across transactions on rayon's pool: one signing hash (an RLP encoding and a
//! keccak) and one public-key recovery each, the main cost of decoding. A signature with
//! `r` or `s` out of range, or a high `s` (EIP-2), is an error naming the transaction.

use alloy_consensus::{Block, EthereumTxEnvelope, Header, TxEip4844};
use alloy_eips::eip4895::Withdrawal;
use alloy_primitives::{B256, B512, U256};
use rayon::prelude::*;
use state::H256;

/// A transaction as a block carries it (a blob transaction without its sidecar).
pub type BlockTx = EthereumTxEnvelope<TxEip4844>;

/// Why bytes are not a block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The RLP does not decode as a block.
    #[error("block RLP: {0}")]
    Rlp(alloy_rlp::Error),
    /// Bytes follow the block's RLP item.
    #[error("{0} bytes follow the block's RLP")]
    TrailingBytes(usize),
    /// A transaction's signature does not yield a sender.
    #[error("transaction {index}: {reason}")]
    Signature {
        /// The transaction's index in the block.
        index: usize,
        /// What is wrong with the signature.
        reason: SignatureProblem,
    },
}

/// What is wrong with a transaction's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureProblem {
    /// `r` or `s` is zero or not below the curve order.
    #[error("signature r or s is out of range")]
    OutOfRange,
    /// `s` is above half the curve order (EIP-2).
    #[error("signature s is above secp256k1n/2 (EIP-2)")]
    HighS,
    /// No public key recovers from the signature.
    #[error("no public key recovers from the signature")]
    Unrecoverable,
}

/// One transaction of a block with its recovered sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    /// The transaction.
    pub tx: BlockTx,
    /// Its sender.
    pub sender: eth::Address,
}

/// A decoded block (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthBlock {
    /// The header.
    pub header: Header,
    /// keccak256 of the header's RLP.
    pub hash: H256,
    /// The transactions with their senders, in block order.
    pub transactions: Vec<SignedTx>,
    /// The ommer headers (empty in every valid block after the merge).
    pub ommers: Vec<Header>,
    /// The withdrawals (EIP-4895), present from Shanghai on.
    pub withdrawals: Option<Vec<Withdrawal>>,
}

/// Decode a block from its RLP and recover its senders.
pub fn decode_block(bytes: &[u8]) -> Result<EthBlock, DecodeError> {
    let mut rest = bytes;
    let sealed = Block::<BlockTx, Header>::decode_sealed(&mut rest).map_err(DecodeError::Rlp)?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes(rest.len()));
    }
    let (block, hash) = sealed.into_parts();
    transactions_fill_their_items(bytes, &block.body.transactions).map_err(DecodeError::Rlp)?;
    let senders: Vec<eth::Address> = block
        .body
        .transactions
        .par_iter()
        .enumerate()
        .map(|(index, tx)| sender(tx).map_err(|reason| DecodeError::Signature { index, reason }))
        .collect::<Result<_, _>>()?;
    let transactions = block
        .body
        .transactions
        .into_iter()
        .zip(senders)
        .map(|(tx, sender)| SignedTx { tx, sender })
        .collect();
    Ok(EthBlock {
        header: block.header,
        hash: H256(hash.0),
        transactions,
        ommers: block.body.ommers,
        withdrawals: block.body.withdrawals.map(|w| w.0),
    })
}

/// A block's RLP split after its first item: the header's bytes (as the block carries them)
/// and the rest of the block list's payload (the body's items).
pub(crate) fn split_header(rlp: &[u8]) -> Result<(&[u8], &[u8]), alloy_rlp::Error> {
    let mut rest = rlp;
    alloy_rlp::Header::decode(&mut rest)?;
    let start = rest;
    let inner = alloy_rlp::Header::decode(&mut rest)?;
    let len = (start.len() - rest.len()).saturating_add(inner.payload_length);
    if len > start.len() {
        return Err(alloy_rlp::Error::InputTooShort);
    }
    Ok(start.split_at(len))
}

/// Every transaction of the block's list fills exactly the RLP item that declares it.
///
/// alloy's envelope decoder reads a typed transaction out of its RLP string without holding
/// it to the string's declared length (its check looks at the type byte, not the string's
/// header), so a string header one length off still decodes, to the same transaction: the
/// bytes would be a block they are not. Each item's declared length is compared with the
/// decoded transaction's network length, and the items with the list's.
fn transactions_fill_their_items(bytes: &[u8], txs: &[BlockTx]) -> Result<(), alloy_rlp::Error> {
    use alloy_eips::eip2718::Encodable2718;
    use alloy_rlp::{Error, Header as Item};
    let (_, mut rest) = split_header(bytes)?;
    let list = Item::decode(&mut rest)?;
    let mut items = rest.get(..list.payload_length).ok_or(Error::InputTooShort)?;
    for tx in txs {
        let start = items;
        let item = Item::decode(&mut items)?;
        let declared = (start.len() - items.len()).saturating_add(item.payload_length);
        if declared != tx.network_len() {
            return Err(Error::UnexpectedLength);
        }
        items = start.get(declared..).ok_or(Error::InputTooShort)?;
    }
    if items.is_empty() {
        Ok(())
    } else {
        Err(Error::UnexpectedLength)
    }
}

/// The secp256k1 group order n.
const SECP256K1N: U256 = U256::from_be_slice(&[
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
]);

/// The sender of `tx`: its signature checked (range, EIP-2) and its key recovered.
pub(crate) fn sender(tx: &BlockTx) -> Result<eth::Address, SignatureProblem> {
    let signature = tx.signature();
    let (r, s) = (signature.r(), signature.s());
    if r.is_zero() || s.is_zero() || r >= SECP256K1N || s >= SECP256K1N {
        return Err(SignatureProblem::OutOfRange);
    }
    if s > SECP256K1N >> 1 {
        return Err(SignatureProblem::HighS);
    }
    let mut rs = [0u8; 64];
    rs[..32].copy_from_slice(&r.to_be_bytes::<32>());
    rs[32..].copy_from_slice(&s.to_be_bytes::<32>());
    let hash = tx.signature_hash();
    let recovered = revm::precompile::secp256k1::ecrecover(
        &B512::from(rs),
        u8::from(signature.v()),
        &B256::from(hash.0),
    )
    .map_err(|_| SignatureProblem::Unrecoverable)?;
    let mut address = [0u8; 20];
    address.copy_from_slice(&recovered.0[12..]);
    Ok(address)
}
