//! `bench-alloc`'s and `stress`'s outputs (`--save-baseline`, `--export-*`, `--timeline`) as a
//! CI job meets them: a regular file replaced atomically, a FIFO, `/dev/null` and standard
//! output written through, `/dev/full` failing the run, two outputs to one place and an output
//! onto an input refused; and the `--baseline` gates that cannot be answered refused rather
//! than passed, a baseline from another device compared only when asked, and JUnit cases that
//! carry their figures.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use gpumem::input::{output_kind, OutputKind};
use serde_json::Value;

use crate::common::{self, expect_exit, gpumem, SAME_WORKLOAD};

/// The same workload on a simulated device of the same size: another device, the same
/// operations.
const SAME_ON_SIM: [&str; 8] = [
    "--device",
    "sim:64MiB",
    "--workload",
    "same-size",
    "-n",
    "300",
    "--size",
    "256KiB",
];

fn bench(extra: &[&str]) -> std::process::Output {
    gpumem()
        .arg("bench-alloc")
        .args(SAME_WORKLOAD)
        .args(extra)
        .output()
        .unwrap()
}

/// Asserts the exit status and that stderr is exactly `line` (one line).
fn expect_line(out: &std::process::Output, code: i32, line: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert_eq!(stderr.trim_end(), line, "{stderr}");
}

fn save(dir: &Path, extra: &[&str]) -> String {
    let path = dir.join("base.json").to_string_lossy().into_owned();
    let out = bench(&[&["--save-baseline", &path][..], extra].concat());
    expect_exit(&out, 0);
    path
}

#[cfg(unix)]
fn is_char_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

#[cfg(unix)]
#[test]
fn a_fifo_dev_null_and_stdout_are_written_through_and_dev_full_fails_the_run() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    // A FIFO, read by a thread: it receives the JUnit document and is still a FIFO after.
    let fifo = dir.path().join("junit.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Guard: a node is only ever handed to gpumem once the library writes it through (the
    // tests may run as root, where replacing /dev/null would break the machine).
    assert_eq!(output_kind(&fifo).unwrap(), OutputKind::Stream);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = gpumem()
        .arg("bench-alloc")
        .args(SAME_WORKLOAD)
        .arg("--export-junit")
        .arg(&fifo)
        .output()
        .unwrap();
    expect_exit(&out, 0);
    let xml = reader.join().unwrap();
    assert!(
        xml.starts_with("<?xml") && xml.ends_with("</testsuite></testsuites>\n"),
        "{xml}"
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());

    // /dev/null: written through, still the character device it was.
    if is_char_device("/dev/null") {
        assert_eq!(
            output_kind(Path::new("/dev/null")).unwrap(),
            OutputKind::Stream
        );
        // The timeline's SVG name rule is for files: a device takes it whatever its name.
        for flag in ["--export-prometheus", "--timeline"] {
            expect_exit(&bench(&[flag, "/dev/null"]), 0);
        }
        assert!(is_char_device("/dev/null"));
    }

    // /dev/full: ENOSPC fails the run with one line, after the one JSON report.
    if is_char_device("/dev/full") {
        assert_eq!(
            output_kind(Path::new("/dev/full")).unwrap(),
            OutputKind::Stream
        );
        let out = gpumem()
            .args(["--json", "bench-alloc"])
            .args(SAME_WORKLOAD)
            .args(["--export-junit", "/dev/full"])
            .output()
            .unwrap();
        expect_line(
            &out,
            1,
            "gpumem: error: writing --export-junit: /dev/full: No space left on device (os error 28)",
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["workload"]["name"], "same-size");
        assert!(is_char_device("/dev/full"));
        // stress shares the exports.
        let out = gpumem()
            .args(["stress", "--device", "host:128MiB", "--phase", "churn"])
            .args(["--ops", "50", "--max-size", "256KiB"])
            .args(["--export-prometheus", "/dev/full"])
            .output()
            .unwrap();
        expect_line(
            &out,
            1,
            "gpumem: error: writing --export-prometheus: /dev/full: No space left on device (os error 28)",
        );
        assert!(is_char_device("/dev/full"));
    }

    // Standard output, by either name: the document follows the report.
    for name in ["/dev/stdout", "-"] {
        let out = bench(&["--export-junit", name]);
        expect_exit(&out, 0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("same-size on host:0")
                && stdout.ends_with("</testsuite></testsuites>\n"),
            "{stdout}"
        );
    }
}

