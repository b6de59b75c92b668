//! Line charts as inline SVG, written by hand (no plotting dependency): a frame, "nice" ticks on
//! the x axis and on one or two y axes, one polyline per series, and a legend. Reference lines
//! are drawn in grey with their label: horizontal ones for thresholds (the checkpoint's async
//! and sync points) and vertical ones for moments (a `--at` schedule changing an option); the
//! axes always take them in, so a threshold the data never reaches is still on the chart.
//! Shaded bands mark spans of the x axis (the warm-up, which is not measured), labelled inside
//! the band. Colours are the Okabe-Ito palette, which red-green colour-blind readers can tell
//! apart (readers of the iibench posts asked for it), and series past the first alternate dash patterns
//! as a second cue. A chart without data says so instead of drawing empty axes.
//!
//! Layout rules every chart keeps: the plot area has the same left and right margins whether
//! or not the chart has a right-hand axis, so charts stacked on a page share their x range on
//! screen; the x axis ends at the last x of the data (the end of the run), not at the next
//! round tick; the legend wraps onto as many rows as it needs within the chart's width, and
//! the chart grows taller by those rows.

use std::fmt::Write as _;

/// Okabe-Ito colours, most distinct first.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

const DASHES: [&str; 4] = ["", "6 3", "2 2", "8 3 2 3"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Left,
    Right,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub axis: Axis,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            axis: Axis::Left,
        }
    }
    pub fn right(mut self) -> Self {
        self.axis = Axis::Right;
        self
    }
}

/// A labelled, shaded span of the x axis from `from` to `to`.
#[derive(Debug, Clone)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub label: String,
}

/// A labelled reference line: horizontal at `at` on `axis`, or vertical at x = `at`.
#[derive(Debug, Clone)]
pub struct RefLine {
    pub at: f64,
    pub label: String,
    pub axis: Axis,
}

#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub y2_label: Option<String>,
    pub series: Vec<Series>,
    pub hlines: Vec<RefLine>,
    pub vlines: Vec<RefLine>,
    pub bands: Vec<Band>,
    /// The x axis' end when the caller fixes it (the run's last second, shared by every chart
    /// of a run); otherwise the last x of the data, lines and bands.
    pub x_end: Option<f64>,
    pub width: f64,
    /// Height with a one-row legend; each further legend row adds `LEGEND_ROW`.
    pub height: f64,
}

/// Margins around the plot area: left and right (room for either y axis' ticks and label,
/// the same on every chart), top (the title), bottom (x ticks, x label and one legend row).
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 70.0;
const MARGIN_TOP: f64 = 30.0;
const MARGIN_BOTTOM: f64 = 70.0;
/// Height of one legend row.
pub const LEGEND_ROW: f64 = 16.0;
/// The legend's swatch, and the gap between an entry's text and the next swatch.
const SWATCH: f64 = 24.0;
const ENTRY_GAP: f64 = 14.0;

/// A generous estimate of the width of `text` at the charts' 11 px sans-serif, so that a
/// legend laid out with it fits when a browser draws it (checked in headless Chromium by the
/// tests).
pub fn text_width(text: &str) -> f64 {
    text.chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | '(' | ')' | '[' | ']'
            | ' ' | 'f' | 't' | 'r' | 'I' | '/' => 3.8,
            'm' | 'w' | 'M' | 'W' | '%' | '@' => 10.0,
            c if c.is_ascii_uppercase() || c.is_ascii_digit() => 7.6,
            _ => 6.6,
        })
        .sum()
}

/// Where each legend entry goes: (x, row) for entries of the given text widths, wrapping
/// within `[left, right]`.
fn legend_layout(widths: &[f64], left: f64, right: f64) -> Vec<(f64, usize)> {
    let mut out = Vec::with_capacity(widths.len());
    let (mut x, mut row) = (left, 0usize);
    for &w in widths {
        let need = SWATCH + w;
        if x > left && x + need > right {
            x = left;
            row += 1;
        }
        out.push((x, row));
        x += need + ENTRY_GAP;
    }
    out
}

/// Escape text for XML content and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A step of 1, 2 or 5 times a power of ten giving about `n` ticks over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// The x axis: from 0 (or the lowest x when negative) to the highest x exactly, and a tick
/// step; ticks are drawn at whole steps up to the end.
fn x_range(vals: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let (mut lo, mut hi) = (0.0f64, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi, nice_step(hi - lo, 8.0))
}

