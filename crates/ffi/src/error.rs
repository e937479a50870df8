//! Result codes of the C ABI and the mapping from the engine's typed errors.

use store::{AtError, BulkError, CommitError, OpenError, StoreError};

/// What a call returns. Anything but `ARBOR_CODE_OK` comes with a message (UTF-8) in the
/// call's `error` out-parameter.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArborCode {
    /// Success.
    Ok = 0,
    /// The key is absent (a proof shows it absent).
    NotFound = 1,
    /// An argument is malformed or out of range (also: a proof that does not verify).
    InvalidArgument = 2,
    /// The database (or a checkpoint) is damaged or not an Arbor database.
    Corrupt = 3,
    /// An I/O or storage error.
    Io = 4,
    /// The handle is closed, stale or unknown.
    Closed = 5,
    /// The operation was cancelled.
    Cancelled = 6,
    /// Arbor panicked; the process is intact, the handle may be unusable.
    Panic = 7,
    /// The block is outside the readable window (above the head, or below head -
    /// `history.recent_blocks`), or was reverted while it was read.
    OutsideWindow = 8,
}

/// An error on its way to the caller: a code and a message.
#[derive(Debug)]
pub(crate) struct FfiError {
    pub(crate) code: ArborCode,
    pub(crate) message: String,
}

impl FfiError {
    pub(crate) fn new(code: ArborCode, message: impl Into<String>) -> Self {
        FfiError { code, message: message.into() }
    }

    pub(crate) fn invalid(message: &'static str) -> Self {
        Self::new(ArborCode::InvalidArgument, message)
    }

    pub(crate) fn invalid_owned(message: String) -> Self {
        Self::new(ArborCode::InvalidArgument, message)
    }

    pub(crate) fn closed(message: &'static str) -> Self {
        Self::new(ArborCode::Closed, message)
    }
}

fn store_code(e: &StoreError) -> ArborCode {
    match e {
        StoreError::KeyTooLong { .. } => ArborCode::InvalidArgument,
        _ if e.is_corruption() => ArborCode::Corrupt,
        _ => ArborCode::Io,
    }
}

impl From<StoreError> for FfiError {
    fn from(e: StoreError) -> Self {
        FfiError::new(store_code(&e), e.to_string())
    }
}

impl From<OpenError> for FfiError {
    fn from(e: OpenError) -> Self {
        let code = match &e {
            // The caller asked for another layout than the database's.
            OpenError::Config(_) | OpenError::LayoutMismatch { .. } => ArborCode::InvalidArgument,
            OpenError::NotArbor { .. }
            | OpenError::SchemaMismatch { .. }
            | OpenError::MissingColumnFamily { .. }
            | OpenError::OrphanedTables { .. } => ArborCode::Corrupt,
            // A directory that holds something else than a database.
            OpenError::CreateDir { source, .. }
                if source.kind() == std::io::ErrorKind::DirectoryNotEmpty =>
            {
                ArborCode::Corrupt
            }
            _ if e.is_corruption() => ArborCode::Corrupt,
            _ => ArborCode::Io,
        };
        FfiError::new(code, e.to_string())
    }
}

impl From<AtError> for FfiError {
    fn from(e: AtError) -> Self {
        let code = match &e {
            AtError::Store(s) => store_code(s),
            _ => ArborCode::OutsideWindow,
        };
        FfiError::new(code, e.to_string())
    }
}

impl From<CommitError> for FfiError {
    fn from(e: CommitError) -> Self {
        let code = match &e {
            CommitError::Store(s) => store_code(s),
            _ => ArborCode::InvalidArgument,
        };
        FfiError::new(code, e.to_string())
    }
}

impl From<BulkError> for FfiError {
    fn from(e: BulkError) -> Self {
        let code = match &e {
            BulkError::Store(s) => store_code(s),
            _ => ArborCode::InvalidArgument,
        };
        FfiError::new(code, e.to_string())
    }
}

impl From<checkpoint::CreateError> for FfiError {
    fn from(e: checkpoint::CreateError) -> Self {
        let code = match &e {
            checkpoint::CreateError::Store(s) => store_code(s),
            checkpoint::CreateError::Options(_)
            | checkpoint::CreateError::UnboundStorage { .. }
            | checkpoint::CreateError::EntryTooLarge { .. }
            | checkpoint::CreateError::ChunkTooLarge { .. } => ArborCode::InvalidArgument,
            checkpoint::CreateError::FlatKey(_)
            | checkpoint::CreateError::CodeKey(_)
            | checkpoint::CreateError::Proof { .. } => ArborCode::Corrupt,
            checkpoint::CreateError::Cancelled => ArborCode::Cancelled,
            _ => ArborCode::Io,
        };
        FfiError::new(code, e.to_string())
    }
}

impl From<checkpoint::FetchError> for FfiError {
    fn from(e: checkpoint::FetchError) -> Self {
        use checkpoint::{ChunkError, FetchError, RestoreError};
        let code = match &e {
            FetchError::Cancelled => ArborCode::Cancelled,
            FetchError::NoCheckpoint { .. } => ArborCode::NotFound,
            FetchError::MissingChunk { .. } | FetchError::BadCheckpoint { .. } => {
                ArborCode::Corrupt
            }
            FetchError::Chunk(c) => match c.as_ref() {
                ChunkError::Store(s) => store_code(s),
                ChunkError::Staging { .. } => ArborCode::Io,
                _ => ArborCode::Corrupt,
            },
            FetchError::Restore(RestoreError::Store(BulkError::Store(s))) => store_code(s),
            FetchError::Restore(RestoreError::Store(_) | RestoreError::OtherCheckpoint { .. }) => {
                ArborCode::InvalidArgument
            }
            FetchError::Restore(RestoreError::Staging { .. }) => ArborCode::Io,
            FetchError::Restore(_) => ArborCode::Corrupt,
            _ => ArborCode::Io,
        };
        FfiError::new(code, e.to_string())
    }
}
