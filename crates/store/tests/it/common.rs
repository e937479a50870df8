//! Shared helpers: small store configs, the in-memory model (a `BTreeMap` per trie with
//! its naive root), deterministic random blocks, per-test seeds, and the check of a view
//! of a recent block against the model's block.

use std::collections::BTreeMap;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::{ChangeSet, TrieId, H256};
use store::{AtError, BlockView, StateDb, StoreConfig};
use trie::{keccak256, root_from_sorted, verify_multiproof, verify_proof, EthLayout};

const MIB: u64 = 1 << 20;

/// A storage trie used alongside the main trie.
pub(crate) const STORAGE_A: TrieId = TrieId::Storage(H256([0x11; 32]));
/// A second storage trie.
pub(crate) const STORAGE_B: TrieId = TrieId::Storage(H256([0xa0; 32]));

/// Small caches and buffers so that tests are quick and caches evict.
pub(crate) fn small_config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.rocksdb.block_cache_bytes = 4 * MIB;
    c.rocksdb.target_file_size_bytes = MIB;
    c.rocksdb.write_buffer_bytes = 2 * MIB;
    c.rocksdb.max_total_wal_bytes = 0;
    c.rocksdb.max_open_files = 64;
    c.cache.node_cache_bytes = 256 << 10;
    c.cache.flat_cache_bytes = 256 << 10;
    c.cache.resident_bytes = 256 << 10;
    c.layers.unpersisted_bytes_max = 2 * MIB;
    c.layers.history_depth = 64;
    c
}

/// Open a store, panicking with the error's message on failure.
pub(crate) fn open(dir: &Path, config: &StoreConfig) -> StateDb {
    match StateDb::open(dir, config.clone()) {
        Ok(db) => db,
        Err(e) => panic!("open {}: {e}", dir.display()),
    }
}

/// One trie's contents in the model (no empty values).
pub(crate) type TrieState = BTreeMap<Vec<u8>, Vec<u8>>;
/// The whole state in the model.
pub(crate) type State = BTreeMap<TrieId, TrieState>;

/// Apply a change set to the model (`None` or empty = delete), as the store does.
pub(crate) fn apply(state: &mut State, changes: &ChangeSet) {
    for (trie, kv) in changes {
        let t = state.entry(*trie).or_default();
        for (k, v) in kv {
            match v.as_ref().filter(|v| !v.is_empty()) {
                Some(v) => t.insert(k.clone(), v.clone()),
                None => t.remove(k),
            };
        }
    }
    state.retain(|_, t| !t.is_empty());
}

/// The naive root of one trie of the model.
pub(crate) fn model_root(state: &State, trie: &TrieId) -> H256 {
    model_root_in(trie::LayoutName::Ethereum, state, trie)
}

/// The model's root of `trie` in `layout`.
pub(crate) fn model_root_in(layout: trie::LayoutName, state: &State, trie: &TrieId) -> H256 {
    struct Root<'a>(Vec<(&'a Vec<u8>, &'a Vec<u8>)>);
    impl trie::WithLayout for Root<'_> {
        type Output = H256;
        fn run<L: trie::Layout>(self) -> H256 {
            root_from_sorted::<L, _, _>(&self.0).unwrap().0
        }
    }
    let pairs = state.get(trie).map(|t| t.iter().collect()).unwrap_or_default();
    layout.dispatch(Root(pairs))
}

/// The model's value of `key` in `trie`.
pub(crate) fn model_get<'a>(state: &'a State, trie: &TrieId, key: &[u8]) -> Option<&'a Vec<u8>> {
    state.get(trie).and_then(|t| t.get(key))
}

/// Commit `changes`: on even steps with the model's prior values (as an executor gives
/// them), on odd steps letting the store read them.
pub(crate) fn commit_alternating(
    db: &mut StateDb,
    state: &State,
    changes: &ChangeSet,
    step: usize,
) -> Result<store::CommitInfo, store::CommitError> {
    if step.is_multiple_of(2) {
        let prior: ChangeSet = changes
            .iter()
            .map(|(t, kv)| {
                let old = kv.keys().map(|k| (k.clone(), model_get(state, t, k).cloned()));
                (*t, old.collect())
            })
            .collect();
        db.commit_with_prior(changes, &prior)
    } else {
        db.commit(changes)
    }
}

