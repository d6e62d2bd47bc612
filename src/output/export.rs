//! CI exports of a `bench-alloc` or `stress` run, apart from their measurement (as hyperfine
//! keeps its exporters): a Markdown summary for a job page (GitHub's `$GITHUB_STEP_SUMMARY`)
//! and a JUnit XML report, one test case a gate or a phase.

use std::fmt::Write as _;

use super::bench::{failure_text, gate_value, BenchReport, Gate};
use super::escape::xml_text;
use super::runs::{
    change_text, evidence_text, metric_text, percent, row_p_text, runs_against, verdict_text,
};
use super::stress::{failure_text as stress_failure_text, StressReport};
use super::thousands;
use crate::units::format_bytes;
use crate::workload::baseline::{Comparison, Confidence, Verdict};

/// The run as a Markdown section: verdict, figures, gates.
pub fn bench_markdown(r: &BenchReport) -> String {
    let mut md = String::new();
    let verdict = verdict_word(r.interrupted, r.passed);
    let _ = writeln!(
        md,
        "### gpumem bench-alloc: {verdict}\n\n`{}` on {}:{} ({}, {})\n",
        cell(&r.workload.name),
        cell(&r.device.backend),
        r.device.index,
        cell(&r.device.name),
        format_bytes(r.device.total_bytes)
    );
    let p = &r.pool;
    let _ = writeln!(md, "| figure | value |\n| --- | --- |");
    let _ = writeln!(md, "| operations | {} |", thousands(r.workload.ops));
    let _ = writeln!(md, "| hit rate | {:.3} |", p.hit_rate);
    let _ = writeln!(
        md,
        "| fragmentation at the peak | {:.3} |",
        p.fragmentation_peak
    );
    let _ = writeln!(
        md,
        "| allocation p50 / p99 | {} ns / {} ns |",
        thousands(p.alloc_ns.p50),
        thousands(p.alloc_ns.p99)
    );
    if let Some(s) = r.speedup {
        let _ = writeln!(md, "| speedup over the device | {s:.1}× |");
    }
    let _ = writeln!(
        md,
        "| peak reserved | {} |",
        format_bytes(p.peak_reserved_bytes)
    );
    if !r.gates.is_empty() {
        let _ = writeln!(
            md,
            "\n| gate | threshold | measured | verdict |\n| --- | --- | --- | --- |"
        );
        for g in &r.gates {
            let _ = writeln!(
                md,
                "| `--{}` | {} | {} | {} |",
                g.name,
                gate_value(g.kind, g.threshold),
                gate_value(g.kind, g.measured),
                if g.passed { "passed" } else { "**missed**" }
            );
        }
    }
    if let Some(c) = &r.comparison {
        // Across devices (--allow-other-device), said before the table.
        let note: String = [c.other_device_note(), c.other_trace_note()]
            .into_iter()
            .flatten()
            .map(|n| format!("**{}**\n\n", cell(&n)))
            .collect();
        let _ = writeln!(
            md,
            "\nAgainst the baseline ({} runs on {}; one-sided Mann-Whitney U test at {} confidence; this run: {}):\n\n{note}| metric | baseline | this run | change | p | verdict |\n| --- | --- | --- | --- | --- | --- |",
            c.baseline_runs,
            cell(&c.baseline_device),
            percent(c.confidence.level()),
            cell(&report_runs(r))
        );
        for row in &c.rows {
            let verdict = verdict_text(row);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                row.metric,
                metric_text(row.metric, row.old),
                metric_text(row.metric, row.new),
                change_text(row.change_pct),
                row_p_text(row),
                if matches!(row.verdict, Verdict::Regressed | Verdict::Undecided) {
                    format!("**{verdict}**")
                } else {
                    verdict
                }
            );
        }
    }
    md
}

