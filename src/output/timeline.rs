//! `bench-alloc --timeline FILE.svg`: allocated and reserved bytes over the replay, with the
//! recording allocator's own reserved curve for a trace, the usable limit and the peak marked.

use std::fmt::Write as _;

use super::bench::BenchReport;
use super::escape::xml_text;
use super::thousands;
use crate::units::format_bytes;

/// The drawing's size and the plot's margins, in pixels: the legend sits in the right margin,
/// outside the plot.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 88.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 64.0;

const RESERVED: &str = "#d62728";
const ALLOCATED: &str = "#1f77b4";
const REFERENCE: &str = "#2ca02c";
const LIMIT: &str = "#7f7f7f";

/// The first "nice" step (1, 2 or 5 × a power of ten) that cuts `span` into at most `max`
/// intervals.
fn nice_step(span: f64, max: f64) -> f64 {
    let raw = (span / max).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
}

/// The base-1024 unit the y axis counts in, for a top value of `max` bytes.
fn byte_unit(max: f64) -> (f64, &'static str) {
    [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ]
    .into_iter()
    .map(|(scale, name)| (scale as f64, name))
    .find(|(scale, _)| max >= *scale)
    .unwrap_or((1.0, "B"))
}

/// A tick's value without trailing zeros: 2, 2.5, 0.25.
fn tick_label(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The plot's scales: operations across, bytes up.
struct Axes {
    max_op: f64,
    top: f64,
}

impl Axes {
    fn x(&self, op: u64) -> f64 {
        LEFT + op as f64 / self.max_op * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, bytes: u64) -> f64 {
        HEIGHT - BOTTOM - bytes as f64 / self.top * (HEIGHT - TOP - BOTTOM)
    }
}

/// Draws the report's timeline as a standalone SVG.
pub fn timeline_svg(report: &BenchReport) -> String {
    let samples = &report.timeline;
    let max_op = samples.last().map_or(1, |s| s.op).max(1);
    let data_max = samples
        .iter()
        .map(|s| s.reserved.max(s.allocated))
        .chain(report.reference_timeline.iter().map(|r| r.1))
        .max()
        .unwrap_or(0)
        .max(1);
    // The usable limit joins the scale only when it would not flatten the curves.
    let limit = report.pool.usable_limit_bytes;
    let limit_shown = limit > 0 && (limit as f64) <= 2.0 * data_max as f64;
    let shown_max = if limit_shown {
        data_max.max(limit)
    } else {
        data_max
    };
    let (scale, unit) = byte_unit(shown_max as f64);
    let y_step = nice_step(shown_max as f64 / scale, 5.0);
    let top = ((shown_max as f64 / scale) / y_step).ceil().max(1.0) * y_step * scale;
    let axes = Axes {
        max_op: max_op as f64,
        top,
    };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let title = format!(
        "{} on {}:{}, {}",
        report.workload.name, report.device.backend, report.device.index, report.device.name
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="28" font-size="15" font-weight="bold">{}</text>"#,
        xml_text(&title)
    );
    grid(&mut svg, &axes, scale, unit, y_step, max_op);
    curves(&mut svg, &axes, report);
    if limit_shown {
        let y = axes.y(limit);
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{LIMIT}" stroke-dasharray="2 3"/>"#,
            WIDTH - RIGHT
        );
    }
    peak_marker(&mut svg, &axes, report);
    legend(&mut svg, report, limit, limit_shown);
    svg.push_str("</svg>\n");
    svg
}

/// Gridlines, ticks and the axes' titles.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "tick positions: whole, non-negative, far below 2^53; a float cast saturates"
)]
fn grid(svg: &mut String, axes: &Axes, scale: f64, unit: &str, y_step: f64, max_op: u64) {
    let (plot_right, plot_bottom) = (WIDTH - RIGHT, HEIGHT - BOTTOM);
    let steps = (axes.top / scale / y_step).round() as u64;
    for i in 0..=steps {
        let v = i as f64 * y_step;
        let y = axes.y((v * scale) as u64);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{plot_right}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 8.0,
            y + 4.0,
            tick_label(v)
        );
    }
    let x_step = nice_step(max_op as f64, 6.0).max(1.0);
    let mut op = 0.0;
    while op <= max_op as f64 + 0.5 {
        let x = axes.x(op as u64);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{plot_bottom}" stroke="#f0f0f0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            plot_bottom + 18.0,
            thousands(op as u64)
        );
        op += x_step;
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{LEFT}" y="{TOP}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
        plot_right - LEFT,
        plot_bottom - TOP
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">operations replayed</text>"#,
        (LEFT + plot_right) / 2.0,
        HEIGHT - 18.0
    );
    let mid = (TOP + plot_bottom) / 2.0;
    let _ = writeln!(
        svg,
        r#"<text x="20" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 20 {mid:.1})">memory ({unit})</text>"#
    );
}

