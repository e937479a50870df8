//! Block-STM against the sequential executor: random blocks (hot keys, deletes, reads of
//! absent keys, failing transactions that write nothing) with 1 to 16 workers must give
//! the same outputs and writes, also when the run switches to sequential execution at a
//! random point; a stress loop repeats with yields injected into the transactions; a
//! conflict-free block keeps validations bounded; the adaptive executor over a stream of
//! blocks gives every block's sequential result, whichever executor it picks.
//!
//! Environment: `ARBOR_PROPTEST_CASES` (default small), `ARBOR_BLOCKSTM_STRESS`
//! (stress iterations, default 20).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;

use std::sync::atomic::{AtomicBool, Ordering};

use exec::{
    execute_parallel, execute_parallel_with, execute_partitioned, execute_partitioned_waves,
    execute_sequential, AdaptiveExecutor, ExecError, Mode, ParallelOptions, Reason, Stop,
    SwitchReason, Transaction, View,
};
use proptest::prelude::*;
use state::{StateReader, TrieId};

fn cases(default: u32) -> u32 {
    std::env::var("ARBOR_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

#[derive(Debug, Clone)]
struct Tx {
    reads: Vec<u8>,
    fail_if: Option<u64>,
    writes: Vec<(u8, u8)>,
    deletes: Vec<u8>,
    deltas: Vec<(u8, i8)>,
    scans: Vec<(u8, bool, usize)>,
    /// A nested transaction writing this key, then committed (`true`) or rolled back.
    nested: Option<(u8, bool)>,
    yields: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Receipt {
    Done(u64),
    Failed(u64),
}

fn key(k: u8) -> Vec<u8> {
    vec![b'k', k]
}

impl Transaction for Tx {
    type Output = Receipt;

    fn execute(&self, view: &mut dyn View) -> Result<Receipt, Stop> {
        let mut acc: u64 = 0;
        for (i, k) in self.reads.iter().enumerate() {
            if self.yields && i % 2 == 1 {
                std::thread::yield_now();
            }
            let v = view.get(&key(*k))?;
            acc = acc
                .wrapping_mul(31)
                .wrapping_add(v.map_or(7, |v| v.iter().map(|b| u64::from(*b)).sum()));
        }
        for (k, reverse, limit) in &self.scans {
            for (key, v) in view.scan(&key(*k), *reverse, *limit)? {
                acc = acc.wrapping_mul(17).wrapping_add(u64::from(key[1]));
                acc = acc.wrapping_add(v.iter().map(|b| u64::from(*b)).sum());
            }
        }
        if self.fail_if == Some(acc % 3) {
            return Ok(Receipt::Failed(acc));
        }
        for (k, c) in &self.writes {
            view.set(&key(*k), vec![(acc as u8).wrapping_add(*c), *c]);
        }
        for k in &self.deletes {
            view.remove(&key(*k));
        }
        for (k, d) in &self.deltas {
            view.add_delta(&key(*k), i64::from(*d))?;
        }
        if let Some((k, keep)) = self.nested {
            // A nested transaction over the key: kept or undone, as the runtime's failed
            // transfers are.
            view.start();
            view.set(&key(k), vec![acc as u8, 9]);
            view.add_delta(&key(k.wrapping_add(1) % 24), 5)?;
            let seen = view.get(&key(k))?;
            acc = acc.wrapping_add(seen.map_or(0, |v| u64::from(v[0])));
            if keep {
                view.commit().expect("a transaction is open");
            } else {
                view.rollback().expect("a transaction is open");
            }
        }
        Ok(Receipt::Done(acc))
    }
}

fn tx(keys: u8) -> impl Strategy<Value = Tx> {
    (
        prop::collection::vec(0..keys, 0..5),
        prop::option::weighted(0.2, 0u64..3),
        prop::collection::vec((0..keys, any::<u8>()), 0..4),
        prop::collection::vec(0..keys, 0..2),
        prop::collection::vec((0..keys, any::<i8>()), 0..3),
        prop::collection::vec((0..keys, any::<bool>(), 0usize..7), 0..2),
        prop::option::weighted(0.3, (0..keys, any::<bool>())),
    )
        .prop_map(|(reads, fail_if, writes, deletes, deltas, scans, nested)| Tx {
            nested,
            reads,
            fail_if,
            writes,
            deletes,
            deltas,
            scans,
            yields: false,
        })
}

type Block = (BTreeMap<Vec<u8>, Vec<u8>>, Vec<Tx>, usize, bool, Option<u64>);

/// Storage, transactions, workers, whether Block-STM runs even where the sequential
/// fallback would (one worker, small blocks), and after how many executions of a worker
/// the run switches to sequential execution, if it does.
fn block() -> impl Strategy<Value = Block> {
    (1u8..24).prop_flat_map(|keys| {
        (
            prop::collection::btree_map(
                (0..keys).prop_map(key),
                prop::collection::vec(any::<u8>(), 1..3),
                0..12,
            ),
            prop::collection::vec(tx(keys), 0..80),
            1usize..=16,
            any::<bool>(),
            prop::option::weighted(0.5, 1u64..60),
        )
    })
}

/// The result of a run over a state that cannot fail.
fn ok<T>(r: Result<T, Infallible>) -> T {
    r.unwrap_or_else(|e| match e {})
}

fn check<S: StateReader<Error = Infallible> + Sync>(
    txs: &[Tx],
    storage: &S,
    workers: usize,
    options: ParallelOptions<'_>,
) -> Result<(), TestCaseError> {
    let seq = ok(execute_sequential(txs, storage));
    let par = execute_parallel_with(txs, storage, workers, options).unwrap();
    prop_assert_eq!(&par.outputs, &seq.outputs);
    prop_assert_eq!(&par.writes, &seq.writes);
    if let Some(switch) = par.run.switch {
        prop_assert_eq!(par.run.mode, Mode::Parallel);
        prop_assert!(switch.at <= txs.len(), "{:?}", par.run);
        if options.always_parallel {
            prop_assert_eq!(switch.reason, SwitchReason::Requested);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    #[test]
    fn parallel_equals_sequential(
        (storage, txs, workers, always_parallel, switch_after) in block()
    ) {
        let options =
            ParallelOptions { always_parallel, switch_after, ..ParallelOptions::default() };
        check(&txs, &storage, workers, options)?;
    }

    /// The partitioned executor with 1 to 16 chunks per wave and 1 to 8 waves: the
    /// sequential result, and a switch only at a chunk's start or its last transaction,
    /// for a conflict.
    #[test]
    fn partitioned_equals_sequential(
        (storage, txs, workers, _, _) in block(),
        waves in 1usize..=8,
    ) {
        let seq = ok(execute_sequential(&txs, &storage));
        let part = ok(execute_partitioned_waves(&txs, &storage, workers, waves));
        prop_assert_eq!(&part.outputs, &seq.outputs);
        prop_assert_eq!(&part.writes, &seq.writes);
        if txs.len() < exec::PARALLEL_MIN_TXS || workers == 1 {
            prop_assert_eq!(part.run.mode, Mode::Sequential);
        } else {
            prop_assert_eq!(part.run.mode, Mode::Partitioned);
            if let Some(switch) = part.run.switch {
                prop_assert_eq!(switch.reason, SwitchReason::Conflict);
                let size = txs.len().div_ceil(workers * part.run.waves);
                let chunk_start = switch.at % size == 0;
                let chunk_last = (switch.at + 1) % size == 0 || switch.at + 1 == txs.len();
                prop_assert!(switch.at > 0 && (chunk_start || chunk_last), "{:?}", part.run);
            }
        }
    }

    /// One adaptive executor runs a stream of blocks: it starts sequentially, then tries
    /// Block-STM, then picks by its measurements; every block, switched or not, gives the
    /// sequential executor's result.
    #[test]
    fn adaptive_executor_equals_sequential_on_a_stream(
        workers in 2usize..=8,
        stream in prop::collection::vec(block(), 1..9),
    ) {
        let mut executor = AdaptiveExecutor::new(workers);
        let mut modelled = 0;
        for (storage, txs, _, _, switch_after) in stream {
            let options = ParallelOptions { switch_after, ..ParallelOptions::default() };
            let out = executor.execute_with(&txs, &storage, options).unwrap();
            let seq = ok(execute_sequential(&txs, &storage));
            prop_assert_eq!(&out.outputs, &seq.outputs);
            prop_assert_eq!(&out.writes, &seq.writes);
            if txs.len() < exec::PARALLEL_MIN_TXS {
                prop_assert_eq!((out.run.mode, out.run.reason), (Mode::Sequential, Reason::SmallBlock));
                continue;
            }
            let expected = match modelled {
                0 => Some((Mode::Sequential, Reason::Unmeasured)),
                1 | 2 => Some((Mode::Parallel, Reason::Unmeasured)),
                3 | 4 => Some((Mode::Partitioned, Reason::Unmeasured)),
                _ => None,
            };
            if let Some(expected) = expected {
                prop_assert_eq!((out.run.mode, out.run.reason), expected);
            }
            if out.run.mode == Mode::Sequential {
                prop_assert!(out.run.switch.is_none());
            }
            modelled += 1;
        }
    }
}

/// Random blocks again in stress mode — random yields and short sleeps inside the
/// executor's loop and inside the transactions — many times: interleavings the plain runs
/// rarely hit.
#[test]
fn stress_with_yields() {
    let iterations: u32 =
        std::env::var("ARBOR_BLOCKSTM_STRESS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(iterations));
    runner
        .run(
            &(block(), any::<u64>()),
            |((storage, mut txs, workers, always_parallel, switch), seed)| {
                for t in &mut txs {
                    t.yields = true;
                }
                let options = ParallelOptions {
                    stress_seed: Some(seed),
                    always_parallel,
                    cancel: None,
                    switch_after: switch,
                };
                check(&txs, &storage, workers.max(2), options)
            },
        )
        .unwrap();
}

/// Transaction i touches only key i: no conflicts, so every transaction executes once and
/// validations stay within a small multiple of the block size.
#[test]
fn conflict_free_block_validates_a_bounded_number_of_times() {
    let txs: Vec<Tx> = (0..200u8)
        .map(|i| Tx {
            reads: vec![i],
            fail_if: None,
            writes: vec![(i, 1)],
            deletes: vec![],
            deltas: vec![],
            scans: vec![],
            nested: None,
            yields: false,
        })
        .collect();
    let storage = BTreeMap::new();
    for workers in [2, 4, 8] {
        let out = ok(execute_parallel(&txs, &storage, workers));
        assert_eq!(out.outputs, ok(execute_sequential(&txs, &storage)).outputs);
        assert_eq!(out.counters.executions, 200, "{workers} workers: {:?}", out.counters);
        assert_eq!(out.counters.aborts, 0);
        assert!(out.counters.validations <= 2 * 200, "{workers} workers: {:?}", out.counters);
    }
}

/// Every transaction bumps one hot counter through a delta and writes its own key: the
/// counter creates no conflicts (no re-execution, no abort) and sums up exactly.
#[test]
fn hot_counter_through_deltas_does_not_conflict() {
    let txs: Vec<Tx> = (1..=200u8)
        .map(|i| Tx {
            reads: vec![i],
            fail_if: None,
            writes: vec![(i, 1)],
            deletes: vec![],
            deltas: vec![(0, 3)],
            scans: vec![],
            nested: None,
            yields: false,
        })
        .collect();
    let storage: BTreeMap<Vec<u8>, Vec<u8>> = [(key(0), 1000u64.to_be_bytes().to_vec())].into();
    let seq = ok(execute_sequential(&txs, &storage));
    assert_eq!(seq.writes[&key(0)], Some(1600u64.to_be_bytes().to_vec()));
    for workers in [2, 4] {
        let out = ok(execute_parallel(&txs, &storage, workers));
        assert_eq!(out.writes, seq.writes);
        assert_eq!(out.outputs, seq.outputs);
        assert_eq!(out.counters.executions, 200, "{:?}", out.counters);
        assert_eq!(out.counters.aborts, 0, "{:?}", out.counters);
    }
}

/// Reads and writes one hot key, so every transaction depends on the one before; the
/// transaction at `trigger` sets the cancel flag, the one at `panic_at` panics.
struct Chain<'a> {
    index: usize,
    trigger: Option<(usize, &'a AtomicBool)>,
    panic_at: Option<usize>,
}

impl Transaction for Chain<'_> {
    type Output = u64;

    fn execute(&self, view: &mut dyn View) -> Result<u64, Stop> {
        if self.panic_at == Some(self.index) {
            panic!("transaction {} fails on purpose", self.index);
        }
        if let Some((at, flag)) = self.trigger {
            if at == self.index {
                flag.store(true, Ordering::SeqCst);
            }
        }
        let n = view.get(b"hot")?.map_or(0, |v| u64::from(v[0])) + 1;
        view.set(b"hot", vec![n as u8]);
        Ok(n)
    }
}

/// Switching a forced Block-STM run to sequential execution after any number of
/// executions keeps the sequential result; with one worker the run is in block order, so
/// the prefix kept is exactly the transactions executed before the switch.
#[test]
fn a_switch_at_any_point_keeps_the_sequential_result() {
    let txs: Vec<Chain<'_>> =
        (0..120).map(|index| Chain { index, trigger: None, panic_at: None }).collect();
    let storage = BTreeMap::new();
    let seq = ok(execute_sequential(&txs, &storage));
    for workers in [1, 2, 4] {
        for k in 1..=120u64 {
            let options = ParallelOptions {
                always_parallel: true,
                switch_after: Some(k),
                ..ParallelOptions::default()
            };
            let out = execute_parallel_with(&txs, &storage, workers, options).unwrap();
            assert_eq!(out.outputs, seq.outputs, "{workers} workers, switch after {k}");
            assert_eq!(out.writes, seq.writes, "{workers} workers, switch after {k}");
            let switch = out.run.switch;
            assert!(switch.is_none_or(|s| s.reason == SwitchReason::Requested), "{switch:?}");
            if workers == 1 {
                assert_eq!(switch.map(|s| s.at), Some(k as usize), "switch after {k}");
            }
        }
    }
}

/// Transaction 0 is slow and sets `flag`; every transaction that sees no flag writes a
/// key of its own and bumps a counter through a delta. Sequentially only transaction 0
/// does; in parallel the others run ahead of it and write speculatively.
struct Flagged(usize);

impl Transaction for Flagged {
    type Output = bool;

    fn execute(&self, view: &mut dyn View) -> Result<bool, Stop> {
        if self.0 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let unflagged = view.get(b"flag")?.is_none();
        if unflagged {
            view.set(&[b"spec".as_slice(), &self.0.to_be_bytes()].concat(), vec![1]);
            view.add_delta(b"count", 1)?;
        }
        if self.0 == 0 {
            view.set(b"flag", vec![1]);
        }
        Ok(unflagged)
    }
}

/// A switch while transaction 0 is still running keeps no write or delta of the
/// transactions that ran ahead of it: the sequential executor runs them again, and what
/// they wrote speculatively is dropped with the rest of the memory past the prefix.
#[test]
fn speculative_writes_past_the_prefix_are_dropped() {
    let txs: Vec<Flagged> = (0..200).map(Flagged).collect();
    let storage = BTreeMap::new();
    let seq = ok(execute_sequential(&txs, &storage));
    assert_eq!(seq.writes.len(), 3, "{:?}", seq.writes);
    for k in [2, 10, 50] {
        let options = ParallelOptions {
            always_parallel: true,
            switch_after: Some(k),
            ..ParallelOptions::default()
        };
        let out = execute_parallel_with(&txs, &storage, 2, options).unwrap();
        assert_eq!(out.writes, seq.writes, "switch after {k}: {:?}", out.run);
        assert_eq!(out.outputs, seq.outputs, "switch after {k}");
    }
}

/// Writes its own key; the first executions while `slow` is above zero take 2 ms each.
struct Slow<'a> {
    index: u8,
    slow: &'a std::sync::atomic::AtomicUsize,
}

impl Transaction for Slow<'_> {
    type Output = u64;

    fn execute(&self, view: &mut dyn View) -> Result<u64, Stop> {
        let taken =
            self.slow.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if taken.is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let k = key(self.index);
        let n = view.get(&k)?.map_or(0, |v| u64::from(v[0])) + 1;
        view.set(&k, vec![n as u8]);
        Ok(n)
    }
}

/// The adaptive executor measures the sequential executor on the first block; on the
/// second, Block-STM's pace falls far behind it (its first executions are slow), so the
/// run switches to sequential execution and keeps the result; after a second such block
/// (Block-STM's first two blocks are measured before it is judged) the next runs
/// sequentially, the model having measured Block-STM as slower. The partitioned
/// executor's first block conflicts, and the next, with twice the waves, do not.
#[test]
fn a_parallel_block_behind_the_sequential_pace_switches() {
    let slow = std::sync::atomic::AtomicUsize::new(0);
    let txs: Vec<Slow<'_>> =
        (0..400).map(|i| Slow { index: (i % 200) as u8, slow: &slow }).collect();
    let storage = BTreeMap::new();
    let seq = ok(execute_sequential(&txs, &storage));
    let mut executor = AdaptiveExecutor::new(2);
    let first = ok(executor.execute(&txs, &storage));
    assert_eq!((first.run.mode, first.run.reason), (Mode::Sequential, Reason::Unmeasured));
    slow.store(20, Ordering::SeqCst);
    let second = ok(executor.execute(&txs, &storage));
    assert_eq!((second.run.mode, second.run.reason), (Mode::Parallel, Reason::Unmeasured));
    assert_eq!(second.run.switch.map(|s| s.reason), Some(SwitchReason::Slower), "{:?}", second.run);
    assert_eq!(second.outputs, seq.outputs);
    assert_eq!(second.writes, seq.writes);
    // Block-STM runs a second block before the model judges it; slow again.
    slow.store(20, Ordering::SeqCst);
    let third = ok(executor.execute(&txs, &storage));
    assert_eq!((third.run.mode, third.run.reason), (Mode::Parallel, Reason::Unmeasured));
    assert_eq!(third.writes, seq.writes);
    // The partitioned executor's first blocks: in the first (one wave) the second chunk
    // reads the keys the first wrote, so it goes on sequentially from the second chunk's
    // start; that block is a step of the cut's search and not a sample, so the next tries
    // two waves, where the keys' writers (transactions 0-199) are all in the first.
    let conflict = Some((200, SwitchReason::Conflict));
    for (waves, switch) in [(1, conflict), (2, None)] {
        let out = ok(executor.execute(&txs, &storage));
        assert_eq!((out.run.mode, out.run.reason), (Mode::Partitioned, Reason::Unmeasured));
        assert_eq!(out.run.waves, waves);
        assert_eq!(out.run.switch.map(|s| (s.at, s.reason)), switch, "{:?}", out.run);
        assert_eq!(out.writes, seq.writes);
        assert_eq!(out.outputs, seq.outputs);
    }
    // One more measured partitioned block (at the faster count, by the clock), then the
    // model chooses.
    let mut next = ok(executor.execute(&txs, &storage));
    assert_eq!((next.run.mode, next.run.reason), (Mode::Partitioned, Reason::Unmeasured));
    assert_eq!(next.writes, seq.writes);
    next = ok(executor.execute(&txs, &storage));
    assert_ne!(next.run.mode, Mode::Parallel, "{:?}", next.run);
    assert_eq!(next.run.reason, Reason::Faster);
    assert_eq!(next.writes, seq.writes);
    let e = executor.estimates();
    assert!(e.parallel_ns_per_tx > e.sequential_ns_per_tx, "{e:?}");
}

/// Runs `f` on its own thread and fails the test if it has not finished within a minute.
fn within_a_minute<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> std::thread::Result<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the executor hung");
    handle.join().unwrap()
}

/// A cancel flag set mid-block stops every worker, including those whose transactions are
/// parked on a dependency, and the call reports the cancellation.
#[test]
fn cancellation_stops_every_worker() {
    for workers in [1, 2, 4, 8] {
        for always_parallel in [false, true] {
            let result = within_a_minute(move || {
                let flag = AtomicBool::new(false);
                let txs: Vec<Chain<'_>> = (0..300)
                    .map(|index| Chain { index, trigger: Some((40, &flag)), panic_at: None })
                    .collect();
                let storage = BTreeMap::new();
                let options = ParallelOptions {
                    cancel: Some(&flag),
                    always_parallel,
                    ..ParallelOptions::default()
                };
                execute_parallel_with(&txs, &storage, workers, options).map(|o| o.outputs.len())
            });
            let result = result.unwrap();
            assert!(matches!(result, Err(ExecError::Cancelled)), "{workers} workers: {result:?}");
        }
    }
    // The partitioned executor (the adaptive executor's fourth block) stops too.
    for workers in [2, 4] {
        let result = within_a_minute(move || {
            let flag = AtomicBool::new(false);
            let storage = BTreeMap::new();
            let mut executor = AdaptiveExecutor::new(workers);
            let calm: Vec<Chain<'_>> =
                (0..300).map(|index| Chain { index, trigger: None, panic_at: None }).collect();
            for _ in 0..3 {
                ok(executor.execute(&calm, &storage));
            }
            let txs: Vec<Chain<'_>> = (0..300)
                .map(|index| Chain { index, trigger: Some((40, &flag)), panic_at: None })
                .collect();
            let options = ParallelOptions { cancel: Some(&flag), ..ParallelOptions::default() };
            let out = executor.execute_with(&txs, &storage, options);
            (out.as_ref().map(|o| o.run.mode).ok(), matches!(out, Err(ExecError::Cancelled)))
        });
        assert_eq!(result.unwrap(), (None, true), "{workers} workers");
    }
    // An unset flag changes nothing.
    let flag = AtomicBool::new(false);
    let txs: Vec<Chain<'_>> =
        (0..100).map(|index| Chain { index, trigger: None, panic_at: None }).collect();
    let storage = BTreeMap::new();
    let options = ParallelOptions { cancel: Some(&flag), ..ParallelOptions::default() };
    let out = execute_parallel_with(&txs, &storage, 4, options).unwrap();
    assert_eq!(out.outputs, (1..=100).collect::<Vec<u64>>());
}

/// A panicking transaction halts the other workers and the panic reaches the caller; no
/// worker waits forever for the transaction that never finishes.
#[test]
fn a_panicking_transaction_does_not_hang_the_block() {
    for workers in [2, 4] {
        for partitioned in [false, true] {
            for panic_at in [0, 150, 299] {
                let result = within_a_minute(move || {
                    let txs: Vec<Chain<'_>> = (0..300)
                        .map(|index| Chain { index, trigger: None, panic_at: Some(panic_at) })
                        .collect();
                    let storage = BTreeMap::new();
                    let out = match partitioned {
                        true => execute_partitioned(&txs, &storage, workers),
                        false => execute_parallel(&txs, &storage, workers),
                    };
                    ok(out).outputs.len()
                });
                assert!(
                    result.is_err(),
                    "{workers} workers at {panic_at}: the panic was swallowed"
                );
            }
        }
    }
}

/// A state whose reads fail from the `fail_after`-th on.
struct Failing {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    reads: std::sync::atomic::AtomicUsize,
    fail_after: usize,
}

#[derive(Debug, PartialEq, thiserror::Error)]
#[error("disk on fire")]
struct Fire;

impl StateReader for Failing {
    type Error = Fire;
    type Range<'a> = std::vec::IntoIter<Result<(Vec<u8>, Vec<u8>), Fire>>;

    fn get(&self, trie: &TrieId, key: &[u8]) -> Result<Option<Vec<u8>>, Fire> {
        if self.reads.fetch_add(1, Ordering::SeqCst) >= self.fail_after {
            return Err(Fire);
        }
        Ok(ok(StateReader::get(&self.map, trie, key)))
    }

    fn range<'a>(
        &'a self,
        _trie: &TrieId,
        _start: &[u8],
        _end: Option<&[u8]>,
    ) -> Result<Self::Range<'a>, Fire> {
        Err(Fire)
    }
}

