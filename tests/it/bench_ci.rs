//! `gpumem bench-alloc` as CI runs it: signals mid-run, hung and crashing drivers, exit codes
//! that tell a lost GPU from a missed gate, and the Markdown and JUnit exports.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::common::{self, gpumem};

#[test]
fn signals_stop_the_replay_with_a_partial_report() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let args = [
            "--json",
            "bench-alloc",
            "--device",
            "sim:64GiB",
            "-n",
            "10000000",
        ];
        let out =
            common::run_until_signal(&args, std::time::Duration::from_millis(2500), signal, code);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["interrupted"], true);
        assert_eq!(doc["passed"], false);
        assert!(doc["raw"].is_null());
        assert!(
            doc["pool"]["ops_replayed"].as_u64().unwrap()
                < doc["workload"]["ops"].as_u64().unwrap()
        );
    }
}

// 1-byte chunks: the signal is seen within one chunk, not after a whole 64 MiB transfer.
#[test]
fn signals_stop_a_transfer_within_a_chunk() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let args = [
            "--json",
            "bench-alloc",
            "--device",
            "host:1GiB",
            "--workload",
            "transfer",
            "--transfer-size",
            "64MiB",
            "--chunk",
            "1",
        ];
        let out =
            common::run_until_signal(&args, std::time::Duration::from_millis(1500), signal, code);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["interrupted"], true);
        assert_eq!(doc["passed"], false);
        assert_eq!(doc["transfer"]["chunk"], 1);
    }
}

// A chunk larger than the transfer is cut to it: no panic at 2^63, no 1 TiB host buffer.
#[test]
fn a_huge_chunk_is_cut_to_the_transfer() {
    for chunk in ["9223372036854775808", "1TiB", "4611686018427387904", "2GiB"] {
        let doc = common::json_ok(
            gpumem()
                .args(["--json", "bench-alloc", "--device", "host:1GiB"])
                .args(["--workload", "transfer", "--transfer-size", "1MiB"])
                .args(["--chunk", chunk]),
        );
        assert_eq!(doc["transfer"]["chunk"], 1 << 20, "{chunk}");
        assert_eq!(doc["transfer"]["corruptions"], 0, "{chunk}");
    }
}

// SIGINT or SIGTERM while a driver is still being probed (a cuInit that takes minutes) ends
// the run at once with 128 + the signal and one JSON document, and the probe child with it.
#[test]
fn signals_while_a_driver_is_probed_end_the_run() {
    let dir = common::fake_gpu_drivers("bench-slow-init", &[]);
    for command in ["bench-alloc", "stress"] {
        for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
            let mark = format!("signal-{command}-{signal}-{}", std::process::id());
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_gpumem"))
                .args(["--json", command, "--device", "cuda:0", "--timeout", "600s"])
                .env("LD_LIBRARY_PATH", &dir)
                .env("GPUMEM_FAKE_INIT_DELAY_MS", "600000")
                .env("GPUMEM_TEST_MARK", &mark)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            assert!(
                common::eventually(1000, || !common::probe_children(&mark).is_empty()),
                "no probe child started"
            );
            // SAFETY: sending a signal to our own child process.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(code), "{command}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("interrupted while opening cuda:0"), "{err}");
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(doc["error"]["exit_code"], code);
            assert!(
                common::eventually(250, || common::probe_children(&mark).is_empty()),
                "{command}: a probe child outlived gpumem"
            );
        }
    }
}

// gpumem killed outright (SIGKILL, which it cannot handle) takes its probe children along.
#[test]
fn probe_children_die_with_gpumem() {
    let dir = common::fake_gpu_drivers("bench-slow-init", &[]);
    for args in [
        &["discover", "--timeout", "600s"][..],
        &["bench-alloc", "--timeout", "600s"],
        &["stress", "--device", "cuda:0", "--timeout", "600s"],
    ] {
        let mark = format!("kill-{}-{}", args[0], std::process::id());
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpumem"))
            .args(args)
            .env("LD_LIBRARY_PATH", &dir)
            .env("GPUMEM_FAKE_INIT_DELAY_MS", "600000")
            .env("GPUMEM_TEST_MARK", &mark)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            common::eventually(1000, || !common::probe_children(&mark).is_empty()),
            "no probe child started"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            common::eventually(250, || common::probe_children(&mark).is_empty()),
            "{args:?}: a probe child outlived gpumem"
        );
    }
}

