//! The `logs` hash of a state test: keccak256 of the RLP list of the transaction's logs,
//! each `[address, [topic, …], data]`. Cost: one encoding and one hash per transaction.

use alloy_primitives::Log;
use state::H256;
use trie::{keccak256, rlp_encode_string};

/// keccak256 of the RLP of `logs`.
pub fn logs_hash(logs: &[Log]) -> H256 {
    let items: Vec<Vec<u8>> = logs
        .iter()
        .map(|log| {
            let topics: Vec<Vec<u8>> =
                log.topics().iter().map(|t| rlp_encode_string(t.as_slice())).collect();
            rlp_list(&[
                rlp_encode_string(log.address.as_slice()),
                rlp_list(&topics),
                rlp_encode_string(&log.data.data),
            ])
        })
        .collect();
    keccak256(&rlp_list(&items))
}

/// The RLP list of already-encoded items.
fn rlp_list(items: &[Vec<u8>]) -> Vec<u8> {
    let payload: usize = items.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(payload + 9);
    if payload < 56 {
        out.push(0xc0 + payload as u8);
    } else {
        let len = payload.to_be_bytes();
        let skip = len.iter().position(|&b| b != 0).unwrap_or(len.len() - 1);
        out.push(0xf7 + (len.len() - skip) as u8);
        out.extend_from_slice(&len[skip..]);
    }
    for item in items {
        out.extend_from_slice(item);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{Address, Bytes, LogData, B256};

    #[test]
    fn empty_logs_hash_to_the_empty_list_hash() {
        // keccak256(0xc0), the `logs` of every state-test entry without logs.
        let want = "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347";
        assert_eq!(logs_hash(&[]).to_string(), want);
    }

    #[test]
    fn long_payloads_use_the_long_header() {
        let log = Log {
            address: Address::repeat_byte(0x11),
            data: LogData::new_unchecked(
                vec![B256::repeat_byte(1); 3],
                Bytes::from(vec![7u8; 300]),
            ),
        };
        let one = rlp_list(&[vec![0x80; 100]]);
        assert_eq!(&one[..2], &[0xf8, 100]);
        let two = rlp_list(&[vec![0x80; 300]]);
        assert_eq!(&two[..3], &[0xf9, 0x01, 0x2c]);
        assert_ne!(logs_hash(std::slice::from_ref(&log)), logs_hash(&[log.clone(), log]));
    }
}
