//! The values a knob can take: how each kind of knob text is parsed, range-checked and printed
//! ([`Kind`]), the conversions of the fields' own types ([`KnobValue`]), and the flush policy.

use crate::io::FlushMethod;
use crate::mvcc::Isolation;

pub(super) const KIB: u64 = 1 << 10;
pub(super) const MIB: u64 = 1 << 20;
pub(super) const GIB: u64 = 1 << 30;
pub(super) const TIB: u64 = 1 << 40;

/// Each buffer-pool instance needs at least this many frames to have an LRU worth the name.
pub const MIN_PAGES_PER_INSTANCE: u64 = 64;

/// How a knob's text is parsed, checked and printed. Values travel as `u64`; [`KnobValue`]
/// converts them to and from the field's own type.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    /// Bytes, plain or with a suffix (K, M, G, T or KiB, MiB, GiB, TiB; all powers of 1024).
    Size { min: u64, max: u64 },
    /// One of a few sizes, written as bytes or with a suffix.
    SizeChoice(&'static [u64]),
    /// A plain integer in `min..=max`; `unit` (may be empty) is said in the expected text.
    Int {
        min: u64,
        max: u64,
        unit: &'static str,
    },
    /// A duration in milliseconds within `min..=max`, written as seconds (`50`, `1.5`, InnoDB's
    /// unit) or with a unit (`500ms`, `2s`, `1m`).
    Millis { min: u64, max: u64 },
    /// on/off/true/false/1/0; the value is 0 or 1.
    Bool,
    /// One of the names (case-insensitive, `-` = `_`); the value is the index.
    Name(&'static [&'static str]),
}

impl Kind {
    pub(super) fn parse(self, raw: &str) -> Option<u64> {
        let raw = raw.trim();
        let value = match self {
            Kind::Size { .. } | Kind::SizeChoice(_) => parse_size(raw)?,
            Kind::Int { .. } => raw.parse::<u64>().ok()?,
            Kind::Millis { .. } => parse_millis(raw)?,
            Kind::Bool => u64::from(parse_bool(raw)?),
            Kind::Name(names) => {
                let want = raw.replace('-', "_");
                names.iter().position(|n| n.eq_ignore_ascii_case(&want))? as u64
            }
        };
        self.accepts(value).then_some(value)
    }

    pub(super) fn accepts(self, v: u64) -> bool {
        match self {
            Kind::Size { min, max } | Kind::Int { min, max, .. } | Kind::Millis { min, max } => {
                (min..=max).contains(&v)
            }
            Kind::SizeChoice(choices) => choices.contains(&v),
            Kind::Bool => v <= 1,
            Kind::Name(names) => v < names.len() as u64,
        }
    }

    pub(super) fn format(self, v: u64) -> String {
        match self {
            Kind::Size { .. } => format_size(v),
            Kind::SizeChoice(_) | Kind::Int { .. } => v.to_string(),
            Kind::Millis { .. } => format_millis(v),
            Kind::Bool => if v == 0 { "off" } else { "on" }.to_string(),
            Kind::Name(names) => usize::try_from(v)
                .ok()
                .and_then(|i| names.get(i))
                .map_or_else(|| v.to_string(), |n| n.to_string()),
        }
    }

    /// The valid range or set, as said in errors and in `help`.
    pub(super) fn expected(self) -> String {
        match self {
            Kind::Size { min, max } => format!(
                "a size from {} to {} (bytes, or with suffix K, M, G, T)",
                format_size(min),
                format_size(max)
            ),
            Kind::SizeChoice(choices) => {
                let list: Vec<String> = choices.iter().map(u64::to_string).collect();
                let (first, last) = (choices.first(), choices.last());
                let short = match (first, last) {
                    (Some(&a), Some(&b)) => format!(" (or {}..{})", format_size(a), format_size(b)),
                    _ => String::new(),
                };
                format!("one of {}{short}", list.join(", "))
            }
            Kind::Int { min, max, unit: "" } => format!("an integer from {min} to {max}"),
            Kind::Int { min, max, unit } => format!("an integer from {min} to {max} ({unit})"),
            Kind::Millis { min, max } => format!(
                "a duration from {} to {} (seconds, or with unit ms, s, m)",
                format_millis(min),
                format_millis(max)
            ),
            Kind::Bool => "one of on, off, true, false, 1, 0".to_string(),
            Kind::Name(names) => format!("one of {}", names.join(", ")),
        }
    }
}

/// Bytes, or a number with a K/M/G/T (KiB..TiB) suffix, case-insensitive, as my.cnf reads them.
pub(super) fn parse_size(raw: &str) -> Option<u64> {
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (digits, suffix) = raw.split_at(split);
    let number: u64 = digits.parse().ok()?;
    let multiplier = match suffix.trim().to_ascii_uppercase().as_str() {
        "" => 1,
        "K" | "KIB" => KIB,
        "M" | "MIB" => MIB,
        "G" | "GIB" => GIB,
        "T" | "TIB" => TIB,
        _ => return None,
    };
    number.checked_mul(multiplier)
}

/// The largest suffix that divides `v` exactly: 128M, 1T, 3000 (bytes).
pub fn format_size(v: u64) -> String {
    for (unit, suffix) in [(TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if v >= unit && (v / unit) * unit == v {
            return format!("{}{suffix}", v / unit);
        }
    }
    v.to_string()
}

/// Milliseconds from `50` or `1.5` (seconds), `500ms`, `2s` or `1m`.
pub(super) fn parse_millis(raw: &str) -> Option<u64> {
    let lower = raw.trim().to_ascii_lowercase();
    let (number, per_unit) = if let Some(n) = lower.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = lower.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = lower.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        (lower.as_str(), 1000.0)
    };
    let number: f64 = number.trim().parse().ok()?;
    let ms = number * per_unit;
    (ms.is_finite() && ms >= 0.0 && ms.fract() == 0.0 && ms < u64::MAX as f64).then_some(ms as u64)
}

