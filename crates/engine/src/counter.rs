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

/// A counter group member's kind: `gauge` among the marks after its unit makes it a gauge (a
/// high-water mark, say), else it is a counter.
pub const fn kind_of(marks: &[&str]) -> MetricKind {
    const fn is_gauge(m: &[u8]) -> bool {
        let g = b"gauge";
        if m.len() != g.len() {
            return false;
        }
        let mut i = 0;
        while i < g.len() {
            if m[i] != g[i] {
                return false;
            }
            i += 1;
        }
        true
    }
    let mut i = 0;
    while i < marks.len() {
        if is_gauge(marks[i].as_bytes()) {
            return MetricKind::Gauge;
        }
        i += 1;
    }
    MetricKind::Counter
}

/// Stripes of a [`Hot`] counter: more than the threads that bump one at once on the machines
/// we run on, few enough that a read (one load per stripe) stays cheap.
const STRIPES: usize = 16;

/// This thread's stripe: threads take stripes in turn as they first count, so up to
/// [`STRIPES`] threads never share one.
pub fn stripe() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    MINE.with(|m| {
        let s = m.get();
        if s != usize::MAX {
            return s;
        }
        let s = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
        m.set(s);
        s
    })
}

/// A counter bumped on every point read by every thread (page requests, hits, views opened):
/// one cache line per stripe, a thread bumps its own ([`stripe`]), a read sums them. One
/// shared `AtomicU64` there cost a cache-line transfer between cores on every bump, and with
/// a dozen of them on a get's path two threads did no more gets than one (docs/measurements.md,
/// "Point gets on two threads"). The same calls as `AtomicU64` for what counters do; a value
/// that goes up and down (a gauge of things open) sums right, since each stripe wraps.
#[derive(Default)]
pub struct Hot {
    cells: [crossbeam::utils::CachePadded<std::sync::atomic::AtomicU64>; STRIPES],
}

impl Hot {
    pub fn fetch_add(&self, n: u64, order: std::sync::atomic::Ordering) {
        self.cells[stripe()].fetch_add(n, order);
    }
    pub fn fetch_sub(&self, n: u64, order: std::sync::atomic::Ordering) {
        self.cells[stripe()].fetch_sub(n, order);
    }
    /// The sum of the stripes (each read on its own: not one instant).
    pub fn load(&self, order: std::sync::atomic::Ordering) -> u64 {
        self.cells
            .iter()
            .fold(0u64, |sum, c| sum.wrapping_add(c.load(order)))
    }
}

impl std::fmt::Debug for Hot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// The atomic type of a counter group member, by its marks: [`Hot`] when `hot` is one.
macro_rules! cell_type {
    () => {
        std::sync::atomic::AtomicU64
    };
    (gauge) => {
        std::sync::atomic::AtomicU64
    };
    (hot) => {
        $crate::counter::Hot
    };
    (gauge hot) => {
        $crate::counter::Hot
    };
}
pub(crate) use cell_type;

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
/// group, say): `since` keeps its value instead of a difference. One marked `hot` (after
/// `gauge`, if both) is a [`Hot`] counter, for those every thread bumps on every point read. `=> Snap named "log_" {`
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
            $( $(#[doc = $doc:literal])+ $field:ident : $unit:literal $($mark:ident)*, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $atomic {
            $( $(#[doc = $doc])+ pub $field: $crate::counter::cell_type!($($mark)*), )*
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
                    kind: $crate::counter::kind_of(&[$(stringify!($mark)),*]),
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
                        $crate::counter::kind_of(&[$(stringify!($mark)),*]),
                    ), )*
                }
            }
        }
    };
}
pub(crate) use counter_group;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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
            /// Things looked at, by every thread.
            looks: "things" hot,
            /// Things open now.
            open_things: "things" gauge hot,
        }
    }

    #[test]
    fn a_group_declares_atomics_snapshot_and_info_from_one_list() {
        use std::sync::atomic::Ordering;
        let c = TestCounters::default();
        c.things.fetch_add(3, Ordering::Relaxed);
        c.thing_us.fetch_add(70, Ordering::Relaxed);
        c.most_things.fetch_max(5, Ordering::Relaxed);
        c.looks.fetch_add(4, Ordering::Relaxed);
        c.open_things.fetch_add(2, Ordering::Relaxed);
        let before = TestCounts {
            things: 1,
            thing_us: 20,
            most_things: 4,
            looks: 1,
            open_things: 9,
        };
        let now = c.snapshot();
        assert_eq!(now.values(), vec![3, 70, 5, 4, 2]);
        assert_eq!(now.since(&before).values(), vec![2, 50, 5, 3, 2]);
        let names: Vec<_> = TestCounts::INFO.iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            ["things", "thing_us", "most_things", "looks", "open_things"]
        );
        assert_eq!(TestCounts::INFO[1].unit, "us");
        assert_eq!(TestCounts::INFO[0].kind, super::MetricKind::Counter);
        assert_eq!(TestCounts::INFO[2].kind, super::MetricKind::Gauge);
        assert_eq!(TestCounts::INFO[3].kind, super::MetricKind::Counter);
        assert_eq!(TestCounts::INFO[4].kind, super::MetricKind::Gauge);
        assert_eq!(TestCounts::INFO[1].meaning_line(), "Time spent doing them.");
    }

    #[test]
    fn a_hot_counter_sums_what_every_thread_counted() {
        use std::sync::atomic::Ordering;
        let c = super::Hot::default();
        std::thread::scope(|s| {
            for _ in 0..40 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.fetch_add(3, Ordering::Relaxed);
                    }
                    c.fetch_sub(1000, Ordering::Relaxed);
                });
            }
        });
        // 40 threads over 16 stripes: some share one, and nothing is lost
        assert_eq!(c.load(Ordering::Relaxed), 40 * 2000);
        // a gauge that one thread raises and another lowers
        let g = super::Hot::default();
        std::thread::scope(|s| {
            s.spawn(|| g.fetch_add(5, Ordering::Relaxed))
                .join()
                .unwrap();
            s.spawn(|| g.fetch_sub(2, Ordering::Relaxed))
                .join()
                .unwrap();
        });
        assert_eq!(g.load(Ordering::Relaxed), 3);
    }
}
