//! bench: mounts the workbench (crate evenkeel-bench) as `evenkeel bench`, `evenkeel sweep`
//! and `evenkeel check DIR --tpcc`, mapping its errors to the CLI's exit codes.

use crate::failure::{CmdResult, Failure};
use evenkeel_bench::{BenchCommand, BenchError, EngineSpec, SweepCommand};
use std::path::{Path, PathBuf};

fn failure(e: BenchError) -> Failure {
    match e {
        BenchError::Usage(m) => Failure::Usage(m),
        BenchError::Inconsistent(m) => Failure::Damaged(m),
        other => Failure::Operation(other.to_string()),
    }
}

pub fn run_bench(cmd: &BenchCommand) -> CmdResult {
    evenkeel_bench::run_bench(cmd).map(|_| ()).map_err(failure)
}

pub fn run_sweep(cmd: &SweepCommand) -> CmdResult {
    evenkeel_bench::run_sweep(cmd).map(|_| ()).map_err(failure)
}

/// `evenkeel matrix`: runs the grid, then prints its table and where it is written.
pub fn run_matrix(a: &evenkeel_bench::matrix::MatrixArgs) -> CmdResult {
    let out = evenkeel_bench::matrix::run_matrix(a).map_err(failure)?;
    print!(
        "{}",
        evenkeel_bench::matrix::render_text(&out.policies, &out.cells)
    );
    println!("matrix: {}", out.out_dir.join("matrix.txt").display());
    Ok(())
}

/// `evenkeel holes`: runs the setups, then prints their table and where it is written.
pub fn run_holes(a: &evenkeel_bench::holes::HolesArgs) -> CmdResult {
    let out = evenkeel_bench::holes::run_holes(a).map_err(failure)?;
    print!("{}", evenkeel_bench::holes::render_text(&out.setups));
    println!("holes: {}", out.out_dir.join("holes.txt").display());
    Ok(())
}

/// TPC-C consistency conditions (clause 3.3.2) on a database the workbench loaded, read
/// through the `engine`'s driver.
pub fn check_tpcc(
    dir: &Path,
    engine: &str,
    config: Option<PathBuf>,
    set: Vec<String>,
) -> CmdResult {
    let spec = EngineSpec {
        engine: engine.to_string(),
        config,
        set,
    };
    let r = evenkeel_bench::tpcc_check_dir(dir, &spec)
        .and_then(|r| r.into_result())
        .map_err(failure)?;
    println!(
        "TPC-C consistency: conditions {:?} hold on {} warehouses",
        r.conditions_checked, r.warehouses
    );
    Ok(())
}
