//! Verifiable chunked checkpoints of Arbor's state.
//!
//! - [`create`]: cut the persisted state ([`store::PersistedState`], a pinned snapshot)
//!   into chunks at content-defined boundaries (`boundary.rs`: the bytes never depend on
//!   the thread count), each with the boundary proofs of its key ranges, in parallel, and
//!   the contract code (the store's `code` family) into code chunks (`code.rs`:
//!   [`CodeChunk`]); then the [`Manifest`] (block, root, the rule, per-chunk keys, sizes
//!   and digests, the code chunks' hashes, sizes and digests).
//! - [`Restorer`]: restore from chunks offered in any order, each verified on arrival
//!   against the one trusted `(block, root)` ([`Trusted`]) before anything of it is
//!   written, crash-safe and resumable; each code against its hash, and, at the end,
//!   every code an account refers to present.
//! - Formats ([`Chunk`], [`Manifest`]: versioned, with magic bytes; the manifest records
//!   the trie layout, [`trie::LayoutName`], in which every proof verifies and a restore
//!   creates its database; `docs/design.md`, "Checkpoints") and the layout shared by
//!   directories, HTTP and object storage ([`CheckpointDir`]).
//! - Sources ([`open_source`]: directories, `http://`, `s3://`) and
//!   [`restore_from_sources`], which restores from several untrusted sources at once,
//!   names and excludes bad ones and reports ([`RestoreReport`]); [`HttpServer`] serves a
//!   checkpoint directory; [`S3Store::push`] uploads one to an S3-compatible bucket.

#![forbid(unsafe_code)]

mod boundary;
mod code;
mod create;
mod dir;
mod direct;
mod fetch;
mod format;
mod keys;
mod open;
mod progress;
mod restore;
mod s3;
mod serve;
mod source;
mod verify;

pub use boundary::boundary_hash;
pub use code::{CodeChunk, CodeError, CODE_CHUNK_MAGIC, CODE_CHUNK_VERSION};
pub use create::{create, create_cancellable, CreateError, CreateOptions, Created, THREADS_MAX};
pub use dir::{chunk_path, manifest_path, parse_id, CheckpointDir, DirError};
pub use fetch::{
    already_restored, find_candidates, find_manifests, restore_from_sources, Candidates,
    FetchError, FetchOptions, FetchProgress, OfferedManifest, RestoreReport, SourceReport,
    ALREADY_RESTORED, WORKERS_MAX,
};
pub use format::{
    BoundaryRule, Chunk, ChunkHash, ChunkInfo, CodeChunkInfo, CodeList, DecodeError, Manifest,
    Segment, CHUNK_BYTES_MAX, CHUNK_MAGIC, ENTRY_BYTES_MAX, FORMAT_VERSION,
    MANIFEST_BLAKE3_VERSION, MANIFEST_BYTES_MAX, MANIFEST_LAYOUT_VERSION, MANIFEST_MAGIC,
    VALUE_BYTES_MAX,
};
pub use open::open_source;
pub use restore::{
    ChunkError, Offered, RestoreError, RestoreOptions, Restorer, Trusted, STAGING_BYTES_DEFAULT,
    STAGING_DIR_NAME, STAGING_MARKER,
};
pub use s3::{PushError, PushReport, S3Store};
pub use serve::{HttpServer, ServeError, REQUEST_HEAD_BYTES_MAX};
pub use source::{Listed, Source, SourceError, SourceOptions};
pub use verify::{verify_checkpoint, verify_manifest, VerifyError, VerifySummary};
