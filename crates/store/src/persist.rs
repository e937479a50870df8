//! Persistence, the committer's side: a committed block's layer is published and handed to
//! the background writer (`writer.rs`) with back-pressure on unpersisted bytes
//! ([`StateDb::push_layer`]), and [`StateDb::flush`] waits until every committed block is
//! durable, then records the head in the durable record (`durable.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::StoreError;
use crate::shared::Progress;
use crate::statedb::StateDb;
use crate::tiers::layer::Layer;
use crate::writer::ToWriter;

impl StateDb {
    /// Wait for room (back-pressure), then publish the layer and hand it to the writer.
    pub(crate) fn push_layer(&mut self, layer: Layer) -> Result<Arc<Layer>, StoreError> {
        let max = self.shared.config.layers.unpersisted_bytes_max;
        {
            let mut p = self.shared.progress.lock();
            if p.pending_bytes > 0 && p.pending_bytes + layer.bytes > max {
                self.shared.commit_waits.fetch_add(1, Ordering::Relaxed);
            }
            while p.poisoned.is_none() && p.pending_bytes > 0 && p.pending_bytes + layer.bytes > max
            {
                self.shared.changed.wait(&mut p);
            }
            if let Some(e) = &p.poisoned {
                return Err(e.poisoned());
            }
            p.pending_bytes += layer.bytes;
            self.shared.peak_unpersisted_bytes.fetch_max(p.pending_bytes, Ordering::Relaxed);
        }
        let layer = Arc::new(layer);
        {
            // Invariant: invalidate under the exclusive layer lock (see view.rs).
            let reader = &self.shared.reader;
            let mut layers = reader.layers.write();
            reader.flat_cache.invalidate_all(layer.flat.iter().map(|(k, _)| k.as_slice()));
            reader.node_cache.invalidate_all(layer.nodes.iter().map(|(k, _)| k.as_slice()));
            layers.push(layer.clone());
        }
        let tx = self.tx.as_ref().ok_or(StoreError::WriterStopped)?;
        tx.send(ToWriter::Layer(layer.clone())).map_err(|_| StoreError::WriterStopped)?;
        Ok(layer)
    }

    /// Wait until every committed block is durable: written by the writer, the memtables
    /// flushed (all column families at once) and the WAL synced. After this returns, a
    /// crash reopens at this head or later (see `writer.rs`, "Durability").
    pub fn flush(&self) -> Result<(), StoreError> {
        // A read-only handle's node buffer (its catch-up) is never written.
        let behind = |p: &Progress| {
            p.persisted < self.head.0 || (!self.shared.read_only && p.nodes_at.is_some())
        };
        if behind(&self.shared.progress.lock()) {
            // The writer may be holding layers back to write them as one group, and it
            // holds node writes back longer (the node buffer, see `catch_up.rs`).
            if let Some(tx) = &self.tx {
                tx.send(ToWriter::Flush).map_err(|_| StoreError::WriterStopped)?;
            }
        }
        {
            let mut p = self.shared.progress.lock();
            while p.poisoned.is_none() && behind(&p) {
                self.shared.changed.wait(&mut p);
            }
            if let Some(e) = &p.poisoned {
                return Err(e.poisoned());
            }
        }
        if !self.shared.read_only {
            self.shared.make_durable()?;
            self.shared.reader.db.flush_wal(true)?;
            self.record_durable()?;
        }
        Ok(())
    }

    /// Record the head in the durable record (see `durable.rs`) once the caller has made
    /// it durable: nothing when the writer has not persisted it (a failed or stopped
    /// writer), or on a read-only handle.
    pub(crate) fn record_durable(&self) -> Result<(), StoreError> {
        if self.shared.read_only || self.shared.progress.lock().persisted != self.head.0 {
            return Ok(());
        }
        self.shared.durable.set(self.head)
    }
}