/// Reserved and allocated as lines, the recording allocator's reserved as a dashed step.
fn curves(svg: &mut String, axes: &Axes, report: &BenchReport) {
    let line = |f: &dyn Fn(&crate::workload::bench::Sample) -> u64| {
        report
            .timeline
            .iter()
            .map(|s| format!("{:.1},{:.1}", axes.x(s.op), axes.y(f(s))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if !report.reference_timeline.is_empty() {
        // A step: the reserved figure holds until the next segment event.
        let end = report.timeline.last().map_or(0, |s| s.op);
        let mut points = Vec::new();
        let mut last = 0;
        for &(op, bytes) in &report.reference_timeline {
            let op = op.min(end);
            points.push(format!("{:.1},{:.1}", axes.x(op), axes.y(last)));
            points.push(format!("{:.1},{:.1}", axes.x(op), axes.y(bytes)));
            last = bytes;
        }
        points.push(format!("{:.1},{:.1}", axes.x(end), axes.y(last)));
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{REFERENCE}" stroke-width="1.5" stroke-dasharray="6 3" points="{}"/>"#,
            points.join(" ")
        );
    }
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" stroke="{RESERVED}" stroke-width="1.5" points="{}"/>"#,
        line(&|s| s.reserved)
    );
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" stroke="{ALLOCATED}" stroke-width="1.5" points="{}"/>"#,
        line(&|s| s.allocated)
    );
}

/// A ring on gpumem's reserved peak, labelled.
fn peak_marker(svg: &mut String, axes: &Axes, report: &BenchReport) {
    // The first sample at the peak: where it was reached.
    let Some(top) = report.timeline.iter().map(|s| s.reserved).max() else {
        return;
    };
    let Some(peak) = report.timeline.iter().find(|s| s.reserved == top) else {
        return;
    };
    let (x, y) = (axes.x(peak.op), axes.y(peak.reserved));
    let anchor = if x > (LEFT + WIDTH - RIGHT) / 2.0 {
        ("end", x - 8.0)
    } else {
        ("start", x + 8.0)
    };
    let _ = writeln!(
        svg,
        r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="none" stroke="{RESERVED}" stroke-width="2"/><text x="{:.1}" y="{:.1}" text-anchor="{}" fill="{RESERVED}">peak {}</text>"#,
        anchor.1,
        (y - 8.0).max(TOP + 12.0),
        anchor.0,
        format_bytes(peak.reserved)
    );
}

/// The legend, in the right margin: a swatch and a label a series.
fn legend(svg: &mut String, report: &BenchReport, limit: u64, limit_shown: bool) {
    let source = report
        .reference
        .as_ref()
        .map_or("the recording", |r| r.source.as_str());
    let mut entries: Vec<(&str, String, &str)> = vec![
        (RESERVED, "gpumem reserved".into(), ""),
        (ALLOCATED, "allocated".into(), ""),
    ];
    if !report.reference_timeline.is_empty() {
        entries.push((REFERENCE, format!("{source} reserved"), "6 3"));
    }
    entries.push((
        LIMIT,
        format!("usable limit {}", format_bytes(limit)),
        "2 3",
    ));
    let x = WIDTH - RIGHT + 16.0;
    for (i, (color, label, dash)) in entries.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            x + 22.0,
            x + 28.0,
            y + 4.0,
            xml_text(label)
        );
    }
    if !limit_shown {
        let y = TOP + 10.0 + 20.0 * (entries.len() - 1) as f64 + 16.0;
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{y:.1}" font-size="11" fill="#555">(above the plot)</text>"##,
            x + 28.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(1271.0, 5.0), 500.0);
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(0.9, 5.0), 0.2);
        assert_eq!(nice_step(20_000.0, 6.0), 5000.0);
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(1000.0), "1000");
        assert_eq!(
            byte_unit(1.24 * (1u64 << 30) as f64),
            ((1u64 << 30) as f64, "GiB")
        );
        assert_eq!(byte_unit(300.0), (1.0, "B"));
    }
}
