//! The sequential reference executor: each transaction sees the writes of every earlier
//! one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::journal::Journaled;
use crate::view::{Below, TxView};
use crate::{
    apply_delta, Base, BlockOutput, Counters, ExecError, Key, ScanBounds, StateReader, Stop,
    Transaction, Value,
};

/// Below a sequential transaction: the writes of the block so far, then storage.
struct SeqBelow<'a, 'b, S: StateReader> {
    storage: &'a Base<'b, S>,
    block: &'a BTreeMap<Key, Option<Value>>,
}

impl<S: StateReader> Below for SeqBelow<'_, '_, S> {
    type Write = Option<Value>;

    fn get(
        &mut self,
        own: &mut Journaled<Option<Value>>,
        key: &[u8],
    ) -> Result<Option<Value>, Stop> {
        if let Some(v) = own.get(key) {
            return Ok(v.clone());
        }
        if let Some(v) = self.block.get(key) {
            return Ok(v.clone());
        }
        let v = self.storage.get(key);
        if self.storage.failed() {
            return Err(Stop::ReadFailed);
        }
        Ok(v)
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

    fn scan(
        &mut self,
        own: &mut Journaled<Option<Value>>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop> {
        let mut out = Vec::new();
        let mut last: Option<Key> = None;
        while out.len() < limit {
            let b = ScanBounds { from, last: last.as_deref(), reverse };
            let own_and_block = b.earlier(b.first_key_in(own.map()), b.first_key_in(self.block));
            let next = b.earlier(own_and_block, self.storage.next_key(&b));
            if self.storage.failed() {
                return Err(Stop::ReadFailed);
            }
            let Some(k) = next else { break };
            if let Some(v) = self.get(own, &k)? {
                out.push((k.clone(), v));
            }
            last = Some(k);
        }
        Ok(out)
    }
}

/// Run `txs` one after another over the main trie of `storage`; the first storage error
/// ends the run.
pub fn execute_sequential<T: Transaction, S: StateReader>(
    txs: &[T],
    storage: &S,
) -> Result<BlockOutput<T::Output>, S::Error> {
    match run(txs, storage, None) {
        Ok(out) => Ok(out),
        Err(ExecError::Storage(e)) => Err(e),
        Err(ExecError::Cancelled) => unreachable!("nothing can cancel a run without a cancel flag"),
    }
}

/// [`execute_sequential`], checking `cancel` before each transaction.
pub(crate) fn run<T: Transaction, S: StateReader>(
    txs: &[T],
    storage: &S,
    cancel: Option<&AtomicBool>,
) -> Result<BlockOutput<T::Output>, ExecError<S::Error>> {
    let base = Base::new(storage);
    let mut writes = BTreeMap::new();
    let mut outputs = Vec::with_capacity(txs.len());
    for tx in txs {
        if cancel.is_some_and(|c| c.load(Relaxed)) {
            return Err(ExecError::Cancelled);
        }
        let mut view = TxView::new(SeqBelow { storage: &base, block: &writes });
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
    let counters = Counters { executions: txs.len() as u64, ..Counters::default() };
    base.finish(BlockOutput { outputs, writes, counters })
}
