//! The `evenkeel` command: load, dump, check and inspect an evenkeel database from the shell.
//!
//! This file holds only the command tree and the mapping of failures to exit codes (0 ok, 1
//! operational failure, 2 usage or configuration error, 3 `check` found damage); each command
//! lives in its own module and uses only the engine's public API. Only commands that work are
//! listed here: no placeholders.

/// mimalloc instead of glibc's malloc for the whole command (the workbench's clients and the
/// engine alike; an application embedding the engine chooses its own). Why: glibc's free-list
/// work (`malloc_consolidate`, `unlink_chunk`, `_int_free`) was about 5% of IO-bound TPC-C's
/// profile; with mimalloc the same runs did 1.04x the New-Order/s for about 25 MiB more RSS
/// (docs/measurements.md, "mimalloc").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod backup;
mod bench;
mod check;
mod config;
mod dirlock;
mod dump;
mod failure;
mod knobs;
mod load;
mod recover;
mod recovery_bench;
mod salvage;
mod soak;
mod status;
mod torture;

use clap::{Parser, Subcommand};
use evenkeel_bench::{BenchCommand, SweepCommand};
use evenkeel_cli::escape;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Line format of load and dump: one row per line, key<TAB>value. Inside keys and values
\\t is a tab, \\n a line feed, \\\\ a backslash and \\xHH any byte; dump writes control bytes
and bytes that are not UTF-8 as \\xHH, so `dump | load` rebuilds a table exactly.

Exit codes: 0 success, 1 operational failure, 2 usage or configuration error,
3 check found problems.

Examples:
  printf 'k1\\tv1\\nk2\\tv2\\n' | evenkeel load /tmp/db --table t
  evenkeel dump /tmp/db --table t | head
  evenkeel check /tmp/db
  evenkeel status /tmp/db --set buffer_pool_size=16M
  evenkeel options";

