//! Benchmark reports as a self-contained HTML page with inline SVG charts (no scripts, no
//! external files): the machine, bar charts with their values and targets drawn as lines,
//! and line charts of a value over a sequence (commit latency over blocks).

use std::fmt::Write as _;

/// One bar.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Its label.
    pub label: String,
    /// Its value.
    pub value: f64,
}

/// A horizontal bar chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above it.
    pub title: String,
    /// Unit of the values (shown after each).
    pub unit: String,
    /// The bars, top to bottom.
    pub bars: Vec<Bar>,
    /// A target value drawn as a vertical line (e.g. a ratio bound), if any.
    pub target: Option<f64>,
}

/// A line chart: one or more series over the same x axis.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Title above it.
    pub title: String,
    /// What x counts (`block`).
    pub x_label: String,
    /// Unit of the values.
    pub unit: String,
    /// Named series of (x, y) points, x increasing.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// A target value drawn as a horizontal line, if any.
    pub target: Option<f64>,
}

/// One figure of a page.
#[derive(Debug, Clone)]
pub enum Figure {
    /// Horizontal bars.
    Bars(Chart),
    /// Lines.
    Lines(LineChart),
}

impl Figure {
    fn title(&self) -> &str {
        match self {
            Figure::Bars(c) => &c.title,
            Figure::Lines(c) => &c.title,
        }
    }

    fn svg(&self) -> String {
        match self {
            Figure::Bars(c) => svg(c),
            Figure::Lines(c) => line_svg(c),
        }
    }
}

/// Colours of successive series.
const PALETTE: [&str; 6] = ["#4a7ab5", "#d98c2b", "#3c9a5f", "#8e5ea2", "#b5494a", "#5f6b73"];

// A line chart's plot area on its page, in pixels.
/// Its left edge (the y labels are to its left).
const LEFT: f64 = 70.0;
/// Its top edge.
const TOP: f64 = 10.0;
/// Its width.
const PLOT_W: f64 = 600.0;
/// Its height (the x labels and the legend are below it).
const PLOT_H: f64 = 260.0;

/// A line chart's scale: the extremes of its finite points (the target counts towards the
/// top; y starts at 0), mapped onto the plot area.
struct Plot {
    x_min: f64,
    x_max: f64,
    y_max: f64,
}

impl Plot {
    fn of(chart: &LineChart) -> Plot {
        let points = chart
            .series
            .iter()
            .flat_map(|(_, p)| p.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite());
        let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in points {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        if let Some(t) = chart.target.filter(|t| t.is_finite()) {
            y_max = y_max.max(t);
        }
        if !x_min.is_finite() {
            (x_min, x_max) = (0.0, 1.0);
        }
        Plot { x_min, x_max, y_max: y_max.max(f64::MIN_POSITIVE) }
    }

    /// The pixel column of `x`.
    fn px(&self, x: f64) -> f64 {
        let x_span = (self.x_max - self.x_min).max(f64::MIN_POSITIVE);
        LEFT + (x - self.x_min) / x_span * PLOT_W
    }

    /// The pixel row of `y`.
    fn py(&self, y: f64) -> f64 {
        TOP + PLOT_H - y / self.y_max * PLOT_H
    }
}

/// The SVG of a line chart: axes with their extremes, a polyline per series, a legend.
pub fn line_svg(chart: &LineChart) -> String {
    let plot = Plot::of(chart);
    let legend_h = 18.0 * chart.series.len() as f64;
    let (width, height) = (LEFT + PLOT_W + 20.0, TOP + PLOT_H + 40.0 + legend_h);
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12"><rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#999"/>"##
    );
    let _ = write!(
        out,
        r#"<text x="{lx}" y="{ty}" text-anchor="end">{top} {unit}</text><text x="{lx}" y="{by}" text-anchor="end">0</text><text x="{LEFT}" y="{xl}">{x0}</text><text x="{xr}" y="{xl}" text-anchor="end">{x1} ({xlabel})</text>"#,
        lx = LEFT - 6.0,
        ty = TOP + 10.0,
        top = format_value(plot.y_max),
        unit = escape(&chart.unit),
        by = TOP + PLOT_H,
        xl = TOP + PLOT_H + 16.0,
        x0 = format_axis(plot.x_min),
        xr = LEFT + PLOT_W,
        x1 = format_axis(plot.x_max),
        xlabel = escape(&chart.x_label),
    );
    for (i, (name, pts)) in chart.series.iter().enumerate() {
        series_svg(&mut out, &plot, i, name, pts);
    }
    if let Some(t) = chart.target.filter(|t| t.is_finite()) {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#c0392b" stroke-dasharray="4 3"/><text x="{tx}" y="{ty:.1}" fill="#c0392b" text-anchor="end">target {t}</text>"##,
            y = plot.py(t),
            x2 = LEFT + PLOT_W,
            tx = LEFT + PLOT_W - 4.0,
            // Below the line when it runs along the top edge.
            ty = if plot.py(t) < TOP + 14.0 { plot.py(t) + 14.0 } else { plot.py(t) - 4.0 },
            t = format_value(t),
        );
    }
    out.push_str("</svg>");
    out
}

