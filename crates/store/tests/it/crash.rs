//! Crash test: a child process (this test binary, re-executed to run [`crash_child`])
//! commits deterministic blocks and reports each block made durable by `flush`; the parent
//! kills it with SIGKILL after a random delay, reopens the database and checks that the
//! head is a committed block (its roots equal a replay of blocks 1..=head on the model),
//! that every block reported durable is there, and that `verify` passes. Repeated
//! `ARBOR_CRASH_ITERATIONS` times (default 3) in the same directory; each child continues
//! from the head it finds. A third test reads and proves at every block of the recent
//! window after each kill (`StateDb::at`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use state::TrieId;
use store::{AtError, StateDb, StoreConfig};
use trie::LayoutName;

use crate::common::{
    apply, check_view, env_number, indexed_key, model_get, model_root_in, open, proof_keys,
    random_block, small_config, spawn_child, test_seed, ModelBlock, State, STORAGE_A,
};

const CHILD_DIR_ENV: &str = "ARBOR_CRASH_CHILD_DIR";
const CHILD_SEED_ENV: &str = "ARBOR_CRASH_CHILD_SEED";
/// Set (to anything) for a child that lets the trie nodes lag far behind the block.
const CHILD_LAG_ENV: &str = "ARBOR_CRASH_CHILD_LAG";
/// The trie layout of the child's database (absent: Ethereum).
const CHILD_LAYOUT_ENV: &str = "ARBOR_CRASH_CHILD_LAYOUT";
const KEYS: u32 = 5_000;
const UPDATES: usize = 200;
const FLUSH_EVERY: u64 = 3;
/// Flushes are rare with lagging nodes: between them the nodes stay behind for up to
/// `history_depth` blocks (the maximum lag) or until the buffer passes its bound (a
/// write-back in the middle of the run), and RocksDB flushes its full memtables (every
/// ~25 blocks here), so kills find groups on disk with their nodes behind.
const FLUSH_EVERY_LAGGING: u64 = 97;

fn config(lag: bool, layout: LayoutName) -> StoreConfig {
    let mut c = small_config();
    c.layout = Some(layout);
    c.rocksdb.write_buffer_bytes = 1 << 20;
    if lag {
        c.layers.persist_blocks = 2;
        c.layers.history_depth = 24;
        c.layers.node_buffer_bytes = 768 << 10;
    }
    c
}

/// The child's body: does nothing unless [`CHILD_DIR_ENV`] is set; then commits blocks
/// until killed, printing `durable <number> <root>` after each successful flush.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else { return };
    let seed: u64 = std::env::var(CHILD_SEED_ENV).unwrap().parse().unwrap();
    let lag = std::env::var_os(CHILD_LAG_ENV).is_some();
    let layout = match std::env::var(CHILD_LAYOUT_ENV) {
        Ok(name) => name.parse().unwrap(),
        Err(_) => LayoutName::Ethereum,
    };
    let flush_every = if lag { FLUSH_EVERY_LAGGING } else { FLUSH_EVERY };
    let mut db = open(Path::new(&dir), &config(lag, layout));
    let mut out = std::io::stdout();
    loop {
        let number = db.head_number() + 1;
        db.commit(&random_block(seed, number, KEYS, UPDATES)).unwrap();
        if number.is_multiple_of(flush_every) {
            db.flush().unwrap();
            writeln!(out, "durable {number} {}", db.head_root()).unwrap();
            out.flush().unwrap();
        }
    }
}

/// The model replayed block by block; only moves forward (the crash test never reverts).
struct Replay {
    seed: u64,
    number: u64,
    state: State,
}

impl Replay {
    fn advance_to(&mut self, number: u64) {
        assert!(number >= self.number, "replay cannot go back from {} to {number}", self.number);
        while self.number < number {
            self.number += 1;
            apply(&mut self.state, &random_block(self.seed, self.number, KEYS, UPDATES));
        }
    }
}

fn parse_durable(line: &str) -> Option<(u64, String)> {
    // The harness prints `test … ` without a newline before the child's first line.
    let at = line.find("durable ")?;
    let mut words = line[at + "durable ".len()..].split(' ');
    Some((words.next()?.parse().ok()?, words.next()?.to_owned()))
}

