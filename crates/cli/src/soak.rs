//! soak: `evenkeel soak`, TPC-C for a long time (an hour by default) with the default engine
//! options, judged on whether memory stays flat and throughput holds.
//!
//! The run is the workbench's `bench tpcc` (load if needed, warm-up, then one sample per second
//! of New-Order/s and of this process's RSS, read from /proc/self/status). The measured seconds
//! are split into quarters; the first quarter is left out of the judgement, since the buffer
//! pool's frames are touched — and RSS grows — until the working set is cached. Then:
//! - memory: the mean RSS of the last quarter may exceed that of the second quarter by at most
//!   `--rss-growth-max-pct` (default 10%): the pool is allocated once at open and every other
//!   structure is bounded, so steady growth past that is a leak;
//! - throughput: the mean New-Order/s of the last quarter must be at least
//!   `--throughput-ratio-min` (default 0.8) of the second quarter's: the ORDER_LINE and HISTORY
//!   tables grow during TPC-C, which costs a little, but a fifth lost is decay.
//!
//! Prints a table of the quarters and the verdict, writes the verdict as JSON (`--report`,
//! default soak.json in the results directory next to the workbench's report.html and
//! timeseries.csv) and exits 1 when a bound is broken.

use crate::config::ConfigArgs;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel_bench::report::default_out;
use evenkeel_bench::run::tpcc::{run_tpcc, TpccOptions};
use evenkeel_bench::run::CommonOptions;
use evenkeel_bench::sampler::SampleRow;
use evenkeel_bench::tpcc::input::Mix;
use evenkeel_bench::EngineSpec;
use serde::Serialize;
use std::path::PathBuf;

pub const LONG_ABOUT: &str = "Run TPC-C (tpcc-mysql's mix, the workbench's `bench tpcc`) \
    for --duration seconds (default 3600) with the default engine options, sampling New-Order/s \
    and this process's RSS every second. The measured seconds are cut into quarters; the first \
    is warm-up for the judgement. Fails (exit 1) when the last quarter's mean RSS is more than \
    --rss-growth-max-pct above the second quarter's, or its mean New-Order/s is below \
    --throughput-ratio-min times the second quarter's. Prints a table of the quarters and writes \
    soak.json beside the workbench's report.";

/// The shortest measured phase that gives four quarters of at least ten seconds.
const DURATION_MIN_S: u64 = 40;

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// Measured seconds
    #[arg(long, default_value_t = 3600)]
    pub duration: u64,

    /// Seconds run before measuring
    #[arg(long, default_value_t = 60)]
    pub warmup: u64,

    #[arg(long, short = 'w', default_value_t = 2)]
    pub warehouses: u32,

    /// Client connections (threads)
    #[arg(long, short = 'c', default_value_t = 8)]
    pub connections: usize,

    /// Data directory, kept (reused when it holds TPC-C data) [default: a temporary one]
    #[arg(long)]
    pub dir: Option<PathBuf>,

    /// Results directory [default: ./evenkeel-results/soak-<timestamp>]
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Write the verdict as JSON here [default: OUT/soak.json]
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Largest allowed growth of mean RSS from the second quarter to the last, in percent
    #[arg(long, default_value_t = 10.0)]
    pub rss_growth_max_pct: f64,

    /// Smallest allowed ratio of the last quarter's mean New-Order/s to the second quarter's
    #[arg(long, default_value_t = 0.8)]
    pub throughput_ratio_min: f64,

    /// Seed of the workload's random numbers
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    #[command(flatten)]
    pub config: ConfigArgs,
}

/// One quarter of the measured phase.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Quarter {
    pub from_s: u64,
    pub to_s: u64,
    pub new_order_per_s_mean: f64,
    pub rss_bytes_mean: f64,
    pub rss_bytes_max: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SoakVerdict {
    pub duration_s: u64,
    pub warmup_s: u64,
    pub warehouses: u32,
    pub connections: usize,
    pub quarters: Vec<Quarter>,
    pub rss_growth_pct: f64,
    pub rss_growth_max_pct: f64,
    pub throughput_ratio: f64,
    pub throughput_ratio_min: f64,
    pub rss_ok: bool,
    pub throughput_ok: bool,
    pub results_dir: String,
}

/// The quarters of the measured seconds (rows not excluded as warm-up).
pub fn quarters(rows: &[SampleRow]) -> Vec<Quarter> {
    let measured: Vec<&SampleRow> = rows.iter().filter(|r| !r.excluded).collect();
    let n = measured.len();
    (0..4)
        .filter_map(|q| {
            let part = measured.get(q * n / 4..(q + 1) * n / 4)?;
            let (first, last) = (part.first()?, part.last()?);
            let len = part.len() as f64;
            Some(Quarter {
                from_s: first.t_s,
                to_s: last.t_s,
                new_order_per_s_mean: part.iter().map(|r| r.ops as f64).sum::<f64>() / len,
                rss_bytes_mean: part.iter().map(|r| r.rss_bytes as f64).sum::<f64>() / len,
                rss_bytes_max: part.iter().map(|r| r.rss_bytes).max().unwrap_or(0),
            })
        })
        .collect()
}

/// RSS growth (percent) and throughput ratio from the second quarter to the last.
pub fn judge(q: &[Quarter]) -> Option<(f64, f64)> {
    let (second, last) = (q.get(1)?, q.get(3)?);
    let growth = if second.rss_bytes_mean > 0.0 {
        100.0 * (last.rss_bytes_mean - second.rss_bytes_mean) / second.rss_bytes_mean
    } else {
        0.0
    };
    let ratio = if second.new_order_per_s_mean > 0.0 {
        last.new_order_per_s_mean / second.new_order_per_s_mean
    } else {
        0.0
    };
    Some((growth, ratio))
}