/// A storage error during execution fails the block with that error, in every executor
/// and whatever the worker count; the same state without the fault gives the result.
#[test]
fn storage_errors_fail_the_block_with_their_type() {
    let txs: Vec<Tx> = (0..120u8)
        .map(|i| Tx {
            reads: vec![i % 40, (i + 7) % 40],
            fail_if: None,
            writes: vec![(i % 40, 1)],
            deletes: vec![],
            deltas: vec![(0, 1)],
            scans: if i == 90 { vec![(3, false, 4)] } else { vec![] },
            nested: None,
            yields: false,
        })
        .collect();
    let map: BTreeMap<Vec<u8>, Vec<u8>> = (0..40u8).map(|i| (key(i), vec![i, 1])).collect();
    for fail_after in [0, 5, 30, 1_000_000] {
        let state = || Failing { map: map.clone(), reads: 0.into(), fail_after };
        let seq = execute_sequential(&txs, &state());
        for workers in [1, 2, 4] {
            for partitioned in [false, true] {
                let par = within_a_minute({
                    let txs = txs.clone();
                    let state = state();
                    move || match partitioned {
                        true => execute_partitioned(&txs, &state, workers).map(|o| o.writes),
                        false => execute_parallel(&txs, &state, workers).map(|o| o.writes),
                    }
                })
                .unwrap();
                match (&seq, &par) {
                    (Err(Fire), Err(Fire)) => {}
                    (Ok(_), _) | (_, Ok(_)) => {
                        // The scan fails even without point-read faults.
                        panic!("{fail_after} reads then faults, {workers} workers: a run succeeded")
                    }
                }
            }
        }
    }
}