#[test]
fn a_regular_file_is_still_replaced_whole() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("junit.xml");
    std::fs::write(&xml, "old").unwrap();
    // A second name for the old file: replaced by a rename, the old file keeps its bytes.
    let link = dir.path().join("old.xml");
    std::fs::hard_link(&xml, &link).unwrap();
    let out = gpumem()
        .arg("bench-alloc")
        .args(SAME_WORKLOAD)
        .arg("--export-junit")
        .arg(&xml)
        .output()
        .unwrap();
    expect_exit(&out, 0);
    assert!(std::fs::read_to_string(&xml).unwrap().starts_with("<?xml"));
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "old");
    // No temporary file is left beside it.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["junit.xml", "old.xml"]);
}

#[test]
fn two_outputs_to_one_place_or_an_output_onto_an_input_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let out = bench(&[
        "--export-junit",
        &format!("{d}/out.xml"),
        "--export-prometheus",
        &format!("{d}/./out.xml"),
    ]);
    expect_line(
        &out,
        2,
        &format!("gpumem: error: --export-junit {d}/out.xml and --export-prometheus {d}/./out.xml are the same output; give each its own"),
    );
    // An existing file under two names (a symlink) is one output too.
    std::fs::write(dir.path().join("real.svg"), "").unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path().join("real.svg"), dir.path().join("link.md"))
            .unwrap();
        let out = bench(&[
            "--timeline",
            &format!("{d}/real.svg"),
            "--export-markdown",
            &format!("{d}/link.md"),
        ]);
        expect_line(
            &out,
            2,
            &format!("gpumem: error: --timeline {d}/real.svg and --export-markdown {d}/link.md are the same output; give each its own"),
        );
    }
    let out = bench(&["--export-junit", "/dev/stdout", "--export-prometheus", "-"]);
    expect_line(
        &out,
        2,
        "gpumem: error: --export-junit /dev/stdout and --export-prometheus - are the same output; give each its own",
    );
    let out = bench(&[
        "--export-junit",
        "/dev/stdout",
        "--save-baseline",
        "/dev/stdout",
    ]);
    expect_line(
        &out,
        2,
        "gpumem: error: --save-baseline /dev/stdout and --export-junit /dev/stdout are the same output; give each its own",
    );
    // Onto an input: named by both flags.
    let base = save(dir.path(), &[]);
    let out = bench(&["--baseline", &base, "--export-prometheus", &base]);
    expect_line(
        &out,
        2,
        &format!(
            "gpumem: error: --export-prometheus {base} would overwrite the input --baseline {base}"
        ),
    );
    let out = bench(&["--export-junit", d.to_string().as_str()]);
    expect_line(
        &out,
        2,
        &format!("gpumem: error: --export-junit {d} is a directory: an output goes to a file, a FIFO or a character device"),
    );
}

#[test]
fn gates_the_baseline_cannot_answer_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    // Saved without the raw replay: the baseline has no speedup.
    let base = save(dir.path(), &["--no-raw"]);
    let out = bench(&["--baseline", &base, "--max-regression", "speedup:5"]);
    expect_line(
        &out,
        2,
        &format!("gpumem: error: --max-regression speedup:5: the baseline {base} has no speedup (it has ops-per-sec, hit-rate, fragmentation, peak-reserved, alloc-p50-ns, alloc-p99-ns, free-p99-ns)"),
    );
    // Nor can a run without the raw replay answer one.
    let out = bench(&[
        "--baseline",
        &base,
        "--no-raw",
        "--max-regression",
        "speedup:5",
    ]);
    expect_line(
        &out,
        2,
        "gpumem: error: --max-regression speedup:5 needs the raw replay; drop --no-raw",
    );
    // A baseline file that does not exist.
    let missing = dir.path().join("missing.json");
    let out = bench(&["--baseline", &missing.to_string_lossy()]);
    expect_line(
        &out,
        1,
        &format!(
            "gpumem: error: --baseline: {}: No such file or directory (os error 2)",
            missing.display()
        ),
    );
}

