//! A global allocator wrapper that counts allocations and bytes requested, for the
//! allocation figures of `arbor bench` (allocations per block, as the Cosmos SDK's
//! Block-STM report gives them).
//!
//! Counting must not change what it measures. A single pair of shared atomic counters
//! does: every allocation of every thread then writes the same cache line, and on the
//! parallel executor's allocation-heavy workloads that line bounced between the cores
//! enough to erase the second worker's gain (measured: two independent sequential
//! blocks on two threads ran at 1.0x one block's throughput with a shared counter). So
//! each thread counts in its own cache-line-sized slot, and [`totals`] sums the slots. The
//! first 4,096 threads of a process own a slot each and add to it with plain loads and
//! stores; later threads share 64 other slots round-robin and add atomically, so no count
//! is lost. A locked read-modify-write per allocation was 1% of a store commit's samples in
//! `bench store` at 1M keys, and a third of the sequential executor's time on `bench
//! blockstm`'s worst case (3.1 → 2.1 ms); the owned slots are that many because a benchmark
//! starts new threads for every run (`bench blockstm` ~400), and a counter cheap on some
//! threads and not on others would tilt the comparisons it serves (512 KiB, zero until
//! a thread takes its slot).
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: alloc_count::Counting<std::alloc::System> =
//!     alloc_count::Counting::new(std::alloc::System);
//! ```

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Slots owned by one thread each, and slots shared by the threads after them.
const OWNED: usize = 4096;
const SHARED: usize = 64;

/// One thread's counters, alone on its cache lines.
#[repr(align(128))]
struct Slot {
    allocations: AtomicU64,
    bytes: AtomicU64,
}

static COUNTERS: [Slot; OWNED + SHARED] =
    [const { Slot { allocations: AtomicU64::new(0), bytes: AtomicU64::new(0) } }; OWNED + SHARED];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor: usable inside the allocator. The slot's
    // index, and whether this thread is its only writer.
    static MY_SLOT: Cell<(usize, bool)> = const { Cell::new((usize::MAX, false)) };
}

/// This thread's slot, and whether it is the slot's only writer (a thread that cannot
/// reach its thread-local, while it is torn down, counts in the first shared slot).
fn my_slot() -> (&'static Slot, bool) {
    let (i, own) = MY_SLOT
        .try_with(|s| {
            if s.get().0 == usize::MAX {
                let n = NEXT_SLOT.fetch_add(1, Relaxed);
                s.set(if n < OWNED { (n, true) } else { (OWNED + n % SHARED, false) });
            }
            s.get()
        })
        .unwrap_or((OWNED, false));
    (&COUNTERS[i], own)
}

/// Count one allocation: plainly in an owned slot (readers see whole values either way),
/// atomically in a shared one.
fn count(bytes: usize) {
    let (slot, own) = my_slot();
    if own {
        slot.allocations.store(slot.allocations.load(Relaxed) + 1, Relaxed);
        slot.bytes.store(slot.bytes.load(Relaxed) + bytes as u64, Relaxed);
    } else {
        slot.allocations.fetch_add(1, Relaxed);
        slot.bytes.fetch_add(bytes as u64, Relaxed);
    }
}

/// `inner`, counting every allocation and reallocation (and the bytes requested).
#[derive(Debug, Default, Clone, Copy)]
pub struct Counting<A> {
    inner: A,
}

impl<A> Counting<A> {
    /// Wrap `inner`; usable in a `static`.
    pub const fn new(inner: A) -> Self {
        Counting { inner }
    }
}

/// (allocations including reallocations, bytes requested) by every thread so far.
pub fn totals() -> (u64, u64) {
    COUNTERS
        .iter()
        .fold((0, 0), |(a, b), s| (a + s.allocations.load(Relaxed), b + s.bytes.load(Relaxed)))
}

// SAFETY: every method forwards to `inner` with the caller's arguments unchanged, so the
// wrapper upholds `GlobalAlloc`'s contract exactly when `inner` does; the counting
// touches only atomics and a const-initialised thread-local, never the heap.
#[allow(unsafe_code)]
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { self.inner.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { self.inner.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }
}