/// The secure-style 32-byte key number `index` of a deterministic key space.
pub(crate) fn indexed_key(index: u32) -> Vec<u8> {
    keccak256(&index.to_be_bytes()).0.to_vec()
}

/// Block `number`'s changes, a pure function of `(seed, number)`: `updates` random
/// updates (80%) and deletions (20%) over `keys` keys, mostly in the main trie and some
/// in [`STORAGE_A`]. Replaying blocks 1..=n on an empty model gives the state at n.
pub(crate) fn random_block(seed: u64, number: u64, keys: u32, updates: usize) -> ChangeSet {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ number.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut changes = ChangeSet::new();
    for _ in 0..updates {
        let trie = if rng.gen_bool(0.8) { TrieId::Main } else { STORAGE_A };
        let key = indexed_key(rng.gen_range(0..keys));
        let value = if rng.gen_bool(0.2) {
            None
        } else {
            let len = rng.gen_range(1..80);
            Some((0..len).map(|_| rng.gen()).collect())
        };
        changes.entry(trie).or_default().insert(key, value);
    }
    changes
}

/// The seed of one test: `ARBOR_SEED` if set, else fresh. Printed so that a failure
/// (whose captured output the harness shows) can be replayed.
pub(crate) fn test_seed(test: &str) -> u64 {
    let seed = match std::env::var("ARBOR_SEED") {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("ARBOR_SEED={s:?} is not a u64")),
        Err(_) => rand::thread_rng().gen(),
    };
    eprintln!("{test}: seed {seed} (replay with ARBOR_SEED={seed})");
    seed
}

/// An environment variable parsed as a number, or `default`.
pub(crate) fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("{name}={s:?} is not a number")),
        Err(_) => default,
    }
}

/// Check the store's head, roots and every listed key against the model at its head.
pub(crate) fn assert_matches_model(
    db: &StateDb,
    state: &State,
    number: u64,
    keys: &[(TrieId, Vec<u8>)],
    ctx: &str,
) {
    assert_eq!(db.head_number(), number, "{ctx}: head number");
    assert_eq!(db.head_root(), model_root(state, &TrieId::Main), "{ctx}: head root");
    for t in [TrieId::Main, STORAGE_A, STORAGE_B] {
        assert_eq!(db.trie_root(&t).unwrap(), model_root(state, &t), "{ctx}: root of {t:?}");
    }
    for (t, k) in keys {
        assert_eq!(
            db.get(t, k).unwrap().as_ref(),
            model_get(state, t, k),
            "{ctx}: {t:?} key {}",
            hex::encode(k)
        );
    }
}

/// Start this test binary again running only `test` (a child body that acts when its
/// environment names a directory), with `envs` set, its stdout piped to the caller.
pub(crate) fn spawn_child(test: &str, envs: &[(&str, &std::ffi::OsStr)]) -> std::process::Child {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
}

/// One block of a model that keeps every block: its whole state and its roots.
#[derive(Debug, Clone)]
pub(crate) struct ModelBlock {
    /// The state at the block.
    pub(crate) state: State,
    /// Its main-trie root (the block's root).
    pub(crate) root: H256,
    /// The root of [`STORAGE_A`].
    pub(crate) storage_root: H256,
}

impl ModelBlock {
    pub(crate) fn new(state: State) -> ModelBlock {
        let root = model_root(&state, &TrieId::Main);
        let storage_root = model_root(&state, &STORAGE_A);
        ModelBlock { state, root, storage_root }
    }

    /// The block after this one: `changes` applied.
    pub(crate) fn next(&self, changes: &ChangeSet) -> ModelBlock {
        let mut state = self.state.clone();
        apply(&mut state, changes);
        ModelBlock::new(state)
    }

    /// The root of `trie` ([`TrieId::Main`] or [`STORAGE_A`]).
    pub(crate) fn root_of(&self, trie: &TrieId) -> H256 {
        match trie {
            TrieId::Main => self.root,
            t if *t == STORAGE_A => self.storage_root,
            t => panic!("the model keeps no root of {t:?}"),
        }
    }
}

/// Why a block view's check failed: the view refused (the block left the window or was
/// reverted, or the store failed), or it answered something the model does not hold.
#[derive(Debug)]
pub(crate) enum ViewFail {
    /// The view's error.
    At(AtError),
    /// A wrong answer, described.
    Wrong(String),
}

