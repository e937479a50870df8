//! revm's transaction for a block's transaction: every field the wire format carries,
//! the recovered sender as the caller. A legacy transaction signed before EIP-155 has no
//! chain id (revm then skips the chain-id check); the EIP-1559 family's fee cap is revm's
//! gas price and its tip the priority fee. EIP-7702 authorizations go to revm signed:
//! revm recovers each authority and skips the invalid ones, as the EIP says.

use alloy_consensus::Transaction as _;
use alloy_primitives::Address as RevmAddress;
use revm::context::TxEnv;
use revm::context_interface::either::Either;

use super::decode::SignedTx;

/// revm's transaction for `signed`.
pub(crate) fn tx_env(signed: &SignedTx) -> TxEnv {
    let tx = &signed.tx;
    TxEnv {
        tx_type: tx.tx_type() as u8,
        caller: RevmAddress::from(signed.sender),
        gas_limit: tx.gas_limit(),
        gas_price: tx.max_fee_per_gas(),
        kind: tx.kind(),
        value: tx.value(),
        data: tx.input().clone(),
        nonce: tx.nonce(),
        chain_id: tx.chain_id(),
        access_list: tx.access_list().cloned().unwrap_or_default(),
        gas_priority_fee: tx.max_priority_fee_per_gas(),
        blob_hashes: tx.blob_versioned_hashes().map(<[_]>::to_vec).unwrap_or_default(),
        max_fee_per_blob_gas: tx.max_fee_per_blob_gas().unwrap_or_default(),
        authorization_list: tx
            .authorization_list()
            .map(|list| list.iter().cloned().map(Either::Left).collect())
            .unwrap_or_default(),
    }
}