pub fn run(args: &SoakArgs) -> CmdResult {
    if args.duration < DURATION_MIN_S {
        return Err(Failure::Usage(format!(
            "--duration {}: at least {DURATION_MIN_S} seconds (four quarters of ten)",
            args.duration
        )));
    }
    let valid = args.rss_growth_max_pct >= 0.0 && args.throughput_ratio_min > 0.0;
    if !valid {
        return Err(Failure::Usage(
            "--rss-growth-max-pct must be >= 0 and --throughput-ratio-min > 0".into(),
        ));
    }
    // Validate engine options the way every other command does, before a long load.
    args.config.options()?;
    let out = args.out.clone().unwrap_or_else(|| default_out("soak"));
    let o = TpccOptions {
        common: CommonOptions {
            engine: EngineSpec::evenkeel(args.config.config.clone(), args.config.set.clone()),
            dir: args.dir.clone(),
            out: Some(out.clone()),
            json: false,
            quiet: false,
            seed: args.seed,
            schedule: Vec::new(),
        },
        warehouses: args.warehouses,
        connections: args.connections,
        duration_s: args.duration,
        warmup_s: args.warmup,
        interval_s: 60,
        mix: Mix::TpccMysql,
        items: None,
        customers: None,
        live_check_every_s: 0,
    };
    let run = run_tpcc(&o).map_err(|e| Failure::Operation(e.to_string()))?;
    let q = quarters(&run.rows);
    let (growth, ratio) = judge(&q).ok_or_else(|| {
        Failure::Operation(format!(
            "the run ended after {} measured seconds, too few for four quarters",
            run.rows.iter().filter(|r| !r.excluded).count()
        ))
    })?;
    let v = SoakVerdict {
        duration_s: args.duration,
        warmup_s: args.warmup,
        warehouses: args.warehouses,
        connections: args.connections,
        quarters: q,
        rss_growth_pct: growth,
        rss_growth_max_pct: args.rss_growth_max_pct,
        throughput_ratio: ratio,
        throughput_ratio_min: args.throughput_ratio_min,
        rss_ok: growth <= args.rss_growth_max_pct,
        throughput_ok: ratio >= args.throughput_ratio_min,
        results_dir: run.out_dir.display().to_string(),
    };
    println!("{}", render(&v));
    let path = args.report.clone().unwrap_or_else(|| out.join("soak.json"));
    let json = serde_json::to_string_pretty(&v).map_err(|e| Failure::op("encoding JSON", e))?;
    std::fs::write(&path, json + "\n")
        .map_err(|e| Failure::op(format!("writing {}", path.display()), e))?;
    println!("soak verdict in {}", path.display());
    match (v.rss_ok, v.throughput_ok) {
        (true, true) => Ok(()),
        _ => Err(Failure::Operation(format!(
            "soak failed: RSS grew {growth:.1}% (bound {}%), throughput ratio {ratio:.3} \
             (bound {})",
            args.rss_growth_max_pct, args.throughput_ratio_min
        ))),
    }
}

fn render(v: &SoakVerdict) -> String {
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let mut out = format!(
        "{:<8} {:>12} {:>14} {:>14} {:>13}\n",
        "quarter", "seconds", "New-Order/s", "RSS mean MiB", "RSS max MiB"
    );
    for (i, q) in v.quarters.iter().enumerate() {
        out.push_str(&format!(
            "{:<8} {:>12} {:>14.1} {:>14.1} {:>13.1}\n",
            format!("Q{}", i + 1),
            format!("{}-{}", q.from_s, q.to_s),
            q.new_order_per_s_mean,
            mib(q.rss_bytes_mean),
            mib(q.rss_bytes_max as f64)
        ));
    }
    let word = |ok: bool| if ok { "ok" } else { "FAILED" };
    out.push_str(&format!(
        "RSS Q4 vs Q2: {:+.1}% (bound +{}%): {}\n\
         New-Order/s Q4 / Q2: {:.3} (bound >= {}): {}",
        v.rss_growth_pct,
        v.rss_growth_max_pct,
        word(v.rss_ok),
        v.throughput_ratio,
        v.throughput_ratio_min,
        word(v.throughput_ok)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_s: u64, ops: u64, rss: u64, excluded: bool) -> SampleRow {
        SampleRow {
            t_s,
            ops,
            rss_bytes: rss,
            excluded,
            ..SampleRow::default()
        }
    }

    #[test]
    fn quarters_skip_warmup_and_judge_growth_and_decay() {
        // 2 warm-up seconds, then 8 measured: RSS 100 in Q2, 120 in Q4; ops 10 then 7.
        let mut rows = vec![row(1, 0, 1, true), row(2, 0, 1, true)];
        let plan = [
            (10, 90),
            (10, 90),
            (10, 100),
            (10, 100),
            (9, 110),
            (9, 110),
            (7, 120),
            (7, 120),
        ];
        for (i, (ops, rss)) in plan.iter().enumerate() {
            rows.push(row(3 + i as u64, *ops, *rss, false));
        }
        let q = quarters(&rows);
        assert_eq!(q.len(), 4);
        assert_eq!((q[0].from_s, q[3].to_s), (3, 10));
        let (growth, ratio) = judge(&q).unwrap();
        assert!((growth - 20.0).abs() < 1e-9, "{growth}");
        assert!((ratio - 0.7).abs() < 1e-9, "{ratio}");
        assert!(judge(&q[..2]).is_none());
    }
}