/// The run as JUnit XML: a test case a gate, and one for the run itself (interrupted,
/// corrupted or leaking runs fail it).
pub fn bench_junit(r: &BenchReport) -> String {
    let run_failure = if r.interrupted {
        Some("interrupted before the replay finished".to_string())
    } else {
        failure_text(r.pool.corruptions, 0, &[])
    };
    let gated: Vec<&Comparison> = r
        .comparison
        .iter()
        .flat_map(|c| &c.rows)
        .filter(|row| row.max_regression_pct.is_some())
        .collect();
    let unanswered: Vec<_> = r.comparison.iter().flat_map(|c| &c.unanswered).collect();
    let confidence = r
        .comparison
        .as_ref()
        .map_or(Confidence::DEFAULT, |c| c.confidence);
    // Undecided gates are errors in JUnit's sense: the check could not reach a result.
    let errors = gated
        .iter()
        .filter(|row| row.verdict == Verdict::Undecided)
        .count();
    let failures = r.gates.iter().filter(|g| !g.passed).count()
        + gated
            .iter()
            .filter(|row| row.verdict == Verdict::Regressed)
            .count()
        + unanswered.len()
        + usize::from(run_failure.is_some());
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites><testsuite name=\"gpumem bench-alloc\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\">",
        r.gates.len() + gated.len() + unanswered.len() + 1
    );
    let _ = write!(
        xml,
        "<testcase classname=\"gpumem.bench-alloc\" name=\"{} on {}:{}\">",
        xml_text(&r.workload.name),
        xml_text(&r.device.backend),
        r.device.index
    );
    if let Some(why) = run_failure {
        let _ = write!(xml, "<failure message=\"{}\"/>", xml_text(&why));
    }
    let _ = writeln!(xml, "</testcase>");
    for g in &r.gates {
        gate_case(&mut xml, g);
    }
    let runs = report_runs(r);
    for row in gated {
        regression_case(&mut xml, row, confidence, &runs);
    }
    for metric in unanswered {
        let _ = writeln!(
            xml,
            "<testcase classname=\"gpumem.bench-alloc.regressions\" name=\"{metric}\"><failure message=\"this run measured no {metric} to compare with the baseline\"/></testcase>"
        );
    }
    let _ = writeln!(xml, "</testsuite></testsuites>");
    xml
}

/// The stress run as a Markdown section: verdict, each phase, each failure.
pub fn stress_markdown(r: &StressReport) -> String {
    let o = &r.outcome;
    let mut md = String::new();
    let verdict = verdict_word(o.interrupted, o.passed);
    let _ = writeln!(
        md,
        "### gpumem stress: {verdict}\n\n{}:{} ({}, {})\n",
        cell(&r.device.backend),
        r.device.index,
        cell(&r.device.name),
        format_bytes(r.device.total_bytes)
    );
    let _ = writeln!(
        md,
        "| phase | operations | seconds | verdict |\n| --- | --- | --- | --- |"
    );
    for p in &o.phases {
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} | {} |",
            p.phase.name(),
            thousands(p.ops),
            p.duration_s,
            if p.passed { "passed" } else { "**failed**" }
        );
    }
    for f in &o.failures {
        let _ = writeln!(md, "\n- {}", cell(&stress_failure_text(f)));
    }
    md
}

/// The stress run as JUnit XML: a test case a phase (a failed phase fails), and one for the
/// run's checks (each failure named in its message).
pub fn stress_junit(r: &StressReport) -> String {
    let o = &r.outcome;
    let failures: Vec<String> = o.failures.iter().map(stress_failure_text).collect();
    let run_failed = o.interrupted || !failures.is_empty();
    let failed_phases = o.phases.iter().filter(|p| !p.passed).count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites><testsuite name=\"gpumem stress\" tests=\"{}\" failures=\"{}\">",
        o.phases.len() + 1,
        failed_phases + usize::from(run_failed)
    );
    for p in &o.phases {
        let name = p.phase.name();
        let _ = write!(
            xml,
            "<testcase classname=\"gpumem.stress\" name=\"{name}\" time=\"{:.3}\">",
            p.duration_s
        );
        if !p.passed {
            let _ = write!(xml, "<failure message=\"the {name} phase failed\"/>");
        }
        let _ = writeln!(xml, "</testcase>");
    }
    let _ = write!(
        xml,
        "<testcase classname=\"gpumem.stress\" name=\"{}:{} checks\">",
        xml_text(&r.device.backend),
        r.device.index
    );
    if run_failed {
        let why = if o.interrupted {
            "interrupted before every phase ran".to_string()
        } else {
            failures.join("; ")
        };
        let _ = write!(xml, "<failure message=\"{}\"/>", xml_text(&why));
    }
    let _ = writeln!(xml, "</testcase>\n</testsuite></testsuites>");
    xml
}

