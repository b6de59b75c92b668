//! counter: a group of counters declared once.
//!
//! `counter_group!` takes one list of counters, each with its unit and its meaning (its doc
//! comment), and makes from it the atomic struct the engine counts in, the plain snapshot
//! struct `Status` carries, and the snapshot's [`MetricInfo`] table that `Status::metrics`,
//! `evenkeel status` and the workbench read. Adding a counter to a group is one line here and
//! the `fetch_add` that counts it.

/// How a reader treats a metric's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// Only grows while the database is open: a reader takes differences for a rate.
    Counter,
    /// A current value (an age, a percentage, a size).
    Gauge,
}

/// One metric's declaration.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct MetricInfo {
    /// Its name in `Status::metrics`, `evenkeel status --metrics` and the workbench's extras.
    pub name: &'static str,
    /// What one unit of its value is: "pages", "us", "bytes", "%", ...
    pub unit: &'static str,
    pub kind: MetricKind,
    /// One sentence: what it counts or measures.
    pub meaning: &'static str,
}

impl MetricInfo {
    /// The meaning as one line (a declaration's doc lines joined by single spaces).
    pub fn meaning_line(&self) -> String {
        self.meaning
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A counter group member's kind: `gauge` after its unit makes it a gauge (a high-water mark,
/// say), nothing a counter.
pub const fn kind_of(marks: &[&str]) -> MetricKind {
    if marks.is_empty() {
        MetricKind::Counter
    } else {
        MetricKind::Gauge
    }
}

/// `now`'s growth since `before` for a counter, `now` for a gauge.
pub const fn since(now: u64, before: u64, kind: MetricKind) -> u64 {
    match kind {
        MetricKind::Counter => now.saturating_sub(before),
        MetricKind::Gauge => now,
    }
}

/// Declares a counter group (used as `crate::counter::counter_group!`):
///
/// ```ignore
/// counter_group! {
///     /// What the group counts.
///     pub struct FlushCounters => FlushCounts {
///         /// Pages written from the flush lists by the page cleaner.
///         pages_flushed_background: "pages",
///     }
/// }
/// ```
///
/// gives `FlushCounters` (one `AtomicU64` per counter, `Default`, `snapshot()`), `FlushCounts`
/// (one `u64` per counter, `INFO`: the counters' [`MetricInfo`] in declaration order, and
/// `values()` in the same order, `since(before)`). Every counter must have a doc comment: it is
/// its meaning. A member written `name: "unit" gauge` is a gauge (a high-water mark kept in the
/// group, say): `since` keeps its value instead of a difference. `=> Snap named "log_" {`
/// prefixes the members' metric names (not their field names) where a bare name would be
/// ambiguous among all metrics.
macro_rules! counter_group {
    (
        $(#[$meta:meta])*
        $vis:vis struct $atomic:ident => $snap:ident named $prefix:literal { $($body:tt)* }
    ) => {
        $crate::counter::counter_group! { @group $prefix; $(#[$meta])* $vis struct $atomic => $snap { $($body)* } }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $atomic:ident => $snap:ident { $($body:tt)* }
    ) => {
        $crate::counter::counter_group! { @group ""; $(#[$meta])* $vis struct $atomic => $snap { $($body)* } }
    };
    (
        @group $prefix:literal;
        $(#[$meta:meta])*
        $vis:vis struct $atomic:ident => $snap:ident {
            $( $(#[doc = $doc:literal])+ $field:ident : $unit:literal $($gauge:ident)?, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $atomic {
            $( $(#[doc = $doc])+ pub $field: std::sync::atomic::AtomicU64, )*
        }

        $(#[$meta])*
        ///
        /// A snapshot of the atomic counters, taken by `snapshot()`.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
        $vis struct $snap {
            $( $(#[doc = $doc])+ pub $field: u64, )*
        }

        impl $atomic {
            /// Every counter's current value (each read on its own: relaxed, not one instant).
            pub fn snapshot(&self) -> $snap {
                $snap {
                    $( $field: self.$field.load(std::sync::atomic::Ordering::Relaxed), )*
                }
            }
        }

        impl $snap {
            /// The group's counters, in declaration order.
            pub const INFO: &'static [$crate::counter::MetricInfo] = &[
                $( $crate::counter::MetricInfo {
                    name: concat!($prefix, stringify!($field)),
                    unit: $unit,
                    kind: $crate::counter::kind_of(&[$(stringify!($gauge))?]),
                    meaning: concat!($($doc),+),
                }, )*
            ];

            /// The values, in the order of [`Self::INFO`].
            pub fn values(&self) -> Vec<u64> {
                vec![$( self.$field ),*]
            }

            /// Each counter's growth since `before` (saturating: a counter never shrinks); a
            /// gauge keeps its current value.
            pub fn since(&self, before: &Self) -> Self {
                $snap {
                    $( $field: $crate::counter::since(
                        self.$field,
                        before.$field,
                        $crate::counter::kind_of(&[$(stringify!($gauge))?]),
                    ), )*
                }
            }
        }
    };
}
pub(crate) use counter_group;

#[cfg(test)]
mod tests {
    super::counter_group! {
        /// Two counters for the test.
        pub struct TestCounters => TestCounts {
            /// Things done.
            things: "things",
            /// Time spent
            /// doing them.
            thing_us: "us",
            /// Most things at once.
            most_things: "things" gauge,
        }
    }

    #[test]
    fn a_group_declares_atomics_snapshot_and_info_from_one_list() {
        use std::sync::atomic::Ordering;
        let c = TestCounters::default();
        c.things.fetch_add(3, Ordering::Relaxed);
        c.thing_us.fetch_add(70, Ordering::Relaxed);
        c.most_things.fetch_max(5, Ordering::Relaxed);
        let before = TestCounts {
            things: 1,
            thing_us: 20,
            most_things: 4,
        };
        let now = c.snapshot();
        assert_eq!(now.values(), vec![3, 70, 5]);
        assert_eq!(now.since(&before).values(), vec![2, 50, 5]);
        let names: Vec<_> = TestCounts::INFO.iter().map(|m| m.name).collect();
        assert_eq!(names, ["things", "thing_us", "most_things"]);
        assert_eq!(TestCounts::INFO[1].unit, "us");
        assert_eq!(TestCounts::INFO[0].kind, super::MetricKind::Counter);
        assert_eq!(TestCounts::INFO[2].kind, super::MetricKind::Gauge);
        assert_eq!(TestCounts::INFO[1].meaning_line(), "Time spent doing them.");
    }
}
