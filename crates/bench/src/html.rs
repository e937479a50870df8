//! Benchmark reports as a self-contained HTML page with inline SVG bar charts (no
//! scripts, no external files): the machine, each chart's bars with their values, and the
//! targets drawn as lines.

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

fn format_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The whole page: a title, the machine line, free text, then the charts.
pub fn page(title: &str, machine: &str, notes: &[String], charts: &[Chart]) -> String {
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
    for c in charts {
        let _ = writeln!(out, "<h2>{}</h2>\n{}", escape(&c.title), svg(c));
    }
    out.push_str("</body></html>\n");
    out
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
}
