//! Stability figures of a per-second throughput series (DESIGN.md, "Metrics"): mean, 1st
//! percentile, minimum, maximum, coefficient of variation, seconds below half the mean, zero
//! seconds and the longest run of them; and iibench's ips.99. These are what tell a level line
//! from one with holes, which averages hide (the 1-second micro-stalls of adaptive flushing in MySQL 5.6 under tpcc-mysql).

use serde::{Deserialize, Serialize};

/// Figures of one series. All zero for an empty series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    pub seconds: u64,
    pub mean: f64,
    /// 1st percentile (nearest rank): the rate the worst 1% of seconds fall to.
    pub p1: f64,
    pub min: f64,
    pub max: f64,
    /// Standard deviation / mean (population standard deviation).
    pub cv: f64,
    pub seconds_below_half_mean: u64,
    pub zero_seconds: u64,
    pub longest_zero_run: u64,
}

/// Nearest-rank percentile `pct` (0-100] of `v`, which need not be sorted.
pub fn percentile(v: &[f64], pct: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((pct / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1]
}

pub fn stability(series: &[f64]) -> Stability {
    if series.is_empty() {
        return Stability::default();
    }
    let n = series.len() as f64;
    let mean = series.iter().sum::<f64>() / n;
    let var = series.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let (mut run, mut longest, mut zeros) = (0u64, 0u64, 0u64);
    for &x in series {
        if x == 0.0 {
            zeros += 1;
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    Stability {
        seconds: series.len() as u64,
        mean,
        p1: percentile(series, 1.0),
        min: series.iter().copied().fold(f64::INFINITY, f64::min),
        max: series.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        seconds_below_half_mean: series.iter().filter(|&&x| x < mean / 2.0).count() as u64,
        zero_seconds: zeros,
        longest_zero_run: longest,
    }
}

/// Seconds in the window of the rolling median that [`detrended`] divides by.
pub const DETREND_WINDOW_S: usize = 30;

/// Each second's rate relative to the median of the `window` seconds centred on it (clipped
/// at the ends of the run): 1.0 is "as usual for this part of the run". A hole (a few seconds
/// far under their neighbours) stays visible; a slow drift (throughput falling as the data
/// grows or the cache turns over) divides out. A second whose window's median is 0 counts as
/// 0: it lies inside a stall longer than half the window.
pub fn relative_to_rolling_median(series: &[f64], window: usize) -> Vec<f64> {
    let half = window.max(1) / 2;
    (0..series.len())
        .map(|i| {
            let lo = i.saturating_sub(half);
            let hi = (i + half + 1).min(series.len());
            let base = percentile(&series[lo..hi], 50.0);
            if base > 0.0 {
                series[i] / base
            } else {
                0.0
            }
        })
        .collect()
}

/// The stability figures of [`relative_to_rolling_median`] over [`DETREND_WINDOW_S`]: its p1,
/// min and seconds below half say how deep and how many the holes are, with drift removed
/// (mean near 1.0; `p1 / mean` is the detrended p1/mean).
pub fn detrended(series: &[f64]) -> Stability {
    stability(&relative_to_rolling_median(series, DETREND_WINDOW_S))
}

/// iibench's 99th-percentile-low rate of one client: its per-interval rates sorted
/// descending, the value at position floor(0.99 * n) (the last one when that is past the end).
pub fn ips99_client(rates: &[f64]) -> f64 {
    if rates.is_empty() {
        return 0.0;
    }
    let mut s = rates.to_vec();
    s.sort_by(|a, b| b.total_cmp(a));
    let at = ((s.len() as f64) * 0.99) as usize;
    s[at.min(s.len() - 1)]
}

/// ips.99 of a run: the sum over clients of each client's ips.99.
pub fn ips99(per_client_rates: &[Vec<f64>]) -> f64 {
    per_client_rates.iter().map(|r| ips99_client(r)).sum()
}

/// Sums of consecutive windows of `w` values (the last window may be short and is dropped).
pub fn windows(series: &[f64], w: usize) -> Vec<f64> {
    series
        .chunks_exact(w.max(1))
        .map(|c| c.iter().sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detrending_removes_drift_and_keeps_holes() {
        // a steady decline from 1,000/s to 500/s over 300 s: plain p1/mean is low, detrended ~1
        let drift: Vec<f64> = (0..300)
            .map(|i| 1000.0 - i as f64 * 500.0 / 300.0)
            .collect();
        let plain = stability(&drift);
        let d = detrended(&drift);
        assert!(plain.p1 / plain.mean < 0.7, "{plain:?}");
        assert!(d.p1 / d.mean > 0.97, "{d:?}");
        assert_eq!(d.seconds_below_half_mean, 0);
        // the same with three 1-second holes at a fifth of the rate: detrended shows them
        let mut holes = drift.clone();
        for i in [50, 150, 250] {
            holes[i] /= 5.0;
        }
        let h = detrended(&holes);
        assert_eq!(h.seconds_below_half_mean, 3, "{h:?}");
        assert!(h.min < 0.25, "{h:?}");
        // a stall longer than half the window counts as zeros
        let mut stall = vec![100.0; 120];
        for x in stall.iter_mut().skip(40).take(20) {
            *x = 0.0;
        }
        assert!(detrended(&stall).zero_seconds >= 20);
        assert_eq!(detrended(&[]), Stability::default());
    }

    #[test]
    fn level_series() {
        let s = stability(&[100.0; 60]);
        assert_eq!((s.mean, s.p1, s.min, s.cv), (100.0, 100.0, 100.0, 0.0));
        assert_eq!(
            (
                s.seconds_below_half_mean,
                s.zero_seconds,
                s.longest_zero_run
            ),
            (0, 0, 0)
        );
    }

    #[test]
    fn series_with_holes() {
        // 10 s at 100, a 3 s stall, 2 s at 30, one more zero, 4 s at 100.
        let mut v = vec![100.0; 10];
        v.extend([0.0, 0.0, 0.0, 30.0, 30.0, 0.0]);
        v.extend([100.0; 4]);
        let s = stability(&v);
        assert_eq!(s.seconds, 20);
        assert!((s.mean - 73.0).abs() < 1e-9);
        assert_eq!(s.min, 0.0);
        assert_eq!(s.p1, 0.0);
        assert_eq!(s.zero_seconds, 4);
        assert_eq!(s.longest_zero_run, 3);
        assert_eq!(s.seconds_below_half_mean, 6);
        let sd = (v.iter().map(|x| (x - 73.0_f64).powi(2)).sum::<f64>() / 20.0).sqrt();
        assert!((s.cv - sd / 73.0).abs() < 1e-12);
    }

    #[test]
    fn percentile_nearest_rank() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(percentile(&v, 1.0), 2.0);
        assert_eq!(percentile(&v, 50.0), 100.0);
        assert_eq!(percentile(&[5.0], 1.0), 5.0);
    }

    #[test]
    fn ips99_as_iibench() {
        // 100 intervals at 1..=100: sorted descending, position 99 holds 1.
        let a: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(ips99_client(&a), 1.0);
        // 1000 intervals 1..=1000: position 990 of the descending list holds 10.
        let b: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(ips99_client(&b), 10.0);
        assert_eq!(ips99(&[a, b]), 11.0);
        assert_eq!(ips99_client(&[]), 0.0);
        assert_eq!(windows(&[1.0, 2.0, 3.0, 4.0, 5.0], 2), vec![3.0, 7.0]);
    }
}
