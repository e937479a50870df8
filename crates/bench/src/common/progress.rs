//! Progress bars on stderr, one per phase; hidden when the caller wants clean output.
//!
//! Bars are advanced between timed sections, never from a ticking thread, so drawing
//! does not compete with the measured code for a core.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps for a phase, or a hidden one.
pub fn bar(
    progress: bool,
    len: u64,
    phase: impl Into<std::borrow::Cow<'static, str>>,
) -> ProgressBar {
    if !progress {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("{msg:<34} [{bar:30}] {pos}/{len} {elapsed_precise}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    let pb = ProgressBar::new(len).with_style(style);
    pb.set_message(phase);
    pb
}