/// Limit glibc's malloc to `arenas` arenas (its default: up to 8 per core). Memory that C
/// and C++ code allocates through glibc (RocksDB's blocks, memtables and batches) comes
/// from the arena of the calling thread, and glibc gives each thread that meets a locked
/// arena a new one, so a store's background threads, writer and rayon workers spread their
/// freed memory over many arenas, each keeping its own free pages. One arena per core,
/// `arbor bench store` on 2 cores, before/after: at 10M keys, 100 blocks, Arbor's peak RSS
/// 1,337 → 1,160 MiB (4.67 → 4.93 blocks/s); at 1M keys, 150 blocks, 879 → 859 MiB
/// (14.97 → 16.04 blocks/s). Call it before starting threads. Does nothing on other C
/// libraries.
pub fn limit_glibc_arenas(arenas: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let arenas = libc::c_int::try_from(arenas.max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `mallopt` takes two integers and only sets a tunable of glibc's
        // allocator (it takes the allocator's own lock); no memory is passed or returned.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = arenas;
}

/// Turn transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`), so
/// that no mapping of it is backed by 2 MiB pages, those mimalloc asks for with
/// `MADV_HUGEPAGE` included. A huge page is faulted in by zeroing all 2 MiB at once
/// (`clear_page_erms` under `do_huge_pmd_anonymous_page` in the profiles), which the
/// executor's short-lived per-block buffers paid on every fresh page. Measured on 2
/// cores, full `arbor bench blockstm`, two runs each with THP on and off: chain-transfers
/// with 2 workers 1.00–1.01× the sequential executor (the model kept sequential) against
/// 1.25–1.31×, its two-sequential-blocks ceiling 1.58 against 1.94; the other workloads
/// unchanged (docs/benchmarks.md, "Transparent huge pages"). Returns whether the flag is set;
/// a kernel without the call leaves THP as it was. Does nothing on other systems.
pub fn disable_transparent_huge_pages() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)` takes integers only and sets a
        // flag of the calling process's memory map; no memory is passed or returned.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// mimalloc's `mi_option_purge_delay` (index 15 of `mi_option_t` in both of the vendored
/// versions' `mimalloc.h`; `libmimalloc-sys` names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long mimalloc keeps memory freed by this process before giving it back to the
/// system, in ms (its default is 10).
pub const FREED_MEMORY_DELAY_MS: i64 = 1_000;

/// Make mimalloc keep freed memory for [`FREED_MEMORY_DELAY_MS`] before it purges it.
/// With mimalloc's default of 10 ms, the executors' per-block buffers (a chunk's writes,
/// the final write set, each freed at the end of a block) were given back between two
/// blocks and faulted in again, zeroed, by the next (`clear_page_erms` under the page
/// fault handler: ~10% of `bench blockstm`'s samples). Measured on 2 cores, `bench
/// blockstm --no-sig --workers 2`, two alternated rounds per delay: the partitioned
/// executor on no-conflict 1.25–1.27× the sequential executor at 10 ms against 1.35–1.38×
/// at 1,000 ms, chain-transfers 1.50–1.51× against 1.56–1.62×, and the sequential
/// executor's own blocks 5–10% faster. A node runs its blocks back to back while it
/// catches up; a second is far above a block's time and still gives memory back once a
/// burst is over. Only a process whose allocator is mimalloc is affected.
pub fn keep_freed_memory() {
    // SAFETY: `mi_option_set` takes an option index and a value, both integers; mimalloc
    // reads the option whenever it considers purging, so setting it at any time is sound.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, FREED_MEMORY_DELAY_MS as _);
    }
}

/// Give the memory mimalloc keeps after frees (see [`keep_freed_memory`]) back to the
/// system now, where the process's peak resident size is about to be measured afresh: a
/// benchmark that runs engines one after another in one process resets the peak between
/// them, and memory the previous engine freed within the last second is not the next
/// one's.
pub fn release_freed_memory() {
    // SAFETY: `mi_collect` takes a flag and frees only memory no live allocation holds.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_is_kept_for_the_delay() {
        keep_freed_memory();
        // SAFETY: `mi_option_get` takes an option index and returns an integer.
        #[allow(unsafe_code)]
        let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay as i64, FREED_MEMORY_DELAY_MS);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn huge_pages_turn_off_for_the_process() {
        // The flag is per process and inherited; this test binary does not depend on THP.
        assert!(disable_transparent_huge_pages());
        // SAFETY: `PR_GET_THP_DISABLE` takes and returns integers only.
        #[allow(unsafe_code)]
        let flag = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(flag, 1);
    }

    /// This thread's slot index and ownership, once it has counted.
    fn slot_of_this_thread() -> (usize, bool) {
        count(0);
        MY_SLOT.with(|s| s.get())
    }

    /// Two threads past the owned slots that share one slot, counting at the same time:
    /// none of their counts is lost (shared slots add atomically).
    #[test]
    fn no_count_is_lost_in_a_shared_slot() {
        const EACH: u64 = 5_000_000;
        // Spend the owned slots, then start threads until two share a slot.
        let claim = || std::thread::spawn(slot_of_this_thread).join().unwrap();
        while claim().0 < OWNED {}
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let hot = |start: std::sync::Arc<std::sync::Barrier>| {
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::spawn(move || {
                tx.send(slot_of_this_thread()).unwrap();
                start.wait();
                for _ in 0..EACH {
                    count(3);
                }
            });
            (rx.recv().unwrap(), t)
        };
        let (a, first) = hot(start.clone());
        while NEXT_SLOT.load(Relaxed) % SHARED != (a.0 - OWNED) % SHARED {
            claim();
        }
        // Read before the second thread starts: the first waits for it at the barrier.
        let (a0, b0) = (COUNTERS[a.0].allocations.load(Relaxed), COUNTERS[a.0].bytes.load(Relaxed));
        let (b, second) = hot(start);
        assert_eq!((a.0, a.1), (b.0, false), "the two threads share a slot");
        first.join().unwrap();
        second.join().unwrap();
        let counted = COUNTERS[a.0].allocations.load(Relaxed) - a0;
        assert!(counted >= 2 * EACH, "{counted} allocations counted of {}", 2 * EACH);
        assert!(COUNTERS[a.0].bytes.load(Relaxed) - b0 >= 6 * EACH);
    }

    #[test]
    fn totals_grow_with_counted_allocations() {
        let (a0, b0) = totals();
        count(100);
        count(28);
        let (a1, b1) = totals();
        assert!(a1 >= a0 + 2);
        assert!(b1 >= b0 + 128);
    }
}