/// `50s`, `500ms`, `1500ms`: whole seconds when exact, else milliseconds.
pub(super) fn format_millis(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

pub(super) fn parse_bool(raw: &str) -> Option<bool> {
    match raw.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Some(true),
        "off" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// Converts a field's type to and from the `u64` a [`Kind`] works with. Values reaching
/// `from_knob` have passed `Kind::accepts`, so the saturating fallbacks are never taken.
pub(super) trait KnobValue {
    fn to_knob(&self) -> u64;
    fn from_knob(v: u64) -> Self;
}

impl KnobValue for u64 {
    fn to_knob(&self) -> u64 {
        *self
    }
    fn from_knob(v: u64) -> Self {
        v
    }
}

impl KnobValue for u32 {
    fn to_knob(&self) -> u64 {
        u64::from(*self)
    }
    fn from_knob(v: u64) -> Self {
        u32::try_from(v).unwrap_or(u32::MAX)
    }
}

impl KnobValue for usize {
    fn to_knob(&self) -> u64 {
        u64::try_from(*self).unwrap_or(u64::MAX)
    }
    fn from_knob(v: u64) -> Self {
        usize::try_from(v).unwrap_or(usize::MAX)
    }
}

/// Milliseconds.
impl KnobValue for std::time::Duration {
    fn to_knob(&self) -> u64 {
        u64::try_from(self.as_millis()).unwrap_or(u64::MAX)
    }
    fn from_knob(v: u64) -> Self {
        std::time::Duration::from_millis(v)
    }
}

impl KnobValue for bool {
    fn to_knob(&self) -> u64 {
        u64::from(*self)
    }
    fn from_knob(v: u64) -> Self {
        v != 0
    }
}

/// Index into [`Isolation::NAMES`], the set its knob is declared with.
impl KnobValue for Isolation {
    fn to_knob(&self) -> u64 {
        *self as u64
    }
    fn from_knob(v: u64) -> Self {
        usize::try_from(v)
            .ok()
            .and_then(|i| Isolation::ALL.get(i).copied())
            .unwrap_or(Isolation::RepeatableRead)
    }
}

/// Index into [`FlushMethod::NAMES`], the set its knob is declared with.
impl KnobValue for FlushMethod {
    fn to_knob(&self) -> u64 {
        let index = FlushMethod::NAMES.iter().position(|n| *n == self.name());
        index.map_or(u64::MAX, |i| i as u64)
    }
    fn from_knob(v: u64) -> Self {
        usize::try_from(v)
            .ok()
            .and_then(|i| FlushMethod::NAMES.get(i))
            .and_then(|n| FlushMethod::parse(n))
            .unwrap_or_default()
    }
}

/// The page cleaner's flush policy (`adaptive_flushing`): one type from option parsing to the
/// cleaner, `Status` and the workbench. Parsed and printed by its name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlushPolicy {
    /// InnoDB 5.1: io_capacity pages past max_dirty_pages_pct, flushing at the async point.
    Fixed,
    /// InnoDB 5.5's adaptive flushing: the redo rate times dirty pages per redo byte.
    Innodb55,
    /// XtraDB's `estimate`: from the age of the oldest dirty pages.
    Estimate,
    /// XtraDB's `keep_average`: a steady share of the flush list each second.
    KeepAverage,
    /// InnoDB 5.6-8.0's adaptive flushing: pct_for_lsn and pct_for_dirty, averaged.
    Innodb80,
    /// evenkeel's own: holds the checkpoint age at a set point by feedback and feed-forward,
    /// with commit admission instead of foreground flushing.
    #[default]
    Steady,
}

impl FlushPolicy {
    /// Every policy, in the order of [`FlushPolicy::NAMES`].
    pub const ALL: [FlushPolicy; 6] = [
        FlushPolicy::Fixed,
        FlushPolicy::Innodb55,
        FlushPolicy::Estimate,
        FlushPolicy::KeepAverage,
        FlushPolicy::Innodb80,
        FlushPolicy::Steady,
    ];
    /// The names `adaptive_flushing` accepts.
    pub const NAMES: &'static [&'static str] = &[
        "fixed",
        "innodb55",
        "estimate",
        "keep_average",
        "innodb80",
        "steady",
    ];

    pub fn name(self) -> &'static str {
        match self {
            FlushPolicy::Fixed => "fixed",
            FlushPolicy::Innodb55 => "innodb55",
            FlushPolicy::Estimate => "estimate",
            FlushPolicy::KeepAverage => "keep_average",
            FlushPolicy::Innodb80 => "innodb80",
            FlushPolicy::Steady => "steady",
        }
    }

    /// The policy named `name` (case-insensitive, `-` = `_`).
    pub fn parse(name: &str) -> Option<FlushPolicy> {
        let want = name.trim().replace('-', "_");
        FlushPolicy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(&want))
    }
}

impl std::fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Index into [`FlushPolicy::NAMES`], the set its knob is declared with.
impl KnobValue for FlushPolicy {
    fn to_knob(&self) -> u64 {
        FlushPolicy::ALL
            .iter()
            .position(|p| p == self)
            .map_or(u64::MAX, |i| i as u64)
    }
    fn from_knob(v: u64) -> Self {
        usize::try_from(v)
            .ok()
            .and_then(|i| FlushPolicy::ALL.get(i).copied())
            .unwrap_or_default()
    }
}