/// A transaction that writes its own key and bumps a shared counter through a delta.
fn own_key_and_counter(i: u8, scans: Vec<(u8, bool, usize)>) -> Tx {
    Tx {
        reads: vec![i],
        fail_if: None,
        writes: vec![(i, 1)],
        deletes: vec![],
        deltas: vec![(0, 3)],
        scans,
        nested: None,
        yields: false,
    }
}

/// Chunks that touch disjoint keys and share only a delta-bumped counter are all kept:
/// no switch, the counter summed across chunks and waves on top of its stored value.
#[test]
fn partitioned_keeps_chunks_that_share_only_deltas() {
    let txs: Vec<Tx> = (1..=200u8).map(|i| own_key_and_counter(i, vec![])).collect();
    let storage: BTreeMap<Vec<u8>, Vec<u8>> = [(key(0), 1000u64.to_be_bytes().to_vec())].into();
    let seq = ok(execute_sequential(&txs, &storage));
    for workers in [2, 3, 4, 8] {
        let out = ok(execute_partitioned(&txs, &storage, workers));
        assert_eq!(out.writes, seq.writes, "{workers} chunks");
        assert_eq!(out.outputs, seq.outputs, "{workers} chunks");
        assert_eq!(out.run.switch, None, "{workers} chunks");
        assert_eq!(out.counters.executions, 200);
    }
}

