//! Database handles: generation-checked ids, never pointers.
//!
//! A handle is `(slot + 1) << 32 | generation`. Closing a database bumps its slot's
//! generation, so a stale handle (used after close, or a forged one) finds nothing and is
//! `ARBOR_CODE_CLOSED`, never undefined behaviour. Each call holds a [`Call`] guard for its
//! duration; `close` refuses new calls at once and waits (up to its deadline) for the calls
//! in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use store::{ReadHandle, StateDb};

use crate::error::FfiError;

/// One open database.
pub(crate) struct Entry {
    /// The store; `None` once closed. Commits and other writers lock it.
    pub(crate) db: Mutex<Option<StateDb>>,
    /// Reads from any thread, concurrently with commits.
    pub(crate) reader: ReadHandle,
    closed: AtomicBool,
    in_flight: Mutex<usize>,
    idle: Condvar,
}

struct Slot {
    generation: u32,
    entry: Option<Arc<Entry>>,
}

fn slots() -> &'static Mutex<Vec<Slot>> {
    static SLOTS: OnceLock<Mutex<Vec<Slot>>> = OnceLock::new();
    SLOTS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Register an open database; returns its handle.
pub(crate) fn register(db: StateDb) -> Result<u64, FfiError> {
    let reader = db.read_handle()?;
    let entry = Arc::new(Entry {
        db: Mutex::new(Some(db)),
        reader,
        closed: AtomicBool::new(false),
        in_flight: Mutex::new(0),
        idle: Condvar::new(),
    });
    let mut slots = slots().lock();
    let index = match slots.iter().position(|s| s.entry.is_none()) {
        Some(i) => i,
        None => {
            slots.push(Slot { generation: 1, entry: None });
            slots.len() - 1
        }
    };
    let slot = &mut slots[index];
    slot.entry = Some(entry);
    Ok(((index as u64 + 1) << 32) | u64::from(slot.generation))
}

/// A call in flight on a database (see the module docs).
pub(crate) struct Call {
    pub(crate) entry: Arc<Entry>,
}

impl Drop for Call {
    fn drop(&mut self) {
        let mut n = self.entry.in_flight.lock();
        *n -= 1;
        if *n == 0 {
            self.entry.idle.notify_all();
        }
    }
}

fn find(handle: u64) -> Option<Arc<Entry>> {
    let index = usize::try_from((handle >> 32).checked_sub(1)?).ok()?;
    let generation = (handle & 0xffff_ffff) as u32;
    let slots = slots().lock();
    let slot = slots.get(index)?;
    (slot.generation == generation).then(|| slot.entry.clone()).flatten()
}

/// Start a call on `handle`.
pub(crate) fn call(handle: u64) -> Result<Call, FfiError> {
    let entry =
        find(handle).ok_or_else(|| FfiError::closed("the database handle is closed or unknown"))?;
    let mut n = entry.in_flight.lock();
    if entry.closed.load(Ordering::Acquire) {
        return Err(FfiError::closed("the database is closing"));
    }
    *n += 1;
    drop(n);
    Ok(Call { entry })
}

/// Close `handle`: refuse new calls, wait up to `timeout` for those in flight, then close
/// the store. At the deadline with calls still running, the handle is gone and the store
/// closes when the last call ends; the result is `ARBOR_CODE_CLOSED`.
pub(crate) fn close(handle: u64, timeout: Duration) -> Result<(), FfiError> {
    let entry = {
        let index = (handle >> 32).checked_sub(1).and_then(|i| usize::try_from(i).ok());
        let mut slots = slots().lock();
        let slot = index
            .and_then(|i| slots.get_mut(i))
            .filter(|s| s.generation == (handle & 0xffff_ffff) as u32 && s.entry.is_some())
            .ok_or_else(|| FfiError::closed("the database handle is closed or unknown"))?;
        slot.generation = slot.generation.wrapping_add(1).max(1);
        slot.entry.take().ok_or_else(|| FfiError::closed("the database is closed"))?
    };
    entry.closed.store(true, Ordering::Release);
    let deadline = Instant::now() + timeout;
    let mut n = entry.in_flight.lock();
    while *n > 0 {
        if entry.idle.wait_until(&mut n, deadline).timed_out() && *n > 0 {
            return Err(FfiError::closed(
                "calls still in flight at the close deadline; the database closes when they end",
            ));
        }
    }
    drop(n);
    let db = entry.db.lock().take();
    match db {
        Some(db) => Ok(db.close()?),
        None => Ok(()),
    }
}
