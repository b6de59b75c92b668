//! `declare_metrics!`: turns the one table of metrics in `metrics/mod.rs` into the live
//! [`Metrics`](super::Metrics) (one atomic cell per row), the plain
//! [`MetricsSnapshot`](super::MetricsSnapshot) and the descriptor list.
//!
//! What must stay true: every row appears, in table order, in the struct fields, the snapshot,
//! `MetricsSnapshot::iter` and `Metrics::DESCRIPTORS`; nothing about a metric is written twice.

/// Rows are `/// doc` then `name: Counter|Gauge, "unit";`.
macro_rules! declare_metrics {
    ($( $(#[doc = $doc:literal])+ $name:ident : $kind:ident, $unit:literal; )+) => {
        /// The engine's live counters and gauges; share it behind an `Arc` and update cells
        /// directly: `metrics.pages_read.inc(1)`, `metrics.pages_dirty.set(n)`.
        #[derive(Debug, Default)]
        pub struct Metrics {
            $( $(#[doc = $doc])+ pub $name: $kind, )+
        }

        /// Every metric's value at one moment, or (from [`MetricsSnapshot::delta`]) over one
        /// interval.
        #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
        pub struct MetricsSnapshot {
            $( $(#[doc = $doc])+ pub $name: u64, )+
        }

        impl Metrics {
            /// Name, unit, kind and doc of every metric, in table order.
            pub const DESCRIPTORS: &'static [MetricDesc] = &[ $(
                MetricDesc {
                    name: stringify!($name),
                    unit: $unit,
                    kind: <$kind as Metric>::KIND,
                    doc: concat!($($doc),+),
                },
            )+ ];

            /// Reads every cell. Cells are read one by one, so a snapshot taken while the engine
            /// runs is not atomic across metrics (good enough for per-second sampling).
            pub fn snapshot(&self) -> MetricsSnapshot {
                MetricsSnapshot { $( $name: Metric::get(&self.$name), )+ }
            }
        }

        impl MetricsSnapshot {
            /// `(name, unit, value)` for every metric, in table order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, &'static str, u64)> {
                [ $( (stringify!($name), $unit, self.$name), )+ ].into_iter()
            }

            /// Counters become `self - earlier` (the amount in the interval: a per-second rate
            /// when snapshots are a second apart); gauges keep `self`'s value.
            pub fn delta(&self, earlier: &Self) -> Self {
                MetricsSnapshot { $( $name: <$kind as Metric>::delta(self.$name, earlier.$name), )+ }
            }
        }
    };
}

pub(super) use declare_metrics;