/// Axis range from data: starts at 0 for non-negative data, rounded out to whole steps.
fn range(vals: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0, 0.2);
    }
    lo = lo.min(0.0);
    if hi <= lo {
        hi = lo + 1.0;
    }
    let step = nice_step(hi - lo, 5.0);
    ((lo / step).floor() * step, (hi / step).ceil() * step, step)
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        let t = format!("{v:.2}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl Chart {
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            y2_label: None,
            series: Vec::new(),
            hlines: Vec::new(),
            vlines: Vec::new(),
            bands: Vec::new(),
            x_end: None,
            width: 860.0,
            height: 320.0,
        }
    }

    pub fn with(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    /// A horizontal reference line at `y` on `axis`.
    pub fn hline(mut self, y: f64, axis: Axis, label: impl Into<String>) -> Self {
        self.hlines.push(RefLine {
            at: y,
            label: label.into(),
            axis,
        });
        self
    }

    /// A vertical marker at `x`.
    pub fn vline(mut self, x: f64, label: impl Into<String>) -> Self {
        self.vlines.push(RefLine {
            at: x,
            label: label.into(),
            axis: Axis::Left,
        });
        self
    }

    /// A shaded span of the x axis from `from` to `to`, labelled inside.
    pub fn band(mut self, from: f64, to: f64, label: impl Into<String>) -> Self {
        self.bands.push(Band {
            from,
            to,
            label: label.into(),
        });
        self
    }

    /// Ends the x axis at `x`; points past it are left out.
    pub fn x_end(mut self, x: f64) -> Self {
        self.x_end = Some(x);
        self
    }

    pub fn y2(mut self, label: &str) -> Self {
        self.y2_label = Some(label.into());
        self
    }

    fn has_data(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }

    /// The legend's entries: label text, with the right axis and a missing series said.
    fn legend_labels(&self) -> Vec<String> {
        self.series
            .iter()
            .map(|s| {
                let mut label = if s.axis == Axis::Right {
                    format!("{} (right axis)", s.name)
                } else {
                    s.name.clone()
                };
                if s.points.is_empty() {
                    label.push_str(": no data");
                }
                label
            })
            .collect()
    }

    /// The chart as an `<svg>` element.
    pub fn render(&self) -> String {
        let w = self.width;
        let (l, r, t, b) = (MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM);
        let (pw, ph) = (w - l - r, self.height - t - b);
        let labels = self.legend_labels();
        let widths: Vec<f64> = labels.iter().map(|s| text_width(s)).collect();
        let legend = legend_layout(&widths, l, w - 10.0);
        let rows = legend.last().map_or(1, |&(_, row)| row + 1);
        let h = self.height + LEGEND_ROW * (rows - 1) as f64;
        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11"><title>{}</title>"#,
            esc(&self.title)
        );
        let _ = write!(
            o,
            r#"<text x="{}" y="18" font-size="14" font-weight="bold">{}</text>"#,
            l,
            esc(&self.title)
        );
        if !self.has_data() {
            let _ = write!(
                o,
                r##"<rect class="plot" x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="#888"/><text x="{}" y="{}" text-anchor="middle" fill="#666">no data: not exposed by this engine</text></svg>"##,
                l + pw / 2.0,
                t + ph / 2.0
            );
            return o;
        }
        let all = || self.series.iter().flat_map(|s| s.points.iter());
        let (x0, x1, xs) = match self.x_end {
            Some(end) => x_range(all().map(|p| p.0.min(end)).chain([end])),
            None => x_range(
                all()
                    .map(|p| p.0)
                    .chain(self.vlines.iter().map(|v| v.at))
                    .chain(self.bands.iter().flat_map(|b| [b.from, b.to])),
            ),
        };
        let side = |a: Axis| {
            range(
                self.series
                    .iter()
                    .filter(|s| s.axis == a)
                    .flat_map(|s| s.points.iter().map(|p| p.1))
                    .chain(self.hlines.iter().filter(|h| h.axis == a).map(|h| h.at)),
            )
        };
        let (y0, y1, ys) = side(Axis::Left);
        let (z0, z1, zs) = side(Axis::Right);
        let px = |x: f64| l + (x - x0) / (x1 - x0) * pw;
        let py = |y: f64, lo: f64, hi: f64| t + ph - (y - lo) / (hi - lo) * ph;
        // Bands under everything else, their label at the band's top left.
        for band in &self.bands {
            let (bx0, bx1) = (px(band.from.max(x0)), px(band.to.min(x1)));
            let _ = write!(
                o,
                r##"<rect class="band" x="{bx0:.1}" y="{t}" width="{:.1}" height="{ph}" fill="#e6e6e6"/><text class="band-label" x="{:.1}" y="{}" fill="#555">{}</text>"##,
                (bx1 - bx0).max(0.0),
                bx0 + 3.0,
                t + ph - 6.0,
                esc(&band.label)
            );
        }
        let _ = write!(
            o,
            r##"<rect class="plot" x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
        );
        // Grid and ticks.
        let mut x = (x0 / xs).ceil() * xs;
        while x <= x1 + xs * 1e-9 {
            let _ = write!(
                o,
                r##"<line x1="{0:.1}" y1="{t}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
                px(x),
                t + ph,
                t + ph + 14.0,
                fmt_tick(x)
            );
            x += xs;
        }
        let mut y = y0;
        while y <= y1 + ys / 2.0 {
            let _ = write!(
                o,
                r##"<line x1="{l}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#eee"/><text x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"##,
                py(y, y0, y1),
                l + pw,
                l - 4.0,
                py(y, y0, y1) + 4.0,
                fmt_tick(y)
            );
            y += ys;
        }
        if let Some(y2) = &self.y2_label {
            let mut z = z0;
            while z <= z1 + zs / 2.0 {
                let _ = write!(
                    o,
                    r#"<text x="{}" y="{:.1}">{}</text>"#,
                    l + pw + 4.0,
                    py(z, z0, z1) + 4.0,
                    fmt_tick(z)
                );
                z += zs;
            }
            let _ = write!(
                o,
                r#"<text transform="translate({},{}) rotate(90)" text-anchor="middle">{}</text>"#,
                w - 12.0,
                t + ph / 2.0,
                esc(y2)
            );
        }
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            l + pw / 2.0,
            t + ph + 30.0,
            esc(&self.x_label)
        );
        let _ = write!(
            o,
            r#"<text transform="translate(14,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            t + ph / 2.0,
            esc(&self.y_label)
        );
        // Reference lines under the series.
        for hl in &self.hlines {
            let y = if hl.axis == Axis::Left {
                py(hl.at, y0, y1)
            } else {
                py(hl.at, z0, z1)
            };
            let _ = write!(
                o,
                r##"<line class="ref" x1="{l}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#666" stroke-dasharray="5 4"/><text x="{}" y="{:.1}" text-anchor="end" fill="#444">{}</text>"##,
                l + pw,
                l + pw - 4.0,
                y - 3.0,
                esc(&hl.label)
            );
        }
        for (i, v) in self.vlines.iter().enumerate() {
            let x = px(v.at);
            // A label that would run past the plot's right edge ends at the line instead.
            let (tx, anchor) = if x + 3.0 + text_width(&v.label) > l + pw {
                (x - 3.0, "end")
            } else {
                (x + 3.0, "start")
            };
            let _ = write!(
                o,
                r##"<line class="marker" x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{}" stroke="#666" stroke-dasharray="3 3"/><text x="{tx:.1}" y="{}" text-anchor="{anchor}" fill="#444">{}</text>"##,
                t + ph,
                t + 12.0 + 12.0 * (i % 4) as f64,
                esc(&v.label)
            );
        }
        // Series, then the legend in rows below the x label.
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let dash = DASHES[i % DASHES.len()];
            let (lo, hi) = if s.axis == Axis::Left {
                (y0, y1)
            } else {
                (z0, z1)
            };
            let pts: Vec<String> = s
                .points
                .iter()
                .filter(|p| p.0 <= x1)
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y, lo, hi)))
                .collect();
            let _ = write!(
                o,
                r#"<polyline class="series" fill="none" stroke="{color}" stroke-width="1.5" stroke-dasharray="{dash}" points="{}"><title>{}</title></polyline>"#,
                pts.join(" "),
                esc(&s.name)
            );
        }
        for (i, (label, &(lx, row))) in labels.iter().zip(&legend).enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let dash = DASHES[i % DASHES.len()];
            let ly = self.height - 18.0 + LEGEND_ROW * row as f64;
            let _ = write!(
                o,
                r#"<g class="legend"><line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{}" y="{}">{}</text></g>"#,
                lx + 20.0,
                lx + SWATCH,
                ly + 4.0,
                esc(label)
            );
        }
        o.push_str("</svg>");
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(7.0, 5.0), 2.0);
        assert_eq!(range([3.0, 97.0].into_iter()), (0.0, 100.0, 20.0));
    }

    #[test]
    fn reference_lines_widen_the_axes() {
        let c = Chart::new("t", "x", "y")
            .with(Series::new("s", vec![(0.0, 1.0), (10.0, 2.0)]))
            .hline(94.0, Axis::Left, "sync point")
            .vline(20.0, "set a=b");
        let svg = c.render();
        assert!(svg.contains("sync point") && svg.contains("set a=b"));
        assert!(svg.contains(">100<"), "y axis reaches the line: {svg}");
        assert!(svg.contains(">20<"), "x axis reaches the marker");
    }

    #[test]
    fn empty_chart_says_so() {
        let s = Chart::new("t", "x", "y").render();
        assert!(s.contains("no data"));
        assert!(!s.contains("polyline"));
    }

    /// The x of the last point of the first polyline.
    fn last_x(svg: &str) -> f64 {
        let pts = svg.split("points=\"").nth(1).expect("a polyline");
        let pts = &pts[..pts.find('"').expect("closed")];
        let last = pts.split_whitespace().last().expect("points");
        last.split(',').next().expect("x").parse().expect("number")
    }

    #[test]
    fn the_x_axis_ends_with_the_data_or_the_given_end() {
        let pts: Vec<(f64, f64)> = (1..=130).map(|t| (t as f64, 1.0)).collect();
        let svg = Chart::new("t", "x", "y")
            .with(Series::new("s", pts.clone()))
            .render();
        assert_eq!(
            last_x(&svg),
            MARGIN_LEFT + 860.0 - MARGIN_LEFT - MARGIN_RIGHT
        );
        assert!(
            svg.contains(">120<") && !svg.contains(">140<"),
            "no tick past the end"
        );
        let svg = Chart::new("t", "x", "y")
            .with(Series::new("s", pts))
            .x_end(135.0)
            .render();
        let pw = 860.0 - MARGIN_LEFT - MARGIN_RIGHT;
        assert!((last_x(&svg) - (MARGIN_LEFT + 130.0 / 135.0 * pw)).abs() < 0.06);
        let short: Vec<(f64, f64)> = (1..=10).map(|t| (t as f64, 1.0)).collect();
        let svg = Chart::new("t", "x", "y")
            .with(Series::new("s", short))
            .x_end(5.0)
            .render();
        assert!(
            last_x(&svg) <= MARGIN_LEFT + pw,
            "points past the end left out"
        );
    }

    #[test]
    fn legends_wrap_and_the_chart_grows_by_their_rows() {
        let one = Chart::new("t", "x", "y")
            .with(Series::new("a", vec![(0.0, 1.0), (1.0, 2.0)]))
            .render();
        assert!(one.contains(r#"height="320""#));
        let mut c = Chart::new("t", "x", "y");
        for i in 0..8 {
            c = c.with(Series::new(
                format!("a rather long series name number {i}"),
                vec![(0.0, 1.0), (1.0, 2.0)],
            ));
        }
        let svg = c.render();
        let labels = c.legend_labels();
        let widths: Vec<f64> = labels.iter().map(|l| text_width(l)).collect();
        let layout = legend_layout(&widths, MARGIN_LEFT, 850.0);
        let rows = layout.last().expect("entries").1 + 1;
        assert!(rows >= 3, "{rows} rows");
        for (&(x, _), w) in layout.iter().zip(&widths) {
            assert!(x + SWATCH + w <= 850.0, "entry inside the chart");
        }
        let h = 320.0 + LEGEND_ROW * (rows - 1) as f64;
        assert!(svg.contains(&format!(r#"height="{h}""#)), "grows to {h}");
    }

    #[test]
    fn a_right_axis_keeps_the_plot_area() {
        let plot = |svg: &str| {
            let at = svg.find(r#"class="plot""#).expect("plot rect");
            svg[at..at + 80].to_string()
        };
        let s = || Series::new("s", vec![(0.0, 1.0), (10.0, 2.0)]);
        let left = Chart::new("t", "x", "y").with(s()).render();
        let both = Chart::new("t", "x", "y")
            .y2("z")
            .with(s())
            .with(s().right())
            .render();
        assert_eq!(plot(&left), plot(&both));
    }
}
