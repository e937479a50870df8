//! Signals: Ctrl-C and SIGTERM end the long-running commands (`import`, `load`, `revert`,
//! `checkpoint serve|restore`) at a clean boundary instead of killing the process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

/// A flag set on Ctrl-C or SIGTERM: the caller stops at its next boundary (a block, a
/// chunk) when it sees it.
pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::SeqCst))
        .context("cannot install the signal handler")?;
    Ok(stop)
}
