//! The temporary directories the benchmarks' databases live in (removed when dropped).

use std::path::Path;

use anyhow::{Context, Result};

/// A temporary directory named `prefix…`, under `dir` when given (created if missing).
pub(crate) fn temp_dir(prefix: &str, dir: Option<&Path>) -> Result<tempfile::TempDir> {
    let builder = || tempfile::Builder::new().prefix(prefix).clone();
    match dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            builder().tempdir_in(d)
        }
        None => builder().tempdir(),
    }
    .context("cannot create a temporary directory")
}