/// evenkeel: an embeddable transactional storage engine (InnoDB's architecture, level
/// throughput without tuning)
#[derive(Parser, Debug)]
#[command(name = "evenkeel", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load key<TAB>value lines from stdin into a table, creating database and table if
    /// missing
    #[command(long_about = "Load key<TAB>value lines from stdin into a table.\n\n\
        Creates the database and the table when missing; existing keys are replaced. Commits \
        every --batch lines and once more for the remainder, then prints a summary (lines, \
        commits, seconds, rows/s) to stderr. A malformed line stops the load with its line \
        number; batches committed before it stay. With --ack-file F, after each commit \
        returns the count of lines committed so far is appended to F and F is fsynced, so a \
        crash test can check that every acknowledged line survived (how durable a commit is \
        at return follows flush_log_at_trx_commit).")]
    Load(load::LoadArgs),

    /// Print a table to stdout in key order, in the line format load reads
    #[command(
        long_about = "Print a table to stdout in key order, one key<TAB>value line per \
        row, escaped as load expects, so `evenkeel dump A -t T | evenkeel load B -t T` copies \
        a table exactly. A closed pipe (| head) ends the dump quietly."
    )]
    Dump(dump::DumpArgs),

    /// Verify every page checksum and B+tree invariant; print per-table row and page counts
    #[command(
        long_about = "Verify a database without opening it for writing: every page \
        checksum, every B+tree invariant (key order, separator bounds, levels, leaf links), \
        overflow chains, the free list, and that every page is used exactly once. Prints per-\
        table rows, depth, leaf/internal/overflow pages and leaf fill, and the free-page \
        count. Each problem is printed with its file, page number and broken rule, and the \
        command exits 3. Run it when no other process has the database open. check writes \
        nothing to the database: one that was not shut down cleanly (its process was killed) \
        is refused unless --recover (run crash recovery first, as `evenkeel recover` does) or \
        --no-recover (check the fuzzy file as it lies) is given. With --salvage --out \
        DIR it instead exports every readable row of every table into DIR/<table>.tsv (the \
        load format), skipping pages that fail verification, and reports what it skipped: \
        the way out when a damaged database refuses to open."
    )]
    Check(check::CheckArgs),

    /// Run crash recovery on a database that was not shut down cleanly (the read-only
    /// commands refuse one)
    #[command(
        long_about = "Run crash recovery on a database whose last process was killed \
        or crashed: restore torn pages from the doublewrite area, redo the log from the last \
        checkpoint, re-apply committed transactions whose apply was cut, then close cleanly. \
        dump, status and check write nothing to a database, so they refuse one that needs \
        this. A cleanly shut down database is left as it is. Damage that recovery cannot \
        repair exits 3; `evenkeel check --salvage --out DIR` exports what is readable."
    )]
    Recover(recover::RecoverArgs),

    /// Copy a database into a new or empty directory, ready to open (an online backup)
    #[command(
        long_about = "Copy the database in SRC into DEST (created if missing, refused \
        unless empty) and prepare the copy: DEST then holds a database that opens cleanly, with \
        no recovery, and holds exactly the transactions committed before one point of the \
        backup. The data file is copied page by page while the redo log is followed, then \
        the copy is recovered to one point (XtraBackup's method), so a program embedding the \
        engine backs up while it writes (Database::backup_to). This command opens SRC \
        read-only and writes nothing to it; one that needs crash recovery is refused. A DEST \
        that is not empty, or runs out of space, fails naming the limit, leaving DEST \
        without any file of the backup."
    )]
    Backup(backup::BackupArgs),

    /// Print sizes and counters, grouped like SHOW ENGINE INNODB STATUS
    #[command(
        long_about = "Open the database read-only and print its sizes and counters in sections \
        named as in InnoDB's SHOW ENGINE INNODB STATUS: BUFFER POOL AND MEMORY, INSERT BUFFER, FILE, LOG, \
        FLUSH / DOUBLEWRITE, RECOVERY, TABLES, TRANSACTIONS, ROW OPERATIONS. RECOVERY says \
        what this open's crash recovery did (nothing after a clean shutdown). Counters cover this command's own open of the database. \
        --json prints the engine's Status structure instead."
    )]
    Status(status::StatusArgs),

    /// List every engine option with its default, valid range and meaning
    #[command(
        alias = "help-options",
        long_about = "List every engine option with its default, valid range and meaning. \
            With --config and/or --set, validate them and also show the value each option \
            would have."
    )]
    Options(knobs::OptionsArgs),

    /// Run a workbench experiment: TPC-C as tpcc-mysql runs it, or the insert benchmark
    #[command(
        subcommand,
        long_about = "Run a workbench experiment on an embedded database (a fresh \
        temporary directory unless --dir is given): TPC-C as tpcc-mysql runs it, or the insert \
        benchmark (iibench). Prints per-interval lines, then a summary, and writes \
        summary.json, timeseries.csv (one row per second) and report.html to --out."
    )]
    Bench(evenkeel_bench::BenchCommand),

    /// Run a workbench experiment once per value of a setting and compare the runs
    #[command(
        subcommand,
        long_about = "Run a workbench experiment once per value of an engine option or \
        workload argument (--vary name=v1,v2,...), then write one table with a row per run \
        and overlaid throughput charts."
    )]
    Sweep(evenkeel_bench::SweepCommand),

    /// Every flush policy over a grid of setups, back to back per cell: how level each ran
    #[command(
        long_about = "Run every flush policy (--policies) over a fixed grid of IO-bound \
        setups: the redo log at 1/16 and 1/2 of the buffer pool, 64 clients on 2 cores, a pool \
        that holds the data, for TPC-C and the insert benchmark's l.i1. Each cell loads once \
        and runs the policies back to back on fresh copies of its data. Prints, and writes to \
        matrix.txt, the per-second throughput's p1/mean after detrending per cell and policy, \
        with whether steady is at least the best classic policy and at least 0.9 in each cell; \
        matrix.json holds every run's figures and each cell's sweep command. At the default \
        30 s per run the grid takes under an hour on 2 cores."
    )]
    Matrix(evenkeel_bench::matrix::MatrixArgs),

    /// The seeds' setups on evenkeel and real InnoDB, back to back: where one falls into holes
    #[command(
        long_about = "Run the setups where the seeds saw InnoDB fall into throughput holes \
        (the insert benchmark's l.i1 with secondary indexes over a small pool; TPC-C with a \
        small redo log, with a large pool and a small redo log, and with more clients than \
        cores) on each engine of --engines (evenkeel and InnoDB by default; InnoDB needs a \
        build with --features innodb and Debian's mariadb-server), one engine sweep per setup \
        on copies of the same loaded data. Prints, and writes to holes.txt, per setup and \
        engine the mean, p1/mean plain and detrended, CV, seconds under half the mean and at \
        zero, the checkpoint age's maximum, the dirty pages' mean, stall seconds and bytes \
        written per operation, and whether evenkeel kept its promise there (p1/mean at least \
        0.9, no second under half its mean, a mean at least InnoDB's). Each setup's \
        sweep.html draws the engines on one chart; holes.json holds every run's figures. \
        About 20 minutes at the defaults once the data is loaded; the loads (kept in --dir) \
        add about 8 minutes the first time."
    )]
    Holes(evenkeel_bench::holes::HolesArgs),

    /// Kill -9 a workload at random moments, recover, verify every acknowledged commit, repeat
    #[command(
        long_about = "Kill -9 a workload at random moments, recover, verify, repeat.\n\n\
        Each cycle starts a child process running the workload (tpcc, insert or kv) on the \
        same database with flush_log_at_trx_commit=1, SIGKILLs it after a random time from \
        --kill-after, reopens the database (crash recovery), verifies that every commit the \
        child acknowledged is there (an ack line written after commit() returned) and that \
        the workload's own rules hold (TPC-C consistency conditions; iibench ids and index \
        entries; the kv model's version of every key, in-flight transactions all or \
        nothing), then runs check on every page. Every cycle prints its seed; the end prints \
        cycles, recoveries, redo replayed, recovery times and lost acknowledged commits. The \
        first failure stops the run, keeps the directory and exits 3.\n\n\
        Defaults before --config/--set: flush_log_at_trx_commit=1, buffer_pool_size=4M, \
        log_file_size=1M, log_buffer_size=256K, so eviction, checkpoints and log wrap happen \
        in every cycle."
    )]
    Torture(torture::TortureArgs),

    /// The process `torture` starts and kills (internal)
    #[command(name = "torture-child", hide = true)]
    TortureChild(torture::ChildArgs),

    /// Measure crash recovery per redo log size: time, redo MB/s and peak memory
    #[command(
        name = "recovery-bench",
        long_about = "Measure crash recovery per redo log size (--log-size, default \
        64M,1G,4G). For each, a child fills a new database's log with random puts until the \
        checkpoint age is --fill of its capacity and is killed with SIGKILL; a second child \
        recovers it (open and close) and reports its peak resident set size. Prints per log \
        size the redo replayed, the open's time and its scan, redo and re-apply parts, redo \
        MB/s, and peak RSS beside the budget (buffer pool + log buffer + recovery_memory). \
        --set options apply to both children. Needs about twice the largest log size of \
        free disk. Linux only."
    )]
    RecoveryBench(recovery_bench::RecoveryBenchArgs),

    /// The processes `recovery-bench` starts (internal)
    #[command(name = "recovery-bench-child", hide = true)]
    RecoveryBenchChild(recovery_bench::RecoveryBenchChildArgs),

    /// Run TPC-C for a long time (default an hour) and check that memory stays flat and
    /// throughput does not decay
    #[command(long_about = soak::LONG_ABOUT)]
    Soak(soak::SoakArgs),
}