#[test]
fn a_baseline_from_another_device_is_refused_unless_allowed_and_then_labelled() {
    let dir = tempfile::tempdir().unwrap();
    let base = save(dir.path(), &[]);
    let refused = gpumem()
        .arg("bench-alloc")
        .args(SAME_ON_SIM)
        .args(["--baseline", &base])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().last().unwrap(),
        format!("gpumem: error: --baseline {base} was recorded on host:0 (host:64.00 MiB); this run is on sim:0 (sim:64.00 MiB) (--allow-other-device compares them anyway)")
    );
    let md = dir.path().join("summary.md");
    let allowed = gpumem()
        .args(["--json", "bench-alloc"])
        .args(SAME_ON_SIM)
        .args(["--baseline", &base, "--allow-other-device"])
        .args(["--max-regression", "hit-rate:1", "--export-markdown"])
        .arg(&md)
        .output()
        .unwrap();
    expect_exit(&allowed, 0);
    let doc: Value = serde_json::from_slice(&allowed.stdout).unwrap();
    let c = &doc["comparison"];
    assert_eq!(c["other_device"], true, "{c}");
    assert_eq!(c["baseline_device"], "host:0 (host:64.00 MiB)");
    assert_eq!(c["device"], "sim:0 (sim:64.00 MiB)");
    let label = "comparing different devices: the baseline ran on host:0 (host:64.00 MiB), this run on sim:0 (sim:64.00 MiB) (--allow-other-device)";
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains(&format!("**{label}**")), "{md}");
    let text = gpumem()
        .args(["bench-alloc", "--wide"])
        .args(SAME_ON_SIM)
        .args(["--baseline", &base, "--allow-other-device"])
        .output()
        .unwrap();
    expect_exit(&text, 0);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.lines().any(|l| l == format!("note: {label}")),
        "{stdout}"
    );
    // On the same device, nothing to label.
    let same = gpumem()
        .args(["--json", "bench-alloc"])
        .args(SAME_WORKLOAD)
        .args(["--baseline", &base])
        .output()
        .unwrap();
    expect_exit(&same, 0);
    let doc: Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(doc["comparison"]["other_device"], false);
    // The flag needs a baseline.
    common::one_line_error(
        gpumem()
            .arg("bench-alloc")
            .args(SAME_WORKLOAD)
            .arg("--allow-other-device"),
        2,
    );
}

#[test]
fn junit_cases_carry_their_figures_passed_or_failed() {
    let dir = tempfile::tempdir().unwrap();
    // Two runs a side: the hit rate and peak repeat exactly, so the change is known exactly (one
    // run a side would be undecided).
    let base = save(dir.path(), &["--runs", "2"]);
    let old = common::scale_baseline_metric(Path::new(&base), "hit-rate", 1.12);
    let xml = dir.path().join("junit.xml");
    let out = bench(&[
        "--runs",
        "2",
        "--baseline",
        &base,
        "--max-regression",
        "hit-rate:10",
        "--max-regression",
        "peak-reserved:5",
        "--min-hit-rate",
        "0.5",
        "--export-junit",
        &xml.to_string_lossy(),
    ]);
    expect_exit(&out, 1);
    let xml = std::fs::read_to_string(xml).unwrap();
    assert!(xml.contains("tests=\"4\" failures=\"1\""), "{xml}");
    let case = |name: &str| {
        xml.lines()
            .find(|l| l.contains(&format!("name=\"{name}\">")))
            .unwrap_or_else(|| panic!("{name}: {xml}"))
            .to_string()
    };
    let figures = format!(
        "baseline {:.4}, this run {old:.4}, change -10.7%, threshold 10%; every run the same on each side: the change is exact; 2 runs against the baseline&apos;s 2",
        old * 1.12
    );
    assert_eq!(
        case("hit-rate"),
        format!("<testcase classname=\"gpumem.bench-alloc.regressions\" name=\"hit-rate\"><failure message=\"hit-rate -10.7% against the baseline: REGRESSED (&gt; 10%); {figures}\"/><system-out>hit-rate: REGRESSED (&gt; 10%); {figures}</system-out></testcase>")
    );
    assert_eq!(
        case("peak-reserved"),
        "<testcase classname=\"gpumem.bench-alloc.regressions\" name=\"peak-reserved\"><system-out>peak-reserved: ok (≤ 5%); baseline 32.00 MiB, this run 32.00 MiB, change +0.0%, threshold 5%; every run the same on each side: the change is exact; 2 runs against the baseline&apos;s 2</system-out></testcase>"
    );
    assert_eq!(
        case("--min-hit-rate"),
        format!("<testcase classname=\"gpumem.bench-alloc.gates\" name=\"--min-hit-rate\"><system-out>measured {old:.4}, threshold 0.5000</system-out></testcase>")
    );
}