/// Series `i` of a line chart: its polyline and its legend entry.
fn series_svg(out: &mut String, plot: &Plot, i: usize, name: &str, pts: &[(f64, f64)]) {
    let colour = PALETTE[i % PALETTE.len()];
    let coords: Vec<String> = pts
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|&(x, y)| format!("{:.1},{:.1}", plot.px(x), plot.py(y)))
        .collect();
    let _ = write!(
        out,
        r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
        coords.join(" ")
    );
    let ly = TOP + PLOT_H + 34.0 + 18.0 * i as f64;
    let _ = write!(
        out,
        r#"<rect x="{LEFT}" y="{ry}" width="14" height="10" fill="{colour}"/><text x="{tx}" y="{ly}">{name}</text>"#,
        ry = ly - 9.0,
        tx = LEFT + 20.0,
        name = escape(name),
    );
}

/// At most `max` points of `values` (indexed from 1): consecutive equal buckets averaged,
/// each at its bucket's last index; (x, y) pairs for a [`LineChart`].
pub fn downsample(values: &[f64], max: usize) -> Vec<(f64, f64)> {
    let per = values.len().div_ceil(max.max(1)).max(1);
    values
        .chunks(per)
        .enumerate()
        .map(|(i, c)| ((i * per + c.len()) as f64, c.iter().sum::<f64>() / c.len() as f64))
        .collect()
}

/// The machine line of a page.
pub fn machine_line(m: &crate::common::machine::MachineInfo) -> String {
    format!(
        "{} ({} logical cores), {}, opt-level {}, {}",
        m.cpu_model, m.logical_cores, m.rustc, m.opt_level, m.target
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The SVG of one chart.
pub fn svg(chart: &Chart) -> String {
    const LABEL_W: f64 = 260.0;
    const BAR_W: f64 = 420.0;
    const ROW_H: f64 = 26.0;
    let max = chart
        .bars
        .iter()
        .map(|b| b.value)
        .chain(chart.target)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let height = ROW_H * chart.bars.len() as f64 + 16.0;
    let width = LABEL_W + BAR_W + 140.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">"#
    );
    for (i, b) in chart.bars.iter().enumerate() {
        let y = 8.0 + ROW_H * i as f64;
        let w = if b.value.is_finite() { (b.value / max * BAR_W).max(1.0) } else { 1.0 };
        let _ = write!(
            out,
            r##"<text x="{lx}" y="{ty}" text-anchor="end">{label}</text><rect x="{LABEL_W}" y="{y}" width="{w:.1}" height="{bh}" fill="#4a7ab5"/><text x="{vx:.1}" y="{ty}">{value} {unit}</text>"##,
            lx = LABEL_W - 8.0,
            ty = y + 15.0,
            label = escape(&b.label),
            bh = ROW_H - 8.0,
            vx = LABEL_W + w + 6.0,
            value = format_value(b.value),
            unit = escape(&chart.unit),
        );
    }
    if let Some(t) = chart.target.filter(|t| t.is_finite()) {
        let x = LABEL_W + t / max * BAR_W;
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="2" x2="{x:.1}" y2="{y2}" stroke="#c0392b" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{y2}" fill="#c0392b">target {t}</text>"##,
            y2 = height - 2.0,
            tx = x + 4.0,
            t = format_value(t),
        );
    }
    out.push_str("</svg>");
    out
}

