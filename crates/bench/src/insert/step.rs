//! The steps of the insert benchmark, named as in its reports: l.i0 loads without secondary
//! indexes (100 rows per commit), l.x builds them, l.i1 inserts 50 rows per commit and deletes
//! as many of the oldest (constant table size), l.i2 does the same 5 rows per commit, and qr
//! runs range queries on the secondary indexes while a background writer per table inserts and
//! deletes at a fixed rate.

use crate::error::{BenchError, BenchResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    LoadI0,
    BuildIndexes,
    InsertI1,
    InsertI2,
    QueryRange,
}

impl Step {
    pub const ALL: [Step; 5] = [
        Step::LoadI0,
        Step::BuildIndexes,
        Step::InsertI1,
        Step::InsertI2,
        Step::QueryRange,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::LoadI0 => "l.i0",
            Step::BuildIndexes => "l.x",
            Step::InsertI1 => "l.i1",
            Step::InsertI2 => "l.i2",
            Step::QueryRange => "qr",
        }
    }

    /// Rows per commit of an insert step.
    pub fn batch(self) -> usize {
        match self {
            Step::LoadI0 => 100,
            Step::InsertI1 => 50,
            Step::InsertI2 => 5,
            // rows per index-build transaction (x 3 index entries): small enough for the
            // redo of a 4 MiB log (the engine refuses a transaction over half the log)
            Step::BuildIndexes => 200,
            Step::QueryRange => 10,
        }
    }

    /// True for the steps whose throughput is inserted rows (ips).
    pub fn is_insert(self) -> bool {
        matches!(self, Step::LoadI0 | Step::InsertI1 | Step::InsertI2)
    }

    /// The timed insert steps into loaded tables (l.i1, l.i2): the steps `--warmup` runs
    /// unmeasured for its first seconds, as they start on whatever state the load (or a fresh
    /// copy of it) left.
    pub fn warms_up(self) -> bool {
        matches!(self, Step::InsertI1 | Step::InsertI2)
    }

    /// The steps that build the data the others run on (l.i0, l.x): a sweep loads them once.
    pub fn is_load(self) -> bool {
        matches!(self, Step::LoadI0 | Step::BuildIndexes)
    }
}

/// Steps as `--steps` text (what [`parse_steps`] reads).
pub fn steps_arg(steps: &[Step]) -> String {
    steps.iter().map(|s| s.name()).collect::<Vec<_>>().join(",")
}

/// Parse a comma-separated step list, keeping the benchmark's order.
pub fn parse_steps(s: &str) -> BenchResult<Vec<Step>> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let step = Step::ALL
            .iter()
            .copied()
            .find(|st| st.name() == name)
            .ok_or_else(|| {
                let all: Vec<&str> = Step::ALL.iter().map(|s| s.name()).collect();
                BenchError::Usage(format!(
                    "--steps: unknown step {name:?}: expected some of {}",
                    all.join(",")
                ))
            })?;
        if !out.contains(&step) {
            out.push(step);
        }
    }
    if out.is_empty() {
        return Err(BenchError::Usage("--steps: no step given".into()));
    }
    out.sort_by_key(|s| Step::ALL.iter().position(|x| x == s));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders() {
        assert_eq!(
            parse_steps("l.i1, l.i0").ok(),
            Some(vec![Step::LoadI0, Step::InsertI1])
        );
        assert!(parse_steps("l.i9").is_err());
        assert!(parse_steps("").is_err());
    }
}