/// A counter that chunks bump through deltas and one chunk sets blindly (without reading
/// it: no conflict): its final value is the set plus the deltas after it, in block order.
/// So is a key one chunk sets and later chunks bump.
#[test]
fn partitioned_resolves_values_and_deltas_across_chunks_in_block_order() {
    let storage: BTreeMap<Vec<u8>, Vec<u8>> = [(key(0), 1000u64.to_be_bytes().to_vec())].into();
    let mut txs: Vec<Tx> = (1..=100u8).map(|i| own_key_and_counter(i, vec![])).collect();
    for (set_at, k) in [(30, 0u8), (10, 200), (55, 201), (80, 202)] {
        txs[set_at].writes.push((k, 9));
        for t in &mut txs[set_at + 1..] {
            t.deltas.push((k, 1));
        }
    }
    for t in &mut txs[..10] {
        t.deltas.extend([(200u8, 2i8), (201, 2), (202, 2)]);
    }
    let seq = ok(execute_sequential(&txs, &storage));
    for workers in [2, 4, 8] {
        let out = ok(execute_partitioned(&txs, &storage, workers));
        assert_eq!(out.run.switch, None, "{workers} chunks");
        assert_eq!(out.writes, seq.writes, "{workers} chunks");
        assert_eq!(out.outputs, seq.outputs, "{workers} chunks");
    }
}

