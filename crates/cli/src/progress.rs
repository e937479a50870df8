//! Progress on stderr for the commands that can take a while: what is counted, how far,
//! the rate and (when the total is known) an ETA, and the elapsed time.
//!
//! indicatif draws nothing when stderr is not a terminal, so scripts and pipes see only
//! the commands' outputs; `--json` hides the bars as well.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting `unit`s (`blocks`, `entries`) towards `total`, with rate and ETA; a
/// spinner with the rate when the total is unknown (`None`). Hidden unless `show`.
pub(crate) fn counter(show: bool, total: Option<u64>, what: &str, unit: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(&template(total.is_some(), what, unit))
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    let pb = match total {
        Some(len) => ProgressBar::new(len),
        None => ProgressBar::no_length(),
    };
    pb.set_style(style);
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// Run `work` on this thread while a scoped thread moves `pb` to `count()` every 100 ms;
/// the bar's length grows when the count passes it (the totals here are estimates).
pub(crate) fn polled<T>(
    pb: &ProgressBar,
    count: impl Fn() -> u64 + Sync,
    work: impl FnOnce() -> T,
) -> T {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let n = count();
                if pb.length().is_some_and(|len| n > len) {
                    pb.set_length(n);
                }
                pb.set_position(n);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        // Stop the poller however `work` ends: a scope joins its threads even when unwinding.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&done);
        work()
    })
}

/// The bar's template: with a bar and an ETA when the total is known.
fn template(known_total: bool, what: &str, unit: &str) -> String {
    if known_total {
        format!(
            "{{spinner}} {what} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit} · {{per_sec}} · \
             ETA {{eta}} · {{elapsed_precise}} {{msg}}"
        )
    } else {
        format!(
            "{{spinner}} {what} {{human_pos}} {unit} · {{per_sec}} · {{elapsed_precise}} {{msg}}"
        )
    }
}

/// RocksDB's estimate of the entries in `flat` (0 if it has none): the total of the
/// progress bars of whole-state scans.
pub(crate) fn flat_entries_estimate(db: &store::StateDb) -> u64 {
    db.stats().column_families.iter().find(|c| c.name == "flat").map_or(0, |c| c.estimated_keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse() {
        // A template that does not parse would fall back silently: check both parse.
        for known in [true, false] {
            let t = template(known, "reverting", "blocks");
            assert!(ProgressStyle::with_template(&t).is_ok(), "{t}");
            assert!(t.contains("per_sec") && t.contains("reverting") && t.contains("blocks"));
            assert_eq!(t.contains("{eta}"), known);
        }
        for total in [Some(10), None] {
            let pb = counter(true, total, "doing", "things");
            pb.inc(3);
            assert_eq!(pb.position(), 3);
            pb.finish_and_clear();
        }
        assert!(counter(false, Some(1), "x", "y").is_hidden());
    }

    #[test]
    fn polling_ends_with_the_work_even_when_it_panics() {
        let pb = counter(false, Some(2), "x", "y");
        assert_eq!(polled(&pb, || 5, || 7), 7);
        let r = std::panic::catch_unwind(|| polled(&pb, || 1, || panic!("work failed")));
        assert!(r.is_err(), "the panic reaches the caller instead of hanging the poller");
    }
}
