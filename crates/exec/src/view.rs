//! [`TxView`]: a transaction's [`View`] as both executors build it, its own writes
//! (journaled per nested transaction) over what lies below them ([`Below`]: the writes of
//! earlier transactions and storage, which is where the executors differ).
//!
//! What touches only the own writes (set, remove, nested transactions, discarding) is
//! written here once; reads, deltas and scans, which combine the own writes with what lies
//! below, go to the executor's [`Below`].

use state::{apply_delta, StateView, TransactionError};

use crate::journal::Journaled;
use crate::{Key, Stop, Value, View, Write};

/// What lies below a transaction's own writes, and how reads combine the two.
pub(crate) trait Below {
    /// What the own writes hold per key: at least a value (`None` = delete), from
    /// [`StateView::set`] and [`StateView::remove`].
    type Write: From<Option<Value>>;

    /// [`StateView::get`] through the own writes `own`.
    fn get(&mut self, own: &mut Journaled<Self::Write>, key: &[u8]) -> Result<Option<Value>, Stop>;

    /// [`StateView::add_delta`] into the own writes `own`.
    fn add_delta(
        &mut self,
        own: &mut Journaled<Self::Write>,
        key: &[u8],
        amount: i64,
    ) -> Result<(), Stop>;

    /// [`View::scan`] through the own writes `own`.
    fn scan(
        &mut self,
        own: &mut Journaled<Self::Write>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop>;
}

/// A transaction's view: its own writes over `below`.
pub(crate) struct TxView<B: Below> {
    /// The transaction's own writes, with a checkpoint per open nested transaction.
    pub(crate) own: Journaled<B::Write>,
    /// What lies below them.
    pub(crate) below: B,
}

impl<B: Below> TxView<B> {
    /// A view with no writes yet.
    pub(crate) fn new(below: B) -> Self {
        TxView { own: Journaled::default(), below }
    }
}

impl<B: Below> StateView for TxView<B> {
    type Error = Stop;

    fn get(&mut self, key: &[u8]) -> Result<Option<Value>, Stop> {
        self.below.get(&mut self.own, key)
    }

    fn set(&mut self, key: &[u8], value: Value) {
        self.own.insert(key, B::Write::from(Some(value)));
    }

    fn remove(&mut self, key: &[u8]) {
        self.own.insert(key, B::Write::from(None));
    }

    fn add_delta(&mut self, key: &[u8], amount: i64) -> Result<(), Stop> {
        self.below.add_delta(&mut self.own, key, amount)
    }

    fn start(&mut self) {
        self.own.start();
    }

    fn commit(&mut self) -> Result<(), TransactionError> {
        self.own.commit()
    }

    fn rollback(&mut self) -> Result<(), TransactionError> {
        self.own.rollback()
    }
}

impl<B: Below> View for TxView<B> {
    fn scan(
        &mut self,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop> {
        self.below.scan(&mut self.own, from, reverse, limit)
    }

    fn discard_writes(&mut self) {
        self.own.clear();
    }
}

/// What lies below own writes that keep deltas ([`Write`]: Block-STM's and the
/// partitioned executor's): reading past them and scanning. [`Below`]'s get and add_delta
/// follow: an own value answers a read; an own delta is added to the value below (the
/// transaction then holds the sum as its value); a delta adds to an own write or is
/// recorded as one, reading nothing.
pub(crate) trait DeltaBelow {
    /// The value of `key` below the transaction's own writes.
    fn read_below(&mut self, key: &[u8]) -> Result<Option<Value>, Stop>;

    /// [`View::scan`] through the own writes `own`.
    fn scan(
        &mut self,
        own: &mut Journaled<Write>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop>;
}

impl<D: DeltaBelow> Below for D {
    type Write = Write;

    fn get(&mut self, own: &mut Journaled<Write>, key: &[u8]) -> Result<Option<Value>, Stop> {
        match own.get(key) {
            Some(Write::Value(v)) => Ok(v.clone()),
            Some(Write::Delta(d)) => {
                let d = *d;
                let v = apply_delta(self.read_below(key)?.as_deref(), d);
                // From here on the transaction holds the value itself.
                own.settle(key, Write::Value(Some(v.clone())));
                Ok(Some(v))
            }
            None => self.read_below(key),
        }
    }

    fn add_delta(
        &mut self,
        own: &mut Journaled<Write>,
        key: &[u8],
        amount: i64,
    ) -> Result<(), Stop> {
        let w = match own.get(key) {
            Some(Write::Value(v)) => Write::Value(Some(apply_delta(v.as_deref(), amount))),
            Some(Write::Delta(d)) => Write::Delta(d.wrapping_add(amount)),
            None => Write::Delta(amount),
        };
        own.insert(key, w);
        Ok(())
    }

    fn scan(
        &mut self,
        own: &mut Journaled<Write>,
        from: &[u8],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, Stop> {
        DeltaBelow::scan(self, own, from, reverse, limit)
    }
}
