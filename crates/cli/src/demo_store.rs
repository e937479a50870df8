//! The database part of `arbor demo`: a temporary store initialised from mainnet's
//! genesis, verified, loaded with random account updates, reverted and verified again.
//!
//! Blocks 1-20 each write 1,000 random accounts (seeded ChaCha8): 70% change a genesis
//! account's nonce and balance, 20% create an account, 10% delete a genesis account.
//! Reverting 5 blocks must restore exactly the root recorded at block 15; a checkpoint of
//! that head, restored into a second database, must hold the same root. The directories
//! are removed at the end, whatever happened. Cost: about a second in a release build.

use std::collections::BTreeMap;
use std::time::Instant;

use alloy_primitives::U256;
use anyhow::{Context, Result};
use eth::{Account, Genesis};
use indicatif::ProgressBar;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use state::{ChangeSet, TrieId, H256};
use store::{StateDb, StoreConfig};
use trie::{keccak256, EMPTY_CODE_HASH, EMPTY_ROOT};

/// Blocks loaded after genesis.
const BLOCKS: u64 = 20;
/// Account writes per block.
const UPDATES_PER_BLOCK: usize = 1_000;
/// Blocks reverted at the end.
const REVERTED: u64 = 5;
/// Seed of the demo's account updates.
const SEED: u64 = 0xa5b0;

/// What the database part of the demo did and found.
#[derive(Debug, Serialize)]
pub(crate) struct StoreDemo {
    pub(crate) genesis_root: String,
    pub(crate) genesis_root_matches: bool,
    pub(crate) init_ms: f64,
    pub(crate) genesis_verified: bool,
    pub(crate) blocks: u64,
    pub(crate) updates_per_block: usize,
    pub(crate) load_ms: f64,
    pub(crate) loaded_root: String,
    pub(crate) loaded_verified: bool,
    pub(crate) reverted: u64,
    pub(crate) revert_ms: f64,
    pub(crate) reverted_root: String,
    pub(crate) expected_reverted_root: String,
    pub(crate) revert_matches: bool,
    pub(crate) reverted_verified: bool,
    pub(crate) verify_ms: f64,
    pub(crate) checkpoint_chunks: usize,
    pub(crate) checkpoint_ms: f64,
    pub(crate) restore_ms: f64,
    pub(crate) restored_root: String,
    pub(crate) restored_matches: bool,
}

impl StoreDemo {
    /// Every pass/fail outcome, in report order.
    pub(crate) fn outcomes(&self) -> [bool; 6] {
        [
            self.genesis_root_matches,
            self.genesis_verified,
            self.loaded_verified,
            self.revert_matches,
            self.reverted_verified,
            self.restored_matches,
        ]
    }
}

fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Run the database demo on a temporary directory.
pub(crate) fn run(genesis: &Genesis, expected_root: &H256) -> Result<StoreDemo> {
    let dir = tempfile::Builder::new()
        .prefix("arbor-demo-")
        .tempdir()
        .context("cannot create a temporary database directory")?;
    let mut db = StateDb::open(dir.path(), StoreConfig::default())
        .context("cannot create the demo database")?;
    let start = Instant::now();
    let genesis_root = crate::genesis_load::load_genesis(
        &mut db,
        genesis,
        eth::genesis_entries(genesis),
        None,
        &ProgressBar::hidden(),
    )
    .context("cannot initialise the demo database")?;
    let init_ms = ms_since(start);
    let mut verify_ms = 0.0;
    let mut verified = |db: &StateDb| -> Result<bool> {
        let start = Instant::now();
        let ok = db.verify().context("cannot verify the demo database")?.ok();
        verify_ms += ms_since(start);
        Ok(ok)
    };
    let genesis_verified = verified(&db)?;

    let accounts: Vec<H256> = genesis.alloc.keys().map(|a| keccak256(a)).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut roots = vec![genesis_root];
    let start = Instant::now();
    for b in 1..=BLOCKS {
        let changes = random_block(&mut rng, &accounts, b);
        let info = db.commit(&changes).with_context(|| format!("cannot commit demo block {b}"))?;
        roots.push(info.root);
    }
    db.flush().context("cannot flush the demo database")?;
    let load_ms = ms_since(start);
    let head_root = db.head_root();
    let loaded_verified = verified(&db)?;

    let start = Instant::now();
    db.revert(REVERTED).context("cannot revert the demo blocks")?;
    let revert_ms = ms_since(start);
    let expected_after = roots[(BLOCKS - REVERTED) as usize];
    let root_after_revert = db.head_root();
    let reverted_verified = verified(&db)?;
    let restored = checkpoint_round_trip(&db)?;
    db.close().context("cannot close the demo database")?;

    Ok(StoreDemo {
        genesis_root: genesis_root.to_string(),
        genesis_root_matches: genesis_root == *expected_root,
        init_ms,
        genesis_verified,
        blocks: BLOCKS,
        updates_per_block: UPDATES_PER_BLOCK,
        load_ms,
        loaded_root: head_root.to_string(),
        loaded_verified,
        reverted: REVERTED,
        revert_ms,
        reverted_root: root_after_revert.to_string(),
        expected_reverted_root: expected_after.to_string(),
        revert_matches: root_after_revert == expected_after && root_after_revert != head_root,
        reverted_verified,
        verify_ms,
        checkpoint_chunks: restored.chunks,
        checkpoint_ms: restored.create_ms,
        restore_ms: restored.restore_ms,
        restored_root: restored.root.to_string(),
        restored_matches: restored.root == root_after_revert && restored.verified,
    })
}

