//! One post entry's transaction, built from the test's template: the `data`, `gasLimit`
//! and `value` its indexes pick, the access list of its data index, its type (explicit,
//! or from the fields present: an authorization list makes EIP-7702, blob hashes
//! EIP-4844, `maxFeePerGas` EIP-1559, an access list EIP-2930, else legacy) and its
//! sender (`sender`, checked against `secretKey` when both are given).
//!
//! State tests are unsigned: the secret key stands in for a valid signature, so a
//! transaction without one is rejected here. A transaction whose numbers the wire format
//! cannot carry, or revm's transaction cannot hold (a gas price over 128 bits), is a
//! [`TxBuildError`]: the runner counts it as rejected, which is right when the fixture
//! expects an exception and a failure otherwise.

use alloy_primitives::{Address as RevmAddress, Bytes, TxKind, B256, U256};
use revm::context::TxEnv;
use revm::context_interface::either::Either;
use revm::context_interface::transaction::{
    AccessList, AccessListItem, Authorization, SignedAuthorization,
};
use state::H256;
use trie::keccak256;

use super::fixture::{Indexes, TxNumber, TxTemplate};

/// Why a post entry's transaction cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TxBuildError {
    /// A number does not fit where the transaction carries it.
    #[error("transaction field {field} does not fit in {bits} bits")]
    Unencodable {
        /// The field.
        field: &'static str,
        /// Its width.
        bits: u32,
    },
    /// Neither a secret key nor a sender: nothing signs the transaction.
    #[error("the transaction has no secretKey: it is unsigned")]
    Unsigned,
    /// The secret key is not a valid secp256k1 key.
    #[error("secretKey is not a valid secp256k1 private key")]
    BadSecretKey,
    /// `sender` is not the address of `secretKey`.
    #[error("sender 0x{sender} is not the address of secretKey (0x{derived})", sender = hex::encode(.sender), derived = hex::encode(.derived))]
    SenderMismatch {
        /// The fixture's sender.
        sender: eth::Address,
        /// The key's address.
        derived: eth::Address,
    },
    /// An index past the end of its array (a [`Indexes`] not from this template's fixture,
    /// which the parser checks): not the transaction's fault.
    #[error("{field} index {index} is out of range: the template has {len}")]
    Index {
        /// `data`, `gasLimit` or `value`.
        field: &'static str,
        /// The index.
        index: usize,
        /// The array's length.
        len: usize,
    },
    /// A blob or EIP-7702 transaction without a recipient.
    #[error("a type {0} transaction needs a recipient (`to`)")]
    MissingRecipient(u8),
}

/// revm's transaction for the entry with `indexes`.
pub fn build_tx(
    template: &TxTemplate,
    indexes: Indexes,
    chain_id: u64,
) -> Result<TxEnv, TxBuildError> {
    let at = |field: &'static str, index: usize, len: usize| {
        (index < len).then_some(index).ok_or(TxBuildError::Index { field, index, len })
    };
    let data = &template.data[at("data", indexes.data, template.data.len())?];
    let gas_limit = template.gas_limit[at("gasLimit", indexes.gas, template.gas_limit.len())?];
    let value = template.value[at("value", indexes.value, template.value.len())?];
    let caller = sender(template)?;
    let tx_type = tx_type(template, indexes);
    if tx_type >= 3 && template.to.is_none() {
        return Err(TxBuildError::MissingRecipient(tx_type));
    }
    let price =
        template.gas_price.or(template.max_fee_per_gas).unwrap_or(TxNumber::Value(U256::ZERO));
    let tx = TxEnv {
        tx_type,
        caller: RevmAddress::from(caller),
        gas_limit: fit(gas_limit, "gasLimit")?,
        gas_price: fit(price, "gasPrice")?,
        kind: template.to.map_or(TxKind::Create, |to| TxKind::Call(RevmAddress::from(to))),
        value: word(value, "value")?,
        data: Bytes::from(data.clone()),
        nonce: fit(template.nonce, "nonce")?,
        chain_id: Some(match template.chain_id {
            Some(id) => fit(id, "chainId")?,
            None => chain_id,
        }),
        access_list: access_list(template, indexes),
        gas_priority_fee: template
            .max_priority_fee_per_gas
            .map(|p| fit(p, "maxPriorityFeePerGas"))
            .transpose()?,
        blob_hashes: template
            .blob_versioned_hashes
            .iter()
            .flatten()
            .map(|h| B256::from(h.0))
            .collect(),
        max_fee_per_blob_gas: template
            .max_fee_per_blob_gas
            .map(|f| fit(f, "maxFeePerBlobGas"))
            .transpose()?
            .unwrap_or(0),
        authorization_list: authorizations(template)?,
    };
    Ok(tx)
}

