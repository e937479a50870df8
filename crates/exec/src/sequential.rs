//! The sequential reference executor: each transaction sees the writes of every earlier
//! one. It also finishes blocks that Block-STM started: then the writes of Block-STM's
//! validated prefix lie between the block's writes and storage ([`Under`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::journal::Journaled;
use crate::mvmemory::IndexKey;
use crate::scan::{scan, Sources};
use crate::view::{Below, TxView};
use crate::{
    Base, BlockOutput, Counters, ExecError, Key, Reason, Run, ScanBounds, Stop, Transaction, Value,
};
use state::{apply_delta, StateReader};

/// What lies between a sequential run's own writes and storage: nothing for a whole
/// block (`()`), Block-STM's validated prefix when a run finishes a block it started.
pub(crate) trait Under {
    /// What the layer holds under `key` (`Some(None)`: deleted there), or `None`: look in
    /// storage.
    fn get(&self, key: &[u8]) -> Option<Option<Value>>;

    /// The layer's first key within `bounds`, in scan order (it may hold no value).
    fn first_key(&self, bounds: &ScanBounds<'_>) -> Option<IndexKey>;
}

impl Under for () {
    fn get(&self, _key: &[u8]) -> Option<Option<Value>> {
        None
    }

    fn first_key(&self, _bounds: &ScanBounds<'_>) -> Option<IndexKey> {
        None
    }
}

/// Below a sequential transaction: the writes of the run so far, then `under`, then
/// storage.
struct SeqBelow<'a, 'b, S: StateReader, U: Under> {
    storage: &'a Base<'b, S>,
    block: &'a BTreeMap<Key, Option<Value>>,
    under: &'a U,
}

impl<S: StateReader, U: Under> SeqBelow<'_, '_, S, U> {
    /// The value below the transaction's own writes.
    fn get_below(&self, key: &[u8]) -> Result<Option<Value>, Stop> {
        if let Some(v) = self.block.get(key) {
            return Ok(v.clone());
        }
        if let Some(v) = self.under.get(key) {
            return Ok(v);
        }
        let v = self.storage.get(key);
        if self.storage.failed() {
            return Err(Stop::ReadFailed);
        }
        Ok(v)
    }
}

impl<S: StateReader, U: Under> Below for SeqBelow<'_, '_, S, U> {
    type Write = Option<Value>;

    fn get(
        &mut self,
        own: &mut Journaled<Option<Value>>,
        key: &[u8],
    ) -> Result<Option<Value>, Stop> {
        match own.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.get_below(key),
        }
    }

    fn add_delta(
        &mut self,
        own: &mut Journaled<Option<Value>>,
        key: &[u8],
        amount: i64,
    ) -> Result<(), Stop> {
        let current = self.get(own, key)?;
        own.insert(key, Some(apply_delta(current.as_deref(), amount)));
        Ok(())
    }

    /// A merge of four ordered sources ([`scan`]): the own writes, the run's writes, the
    /// layer under them and storage. The newest write of a key is its value.
    fn scan(
        &mut self,
        own: &mut Journaled<Option<Value>>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let under = self.under;
        let sources = Sources {
            storage: self.storage,
            layer: |bounds: &ScanBounds<'_>| under.first_key(bounds),
            written: Some(self.block),
            own: own.map(),
        };
        let start = ScanBounds { from, last: None, reverse };
        scan(sources, start, limit, |key, found| {
            Ok(match found.own.or(found.written) {
                Some(v) => v.clone(),
                None => match found.in_layer.then(|| under.get(key)).flatten() {
                    Some(v) => v,
                    None => found.stored,
                },
            })
        })
    }
}

/// A sequential run's outputs and the final value of every key it wrote.
pub(crate) type Ran<O> = (Vec<O>, BTreeMap<Key, Option<Value>>);

/// Run `txs` one after another over `under` and storage, checking `cancel` before each.
/// A failed storage read ends the run early (`base` holds the error).
pub(crate) fn run_over<T: Transaction, S: StateReader, U: Under>(
    txs: &[T],
    base: &Base<'_, S>,
    under: &U,
    cancel: Option<&AtomicBool>,
) -> Result<Ran<T::Output>, ExecError<S::Error>> {
    let mut writes = BTreeMap::new();
    let mut outputs = Vec::with_capacity(txs.len());
    for tx in txs {
        if cancel.is_some_and(|c| c.load(Relaxed)) {
            return Err(ExecError::Cancelled);
        }
        let mut view = TxView::new(SeqBelow { storage: base, block: &writes, under });
        let out = match tx.execute(&mut view) {
            Ok(out) => out,
            Err(Stop::ReadFailed) => {
                assert!(
                    base.failed(),
                    "a transaction returned Stop::ReadFailed without a failed read"
                );
                break;
            }
            Err(Stop::Blocked(_)) => unreachable!("sequential reads never block"),
        };
        let own = view.own.into_writes();
        outputs.push(out);
        writes.extend(own);
    }
    Ok((outputs, writes))
}

/// Run `txs` one after another over the main trie of `storage`; the first storage error
/// ends the run.
pub fn execute_sequential<T: Transaction, S: StateReader>(
    txs: &[T],
    storage: &S,
) -> Result<BlockOutput<T::Output>, S::Error> {
    match run(txs, storage, None, Reason::Requested) {
        Ok(out) => Ok(out),
        Err(ExecError::Storage(e)) => Err(e),
        Err(ExecError::Cancelled) => unreachable!("nothing can cancel a run without a cancel flag"),
    }
}

/// [`execute_sequential`], checking `cancel` before each transaction; `reason` is why the
/// block runs sequentially.
pub(crate) fn run<T: Transaction, S: StateReader>(
    txs: &[T],
    storage: &S,
    cancel: Option<&AtomicBool>,
    reason: Reason,
) -> Result<BlockOutput<T::Output>, ExecError<S::Error>> {
    let base = Base::new(storage);
    let (outputs, writes) = run_over(txs, &base, &(), cancel)?;
    let counters = Counters { executions: txs.len() as u64, ..Counters::default() };
    base.finish(BlockOutput { outputs, writes, counters, run: Run::sequential(reason) })
}
