//! `gpumem bench-alloc` on sim, host, the real OpenCL/Vulkan devices, the stand-in CUDA driver,
//! and recorded traces.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpumem;

use std::path::Path;

use serde_json::Value;

pub(crate) fn bench(args: &[&str]) -> Value {
    common::json_ok(gpumem().args(["--json", "bench-alloc"]).args(args))
}

pub(crate) fn trace(name: &str) -> String {
    common::fixture(&format!("traces/{name}"))
}

pub(crate) fn check_common(doc: &Value) {
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

pub(crate) fn fails(args: &[&str]) -> (i32, String) {
    let out = gpumem().arg("bench-alloc").args(args).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    (out.status.code().unwrap(), stderr)
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
        ">peak 3.66 GiB<",
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

#[test]
fn compare_native_sets_the_pool_beside_the_devices_own_allocator() {
    // A trace: the same operations on both sides, and the PyTorch trace's peak as live bytes.
    let args = ["--device", "sim:8GiB", "--trace"];
    let doc = bench(
        &[
            &args[..],
            &[
                &trace("pytorch-snapshot-transformer-training.pickle"),
                "--compare",
                "native",
            ],
        ]
        .concat(),
    );
    check_common(&doc);
    let n = &doc["native"];
    assert_eq!(n["allocator"], "simulated");
    assert!(n["driver_peaks"].is_null());
    let (pool, native, ratios) = (&n["pool"], &n["native"], &n["ratios"]);
    // The native side holds exactly what is live: one device allocation per request.
    assert_eq!(native["peak_live_bytes"], pool["peak_live_bytes"]);
    assert!(
        native["peak_reserved_bytes"].as_u64().unwrap()
            >= native["peak_live_bytes"].as_u64().unwrap()
    );
    assert_eq!(
        pool["peak_reserved_bytes"],
        doc["pool"]["peak_reserved_bytes"]
    );
    let per_live = |side: &Value| {
        side["peak_reserved_bytes"].as_f64().unwrap() / side["peak_live_bytes"].as_f64().unwrap()
    };
    assert!((pool["reserved_per_live"].as_f64().unwrap() - per_live(pool)).abs() < 1e-9);
    assert!(
        (ratios["reserved_per_live"].as_f64().unwrap() - per_live(pool) / per_live(native)).abs()
            < 1e-9
    );
    for side in [pool, native] {
        assert!(side["alloc_p50_ns"].as_u64().unwrap() <= side["alloc_p99_ns"].as_u64().unwrap());
    }
    // Without the flag there is no comparison.
    let plain = bench(&["--device", "sim:1GiB", "-n", "100"]);
    assert!(plain["native"].is_null());
    // The text report prints the side-by-side table.
    let text = gpumem()
        .args([
            "bench-alloc",
            "--device",
            "host",
            "-n",
            "200",
            "--compare",
            "native",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("pool ÷ native"), "{text}");
    assert!(
        text.contains("native: mmap, one device allocation per request"),
        "{text}"
    );
    assert!(text.contains("reserved / live"), "{text}");
}

/// `--compare native` on the stand-in CUDA driver with `defines`; returns the report and the
/// stand-in's counts of its stream-ordered pool at exit.
fn compare_native_on_fake_cuda(
    variant: &str,
    defines: &[&str],
) -> (Value, std::collections::BTreeMap<String, u64>) {
    let dir = common::fake_gpu_drivers(variant, defines);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("pool.log");
    let doc = common::json_ok(
        gpumem()
            .env("LD_LIBRARY_PATH", &dir)
            .env("GPUMEM_FAKE_TOTAL", "4294967296")
            .env("GPUMEM_FAKE_POOL_LOG", &log)
            .args(["--json", "bench-alloc", "--device", "cuda:0", "-n", "800"])
            .args(["--max-size", "16MiB", "--compare", "native"]),
    );
    check_common(&doc);
    let counts = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect();
    (doc, counts)
}

// On CUDA the native side is the driver's own caching allocator: every request through
// cuMemAllocAsync on the default pool and freed with cuMemFreeAsync, the peak reserved as the
// pool reports it, and the pool's cache given back and its threshold put back at the end.
#[test]
fn compare_native_on_cuda_is_the_stream_ordered_pool() {
    let (doc, counts) = compare_native_on_fake_cuda("bench-cuda", &[]);
    let n = &doc["native"];
    assert_eq!(n["allocator"], "cuMemAllocAsync (default pool)");
    let allocations = doc["workload"]["allocations"].as_u64().unwrap();
    assert_eq!(allocations, 800);
    assert_eq!(counts["allocs"], allocations, "{counts:?}");
    assert_eq!(counts["frees"], allocations);
    assert_eq!(counts["live_bytes"], 0);
    assert_eq!(counts["reserved_bytes"], 0, "trimmed at the end");
    assert_eq!(counts["threshold"], 0, "CUDA's default put back");
    // The peaks are the pool's own watermarks of the replay.
    assert_eq!(n["driver_peaks"]["reserved"], counts["reserved_high"]);
    assert_eq!(n["driver_peaks"]["used"], counts["used_high"]);
    let native = &n["native"];
    assert_eq!(native["peak_reserved_bytes"], counts["reserved_high"]);
    assert_eq!(native["peak_live_bytes"], n["pool"]["peak_live_bytes"]);
    // The pool caches what is freed: it holds at least what was live at the peak.
    assert!(counts["reserved_high"] >= native["peak_live_bytes"].as_u64().unwrap());
    assert!(counts["used_high"] <= counts["reserved_high"]);
    assert!(native["alloc_p50_ns"].as_u64().unwrap() > 0);
    assert_eq!(doc["raw"]["corruptions"], 0);
}

// A driver without memory pools (before CUDA 11.2): the native side is cuMemAlloc, its peak
// counted.
#[test]
fn compare_native_on_cuda_without_memory_pools_is_cumemalloc() {
    let (doc, counts) = compare_native_on_fake_cuda("bench-cuda-no-pools", &["-DOMIT_MEMPOOLS"]);
    let n = &doc["native"];
    assert_eq!(n["allocator"], "cuMemAlloc");
    assert!(n["driver_peaks"].is_null());
    assert!(counts.is_empty(), "{counts:?}");
    assert!(
        n["native"]["peak_reserved_bytes"].as_u64().unwrap()
            >= n["native"]["peak_live_bytes"].as_u64().unwrap()
    );
}

#[test]
fn compare_native_needs_the_raw_replay() {
    let (code, msg) = fails(&["--device", "sim:1GiB", "--no-raw", "--compare", "native"]);
    assert_eq!(code, 2);
    assert_eq!(
        msg.trim_end(),
        "gpumem: error: --compare native replays through the device's own allocator, which --no-raw skips; drop one"
    );
    let (code, msg) = fails(&[
        "--device",
        "host",
        "--workload",
        "transfer",
        "--compare",
        "native",
    ]);
    assert_eq!(code, 2);
    assert!(msg.contains("--workload transfer moves data"), "{msg}");
    let (code, msg) = fails(&["--device", "sim:1GiB", "--compare", "vma"]);
    assert_eq!(code, 2);
    assert!(msg.contains("native"), "{msg}");
}