/// The sender: the secret key's address (checked against `sender` when both are given).
fn sender(template: &TxTemplate) -> Result<eth::Address, TxBuildError> {
    let key = template.secret_key.ok_or(TxBuildError::Unsigned)?;
    let derived = address_of_key(&key)?;
    match template.sender {
        Some(sender) if sender != derived => Err(TxBuildError::SenderMismatch { sender, derived }),
        _ => Ok(derived),
    }
}

/// The address of a secp256k1 private key: the last 20 bytes of the keccak256 of its
/// uncompressed public key (without the 0x04 tag).
pub(crate) fn address_of_key(key: &H256) -> Result<eth::Address, TxBuildError> {
    let signing =
        k256::ecdsa::SigningKey::from_slice(&key.0).map_err(|_| TxBuildError::BadSecretKey)?;
    let point = signing.verifying_key().to_encoded_point(false);
    let hash = keccak256(&point.as_bytes()[1..]);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash.0[12..]);
    Ok(address)
}

/// The transaction type: explicit, or from the fields the template has.
fn tx_type(template: &TxTemplate, indexes: Indexes) -> u8 {
    if let Some(t) = template.tx_type {
        return t;
    }
    if template.authorization_list.is_some() {
        4
    } else if template.blob_versioned_hashes.is_some() || template.max_fee_per_blob_gas.is_some() {
        3
    } else if template.max_fee_per_gas.is_some() {
        2
    } else if has_access_list(template, indexes) {
        1
    } else {
        0
    }
}

fn has_access_list(template: &TxTemplate, indexes: Indexes) -> bool {
    template.access_lists.as_ref().and_then(|l| l.get(indexes.data)).is_some_and(Option::is_some)
}

fn access_list(template: &TxTemplate, indexes: Indexes) -> AccessList {
    let entries =
        template.access_lists.as_ref().and_then(|l| l.get(indexes.data)).and_then(Option::as_ref);
    let items = entries.into_iter().flatten().map(|e| AccessListItem {
        address: RevmAddress::from(e.address),
        storage_keys: e.storage_keys.iter().map(|k| B256::from(k.0)).collect(),
    });
    AccessList(items.collect())
}

fn authorizations(
    template: &TxTemplate,
) -> Result<
    Vec<Either<SignedAuthorization, revm::context_interface::transaction::RecoveredAuthorization>>,
    TxBuildError,
> {
    let mut out = Vec::new();
    for a in template.authorization_list.iter().flatten() {
        let inner = Authorization {
            chain_id: word(a.chain_id, "authorization chainId")?,
            address: RevmAddress::from(a.address),
            nonce: fit(a.nonce, "authorization nonce")?,
        };
        // Any parity but 0 or 1 fails recovery, and EIP-7702 then skips the entry; 2 stands
        // for all of them.
        let y_parity = match a.y_parity {
            TxNumber::Value(v) if v <= U256::from(1u8) => v.to::<u8>(),
            _ => 2,
        };
        let signed = SignedAuthorization::new_unchecked(
            inner,
            y_parity,
            word(a.r, "authorization r")?,
            word(a.s, "authorization s")?,
        );
        out.push(Either::Left(signed));
    }
    Ok(out)
}

fn word(n: TxNumber, field: &'static str) -> Result<U256, TxBuildError> {
    match n {
        TxNumber::Value(v) => Ok(v),
        TxNumber::Unencodable => Err(TxBuildError::Unencodable { field, bits: 256 }),
    }
}

/// A number that must fit the integer type revm holds it in.
fn fit<T: TryFrom<U256>>(n: TxNumber, field: &'static str) -> Result<T, TxBuildError> {
    let bits = (std::mem::size_of::<T>() * 8) as u32;
    let v = word(n, field)?;
    T::try_from(v).map_err(|_| TxBuildError::Unencodable { field, bits })
}
