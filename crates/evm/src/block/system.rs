//! The calls and credits a block makes outside its transactions: before them, the
//! beacon-roots contract (EIP-4788, Cancun on) and the history contract (EIP-2935, Prague
//! on) each called by the system address with the parent beacon root and the parent hash;
//! after them, the withdrawals credited (EIP-4895, Shanghai on) and, from Prague, the
//! execution requests (EIP-7685): deposits from the deposit contract's logs (EIP-6110),
//! then the withdrawal and consolidation request contracts called (EIP-7002, EIP-7251).
//!
//! A system call pays no fee, bumps no nonce and has a 30M gas budget; revm runs it
//! ([`revm::SystemCallEvm`]) over the block's state so far and its changes join the
//! block's. A pre-block contract without code is a no-op, as the EIPs say; a request
//! contract without code, or whose call fails, makes the block invalid. A withdrawal adds
//! its amount (gwei) to its address, creating the account; one of zero amount only
//! touches it, which removes an existing empty account (EIP-161) and creates none.

use alloy_eips::eip2935::HISTORY_STORAGE_ADDRESS;
use alloy_eips::eip4788::BEACON_ROOTS_ADDRESS;
use alloy_eips::eip4895::Withdrawal;
use alloy_eips::eip6110::DEPOSIT_REQUEST_TYPE;
use alloy_eips::eip7002::{WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS, WITHDRAWAL_REQUEST_TYPE};
use alloy_eips::eip7251::{CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS, CONSOLIDATION_REQUEST_TYPE};
use alloy_eips::eip7685::Requests;
use alloy_primitives::{b256, Address as RevmAddress, Bytes, B256, U256};
use eth::{AccountWrite, EthChanges};
use revm::context::{BlockEnv, CfgEnv};
use revm::context_interface::result::{EVMError, ExecutionResult};
use revm::{MainBuilder, SystemCallEvm};
use state::H256;
use trie::EMPTY_CODE_HASH;

use super::execute::ExecError;
use super::invalid::InvalidBlock;
use super::overlay::BlockOverlay;
use super::receipts::Receipt;
use crate::changes::evm_changes;
use crate::journal::world_context;
use crate::reader::WorldReader;
use crate::stored::BlockHashes;

/// The block's environment for system calls (the same as its transactions').
pub(crate) struct Env<'e> {
    pub(crate) cfg: &'e CfgEnv,
    pub(crate) block: &'e BlockEnv,
}

/// Call `contract` from the system address with `data` over `overlay`, apply the changes;
/// revm's result.
fn call<R: WorldReader, B: BlockHashes + ?Sized>(
    overlay: &mut BlockOverlay<'_, R, B>,
    env: &Env<'_>,
    contract: RevmAddress,
    data: Bytes,
) -> Result<ExecutionResult, ExecError<R::Error>> {
    let mut evm = world_context(&*overlay, env.cfg.clone(), env.block.clone()).build_mainnet();
    let out = evm.system_call(contract, data).map_err(|e| match e {
        EVMError::Database(e) => ExecError::State(e),
        other => ExecError::Evm(other.to_string()),
    })?;
    drop(evm);
    let changes = evm_changes(&out.state)?;
    overlay.apply(changes);
    Ok(out.result)
}

/// Whether `contract` has code in the block's state so far.
fn has_code<R: WorldReader, B: BlockHashes + ?Sized>(
    overlay: &BlockOverlay<'_, R, B>,
    contract: RevmAddress,
) -> Result<bool, ExecError<R::Error>> {
    let account = overlay.account(&contract.into_array()).map_err(ExecError::read)?;
    Ok(account.is_some_and(|a| a.code_hash != EMPTY_CODE_HASH))
}

/// EIP-4788: store the parent beacon root. EIP-2935 (when `history`): store the parent
/// hash.
pub(crate) fn pre_block<R: WorldReader, B: BlockHashes + ?Sized>(
    overlay: &mut BlockOverlay<'_, R, B>,
    env: &Env<'_>,
    beacon_root: Option<B256>,
    parent_hash: Option<B256>,
) -> Result<(), ExecError<R::Error>> {
    let calls = [(BEACON_ROOTS_ADDRESS, beacon_root), (HISTORY_STORAGE_ADDRESS, parent_hash)];
    for (contract, data) in calls {
        let Some(data) = data else { continue };
        // No code: nothing to call (the EIPs' deployment may come later than the fork).
        if has_code(overlay, contract)? {
            call(overlay, env, contract, Bytes::copy_from_slice(data.as_slice()))?;
        }
    }
    Ok(())
}

/// Credit `withdrawals` (EIP-4895).
pub(crate) fn withdraw<R: WorldReader, B: BlockHashes + ?Sized>(
    overlay: &mut BlockOverlay<'_, R, B>,
    withdrawals: &[Withdrawal],
) -> Result<(), ExecError<R::Error>> {
    for w in withdrawals {
        let amount = w.amount_wei();
        let address = w.address.into_array();
        let account = overlay.account(&address).map_err(ExecError::read)?;
        let mut changes = EthChanges::new();
        match account {
            Some(a) if amount.is_zero() => {
                if a.nonce == 0 && a.balance.is_zero() && a.code_hash == EMPTY_CODE_HASH {
                    changes.remove_account(address);
                }
            }
            None if amount.is_zero() => {}
            _ => {
                let a = account.unwrap_or_default();
                changes.write_account(
                    address,
                    AccountWrite {
                        nonce: a.nonce,
                        balance: a.balance.saturating_add(amount),
                        code_hash: a.code_hash,
                        storage_cleared: false,
                        storage: Default::default(),
                    },
                );
            }
        }
        overlay.apply(changes);
    }
    Ok(())
}

