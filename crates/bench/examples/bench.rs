//! A stand-alone front end to the workbench, mounting the same clap commands the `evenkeel`
//! binary mounts: `bench tpcc|insert`, `sweep tpcc|insert --vary ...`, `check DIR --tpcc`.
//! Useful for trying the workbench without the engine's CLI:
//! `cargo run -p evenkeel-bench --example bench -- bench tpcc --engine model --duration 10`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use evenkeel_bench::{
    run_bench, run_sweep, tpcc_check_dir, BenchCommand, EngineSpec, SweepCommand,
};

#[derive(Parser)]
#[command(name = "bench", about = "evenkeel workbench")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one benchmark.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run a benchmark once per value of a setting.
    #[command(subcommand)]
    Sweep(SweepCommand),
    /// Check a TPC-C database's consistency.
    Check {
        dir: PathBuf,
        #[arg(long, default_value = "evenkeel")]
        engine: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Cmd::Bench(b) => run_bench(b).map(|_| ()),
        Cmd::Sweep(s) => run_sweep(s).map(|_| ()),
        Cmd::Check { dir, engine } => {
            let spec = EngineSpec {
                engine: engine.clone(),
                ..EngineSpec::default()
            };
            tpcc_check_dir(dir, &spec)
                .and_then(|r| r.into_result())
                .map(|r| {
                    println!(
                        "TPC-C consistency: conditions {:?} hold on {} warehouses",
                        r.conditions_checked, r.warehouses
                    );
                })
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