// Opening a device whose driver crashes or hangs ends in a one-line error, within the timeout,
// for bench-alloc and stress alike.
#[test]
fn a_crashing_or_hung_driver_cannot_take_the_run_with_it() {
    let dir = common::fake_gpu_drivers("bench-broken", &[]);
    for command in ["bench-alloc", "stress"] {
        let err = common::one_line_error(
            gpumem()
                .env("LD_LIBRARY_PATH", &dir)
                .env("GPUMEM_FAKE_INIT_CRASH", "segv")
                .args([command, "--device", "cuda:0"]),
            4,
        );
        assert!(
            err.contains("cannot open cuda:0: driver crashed: SIGSEGV in cuInit"),
            "{err}"
        );
        let start = std::time::Instant::now();
        let err = common::one_line_error(
            gpumem()
                .env("LD_LIBRARY_PATH", &dir)
                .env("GPUMEM_FAKE_INIT_DELAY_MS", "60000")
                .args([command, "--device", "cuda:0", "--timeout", "1s"])
                .timeout(std::time::Duration::from_secs(30)),
            4,
        );
        assert!(
            err.contains("cannot open cuda:0: timed out after 1.0 s"),
            "{err}"
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }
}

/// A device that is missing or cannot be opened exits 4 (CI can tell a lost GPU from a missed
/// gate, which exits 1), with one line and, under --json, the error document.
#[test]
fn a_missing_device_exits_4_and_a_missed_gate_1() {
    for command in ["bench-alloc", "stress"] {
        let err = common::one_line_error(gpumem().args([command, "--device", "cuda:99"]), 4);
        assert!(err.contains("cannot open cuda:99"), "{err}");
    }
    let out = gpumem()
        .args(["--json", "bench-alloc", "--device", "cuda:99"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["exit_code"], 4);
    let out = gpumem()
        .args([
            "bench-alloc",
            "--device",
            "host:64MiB",
            "--workload",
            "same-size",
        ])
        .args(["--allocations", "200", "--min-hit-rate", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CI exports: a Markdown summary (added after the earlier steps' sections of
/// $GITHUB_STEP_SUMMARY when no FILE is given) and JUnit XML, a test case a gate; a missed gate
/// is a failure in both; without FILE or the variable, a usage error.
#[test]
fn markdown_and_junit_exports_name_each_gate() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    let junit = dir.path().join("junit.xml");
    std::fs::write(&summary, "## an earlier step\n").unwrap();
    let out = gpumem()
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args([
            "bench-alloc",
            "--device",
            "host:64MiB",
            "--workload",
            "same-size",
        ])
        .args([
            "--allocations",
            "200",
            "--min-hit-rate",
            "1",
            "--max-fragmentation",
            "1",
        ])
        .arg("--export-markdown")
        .arg("--export-junit")
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with("## an earlier step\n### gpumem bench-alloc: failed"),
        "{md}"
    );
    assert!(
        md.contains("| `--min-hit-rate` | 1.0000 | 0.9950 | **missed** |"),
        "{md}"
    );
    assert!(md.contains("| `--max-fragmentation` | 1.0000 |"), "{md}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"3\" failures=\"1\""), "{xml}");
    assert!(
        xml.contains(
            "name=\"--min-hit-rate\"><failure message=\"measured 0.9950, threshold 1.0000\"/>"
        ),
        "{xml}"
    );
    // A passed gate carries its figures too.
    let passed = xml
        .lines()
        .find(|l| l.contains("name=\"--max-fragmentation\">"))
        .unwrap();
    assert!(
        passed.contains("name=\"--max-fragmentation\"><system-out>measured 0.")
            && passed.ends_with(", threshold 1.0000</system-out></testcase>")
            && !passed.contains("<failure"),
        "{xml}"
    );
    let named = dir.path().join("run.md");
    let out = gpumem()
        .env_remove("GITHUB_STEP_SUMMARY")
        .args([
            "bench-alloc",
            "--device",
            "host:64MiB",
            "--allocations",
            "100",
        ])
        .arg("--export-markdown")
        .arg(&named)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(&named)
        .unwrap()
        .starts_with("### gpumem bench-alloc: passed"));
    let err = common::one_line_error(
        gpumem().env_remove("GITHUB_STEP_SUMMARY").args([
            "bench-alloc",
            "--device",
            "host:64MiB",
            "--export-markdown",
        ]),
        2,
    );
    assert!(
        err.contains("$GITHUB_STEP_SUMMARY, which is not set"),
        "{err}"
    );
}

/// `--max-peak-reserved`: an absolute memory gate on what the pool reserved at its peak, held
/// to the run's own figure: passed at it, missed one byte below, with the figures in JSON.
#[test]
fn the_peak_reserved_gate_holds_a_jobs_memory() {
    let run = |limit: &str| {
        gpumem()
            .args(["--json", "bench-alloc", "--device", "host:64MiB"])
            .args(["--workload", "same-size", "--allocations", "200"])
            .args(["--size", "256KiB", "--max-peak-reserved", limit])
            .output()
            .unwrap()
    };
    let out = run("1GiB");
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gate = doc["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "max-peak-reserved")
        .unwrap()
        .clone();
    let peak = gate["measured"].as_f64().unwrap() as u64;
    assert!(peak > 0 && gate["passed"] == true, "{gate}");
    assert_eq!(run(&format!("{peak}B")).status.code(), Some(0));
    let missed = run(&format!("{}B", peak - 1));
    assert_eq!(missed.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&missed.stdout).unwrap();
    assert_eq!(doc["passed"], false);
}

/// Two recordings of one job's trace that differ compare on their memory metrics alone (their
/// figures of time are another workload's): labelled, a grown peak caught by
/// `--max-regression peak-reserved`, a gate on a figure of time refused in one line.
#[test]
fn two_traces_of_a_job_compare_on_memory() {
    let dir = tempfile::tempdir().unwrap();
    let csv = |extra: u64| {
        let mut s = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
        for i in 0..40u64 {
            let size = (1 << 20) + extra * (i % 2);
            s += &format!(
                "1,{i}.1,allocate,0x{:x},{size},0x0\n",
                0x7f00_0000_0000u64 + (i << 24)
            );
        }
        for i in 0..40u64 {
            let size = (1 << 20) + extra * (i % 2);
            s += &format!(
                "1,{i}.2,free,0x{:x},{size},0x0\n",
                0x7f00_0000_0000u64 + (i << 24)
            );
        }
        s
    };
    let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    std::fs::write(&a, csv(0)).unwrap();
    std::fs::write(&b, csv(1 << 20)).unwrap();
    let base = dir.path().join("base.json");
    let bench = |trace: &std::path::Path| {
        let mut c = gpumem();
        c.args([
            "--json",
            "bench-alloc",
            "--device",
            "host:256MiB",
            "--runs",
            "3",
        ])
        .arg("--trace")
        .arg(trace);
        c
    };
    let saved = bench(&a)
        .arg("--save-baseline")
        .arg(&base)
        .output()
        .unwrap();
    assert_eq!(
        saved.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&saved.stderr)
    );
    let out = bench(&b)
        .arg("--baseline")
        .arg(&base)
        .args(["--max-regression", "peak-reserved:5"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &doc["comparison"];
    assert_eq!(c["other_trace"], "trace:a.csv");
    let metrics: Vec<&str> = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metric"].as_str().unwrap())
        .collect();
    assert!(
        metrics
            .iter()
            .all(|m| ["hit-rate", "fragmentation", "peak-reserved"].contains(m)),
        "{metrics:?}"
    );
    // Half the allocations doubled: the pool's peak grew, and the gate says so (exit 1).
    assert_eq!(out.status.code(), Some(1), "{c}");
    let err = common::one_line_error(
        bench(&b)
            .arg("--baseline")
            .arg(&base)
            .args(["--max-regression", "ops-per-sec:10"]),
        2,
    );
    assert!(
        err.ends_with(
            "two traces compare on their memory metrics only (peak-reserved, fragmentation, \
             hit-rate)\n"
        ),
        "{err}"
    );
}
