//! The sequential reference executor: each transaction sees the writes of every earlier
//! one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::{
    apply_delta, BlockOutput, Blocked, Cancelled, Counters, Key, ScanBounds, Storage, Transaction,
    Value, View,
};

struct SeqView<'a, S: Storage> {
    storage: &'a S,
    block: &'a BTreeMap<Key, Option<Value>>,
    own: BTreeMap<Key, Option<Value>>,
}

impl<S: Storage> View for SeqView<'_, S> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Value>, Blocked> {
        if let Some(v) = self.own.get(key) {
            return Ok(v.clone());
        }
        if let Some(v) = self.block.get(key) {
            return Ok(v.clone());
        }
        Ok(self.storage.get(key))
    }

    fn set(&mut self, key: &[u8], value: Value) {
        self.own.insert(key.to_vec(), Some(value));
    }

    fn delete(&mut self, key: &[u8]) {
        self.own.insert(key.to_vec(), None);
    }

    fn scan(
        &mut self,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Blocked> {
        let mut out = Vec::new();
        let mut last: Option<Key> = None;
        while out.len() < limit {
            let b = ScanBounds { from, last: last.as_deref(), reverse };
            let own_and_block = b.earlier(b.first_key_in(&self.own), b.first_key_in(self.block));
            let next = b.earlier(own_and_block, self.storage.next_key(&b));
            let Some(k) = next else { break };
            if let Some(v) = self.get(&k)? {
                out.push((k.clone(), v));
            }
            last = Some(k);
        }
        Ok(out)
    }

    fn add_delta(&mut self, key: &[u8], amount: i64) {
        let current = self.get(key).expect("sequential reads never block");
        self.own.insert(key.to_vec(), Some(apply_delta(current.as_deref(), amount)));
    }
}

/// Run `txs` one after another over `storage`.
pub fn execute_sequential<T: Transaction, S: Storage>(
    txs: &[T],
    storage: &S,
) -> BlockOutput<T::Output> {
    match run(txs, storage, None) {
        Ok(out) => out,
        Err(Cancelled) => unreachable!("nothing can cancel a run without a cancel flag"),
    }
}

/// [`execute_sequential`], checking `cancel` before each transaction.
pub(crate) fn run<T: Transaction, S: Storage>(
    txs: &[T],
    storage: &S,
    cancel: Option<&AtomicBool>,
) -> Result<BlockOutput<T::Output>, Cancelled> {
    let mut writes = BTreeMap::new();
    let mut outputs = Vec::with_capacity(txs.len());
    for tx in txs {
        if cancel.is_some_and(|c| c.load(Relaxed)) {
            return Err(Cancelled);
        }
        let mut view = SeqView { storage, block: &writes, own: BTreeMap::new() };
        let out = tx.execute(&mut view).expect("sequential reads never block");
        let own = view.own;
        outputs.push(out);
        writes.extend(own);
    }
    let counters = Counters { executions: txs.len() as u64, ..Counters::default() };
    Ok(BlockOutput { outputs, writes, counters })
}