/// A chunk that reads a key an earlier chunk wrote, or scans a range an earlier chunk
/// wrote into (a phantom: the key did not exist before the block), makes the run switch
/// at that chunk's start. Four workers, 100 transactions: chunks of 25.
#[test]
fn partitioned_switches_at_the_first_conflicting_chunk() {
    let storage = BTreeMap::new();
    let run = |writer: usize, reader: usize, scan: bool| {
        let mut txs: Vec<Tx> = (1..=100u8).map(|i| own_key_and_counter(i, vec![])).collect();
        txs[writer].writes.push((150, 2));
        match scan {
            true => txs[reader].scans.push((140, false, 3)),
            false => txs[reader].reads.push(150),
        }
        let seq = ok(execute_sequential(&txs, &storage));
        let out = ok(execute_partitioned(&txs, &storage, 4));
        assert_eq!(out.writes, seq.writes, "{writer} -> {reader}");
        assert_eq!(out.outputs, seq.outputs, "{writer} -> {reader}");
        out.run.switch.map(|s| (s.at, s.reason))
    };
    let conflict = |at| Some((at, SwitchReason::Conflict));
    assert_eq!(run(10, 60, false), conflict(50));
    assert_eq!(run(10, 80, true), conflict(75));
    assert_eq!(run(55, 30, false), None);
    // A chunk's own earlier transaction is not a conflict.
    assert_eq!(run(30, 40, false), None);
    // Two chunks write the same key (the later blindly: no conflict); the sequential part
    // after a switch reads the later write.
    let mut txs: Vec<Tx> = (1..=100u8).map(|i| own_key_and_counter(i, vec![])).collect();
    txs[10].writes.push((150, 2));
    txs[30].writes.push((150, 3));
    txs[60].reads.push(150);
    let seq = ok(execute_sequential(&txs, &storage));
    let out = ok(execute_partitioned(&txs, &storage, 4));
    assert_eq!(out.run.switch.map(|s| s.at), Some(50));
    assert_eq!(out.outputs, seq.outputs);
    assert_eq!(out.writes, seq.writes);
}

