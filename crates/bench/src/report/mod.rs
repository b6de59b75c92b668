//! Results of a run on disk: `summary.json`, `timeseries.csv` and `report.html` in one
//! directory (default `./evenkeel-results/<workload>-<UTC timestamp>`), and the sweep page
//! that sets several runs side by side.

pub mod csv;
pub mod html;
pub mod iobound;
pub mod summary;
pub mod svg;
pub mod sweep;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{BenchError, BenchResult};
use crate::sampler::SampleRow;
use summary::Summary;

/// `YYYYmmdd-HHMMSS` in UTC for Unix time `secs`.
pub fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The default results directory for a workload started now.
pub fn default_out(workload: &str) -> PathBuf {
    PathBuf::from("evenkeel-results").join(format!("{workload}-{}", utc_stamp(now_unix_s())))
}

fn write(path: &Path, text: &str) -> BenchResult<()> {
    std::fs::write(path, text).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
}

/// Write summary.json, timeseries.csv and report.html into `out` (created if needed).
pub fn write_results(out: &Path, s: &Summary, rows: &[SampleRow]) -> BenchResult<()> {
    std::fs::create_dir_all(out)
        .map_err(|e| BenchError::io(format!("create {}", out.display()), e))?;
    let json = serde_json::to_string_pretty(s).map_err(|e| BenchError::Data(e.to_string()))?;
    write(&out.join("summary.json"), &json)?;
    write(
        &out.join("timeseries.csv"),
        &csv::render(rows, &s.config_hash),
    )?;
    write(&out.join("report.html"), &html::render(s, rows))
}

/// Read back a results directory written by `write_results`.
pub fn read_results(dir: &Path) -> BenchResult<(Summary, Vec<SampleRow>)> {
    let read = |name: &str| {
        let p = dir.join(name);
        std::fs::read_to_string(&p).map_err(|e| BenchError::io(format!("read {}", p.display()), e))
    };
    let s: Summary = serde_json::from_str(&read("summary.json")?)
        .map_err(|e| BenchError::Data(format!("summary.json: {e}")))?;
    let (rows, _) = csv::read(&read("timeseries.csv")?)?;
    Ok((s, rows))
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_stamps() {
        assert_eq!(super::utc_stamp(0), "19700101-000000");
        assert_eq!(super::utc_stamp(951_782_400 + 3661), "20000229-010101");
    }
}