impl From<AtError> for ViewFail {
    fn from(e: AtError) -> Self {
        ViewFail::At(e)
    }
}

impl std::fmt::Display for ViewFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ViewFail::At(e) => write!(f, "view error: {e}"),
            ViewFail::Wrong(s) => write!(f, "{s}"),
        }
    }
}

fn same<T: PartialEq + std::fmt::Debug>(
    got: T,
    want: T,
    what: impl FnOnce() -> String,
) -> Result<(), ViewFail> {
    if got == want {
        return Ok(());
    }
    Err(ViewFail::Wrong(format!("{}: got {got:?}, want {want:?}", what())))
}

/// The model's entries of `trie` with `start <= key < end`, at most `limit`.
pub(crate) fn model_range(
    state: &State,
    trie: &TrieId,
    start: &[u8],
    end: Option<&[u8]>,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Some(t) = state.get(trie) else { return Vec::new() };
    t.range(start.to_vec()..)
        .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
        .take(limit)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Keys worth proving at a block of `state`: up to two present keys of each trie, a key
/// of the key space (`indexed_key(0..keys)`) that may be absent, one outside it and a
/// short one (absent).
pub(crate) fn proof_keys(state: &State, keys: u32, rng: &mut impl Rng) -> Vec<Vec<u8>> {
    use rand::seq::IteratorRandom;
    let mut out: Vec<Vec<u8>> = Vec::new();
    for t in [TrieId::Main, STORAGE_A] {
        let present = state.get(&t).into_iter().flat_map(|m| m.keys());
        out.extend(present.choose_multiple(rng, 2).into_iter().cloned());
    }
    out.push(indexed_key(rng.gen_range(0..keys)));
    out.push(indexed_key(keys + rng.gen_range(0..1000)));
    out.push(vec![0x12]);
    out.sort();
    out.dedup();
    out
}

/// A random key for a range bound: a present key, one of the key space, or any 32 bytes.
fn range_bound(state: &State, trie: &TrieId, keys: u32, rng: &mut impl Rng) -> Vec<u8> {
    use rand::seq::IteratorRandom;
    match rng.gen_range(0..3) {
        0 => state
            .get(trie)
            .and_then(|m| m.keys().choose(rng).cloned())
            .unwrap_or_else(|| indexed_key(0)),
        1 => indexed_key(rng.gen_range(0..keys)),
        _ => rng.gen::<[u8; 32]>().to_vec(),
    }
}

/// Check a view of one block against the model's block: its roots, `get` of every key of
/// `gets`, `prove` and `prove_many` of `proven` (verified against the model's root of the
/// block; for a key whose value differs at `head`, the proof must not verify against the
/// head's root), the whole range of each trie and a random sub-range with a small limit.
/// Tries: [`TrieId::Main`] and [`STORAGE_A`]. `keys` is the size of the key space.
pub(crate) fn check_view(
    view: &BlockView<'_>,
    block: &ModelBlock,
    head: Option<&ModelBlock>,
    gets: &[Vec<u8>],
    proven: &[Vec<u8>],
    keys: u32,
    rng: &mut impl Rng,
) -> Result<(), ViewFail> {
    let b = view.number();
    same(view.root(), block.root, || format!("root at {b}"))?;
    same(view.trie_root(&STORAGE_A)?, block.storage_root, || format!("storage root at {b}"))?;
    for t in [TrieId::Main, STORAGE_A] {
        for k in gets {
            let got = view.get(&t, k)?;
            same(got.as_ref(), model_get(&block.state, &t, k), || {
                format!("{t:?} get {} at {b}", hex::encode(k))
            })?;
        }
        check_proofs(view, block, head, &t, proven)?;
        let all = view.range(&t, &[], None, usize::MAX)?;
        same(all, model_range(&block.state, &t, &[], None, usize::MAX), || {
            format!("{t:?} whole range at {b}")
        })?;
        let mut bounds =
            [range_bound(&block.state, &t, keys, rng), range_bound(&block.state, &t, keys, rng)];
        bounds.sort();
        let [start, end] = bounds;
        let end = rng.gen_bool(0.7).then_some(end);
        let limit = rng.gen_range(0..10);
        let got = view.range(&t, &start, end.as_deref(), limit)?;
        same(got, model_range(&block.state, &t, &start, end.as_deref(), limit), || {
            let end = end.as_ref().map(hex::encode);
            format!("{t:?} range {}..{end:?} limit {limit} at {b}", hex::encode(&start))
        })?;
    }
    Ok(())
}

fn check_proofs(
    view: &BlockView<'_>,
    block: &ModelBlock,
    head: Option<&ModelBlock>,
    trie: &TrieId,
    proven: &[Vec<u8>],
) -> Result<(), ViewFail> {
    let (b, t) = (view.number(), *trie);
    let root = block.root_of(&t);
    for k in proven {
        let want = model_get(&block.state, &t, k);
        let proof = view.prove(t, k)?;
        let what = || format!("{t:?} proof of {} at {b}", hex::encode(k));
        let got = verify_proof::<EthLayout>(&root, k, &proof)
            .map_err(|e| ViewFail::Wrong(format!("{}: does not verify: {e}", what())))?;
        same(got.as_ref(), want, what)?;
        let Some(head) = head else { continue };
        let now = model_get(&head.state, &t, k);
        if now != want {
            let at_head = verify_proof::<EthLayout>(&head.root_of(&t), k, &proof);
            if at_head.is_ok() {
                let msg = format!("{}: verifies against the head's root: {at_head:?}", what());
                return Err(ViewFail::Wrong(msg));
            }
        }
    }
    let many = view.prove_many(t, proven)?;
    let got = verify_multiproof::<EthLayout>(&root, proven, &many).map_err(|e| {
        ViewFail::Wrong(format!("{t:?} multiproof of {} keys at {b}: {e}", proven.len()))
    })?;
    let want: Vec<Option<Vec<u8>>> =
        proven.iter().map(|k| model_get(&block.state, &t, k).cloned()).collect();
    same(got, want, || format!("{t:?} multiproof values at {b}"))
}

/// The states of a database's blocks since block 0, and which blocks still have history
/// on disk (the last `depth`): what a revert may undo.
pub(crate) struct Model {
    pub(crate) states: Vec<State>,
    pub(crate) history: std::collections::BTreeSet<u64>,
    depth: u64,
}

impl Model {
    /// Block 0, empty, with `depth` blocks of history kept.
    pub(crate) fn new(depth: u64) -> Model {
        Model { states: vec![State::new()], history: Default::default(), depth }
    }

    pub(crate) fn head(&self) -> u64 {
        self.states.len() as u64 - 1
    }

    pub(crate) fn state(&self) -> &State {
        self.states.last().unwrap()
    }

    pub(crate) fn commit(&mut self, changes: &ChangeSet) {
        let mut next = self.state().clone();
        apply(&mut next, changes);
        self.states.push(next);
        let number = self.head();
        self.history.insert(number);
        if let Some(pruned) = number.checked_sub(self.depth) {
            self.history.remove(&pruned);
        }
    }

    /// Blocks `revert` can undo: consecutive blocks from the head down with history.
    pub(crate) fn revertable(&self) -> u64 {
        (1..=self.head()).rev().take_while(|b| self.history.contains(b)).count() as u64
    }

    pub(crate) fn revert(&mut self, n: u64) {
        for _ in 0..n {
            self.history.remove(&self.head());
            self.states.pop();
        }
    }

    /// Revert `n` blocks of `db` and of the model: within the history it succeeds; past it
    /// it is an error after undoing at most what was available (the model follows).
    pub(crate) fn revert_db(
        &mut self,
        db: &mut StateDb,
        n: u64,
        step: usize,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let available = self.revertable();
        let result = db.revert(n);
        if n <= available {
            proptest::prop_assert!(
                result.is_ok(),
                "step {}: revert {} of {}: {:?}",
                step,
                n,
                available,
                result
            );
            self.revert(n);
            return Ok(());
        }
        proptest::prop_assert!(
            matches!(
                result,
                Err(store::RevertError::TooFar { .. } | store::RevertError::Pruned { .. })
            ),
            "step {}: revert {} with {} available gave {:?}",
            step,
            n,
            available,
            result
        );
        let undone = self.head() - db.head_number();
        proptest::prop_assert!(
            undone <= available,
            "step {}: undid {} of {}",
            step,
            undone,
            available
        );
        self.revert(undone);
        Ok(())
    }
}
