//! The catch-up figure of `arbor bench store`: after the measured blocks, Arbor commits
//! more blocks of the same workload until its node buffer is near its bound (or the nodes
//! lag `history_depth` blocks), closes without writing the buffer back
//! (`StateDb::close_with_nodes_behind`: what a kill right after a group reached disk
//! leaves), and reopens. The open brings the nodes to the head from the reverse diffs; its
//! catch-up time is the figure, and the head root after it must be the one committed.

use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde::Serialize;
use store::{StateDb, StoreConfig};

use crate::common::progress::bar;
use crate::common::workload::Workload;

/// Most extra blocks committed while waiting for the buffer to fill.
const EXTRA_BLOCKS_MAX: u64 = 1_000;

/// What the catch-up measurement found.
#[derive(Debug, Clone, Serialize)]
pub struct CatchUpReport {
    /// Blocks committed after the measured ones to fill the node buffer.
    pub blocks_committed: u64,
    /// Node write-backs during them (the buffer passing its bound or the lag its limit).
    pub write_backs: u64,
    /// Blocks the nodes on disk lagged the head at the close.
    pub lag_blocks: u64,
    /// Bytes in the node buffer at the close.
    pub buffer_bytes: u64,
    /// The node buffer's bound (`layers.node_buffer_bytes`).
    pub buffer_bound_bytes: u64,
    /// Keys the catch-up applied (each changed key once).
    pub keys: u64,
    /// The catch-up's wall time (reverse diffs read, update pass, roots checked).
    pub catch_up_seconds: f64,
    /// The whole reopen's wall time (RocksDB's open and the catch-up).
    pub open_seconds: f64,
}

/// Commit blocks `first..` of `workload` to the Arbor store at `dir` until its node buffer
/// is at its maximum lag, close leaving the nodes behind, and time the reopen.
pub(crate) fn measure_catch_up(
    config: &StoreConfig,
    workload: &Workload,
    dir: &Path,
    first: u64,
    progress: bool,
) -> Result<CatchUpReport> {
    let mut db = StateDb::open(dir, config.clone()).context("cannot reopen the Arbor store")?;
    let l = &config.layers;
    let pb = bar(progress, EXTRA_BLOCKS_MAX, "arbor: blocks until the node buffer is full");
    let write_backs_before = db.stats().node_write_backs;
    let mut b = first;
    loop {
        let changes = workload.change_set_of(&workload.block_ops(b));
        db.commit(&changes).with_context(|| format!("Arbor commit of block {b} failed"))?;
        pb.inc(1);
        b += 1;
        let s = db.stats();
        let lag = s.head_number.saturating_sub(s.nodes_at);
        // The close adds the held blocks without a write-back: stop a little short.
        let full = s.node_buffer_bytes >= l.node_buffer_bytes / 4 * 3
            || lag + 2 * l.persist_blocks >= l.history_depth;
        if (full && s.node_write_backs > write_backs_before) || b - first >= EXTRA_BLOCKS_MAX {
            break;
        }
    }
    pb.finish();
    let root = db.head_root();
    let s = db.stats();
    let write_backs = s.node_write_backs - write_backs_before;
    db.close_with_nodes_behind().context("Arbor close failed")?;
    let start = Instant::now();
    let db = StateDb::open(dir, config.clone()).context("Arbor reopen (catch-up) failed")?;
    let open_seconds = start.elapsed().as_secs_f64();
    ensure!(db.head_root() == root, "Arbor caught up to root {}, not {root}", db.head_root());
    let reopened = db.stats();
    let caught = reopened.catch_up;
    db.close().context("Arbor close failed")?;
    Ok(CatchUpReport {
        blocks_committed: b - first,
        write_backs,
        lag_blocks: reopened.head_number.saturating_sub(reopened.nodes_at),
        buffer_bytes: reopened.node_buffer_bytes,
        buffer_bound_bytes: l.node_buffer_bytes,
        keys: caught.map_or(0, |c| c.keys),
        catch_up_seconds: caught.map_or(0.0, |c| c.time.as_secs_f64()),
        open_seconds,
    })
}