/// Run one child for `delay`, kill it, and return what it reported durable.
fn run_child(
    dir: &Path,
    block_seed: u64,
    delay: Duration,
    lag: bool,
    layout: LayoutName,
) -> Vec<(u64, String)> {
    let seed = block_seed.to_string();
    let mut envs = vec![(CHILD_DIR_ENV, dir.as_os_str()), (CHILD_SEED_ENV, seed.as_ref())];
    if lag {
        envs.push((CHILD_LAG_ENV, "1".as_ref()));
    }
    envs.push((CHILD_LAYOUT_ENV, layout.as_str().as_ref()));
    let mut child = spawn_child("crash::crash_child", &envs);
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| parse_durable(&l))
            .collect::<Vec<_>>()
    });
    std::thread::sleep(delay);
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "the child ended before it was killed: {status}");
    reader.join().unwrap()
}

#[test]
fn sigkill_then_reopen() {
    kill_and_reopen("sigkill_then_reopen", false, LayoutName::Ethereum);
}

/// The same with the nodes far behind the block: kills land with the node buffer holding
/// up to `history_depth` blocks (the maximum lag) and in the middle of write-backs; every
/// reopen brings the nodes to the head (checked against the model) or refuses.
#[test]
fn sigkill_with_nodes_behind_then_reopen() {
    kill_and_reopen("sigkill_with_nodes_behind_then_reopen", true, LayoutName::Ethereum);
}

/// Both kinds of kill in Substrate's layouts: every reopen gives the model's root in the
/// database's layout (V1: with value nodes, for the values of 33 bytes or more).
#[test]
fn sigkill_then_reopen_in_substrate_layouts() {
    kill_and_reopen("sigkill_then_reopen_in_substrate_v0", false, LayoutName::SubstrateV0);
    kill_and_reopen("sigkill_with_nodes_behind_in_substrate_v1", true, LayoutName::SubstrateV1);
}

fn kill_and_reopen(test: &str, lag: bool, layout: LayoutName) {
    let seed = test_seed(test);
    let iterations = env_number("ARBOR_CRASH_ITERATIONS", 3);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let block_seed: u64 = rng.gen();
    let dir = tempfile::tempdir().unwrap();
    let mut replay = Replay { seed: block_seed, number: 0, state: State::new() };
    let mut durable: BTreeMap<u64, String> = BTreeMap::new();
    let mut blocks_total = 0;
    for iteration in 0..iterations {
        let ctx = format!("seed {seed}, iteration {iteration}");
        let delay = Duration::from_millis(rng.gen_range(50..=600));
        let reports = run_child(dir.path(), block_seed, delay, lag, layout);
        let db = open(dir.path(), &config(lag, layout));
        let head = db.head_number();
        if let Some((last, root)) = reports.last() {
            assert!(head >= *last, "{ctx}: head {head} is behind durable block {last}");
            if head == *last {
                assert_eq!(db.head_root().to_string(), *root, "{ctx}: root of durable head {head}");
            }
        }
        // Replay to the head, checking every durable root on the way.
        let previous = replay.number;
        durable.extend(reports);
        assert!(head >= previous, "{ctx}: head {head} went back from {previous}");
        for (number, root) in durable.range(..=head).filter(|(n, _)| **n > previous) {
            replay.advance_to(*number);
            assert_eq!(
                model_root_in(layout, &replay.state, &TrieId::Main).to_string(),
                *root,
                "{ctx}: durable block {number}"
            );
        }
        replay.advance_to(head);
        blocks_total = head;
        assert_eq!(
            db.head_root(),
            model_root_in(layout, &replay.state, &TrieId::Main),
            "{ctx}: head {head} root"
        );
        assert_eq!(
            db.trie_root(&STORAGE_A).unwrap(),
            model_root_in(layout, &replay.state, &STORAGE_A),
            "{ctx}: storage root"
        );
        for i in (0..KEYS).step_by(97) {
            for t in [TrieId::Main, STORAGE_A] {
                let k = indexed_key(i);
                assert_eq!(
                    db.get(&t, &k).unwrap().as_ref(),
                    model_get(&replay.state, &t, &k),
                    "{ctx}: key {i}"
                );
            }
        }
        let report = db.verify().unwrap();
        assert!(report.ok(), "{ctx}: {report:?}");
        let caught_up = db.stats().catch_up.map(|c| (c.from_block, c.keys));
        eprintln!(
            "iteration {iteration}: killed after {delay:?} at head {head}, caught up from {caught_up:?}"
        );
        db.close().unwrap();
    }
    eprintln!("{iterations} kills, {blocks_total} blocks, {} durable reports", durable.len());
}

/// Blocks below the head the window keeps in [`sigkill_then_reads_at_recent_blocks`]
/// (under both configs' history depth).
const RECENT: u64 = 16;

