//! `gpumem bench-alloc` on sim, host, the real OpenCL/Vulkan devices, the stand-in CUDA driver,
//! and recorded traces.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpumem;

use std::path::Path;

use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    common::json_ok(gpumem().args(["--json", "bench-alloc"]).args(args))
}

fn trace(name: &str) -> String {
    common::fixture(&format!("traces/{name}"))
}

fn check_common(doc: &Value) {
    assert_eq!(doc["schema_version"], 1);
    let p = &doc["pool"];
    for key in [
        "hit_rate",
        "fragmentation_peak",
        "fragmentation_end",
        "efficiency",
    ] {
        let v = p[key].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&v), "{key} = {v}");
    }
    assert!(
        p["peak_reserved_bytes"].as_u64().unwrap() >= p["peak_allocated_bytes"].as_u64().unwrap()
    );
    assert!(p["alloc_ns"]["p50"].as_u64().unwrap() <= p["alloc_ns"]["p99"].as_u64().unwrap());
    assert!(p["alloc_ns"]["p99"].as_u64().unwrap() <= p["alloc_ns"]["max"].as_u64().unwrap());
    assert_eq!(p["corruptions"], 0);
    assert_eq!(doc["passed"], true);
}

#[test]
fn sim_random_is_labelled_simulated() {
    let doc = bench(&["--device", "sim:80GiB", "-n", "2000", "--seed", "9"]);
    check_common(&doc);
    assert_eq!(doc["device"]["simulated"], true);
    assert_eq!(doc["device"]["backend"], "sim");
    assert_eq!(doc["workload"]["name"], "random");
    assert_eq!(doc["workload"]["ops"], 4000);
    assert_eq!(doc["workload"]["seed"], 9);
    assert_eq!(doc["pool"]["preset"], "arena");
    // A stated capacity is the whole budget: no fraction, headroom or driver reserve held back.
    assert_eq!(doc["pool"]["usable_limit_bytes"], 80u64 << 30);
    assert_eq!(doc["pool"]["limit_rule"]["rule"], "memory_fraction");
    assert!(doc["speedup"].as_f64().unwrap() > 0.0);
    // The same seed replays the same sequence: identical pool counters.
    let again = bench(&["--device", "sim:80GiB", "-n", "2000", "--seed", "9"]);
    assert_eq!(
        doc["pool"]["peak_allocated_bytes"],
        again["pool"]["peak_allocated_bytes"]
    );
    assert_eq!(doc["pool"]["device_allocs"], again["pool"]["device_allocs"]);
    let text = gpumem()
        .args(["bench-alloc", "--device", "sim:1GiB", "-n", "100"])
        .output()
        .unwrap();
    assert!(String::from_utf8(text.stdout)
        .unwrap()
        .contains("SIMULATED"));
}

#[test]
fn host_workloads_with_verification() {
    for args in [
        vec!["--device", "host:2GiB", "-n", "3000"],
        vec![
            "--device",
            "host:2GiB",
            "--workload",
            "same-size",
            "--size",
            "1MiB",
            "-n",
            "2000",
        ],
        vec![
            "--device",
            "host:2GiB",
            "--workload",
            "mixed",
            "-n",
            "2000",
            "--preset",
            "default",
        ],
        vec![
            "--device",
            "host:2GiB",
            "-n",
            "2000",
            "--size-dist",
            "lognormal",
            "--preset",
            "constrained",
        ],
        vec![
            "--device",
            "host:4GiB",
            "--workload",
            "transformer",
            "--model",
            "qwen2.5-0.5b",
            "--batch",
            "2",
            "--context",
            "512",
        ],
    ] {
        let doc = bench(&args);
        check_common(&doc);
        assert_eq!(doc["device"]["simulated"], false);
        assert!(
            doc["raw"]["alloc_ns"]["p50"].as_u64().unwrap() > 0,
            "{args:?}"
        );
    }
}

#[test]
fn transformer_step_reuses_memory() {
    let doc = bench(&[
        "--device",
        "sim:80GiB",
        "--workload",
        "transformer",
        "--model",
        "mistral-7b",
        "--batch",
        "4",
        "--context",
        "4096",
    ]);
    check_common(&doc);
    assert_eq!(doc["pool"]["preset"], "inference");
    assert!(
        doc["pool"]["hit_rate"].as_f64().unwrap() >= 0.95,
        "{}",
        doc["pool"]
    );
}