/// The DepositEvent's topic: keccak256("DepositEvent(bytes,bytes,bytes,bytes,bytes)").
const DEPOSIT_EVENT: B256 =
    b256!("649bbc62d0e31342afea4e5cd82d4049e7e1ee912fc0889aa790803be39038c5");

/// The requests of a Prague block (EIP-7685): deposits from the logs, then the withdrawal
/// and consolidation contracts' queues; their hash.
pub(crate) fn requests<R: WorldReader, B: BlockHashes + ?Sized>(
    overlay: &mut BlockOverlay<'_, R, B>,
    env: &Env<'_>,
    receipts: &[Receipt],
    deposit_contract: eth::Address,
) -> Result<H256, ExecError<R::Error>> {
    let mut requests = Requests::default();
    requests.push_request_with_type(DEPOSIT_REQUEST_TYPE, deposits(receipts, deposit_contract)?);
    let queues = [
        (
            WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS,
            WITHDRAWAL_REQUEST_TYPE,
            "EIP-7002 withdrawal requests",
        ),
        (
            CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS,
            CONSOLIDATION_REQUEST_TYPE,
            "EIP-7251 consolidation requests",
        ),
    ];
    for (contract, request_type, name) in queues {
        if !has_code(overlay, contract)? {
            let reason = "the contract has no code".to_string();
            return Err(InvalidBlock::SystemCall { contract: name, reason }.into());
        }
        match call(overlay, env, contract, Bytes::new())? {
            ExecutionResult::Success { output, .. } => {
                requests.push_request_with_type(request_type, output.into_data());
            }
            other => {
                let reason = format!("{other:?}");
                return Err(InvalidBlock::SystemCall { contract: name, reason }.into());
            }
        }
    }
    Ok(H256(requests.requests_hash().0))
}

/// EIP-6110's deposit requests: each DepositEvent log of the deposit contract, its five
/// ABI-encoded byte strings (pubkey 48, withdrawal credentials 32, amount 8, signature
/// 96, index 8) concatenated; a log of another layout makes the block invalid.
fn deposits(receipts: &[Receipt], contract: eth::Address) -> Result<Vec<u8>, InvalidBlock> {
    let mut out = Vec::new();
    let logs = receipts.iter().flat_map(|r| r.logs.iter());
    let deposit_logs = logs.filter(|l| {
        l.address.into_array() == contract && l.topics().first() == Some(&DEPOSIT_EVENT)
    });
    for (index, log) in deposit_logs.enumerate() {
        let fields = deposit_fields(&log.data.data).ok_or(InvalidBlock::DepositLog { index })?;
        for field in fields {
            out.extend_from_slice(field);
        }
    }
    Ok(out)
}

/// The five byte strings of a DepositEvent's data, or `None` if the layout is not the
/// contract's: 576 bytes, offsets 160, 256, 320, 384, 512 and sizes 48, 32, 8, 96, 8.
fn deposit_fields(data: &[u8]) -> Option<[&[u8]; 5]> {
    const LAYOUT: [(usize, usize); 5] = [(160, 48), (256, 32), (320, 8), (384, 96), (512, 8)];
    if data.len() != 576 {
        return None;
    }
    let word = |at: usize| -> Option<usize> {
        let w = U256::from_be_slice(data.get(at..at + 32)?);
        usize::try_from(w).ok()
    };
    let mut fields: [&[u8]; 5] = [&[]; 5];
    for (i, (offset, size)) in LAYOUT.into_iter().enumerate() {
        if word(i * 32)? != offset || word(offset)? != size {
            return None;
        }
        fields[i] = data.get(offset + 32..offset + 32 + size)?;
    }
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deposit_layout_is_checked() {
        let mut data = vec![0u8; 576];
        let layout = [(160usize, 48usize), (256, 32), (320, 8), (384, 96), (512, 8)];
        for (i, (offset, size)) in layout.iter().enumerate() {
            data[i * 32 + 31] = (*offset % 256) as u8;
            data[i * 32 + 30] = (*offset / 256) as u8;
            data[offset + 31] = *size as u8;
            for b in &mut data[offset + 32..offset + 32 + size] {
                *b = i as u8 + 1;
            }
        }
        let fields = deposit_fields(&data).unwrap();
        assert_eq!(fields.iter().map(|f| f.len()).collect::<Vec<_>>(), vec![48, 32, 8, 96, 8]);
        assert!(fields[3].iter().all(|b| *b == 4));
        let mut bad = data.clone();
        bad[31] = 0xa1;
        assert!(deposit_fields(&bad).is_none(), "offset moved");
        let mut bad = data.clone();
        bad[160 + 31] = 47;
        assert!(deposit_fields(&bad).is_none(), "size changed");
        assert!(deposit_fields(&data[..575]).is_none());
    }
}