/// Every block of `blocks` (the window, oldest first, ending at the head) read and proven
/// through `db.at`, and the blocks just outside refused naming the window.
fn check_recent(db: &StateDb, blocks: &BTreeMap<u64, ModelBlock>, rng: &mut impl Rng, ctx: &str) {
    let (oldest, head) = (*blocks.keys().next().unwrap(), db.head_number());
    let top = &blocks[&head];
    let gets: Vec<Vec<u8>> = (0..KEYS).step_by(97).map(indexed_key).collect();
    for (b, block) in blocks.iter().rev() {
        let view = db.at(*b).unwrap_or_else(|e| panic!("{ctx}: at({b}), head {head}: {e}"));
        let proven = proof_keys(&block.state, KEYS, rng);
        check_view(&view, block, Some(top), &gets, &proven, KEYS, rng)
            .unwrap_or_else(|e| panic!("{ctx}: block {b} of head {head}: {e}"));
    }
    for b in [Some(head + 1), oldest.checked_sub(1)].into_iter().flatten() {
        match db.at(b) {
            Err(AtError::Outside { block, oldest: o, head: h, .. }) => {
                assert_eq!((block, o, h), (b, oldest, head), "{ctx}: refusal of {b}")
            }
            other => panic!("{ctx}: at({b}) at head {head}: {:?}", other.map(|v| v.root())),
        }
    }
}

/// After a SIGKILL (with the nodes behind the block, so the open catches them up) the
/// recent window holds what was durable, no more: every block from head - [`RECENT`] to the head reads,
/// ranges and proves as the model's (the window read back from the reverse diffs, old
/// nodes undone), the head is at least the last block reported durable, and the blocks
/// just outside are refused naming the window.
#[test]
fn sigkill_then_reads_at_recent_blocks() {
    let seed = test_seed("sigkill_then_reads_at_recent_blocks");
    let iterations = env_number("ARBOR_CRASH_ITERATIONS", 3);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let block_seed: u64 = rng.gen();
    let dir = tempfile::tempdir().unwrap();
    // The last RECENT + 1 states of the replay, by block.
    let mut replay = Replay { seed: block_seed, number: 0, state: State::new() };
    let mut states: BTreeMap<u64, State> = BTreeMap::from([(0, State::new())]);
    // A loaded machine can starve the child: until one kill finds a full window, the
    // iterations go on with longer delays (at most `EXTRA` more).
    const EXTRA: u64 = 5;
    let mut full_windows = 0;
    for iteration in 0u64.. {
        let extra = iteration.checked_sub(iterations);
        if extra.is_some_and(|e| full_windows > 0 || e >= EXTRA) {
            break;
        }
        let ctx = format!("seed {seed}, iteration {iteration}");
        let delay = match extra {
            None => Duration::from_millis(rng.gen_range(100..=900)),
            Some(e) => Duration::from_millis(1000 << e),
        };
        // Kills alternate between nodes far behind (rare flushes: a long catch-up on open)
        // and flushes every few blocks (many durable reports to hold the head to).
        let lag = iteration % 2 == 0;
        let reports = run_child(dir.path(), block_seed, delay, lag, LayoutName::Ethereum);
        let mut config = config(lag, LayoutName::Ethereum);
        config.history.recent_blocks = RECENT;
        let db = open(dir.path(), &config);
        let head = db.head_number();
        let last = reports.last().map_or(0, |r| r.0);
        assert!(head >= last, "{ctx}: head {head} is behind durable block {last}");
        while replay.number < head {
            replay.advance_to(replay.number + 1);
            states.insert(replay.number, replay.state.clone());
        }
        let oldest = head.saturating_sub(RECENT);
        states.retain(|n, _| *n >= oldest);
        let blocks: BTreeMap<u64, ModelBlock> =
            states.iter().map(|(n, s)| (*n, ModelBlock::new(s.clone()))).collect();
        for (number, root) in reports.iter().filter(|(n, _)| *n >= oldest) {
            assert_eq!(blocks[number].root.to_string(), *root, "{ctx}: durable block {number}");
        }
        check_recent(&db, &blocks, &mut rng, &ctx);
        eprintln!(
            "iteration {iteration} (lag {lag}): killed after {delay:?} at head {head} \
             (durable {last}), blocks {oldest}..={head} checked"
        );
        if head > RECENT {
            full_windows += 1;
        }
        db.close().unwrap();
    }
    assert!(full_windows > 0, "seed {seed}: no kill found more than {RECENT} blocks");
}
