//! Running a parsed blockchain test on a [`BlockBackend`]: the network's fork schedule
//! ([`ChainConfig::for_network`]; other networks are skipped and named), the genesis
//! block decoded and its hash checked against `genesisBlockHeader.hash`, its state root
//! against the allocation's, then every block imported in order (a block marked
//! `expectException` must be refused and leave the head unchanged; any other must be
//! accepted, with the hash its `blockHeader` gives), then the head against
//! `lastblockhash` and its state against `postState` (every account's nonce, balance,
//! code and storage, and the root) or `postStateHash`.
//!
//! Cost per test: one genesis commit, and per block a decode, a validation, an execution
//! and a commit (see [`super::Chain`]); at the end the backend's own checks.

use std::collections::HashMap;

use eth::{genesis_entries, secure_key, Address, GenesisAccount};
use state::{TrieId, H256};
use trie::{keccak256, EMPTY_ROOT};

use super::chain::{BlockBackend, Verdict};
use super::fixture::{BlockRlp, BlockTest, BlockTestFile, PostState};
use crate::block::{decode_block, ChainConfig};
use crate::reader::WorldReader;

/// The result of one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestReport {
    /// The test's name.
    pub test: String,
    /// Its network.
    pub network: String,
    /// What happened.
    pub outcome: Outcome,
}

/// What happened to one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// A check failed: what, where.
    Failed(String),
    /// The network is not one this executor runs.
    Skipped,
}

/// Run every test of `file` on a fresh backend from `backend` each.
pub fn run_file<B: BlockBackend>(
    file: &BlockTestFile,
    mut backend: impl FnMut() -> B,
) -> Vec<TestReport> {
    file.tests
        .iter()
        .map(|(name, test)| TestReport {
            test: name.clone(),
            network: test.network.clone(),
            outcome: run_test(test, &mut backend()),
        })
        .collect()
}

/// Run one test on `backend`.
pub fn run_test<B: BlockBackend>(test: &BlockTest, backend: &mut B) -> Outcome {
    let Some(mut chain) = ChainConfig::for_network(&test.network) else {
        return Outcome::Skipped;
    };
    if let Some(id) = test.chain_id {
        chain.chain_id = id;
    }
    match run_chain(test, &chain, backend) {
        Ok(()) => Outcome::Passed,
        Err(failure) => Outcome::Failed(failure),
    }
}

fn run_chain<B: BlockBackend>(
    test: &BlockTest,
    chain: &ChainConfig,
    backend: &mut B,
) -> Result<(), String> {
    let genesis = decode_block(&test.genesis_rlp).map_err(|e| format!("genesisRLP: {e}"))?;
    if genesis.hash != test.genesis_hash {
        return Err(format!(
            "genesis hash {}, genesisBlockHeader.hash is {}",
            genesis.hash, test.genesis_hash
        ));
    }
    let root = backend.start(&test.pre, &genesis, chain).map_err(|e| format!("genesis: {e}"))?;
    if root != test.genesis_state_root {
        return Err(format!(
            "genesis state root {root}, genesisBlockHeader.stateRoot is {}",
            test.genesis_state_root
        ));
    }
    for (i, block) in test.blocks.iter().enumerate() {
        let head = backend.head();
        let verdict = match &block.rlp {
            BlockRlp::Bytes(rlp) => backend.import(rlp).map_err(|e| format!("block {i}: {e}"))?,
            BlockRlp::Malformed(text) => {
                Verdict::Rejected(super::chain::Rejection::NotHex(text.clone()))
            }
        };
        match (&block.expect_exception, verdict) {
            (None, Verdict::Imported(hash)) => {
                if let Some(want) = block.hash.filter(|want| *want != hash) {
                    return Err(format!("block {i}: hash {hash}, blockHeader.hash is {want}"));
                }
            }
            (None, Verdict::Rejected(reason)) => {
                return Err(format!("block {i} refused: {reason}"))
            }
            (Some(expected), Verdict::Imported(_)) => {
                return Err(format!("block {i} accepted, expected it refused ({expected})"))
            }
            (Some(_), Verdict::Rejected(_)) => {
                if backend.head() != head {
                    return Err(format!("block {i} refused but the head moved"));
                }
            }
        }
    }
    if backend.head() != test.last_block_hash {
        return Err(format!("head {}, lastblockhash is {}", backend.head(), test.last_block_hash));
    }
    check_post(test, backend)?;
    backend.finish().map_err(|e| format!("at the end: {e}"))
}

/// The head's state against the expected post-state.
fn check_post<B: BlockBackend>(test: &BlockTest, backend: &B) -> Result<(), String> {
    let got = backend.head_root();
    let expected = match &test.post {
        PostState::Root(root) => *root,
        PostState::Accounts(post) => {
            let entries = genesis_entries(post);
            let roots: HashMap<TrieId, H256> = entries.storage_roots.iter().copied().collect();
            let state = backend.head_state();
            for (address, account) in &post.alloc {
                let storage = TrieId::Storage(secure_key(address));
                let root = roots.get(&storage).copied().unwrap_or(EMPTY_ROOT);
                check_account(&state, address, account, root)?;
            }
            entries.state_root
        }
    };
    if got != expected {
        let what = match test.post {
            PostState::Root(_) => "postStateHash",
            PostState::Accounts(_) => "postState's root (an account beyond it differs)",
        };
        return Err(format!("post-state root {got}, {what} is {expected}"));
    }
    Ok(())
}

/// One account of the expected post-state against the head's.
fn check_account<R: WorldReader>(
    state: &R,
    address: &Address,
    want: &GenesisAccount,
    storage_root: H256,
) -> Result<(), String> {
    let name = format!("0x{}", hex::encode(address));
    let got = state.account(address).map_err(|e| format!("{name}: read failed: {e}"))?;
    let Some(got) = got else { return Err(format!("{name}: missing from the post-state")) };
    if got.nonce != want.nonce {
        return Err(format!("{name}: nonce {}, expected {}", got.nonce, want.nonce));
    }
    if got.balance != want.balance {
        return Err(format!("{name}: balance {}, expected {}", got.balance, want.balance));
    }
    let code_hash =
        if want.code.is_empty() { trie::EMPTY_CODE_HASH } else { keccak256(&want.code) };
    if got.code_hash != code_hash {
        return Err(format!("{name}: code hash {}, expected {code_hash}", got.code_hash));
    }
    for (slot, value) in &want.storage {
        let v = state.storage(address, slot).map_err(|e| format!("{name}: read failed: {e}"))?;
        if v != *value {
            return Err(format!("{name}: slot {slot} is {v}, expected {value}"));
        }
    }
    if got.storage_root != storage_root {
        let got = got.storage_root;
        return Err(format!(
            "{name}: storage root {got}, expected {storage_root} (a slot beyond the expected ones)"
        ));
    }
    Ok(())
}