/// A chunk whose last transaction alone read a stale key (a block-end hook reading what
/// every chunk added to) keeps its other transactions: the run switches at that last
/// transaction. A stale read one transaction earlier switches at the chunk's start. Four
/// workers, 100 transactions: chunks of 25.
#[test]
fn partitioned_runs_a_conflicting_last_transaction_alone() {
    let storage: BTreeMap<Vec<u8>, Vec<u8>> = [(key(0), 1000u64.to_be_bytes().to_vec())].into();
    let run = |reader: usize| {
        let mut txs: Vec<Tx> = (1..=100u8).map(|i| own_key_and_counter(i, vec![])).collect();
        // The counter every transaction bumps, read back.
        txs[reader].reads.push(0);
        let seq = ok(execute_sequential(&txs, &storage));
        let out = ok(execute_partitioned(&txs, &storage, 4));
        assert_eq!(out.writes, seq.writes, "reader {reader}");
        assert_eq!(out.outputs, seq.outputs, "reader {reader}");
        out.run.switch.map(|s| s.at)
    };
    assert_eq!(run(99), Some(99));
    assert_eq!(run(74), Some(74));
    assert_eq!(run(98), Some(75));
    // The first chunk reads only its own deltas.
    assert_eq!(run(24), None);
}

/// Later waves read the earlier waves' writes: values, deletes, deltas on top of a stored
/// value, and scans that meet keys an earlier wave created or deleted. Two workers and
/// four waves over 96 transactions: chunks of 12, waves of 24.
#[test]
fn partitioned_waves_read_the_earlier_waves() {
    let storage: BTreeMap<Vec<u8>, Vec<u8>> =
        [(key(0), 1000u64.to_be_bytes().to_vec()), (key(180), vec![7]), (key(190), vec![9])].into();
    let mut txs: Vec<Tx> = (1..=96u8).map(|i| own_key_and_counter(i, vec![])).collect();
    txs[3].writes.push((150, 2));
    txs[5].deletes.push(180);
    txs[40].reads.extend([150, 180, 3]);
    txs[50].scans.push((140, false, 4));
    txs[60].scans.push((200, true, 2));
    txs[62].writes.push((150, 5));
    txs[70].reads.push(0);
    txs[90].reads.push(150);
    let seq = ok(execute_sequential(&txs, &storage));
    for workers in [2, 3] {
        let out = ok(execute_partitioned_waves(&txs, &storage, workers, 4));
        assert_eq!(out.run.waves, 4);
        assert_eq!(out.writes, seq.writes, "{workers} workers");
        assert_eq!(out.outputs, seq.outputs, "{workers} workers");
    }
    let out = ok(execute_partitioned_waves(&txs, &storage, 2, 4));
    // Transaction 70 reads the counter its wave's first chunk bumped: a conflict, at its
    // chunk's start. Nothing before.
    assert_eq!(out.run.switch.map(|s| (s.at, s.reason)), Some((60, SwitchReason::Conflict)));
    // Without that read, every wave is kept.
    txs[70].reads.clear();
    let seq = ok(execute_sequential(&txs, &storage));
    let out = ok(execute_partitioned_waves(&txs, &storage, 2, 4));
    assert_eq!(out.run.switch, None);
    assert_eq!(out.writes, seq.writes);
    assert_eq!(out.outputs, seq.outputs);
    // One wave: the second chunk's first scan meets what the first chunk wrote.
    assert_eq!(ok(execute_partitioned(&txs, &storage, 2)).run.switch.map(|s| s.at), Some(48));
}
