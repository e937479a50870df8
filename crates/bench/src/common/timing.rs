//! Summaries of repeated timings: median with min and max, and nearest-rank percentiles.

use serde::Serialize;

/// Seconds taken by repeated runs of one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Timing {
    /// Number of runs.
    pub runs: usize,
    /// Median over the runs (mean of the two middle runs for an even count).
    pub seconds_median: f64,
    /// Fastest run.
    pub seconds_min: f64,
    /// Slowest run.
    pub seconds_max: f64,
}

impl Timing {
    /// Summary of `samples` (seconds); all zero when empty.
    pub(crate) fn from_samples(samples: &[f64]) -> Timing {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Timing {
            runs: sorted.len(),
            seconds_median: median_sorted(&sorted),
            seconds_min: sorted.first().copied().unwrap_or(0.0),
            seconds_max: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

/// Median of an ascending slice (0 when empty).
pub(crate) fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Nearest-rank percentile `p` (0 < p <= 100) of an ascending slice (0 when empty).
pub(crate) fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Ascending copy of `samples`.
pub(crate) fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// `numerator / denominator`, or 0 when the denominator is not positive.
pub(crate) fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator > 0.0 {
        numerator / denominator
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        let t = Timing::from_samples(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((t.runs, t.seconds_median, t.seconds_min, t.seconds_max), (4, 2.5, 1.0, 10.0));
        let s = sorted(&(1..=100).map(f64::from).collect::<Vec<_>>());
        assert_eq!(percentile_sorted(&s, 99.0), 99.0);
        assert_eq!(percentile_sorted(&s, 50.0), 50.0);
        assert_eq!(percentile_sorted(&[], 99.0), 0.0);
        assert_eq!(Timing::from_samples(&[]).seconds_median, 0.0);
    }
}
