//! Opening a source by its address: the one module that knows every kind of source
//! (directories and HTTP servers in `source.rs`, S3-compatible buckets in `s3.rs`), so
//! that each kind depends on the [`Source`] trait and none on the others or on this
//! dispatch. Opening costs no request: an address is checked, a client built.

use crate::s3::S3Store;
use crate::source::{DirSource, HttpSource, Source, SourceError, SourceOptions};

/// Open the source at `addr`: `http://…`/`https://…`, `s3://bucket[/prefix]` (endpoint
/// and credentials from the `AWS_*` environment), `file://…` or a directory path.
pub fn open_source(addr: &str, opts: &SourceOptions) -> Result<Box<dyn Source>, SourceError> {
    if addr.starts_with("http://") || addr.starts_with("https://") {
        return Ok(Box::new(HttpSource::new(addr, opts)?));
    }
    if let Some(rest) = addr.strip_prefix("s3://") {
        return Ok(Box::new(S3Store::from_env(rest, opts.timeout)?));
    }
    let path = addr.strip_prefix("file://").unwrap_or(addr);
    if addr.contains("://") && !addr.starts_with("file://") {
        return Err(SourceError::Url(addr.to_string()));
    }
    Ok(Box::new(DirSource::open(addr, path)?))
}