struct RoundTrip {
    chunks: usize,
    create_ms: f64,
    restore_ms: f64,
    root: H256,
    verified: bool,
}

/// Checkpoint the head (small chunks, 2 threads) into a temporary directory and restore it
/// into a new database from there, trusting only the head's block and root.
fn checkpoint_round_trip(db: &StateDb) -> Result<RoundTrip> {
    let tmp = tempfile::Builder::new()
        .prefix("arbor-demo-checkpoint-")
        .tempdir()
        .context("cannot create a temporary checkpoint directory")?;
    let work = tmp.path();
    let out = checkpoint::CheckpointDir::new(work.join("checkpoint"));
    let handle = db.read_handle()?;
    let pinned = handle.persisted()?;
    let opts = checkpoint::CreateOptions {
        rule: checkpoint::BoundaryRule { target_entries: 512, max_bytes: 1 << 20 },
        threads: 2,
    };
    let start = Instant::now();
    let created = checkpoint::create(&pinned, &opts, &out, &Default::default())
        .context("cannot create the demo checkpoint")?;
    let create_ms = ms_since(start);
    let trusted = checkpoint::Trusted { block: db.head_number(), root: db.head_root() };
    let sources = [checkpoint::open_source(&out.root().to_string_lossy(), &Default::default())?];
    let dst = work.join("restored");
    let mut restored = StateDb::open(&dst, StoreConfig::default())?;
    let start = Instant::now();
    let (report, outcome) = checkpoint::restore_from_sources(
        &mut restored,
        trusted,
        &sources,
        &checkpoint::RestoreOptions::new(work.join("staging")),
        &checkpoint::FetchOptions::default(),
        &Default::default(),
        &|_| {},
    );
    outcome.with_context(|| format!("cannot restore the demo checkpoint: {}", report.outcome))?;
    let restore_ms = ms_since(start);
    let verified = restored.verify()?.ok();
    let root = restored.head_root();
    restored.close()?;
    Ok(RoundTrip { chunks: created.manifest.chunks.len(), create_ms, restore_ms, root, verified })
}

/// One block of account writes (see the module docs).
fn random_block(rng: &mut ChaCha8Rng, accounts: &[H256], b: u64) -> ChangeSet {
    let mut changes = BTreeMap::new();
    for j in 0..UPDATES_PER_BLOCK {
        // 0-6: update a genesis account, 7-8: create an account, 9: delete a genesis account.
        let roll = rng.gen_range(0..10);
        let existing = (roll < 7 || roll == 9) && !accounts.is_empty();
        let key = if existing {
            accounts[rng.gen_range(0..accounts.len())]
        } else {
            keccak256(format!("arbor demo new account {b}/{j}").as_bytes())
        };
        let value = (!existing || roll != 9).then(|| {
            let mut balance = [0u8; 32];
            rng.fill(&mut balance[20..]);
            let account = Account {
                nonce: rng.gen_range(0..1_000),
                balance: U256::from_be_bytes(balance),
                storage_root: EMPTY_ROOT,
                code_hash: EMPTY_CODE_HASH,
            };
            account.rlp()
        });
        changes.insert(key.0.to_vec(), value);
    }
    ChangeSet::from([(TrieId::Main, changes)])
}
