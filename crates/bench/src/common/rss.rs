//! Resident memory of this process, from `/proc/self/status` (Linux; `None` elsewhere).
//!
//! The peak (`VmHWM`) can be reset by writing `5` to `/proc/self/clear_refs`, which lets
//! one benchmark process measure two engines' peaks one after the other.

/// Peak resident set size so far (`VmHWM`), bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// Current resident set size (`VmRSS`), bytes.
#[cfg(test)]
pub(crate) fn current_rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

/// Reset the peak to the current RSS, after the allocator has given back what it kept of
/// earlier frees; false where the kernel does not allow it.
pub(crate) fn reset_peak_rss() -> bool {
    alloc_count::release_freed_memory();
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The 1-minute load average (`/proc/loadavg`), or 0 where unknown: other work on the
/// machine during a run makes its absolute timings (less so its ratios) unreliable.
pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// CPU seconds this process has used so far (user + system, every thread), from
/// `/proc/self/stat` at the kernel's usual 100 ticks per second.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Bytes this process has caused to be written to storage so far (`write_bytes` of
/// `/proc/self/io`: what reaches the block layer, WAL, flushes and compaction included).
pub(crate) fn io_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let line = io.lines().find(|l| l.starts_with("write_bytes:"))?;
    line["write_bytes:".len()..].trim().parse().ok()
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_on_linux() {
        if cfg!(target_os = "linux") {
            let now = current_rss_bytes().unwrap_or(0);
            let peak = peak_rss_bytes().unwrap_or(0);
            assert!(now > 0 && peak >= now, "peak {peak}, now {now}");
        }
    }
}
