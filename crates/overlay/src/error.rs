//! The overlay's typed errors, one enum per operation family: handing over the block's
//! changes (transaction control fails with the seam's `state::TransactionError`). Point
//! reads and range reads fail only with the backend's own error type.

/// Why the block's change set could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeSetError<E> {
    /// Transactions are still open; their writes are not final yet.
    #[error("{depth} transaction(s) still open: commit or roll them back before ending the block")]
    TransactionsOpen {
        /// How many transactions are open.
        depth: usize,
    },
    /// Reading a written key's backend value (to drop no-op writes) failed.
    #[error("backend read failed while building the change set")]
    Backend(#[source] E),
}