#[test]
fn pytorch_training_snapshot_against_pytorch() {
    let doc = bench(&[
        "--device",
        "sim:80GiB",
        "--trace",
        &trace("pytorch-snapshot-transformer-training.pickle"),
    ]);
    check_common(&doc);
    let r = &doc["reference"];
    assert_eq!(r["source"], "pytorch");
    assert_eq!(r["measured_as"], "snapshot_segments");
    assert_eq!(r["peak_reserved_bytes"], 4_238_344_192u64);
    // gpumem reserves no more than PyTorch did for the same trace.
    assert!(r["gpumem_reserved_bytes"].as_u64().unwrap() <= 4_238_344_192);
    assert!(doc["pool"]["hit_rate"].as_f64().unwrap() >= 0.95);
    assert_eq!(
        doc["workload"]["allocations"],
        2162 + doc["workload"]["preexisting"].as_u64().unwrap()
    );
}

#[test]
fn pytorch_sample_snapshot_with_streams() {
    let doc = bench(&[
        "--device",
        "host:8GiB",
        "--trace",
        &trace("pytorch-snapshot-format-sample.pickle"),
    ]);
    check_common(&doc);
    assert_eq!(
        doc["pool"]["preset"], "expandable",
        "expandable segments are replayed with expandable segments"
    );
    assert_eq!(doc["pool"]["expandable_segments"], true);
    // Each growth of a range maps memory (a miss), as PyTorch's expandable segments do; in
    // exchange the ranges hold little beyond what is live.
    assert!(doc["pool"]["hit_rate"].as_f64().unwrap() >= 0.9);
    let peak_reserved = doc["pool"]["peak_reserved_bytes"].as_u64().unwrap() as f64;
    let peak_allocated = doc["pool"]["peak_allocated_bytes"].as_u64().unwrap() as f64;
    assert!(
        peak_reserved <= 1.1 * peak_allocated,
        "{peak_reserved} for {peak_allocated}"
    );
    assert_eq!(doc["reference"]["peak_reserved_bytes"], 262_144_000);
}

#[test]
fn rmm_csv_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rmm.csv");
    let mut csv = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    for i in 0..200u64 {
        csv += &format!(
            "1,{i}.0,allocate,{:#x},{},0x0\n",
            0x7f00_0000_0000u64 + i * 0x100_0000,
            4096 * (i % 7 + 1)
        );
        if i % 3 == 0 {
            csv += &format!(
                "1,{i}.5,free,{:#x},{},0x0\n",
                0x7f00_0000_0000u64 + i * 0x100_0000,
                4096 * (i % 7 + 1)
            );
        }
    }
    csv += "1,999,allocate failure,0x0,99999999999999,0x0\n";
    std::fs::write(&path, csv).unwrap();
    let doc = bench(&["--device", "host:1GiB", "--trace", path.to_str().unwrap()]);
    check_common(&doc);
    assert_eq!(doc["workload"]["allocations"], 200);
    assert_eq!(doc["workload"]["skipped"][0][0], "allocate failure");
    assert!(doc["reference"].is_null());
}

fn fails(args: &[&str]) -> (i32, String) {
    let out = gpumem().arg("bench-alloc").args(args).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    (out.status.code().unwrap(), stderr)
}

#[test]
fn malformed_traces_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.bin");
    std::fs::write(&garbage, [0xffu8, 0, 1, 2]).unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", garbage.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("garbage.bin"), "{msg}");
    let evil = dir.path().join("evil.pickle");
    std::fs::write(&evil, b"\x80\x02cos\nsystem\n(S'echo pwned'\ntR.").unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", evil.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("refusing opcode GLOBAL"), "{msg}");
    let real = std::fs::read(trace("pytorch-snapshot-format-sample.pickle")).unwrap();
    let cut = dir.path().join("cut.pickle");
    std::fs::write(&cut, &real[..real.len() / 2]).unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", cut.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("malformed pickle"), "{msg}");
    let csv = dir.path().join("bad.csv");
    std::fs::write(
        &csv,
        "Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,notahex,12,0\n",
    )
    .unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", csv.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("line 2: bad pointer"), "{msg}");
    let (code, _) = fails(&["--device", "sim:1GiB", "--trace", "/nonexistent/trace.csv"]);
    assert_eq!(code, 1);
}