/// An axis extreme: whole numbers without decimals.
fn format_axis(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format_value(v)
    }
}

fn format_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The whole page: a title, the machine line, free text, then the bar charts.
pub fn page(title: &str, machine: &str, notes: &[String], charts: &[Chart]) -> String {
    let figures: Vec<Figure> = charts.iter().cloned().map(Figure::Bars).collect();
    figure_page(title, machine, notes, &figures)
}

/// The whole page: a title, the machine line, free text, then the figures.
pub fn figure_page(title: &str, machine: &str, notes: &[String], figures: &[Figure]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title></head><body style=\"font-family:sans-serif;max-width:900px\">\n<h1>{t}</h1>\n<p>{m}</p>\n",
        t = escape(title),
        m = escape(machine)
    );
    for n in notes {
        let _ = writeln!(out, "<p>{}</p>", escape(n));
    }
    for f in figures {
        let _ = writeln!(out, "<h2>{}</h2>\n{}", escape(f.title()), f.svg());
    }
    out.push_str("</body></html>\n");
    out
}

/// A labelled bar.
pub(crate) fn bar(label: impl Into<String>, value: f64) -> Bar {
    Bar { label: label.into(), value }
}

/// A bar chart as a figure (`target`: a line across it).
pub(crate) fn bars(title: String, unit: &str, bars: Vec<Bar>, target: Option<f64>) -> Figure {
    Figure::Bars(Chart { title, unit: unit.into(), bars, target })
}

/// How a report says whether a target was met.
pub(crate) fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "not met"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_is_balanced_and_escaped() {
        let c = Chart {
            title: "t".into(),
            unit: "s".into(),
            bars: vec![
                Bar { label: "a<b".into(), value: 1.5 },
                Bar { label: "c".into(), value: f64::NAN },
            ],
            target: Some(1.2),
        };
        let s = svg(&c);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("a&lt;b") && !s.contains("a<b"));
        assert_eq!(s.matches("<rect").count(), 2);
        assert!(s.contains("target 1.20"));
    }

    #[test]
    fn lines_and_downsampling() {
        let values: Vec<f64> = (1..=2500).map(f64::from).collect();
        let d = downsample(&values, 1000);
        assert_eq!(d.len(), 834, "buckets of 3");
        assert_eq!(d[0], (3.0, 2.0));
        assert_eq!(d.last().copied(), Some((2500.0, 2500.0)));
        assert_eq!(downsample(&[5.0], 1000), vec![(1.0, 5.0)]);
        assert!(downsample(&[], 10).is_empty());
        let c = LineChart {
            title: "t".into(),
            x_label: "block".into(),
            unit: "ms".into(),
            series: vec![("a&b".into(), d), ("empty".into(), vec![])],
            target: Some(100.0),
        };
        let s = line_svg(&c);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("a&amp;b") && s.contains("target 100"));
    }

    #[test]
    fn line_chart_of_no_points_is_still_an_svg() {
        let c = LineChart {
            title: "t".into(),
            x_label: "block".into(),
            unit: "ms".into(),
            series: vec![],
            target: None,
        };
        let s = line_svg(&c);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
    }
}