/// The directories a command's arguments name (database, data and results directories).
fn dir_args(c: &Command) -> Vec<&Path> {
    fn bench_dirs(c: &evenkeel_bench::CommonArgs) -> Vec<&Path> {
        c.dir.iter().chain(&c.out).map(|p| p.as_path()).collect()
    }
    match c {
        Command::Load(a) => vec![a.dir.as_path()],
        Command::Dump(a) => vec![a.dir.as_path()],
        Command::Status(a) => vec![a.dir.as_path()],
        Command::Recover(a) => vec![a.dir.as_path()],
        Command::Backup(a) => vec![a.src.as_path()],
        Command::Check(a) => std::iter::once(a.dir.as_path())
            .chain(a.out.as_deref())
            .collect(),
        Command::Bench(BenchCommand::Tpcc(a))
        | Command::Sweep(SweepCommand::Tpcc { args: a, .. }) => bench_dirs(&a.common),
        Command::Bench(BenchCommand::Insert(a))
        | Command::Sweep(SweepCommand::Insert { args: a, .. }) => bench_dirs(&a.common),
        Command::Bench(BenchCommand::Kv(a)) => a.dir.iter().map(|p| p.as_path()).collect(),
        Command::Torture(a) => a.dir.iter().map(|p| p.as_path()).collect(),
        Command::Soak(a) => a.dir.iter().chain(&a.out).map(|p| p.as_path()).collect(),
        Command::Matrix(a) => a.dir.iter().chain(&a.out).map(|p| p.as_path()).collect(),
        Command::Holes(a) => a.dir.iter().chain(&a.out).map(|p| p.as_path()).collect(),
        Command::RecoveryBench(a) => a.dir.iter().map(|p| p.as_path()).collect(),
        Command::Options(_) | Command::TortureChild(_) | Command::RecoveryBenchChild(_) => {
            Vec::new()
        }
    }
}

fn main() -> ExitCode {
    // What the engine's background threads report (a page cleaner that stops on an I/O error,
    // recovery's summary) goes to stderr: warnings and errors by default, more with RUST_LOG.
    // Colours only on a terminal (and not with NO_COLOR set), so logs and pipes get plain text.
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    if let Err(f) = dir_args(&cli.command)
        .into_iter()
        .try_for_each(dirlock::require_dir)
    {
        eprintln!("evenkeel: error: {f}");
        return ExitCode::from(f.exit_code());
    }
    let result = match &cli.command {
        Command::Load(a) => load::run(a),
        Command::Dump(a) => dump::run(a),
        Command::Check(a) => check::run(a),
        Command::Status(a) => status::run(a),
        Command::Recover(a) => recover::run(a),
        Command::Backup(a) => backup::run(a),
        Command::Options(a) => knobs::run(a),
        Command::Bench(c) => bench::run_bench(c),
        Command::Sweep(c) => bench::run_sweep(c),
        Command::Matrix(a) => bench::run_matrix(a),
        Command::Holes(a) => bench::run_holes(a),
        Command::Torture(a) => torture::run(a),
        Command::TortureChild(a) => torture::run_child(a),
        Command::Soak(a) => soak::run(a),
        Command::RecoveryBench(a) => recovery_bench::run(a),
        Command::RecoveryBenchChild(a) => recovery_bench::run_child(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("evenkeel: error: {f}");
            ExitCode::from(f.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_tree_is_consistent() {
        Cli::command().debug_assert();
    }
}