#[test]
fn gates_fail_with_exit_1_and_name_the_gate() {
    let out = gpumem()
        .args([
            "--json",
            "bench-alloc",
            "--device",
            "sim:1GiB",
            "-n",
            "500",
            "--max-p99-ns",
            "1",
            "--min-hit-rate",
            "0.5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("gate failed: --max-p99-ns (measured"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("--min-hit-rate"),
        "a passing gate is not named: {stderr}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["passed"], false);
    let gates = doc["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 2);
    assert!(gates
        .iter()
        .any(|g| g["name"] == "min-hit-rate" && g["passed"] == true));
    let (code, msg) = fails(&["--device", "sim:1GiB", "--no-raw", "--min-speedup", "2"]);
    assert_eq!(code, 2);
    assert!(msg.contains("--min-speedup needs the raw replay; drop --no-raw"));
}

#[test]
fn timeline_svg_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    bench(&[
        "--device",
        "sim:80GiB",
        "--trace",
        &trace("pytorch-snapshot-transformer-training.pickle"),
        "--timeline",
        svg.to_str().unwrap(),
        "--no-raw",
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    // No segment events in this snapshot: gpumem's two curves only.
    assert_eq!(text.matches("<polyline").count(), 2);
    for part in [
        "operations replayed",
        "memory (GiB)",
        ">gpumem reserved<",
        ">allocated<",
        ">usable limit 80.00 GiB<",
        "(above the plot)",
        ">peak 3.77 GiB<",
    ] {
        assert!(text.contains(part), "{part} missing");
    }
    // One title, naming the device once.
    assert_eq!(text.matches("sim:0").count(), 1);
    // Round y ticks: 0, 1, 2, 3, 4 GiB.
    for tick in ["\">0<", "\">1<", "\">2<", "\">3<", "\">4<"] {
        assert!(text.contains(tick), "tick {tick}");
    }

    // A trace with segment events: PyTorch's own reserved bytes over the whole trace, a step
    // from 20 to 60 MiB and back, as its events say.
    let events = dir.path().join("events.svg");
    bench(&[
        "--device",
        "host:1GiB",
        "--trace",
        &common::fixture("snapshot-segment-events.pickle"),
        "--timeline",
        events.to_str().unwrap(),
        "--no-raw",
    ]);
    let text = std::fs::read_to_string(&events).unwrap();
    assert_eq!(text.matches("<polyline").count(), 3);
    assert!(text.contains(">pytorch reserved<"));
    let reference = text
        .lines()
        .find(|l| l.contains("stroke-dasharray=\"6 3\" points="))
        .unwrap();
    assert!(reference.matches(',').count() >= 6, "{reference}");
}

#[test]
fn real_opencl_and_vulkan_devices() {
    for backend in ["opencl", "vulkan"] {
        if !common::device_present(backend) {
            continue;
        }
        let doc = bench(&[
            "--device",
            &format!("{backend}:0"),
            "-n",
            "1500",
            "--max-size",
            "8MiB",
        ]);
        check_common(&doc);
        assert_eq!(doc["device"]["backend"], backend);
        assert!(doc["pool"]["device_allocs"].as_u64().unwrap() >= 1);
        assert_eq!(doc["raw"]["corruptions"], 0);
    }
}

#[test]
fn cuda_stand_in_driver() {
    let dir = common::fake_gpu_drivers("bench-cuda", &[]);
    let out = gpumem()
        .env("LD_LIBRARY_PATH", &dir)
        .env("GPUMEM_FAKE_TOTAL", "4294967296")
        .args([
            "--json",
            "bench-alloc",
            "--device",
            "cuda:0",
            "-n",
            "800",
            "--max-size",
            "16MiB",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_common(&doc);
    assert_eq!(doc["device"]["name"], "Fake GPU 0");
}

#[test]
fn pytorch_segment_events_give_pytorchs_peak() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot-segment-events.pickle");
    let doc = bench(&["--device", "sim:1GiB", "--trace", path.to_str().unwrap()]);
    check_common(&doc);
    let r = &doc["reference"];
    assert_eq!(r["measured_as"], "segment_events");
    // segment_alloc 20 MiB + 40 MiB before the 40 MiB segment_free.
    assert_eq!(r["peak_reserved_bytes"], 60u64 << 20);
    assert_eq!(
        r["gpumem_reserved_bytes"],
        doc["pool"]["peak_reserved_bytes"]
    );
    assert_eq!(doc["workload"]["allocations"], 4);
    assert_eq!(doc["workload"]["skipped"], serde_json::json!([["oom", 1]]));
}

#[test]
fn environment_overrides_reach_the_pool() {
    let out = gpumem()
        .env("GPUMEM_MAX_POOL", "64MiB")
        .args([
            "--json",
            "bench-alloc",
            "--device",
            "sim:1GiB",
            "-n",
            "300",
            "--max-size",
            "1MiB",
            "--no-raw",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["pool"]["peak_reserved_bytes"].as_u64().unwrap() <= 64 << 20);
    let out = gpumem()
        .env("GPUMEM_MAX_POOL", "lots")
        .args(["bench-alloc", "--device", "sim:1GiB", "-n", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("GPUMEM_MAX_POOL=lots"));
}

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

#[test]
fn hostile_traces_end_in_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    // 200,000 nested tuples: decoded and dropped without deep recursion.
    let mut nested = b"\x80\x04K\x01".to_vec();
    nested.extend(std::iter::repeat_n(0x85u8, 200_000));
    nested.push(b'.');
    // 5 MB of None: the decoder's stack cap ends it.
    let mut nones = b"\x80\x04".to_vec();
    nones.extend(std::iter::repeat_n(b'N', 5_000_000));
    nones.push(b'.');
    for (name, data, want) in [
        ("nested.pickle", nested, "not a PyTorch memory snapshot"),
        ("nones.pickle", nones, "values on the stack"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, data).unwrap();
        let out = gpumem()
            .args(["bench-alloc", "--device", "sim:1GiB", "--trace"])
            .arg(&path)
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && err.lines().count() == 1,
            "{name}: {err}"
        );
    }
    // Output checked before the run: a missing folder, and the trace itself.
    let trace = dir.path().join("t.pickle");
    std::fs::copy(
        common::fixture("traces/pytorch-snapshot-format-sample.pickle"),
        &trace,
    )
    .unwrap();
    let before = std::fs::read(&trace).unwrap();
    // A hard link and a symlink to the trace are the trace.
    let hard = dir.path().join("hard.svg");
    std::fs::hard_link(&trace, &hard).unwrap();
    let soft = dir.path().join("soft.svg");
    std::os::unix::fs::symlink(&trace, &soft).unwrap();
    for timeline in [dir.path().join("no/such/t.svg"), trace.clone(), hard, soft] {
        let out = gpumem()
            .args(["bench-alloc", "--device", "sim:8GiB", "--trace"])
            .arg(&trace)
            .arg("--timeline")
            .arg(&timeline)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&trace).unwrap(), before);
}

/// `bench-alloc --trace path` on a simulated device: its one-line error (exit 1).
fn trace_error(path: &Path) -> String {
    common::one_line_error(
        gpumem()
            .args(["bench-alloc", "--device", "sim:1GiB", "--trace"])
            .arg(path),
        1,
    )
}

/// A minimal pickle writer (protocol 2 opcodes) so tests build hostile snapshots themselves.
enum Py {
    Int(i128),
    Str(&'static str),
    List(Vec<Py>),
    Dict(Vec<(&'static str, Py)>),
}

fn pickle(v: &Py) -> Vec<u8> {
    fn put(v: &Py, out: &mut Vec<u8>) {
        match v {
            Py::Int(i) => {
                // LONG1: length byte, then little-endian two's complement.
                out.extend([0x8a, 16]);
                out.extend(i.to_le_bytes());
            }
            Py::Str(s) => {
                out.push(b'X');
                out.extend((s.len() as u32).to_le_bytes());
                out.extend(s.as_bytes());
            }
            Py::List(items) => {
                out.extend(b"](");
                items.iter().for_each(|i| put(i, out));
                out.push(b'e');
            }
            Py::Dict(items) => {
                out.extend(b"}(");
                for (k, v) in items {
                    put(&Py::Str(k), out);
                    put(v, out);
                }
                out.push(b'u');
            }
        }
    }
    let mut out = vec![0x80, 2];
    put(v, &mut out);
    out.push(b'.');
    out
}

#[test]
fn snapshot_totals_past_64_bits_are_refused() {
    let alloc = || {
        Py::Dict(vec![
            ("action", Py::Str("alloc")),
            ("addr", Py::Int(4096)),
            ("size", Py::Int(512)),
        ])
    };
    let huge_segment = || {
        Py::Dict(vec![
            ("device", Py::Int(0)),
            ("total_size", Py::Int(1 << 63)),
            ("blocks", Py::List(vec![])),
        ])
    };
    let segment_event = || {
        Py::Dict(vec![
            ("action", Py::Str("segment_alloc")),
            ("addr", Py::Int(0)),
            ("size", Py::Int(u64::MAX as i128)),
        ])
    };
    let cases = [
        (
            "segments.pickle",
            Py::Dict(vec![
                ("segments", Py::List(vec![huge_segment(), huge_segment()])),
                ("device_traces", Py::List(vec![Py::List(vec![alloc()])])),
            ]),
            "sum below 2^64",
        ),
        (
            "events.pickle",
            Py::Dict(vec![(
                "device_traces",
                Py::List(vec![Py::List(vec![
                    segment_event(),
                    segment_event(),
                    alloc(),
                ])]),
            )]),
            "more than 2^64 bytes",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, doc, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, pickle(&doc)).unwrap();
        let err = trace_error(&path);
        assert!(err.contains(want), "{name}: {err}");
    }
}

#[test]
fn protocol_0_and_1_pickles_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        (
            "p0.pickle",
            &b"(dp0\nVdevice_traces\np1\n(lp2\n(lp3\nas."[..],
        ),
        (
            "p1.pickle",
            &b"}q\x00X\r\x00\x00\x00device_tracesq\x01]q\x02]q\x03as."[..],
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = trace_error(&path);
        assert!(err.contains("a pickle of protocol 0 or 1"), "{err}");
    }
}

// 20,000 streams, one allocate/free pair each: every stream gets its own cache and the whole
// log replays. (Replay time per stream, linear in the stream count since the caches were
// indexed, is a benchmark's figure, not a test's: a wall-clock limit here was killed under load.)
#[test]
fn an_rmm_log_with_20k_streams_replays_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    for i in 0..20_000u64 {
        let ptr = 0x10000 + i * 4096;
        csv.push_str(&format!("1,0.1,allocate,{ptr:#x},1024,{:#x}\n", i + 1));
        csv.push_str(&format!("1,0.1,free,{ptr:#x},1024,{:#x}\n", i + 1));
    }
    let path = dir.path().join("streams.csv");
    std::fs::write(&path, csv).unwrap();
    let doc = common::json_ok(
        gpumem()
            .args([
                "--json",
                "bench-alloc",
                "--device",
                "sim:8GiB",
                "--no-raw",
                "--trace",
            ])
            .arg(&path),
    );
    assert_eq!(doc["workload"]["ops"], 40_000);
    assert_eq!(doc["interrupted"], false);
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

// A snapshot whose segments include one from before the recording: PyTorch's reserved peak is
// that segment plus the events' net peak, not the events' alone.
#[test]
fn segments_that_predate_the_recording_count_in_pytorchs_peak() {
    const MIB: i128 = 1 << 20;
    let event = |action: &'static str, addr: i128, size: i128| {
        Py::Dict(vec![
            ("action", Py::Str(action)),
            ("addr", Py::Int(addr)),
            ("size", Py::Int(size)),
        ])
    };
    let segment = |addr: i128, size: i128| {
        Py::Dict(vec![
            ("device", Py::Int(0)),
            ("address", Py::Int(addr)),
            ("total_size", Py::Int(size)),
            ("blocks", Py::List(vec![])),
        ])
    };
    let doc = Py::Dict(vec![
        (
            "segments",
            Py::List(vec![segment(0, 20 * MIB), segment(1 << 40, 8 * MIB)]),
        ),
        (
            "device_traces",
            Py::List(vec![Py::List(vec![
                event("segment_alloc", 0, 20 * MIB),
                event("alloc", 0, MIB),
                event("segment_alloc", 1 << 30, 40 * MIB),
                event("segment_free", 1 << 30, 40 * MIB),
                event("free_completed", 0, MIB),
            ])]),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("predating.pickle");
    std::fs::write(&path, pickle(&doc)).unwrap();
    let doc = bench(&["--device", "sim:1GiB", "--trace", path.to_str().unwrap()]);
    assert_eq!(doc["reference"]["measured_as"], "segment_events");
    assert_eq!(
        doc["reference"]["peak_reserved_bytes"],
        68u64 << 20,
        "{}",
        doc["reference"]
    );
}

// --max-fragmentation gates fragmentation when the pool held the most, not at the end of the
// run (where two emptied cached arenas read as 0.5).
#[test]
fn the_fragmentation_gate_reads_the_peak() {
    let args = ["--device", "sim:4GiB", "-n", "3000", "--no-raw"];
    let doc = bench(&args);
    let (peak, end) = (
        doc["pool"]["fragmentation_peak"].as_f64().unwrap(),
        doc["pool"]["fragmentation_end"].as_f64().unwrap(),
    );
    assert!(peak < end, "{peak} vs {end}");
    let threshold = format!("{:.4}", (peak + end) / 2.0);
    let mut gated = args.to_vec();
    gated.extend(["--max-fragmentation", &threshold]);
    let doc = bench(&gated);
    assert_eq!(doc["gates"][0]["measured"].as_f64().unwrap(), peak);
    assert_eq!(doc["passed"], true);
    let below = format!("{:.4}", peak / 2.0);
    let mut failing = args.to_vec();
    failing.extend(["--json", "--max-fragmentation", &below]);
    let out = gpumem().arg("bench-alloc").args(&failing).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn transfer_workload_measures_both_ways_and_verifies_every_byte() {
    for device in ["host", "opencl:0", "vulkan:0"] {
        let out = gpumem()
            .args([
                "--json",
                "bench-alloc",
                "--workload",
                "transfer",
                "--device",
                device,
            ])
            .args(["--transfer-size", "8MiB", "--chunk", "1MiB"])
            .output()
            .unwrap();
        if out.status.code() != Some(0) && !common::required(device.split(':').next().unwrap()) {
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(0),
            "{device}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let t = &doc["transfer"];
        assert_eq!(
            (t["size"].as_u64(), t["chunk"].as_u64()),
            (Some(8 << 20), Some(1 << 20))
        );
        assert_eq!(t["corruptions"], 0);
        for dir in ["upload", "download"] {
            assert!(
                t[dir]["blocking_bytes_per_sec"].as_f64().unwrap() > 0.0,
                "{device} {dir}"
            );
            assert!(t[dir]["speedup"].as_f64().unwrap() > 0.0);
        }
        assert_eq!(doc["passed"], true);
    }
    let err = common::one_line_error(
        gpumem().args([
            "bench-alloc",
            "--workload",
            "transfer",
            "--device",
            "sim:1GiB",
        ]),
        2,
    );
    assert!(err.contains("sim:SIZE holds none"), "{err}");
}

// Counts in the text report carry separators, as everywhere else: operations, allocations, the
// raw device's allocations and the rates.
#[test]
fn counts_in_the_text_report_have_separators() {
    let out = gpumem()
        .args([
            "bench-alloc",
            "--device",
            "host:256MiB",
            "--workload",
            "random",
        ])
        .args(["--color", "never"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("2,000 operations, 1,000 allocations"),
        "{text}"
    );
    let device = text
        .lines()
        .find(|l| l.contains("device allocations"))
        .unwrap();
    assert!(device.contains("1,000"), "{device}");
    let rate = text.lines().find(|l| l.contains("ops/s")).unwrap();
    let numbers: Vec<&str> = rate
        .split(|c: char| !(c.is_ascii_digit() || c == ','))
        .filter(|w| w.len() > 3)
        .collect();
    assert!(
        !numbers.is_empty() && numbers.iter().all(|n| n.contains(',')),
        "{rate}"
    );
}

// The timeline is SVG: a file named for another format is refused, not written as SVG.
#[test]
fn a_timeline_named_for_another_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("t.png");
    let out = gpumem()
        .args(["bench-alloc", "--device", "host:64MiB", "--timeline"])
        .arg(&png)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--timeline writes SVG; name the file FILE.svg"),
        "{err}"
    );
    assert!(!png.exists());
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
    assert!(
        xml.contains("name=\"--max-fragmentation\"></testcase>"),
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
