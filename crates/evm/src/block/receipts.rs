//! Receipts and the commitments a header makes to its body: the receipts root and logs
//! bloom (from execution), the transactions root, withdrawals root and ommers hash (from
//! the body alone).
//!
//! A receipt is `RLP[status, cumulative gas, bloom, logs]`, prefixed by its transaction's
//! type byte for a typed transaction (EIP-2718); the encodings are alloy's. A list root is
//! the root of the Ethereum trie that maps `RLP(index)` to each item's encoding, built by
//! Arbor's own trie ([`trie::root_from_sorted`]) over the keys in byte order. Cost: one
//! encoding per item and the trie's hashes, about one keccak per item.

use alloy_consensus::{
    Eip658Value, Header, Receipt as AlloyReceipt, ReceiptEnvelope, ReceiptWithBloom,
};
use alloy_eips::eip2718::Encodable2718;
use alloy_eips::eip4895::Withdrawal;
use alloy_primitives::{Bloom, Log};
use state::H256;
use trie::{keccak256, root_from_sorted, EthLayout};

use super::decode::SignedTx;

/// The receipt of one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The transaction's type (0 legacy, 1 EIP-2930, 2 EIP-1559, 3 EIP-4844, 4 EIP-7702).
    pub tx_type: u8,
    /// Whether execution succeeded (EIP-658 status).
    pub success: bool,
    /// Gas used by the block up to and including this transaction.
    pub cumulative_gas_used: u64,
    /// The logs, in order.
    pub logs: Vec<Log>,
    /// The logs' bloom filter.
    pub bloom: Bloom,
}

impl Receipt {
    /// A receipt, its bloom computed from `logs`.
    pub fn new(tx_type: u8, success: bool, cumulative_gas_used: u64, logs: Vec<Log>) -> Receipt {
        let bloom = alloy_primitives::logs_bloom(logs.iter());
        Receipt { tx_type, success, cumulative_gas_used, logs, bloom }
    }

    /// The receipt's consensus encoding (the value under its index in the receipts trie).
    pub fn encoded(&self) -> Vec<u8> {
        let receipt = AlloyReceipt {
            status: Eip658Value::Eip658(self.success),
            cumulative_gas_used: self.cumulative_gas_used,
            logs: self.logs.clone(),
        };
        let with_bloom = ReceiptWithBloom::new(receipt, self.bloom);
        let envelope = match self.tx_type {
            1 => ReceiptEnvelope::Eip2930(with_bloom),
            2 => ReceiptEnvelope::Eip1559(with_bloom),
            3 => ReceiptEnvelope::Eip4844(with_bloom),
            4 => ReceiptEnvelope::Eip7702(with_bloom),
            // Invariant: receipts are made for decoded transactions, types 0 to 4.
            _ => ReceiptEnvelope::Legacy(with_bloom),
        };
        envelope.encoded_2718()
    }
}

/// The root of the trie mapping `RLP(i)` to `items[i]`.
pub(crate) fn list_root(items: impl ExactSizeIterator<Item = Vec<u8>>) -> H256 {
    let mut leaves: Vec<(Vec<u8>, Vec<u8>)> =
        items.enumerate().map(|(i, item)| (alloy_rlp::encode(i), item)).collect();
    leaves.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let (root, _) = root_from_sorted::<EthLayout, _, _>(&leaves)
        // Invariant: the keys are distinct and sorted, the values non-empty.
        .expect("RLP-encoded indexes are distinct keys");
    root
}

/// The transactions root of a body.
pub(crate) fn transactions_root(transactions: &[SignedTx]) -> H256 {
    list_root(transactions.iter().map(|t| t.tx.encoded_2718()))
}

/// The withdrawals root (EIP-4895).
pub(crate) fn withdrawals_root(withdrawals: &[Withdrawal]) -> H256 {
    list_root(withdrawals.iter().map(alloy_rlp::encode))
}

/// The receipts root.
pub(crate) fn receipts_root(receipts: &[Receipt]) -> H256 {
    list_root(receipts.iter().map(Receipt::encoded))
}

/// keccak256 of the RLP list of the ommer headers.
pub(crate) fn ommers_hash(ommers: &[Header]) -> H256 {
    let mut out = Vec::new();
    alloy_rlp::encode_list::<Header, Header>(ommers, &mut out);
    keccak256(&out)
}

/// The bloom of a block: the union of its receipts' blooms.
pub(crate) fn block_bloom(receipts: &[Receipt]) -> Bloom {
    let mut bloom = Bloom::ZERO;
    for r in receipts {
        bloom |= r.bloom;
    }
    bloom
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{Address, Bytes, LogData, B256};

    #[test]
    fn empty_lists_have_the_empty_root() {
        assert_eq!(list_root(std::iter::empty()), trie::EMPTY_ROOT);
        let want = H256(alloy_consensus::EMPTY_OMMER_ROOT_HASH.0);
        assert_eq!(ommers_hash(&[]), want);
    }

    #[test]
    fn roots_match_alloys_reference() {
        let receipts: Vec<Receipt> = (0..300u64)
            .map(|i| {
                let log = Log {
                    address: Address::repeat_byte(i as u8),
                    data: LogData::new_unchecked(
                        vec![B256::repeat_byte(7)],
                        Bytes::from(vec![1; 3]),
                    ),
                };
                Receipt::new((i % 5) as u8, i % 3 != 0, 21_000 * (i + 1), vec![log])
            })
            .collect();
        let envelopes: Vec<Vec<u8>> = receipts.iter().map(Receipt::encoded).collect();
        let reference = alloy_trie::root::ordered_trie_root_encoded(&envelopes);
        assert_eq!(receipts_root(&receipts).0, reference.0);
        let withdrawals: Vec<Withdrawal> = (0..20u64)
            .map(|i| Withdrawal {
                index: i,
                validator_index: i * 2,
                address: Address::repeat_byte(1),
                amount: i,
            })
            .collect();
        let reference = alloy_consensus::proofs::calculate_withdrawals_root(&withdrawals);
        assert_eq!(withdrawals_root(&withdrawals).0, reference.0);
        assert_ne!(block_bloom(&receipts), Bloom::ZERO);
    }
}