fn gate_case(xml: &mut String, g: &Gate) {
    let _ = write!(
        xml,
        "<testcase classname=\"gpumem.bench-alloc.gates\" name=\"--{}\">",
        g.name
    );
    let figures = format!(
        "measured {}, threshold {}",
        gate_value(g.kind, g.measured),
        gate_value(g.kind, g.threshold)
    );
    if !g.passed {
        let _ = write!(xml, "<failure message=\"{}\"/>", xml_text(&figures));
    }
    let _ = writeln!(
        xml,
        "<system-out>{}</system-out></testcase>",
        xml_text(&figures)
    );
}

/// A `--max-regression` gate as a test case: its figures (the baseline's median, this run's,
/// the change, the allowance, the test with its p-value and bound, the runs on each side) in
/// its output, passed or not, and its verdict in the failure's (regressed) or error's
/// (undecided) message.
fn regression_case(xml: &mut String, row: &Comparison, confidence: Confidence, runs: &str) {
    let _ = write!(
        xml,
        "<testcase classname=\"gpumem.bench-alloc.regressions\" name=\"{}\">",
        row.metric
    );
    let figures = format!(
        "baseline {}, this run {}, change {}, threshold {}%; {}; {runs}",
        metric_text(row.metric, row.old),
        metric_text(row.metric, row.new),
        change_text(row.change_pct),
        row.max_regression_pct.unwrap_or(0.0),
        evidence_text(row, confidence)
    );
    let element = match row.verdict {
        Verdict::Regressed => Some("failure"),
        Verdict::Undecided => Some("error"),
        _ => None,
    };
    if let Some(element) = element {
        let _ = write!(
            xml,
            "<{element} message=\"{} {} against the baseline: {}; {}\"/>",
            row.metric,
            change_text(row.change_pct),
            xml_text(&verdict_text(row)),
            xml_text(&figures)
        );
    }
    let _ = writeln!(
        xml,
        "<system-out>{}: {}; {}</system-out></testcase>",
        row.metric,
        xml_text(&verdict_text(row)),
        xml_text(&figures)
    );
}

/// This run's measured runs against the baseline's, and why they stopped when a range was
/// asked (empty without a baseline).
fn report_runs(r: &BenchReport) -> String {
    let Some(c) = &r.comparison else {
        return String::new();
    };
    let runs = r.runs.as_ref();
    runs_against(
        runs.map_or(1, |v| v.runs),
        c.baseline_runs,
        runs.and_then(|v| v.adaptive.as_ref()),
    )
}

/// A run's outcome in one word: an interrupted run is neither passed nor failed.
fn verdict_word(interrupted: bool, passed: bool) -> &'static str {
    match (interrupted, passed) {
        (true, _) => "interrupted",
        (false, true) => "passed",
        (false, false) => "failed",
    }
}

/// Text for a Markdown table cell: pipes and backticks escaped, control characters dropped.
fn cell(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .flat_map(|c| match c {
            '|' | '`' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_escaped() {
        assert_eq!(xml_text("a<b>&\"c\u{7}"), "a&lt;b&gt;&amp;&quot;c");
        assert_eq!(cell("x|y`z\n"), "x\\|y\\`z");
    }
}
