//! `gpumem stress` on capped host memory, the real OpenCL/Vulkan devices and the stand-in CUDA
//! driver: zero corruptions, zero leaks, pressure in order; injected failures survived; a
//! planted corruption caught; Ctrl-C handled.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpumem;

use serde_json::Value;

fn stress(args: &[&str]) -> (i32, Value, String) {
    let out = gpumem()
        .args(["--json", "stress"])
        .args(args)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap(),
        doc,
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The checks every clean run must pass.
fn assert_clean(doc: &Value) {
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["passed"], true, "{}", doc["failures"]);
    assert_eq!(doc["corruptions"], 0);
    assert_eq!(doc["leaked_buffers"], 0);
    assert_eq!(doc["leaked_bytes"], 0);
    assert_eq!(doc["peak_pressure"], "critical");
    let ramp: Vec<(String, String)> = doc["pressure_transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["phase"] == "ramp")
        .map(|t| {
            (
                t["from"].as_str().unwrap().to_string(),
                t["to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [("low", "medium"), ("medium", "high"), ("high", "critical")]
        .map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(ramp, expected);
    if doc["free_compared"] == true {
        assert!(
            doc["device_free_after"].as_u64().unwrap()
                + doc["free_tolerance_bytes"].as_u64().unwrap()
                >= doc["device_free_before"].as_u64().unwrap()
        );
    }
    // Where the backend counts what it holds, everything came back to the byte.
    if let Some(after) = doc["device_held_after"].as_u64() {
        assert_eq!(Some(after), doc["device_held_before"].as_u64());
    }
    // Every out-of-memory failure went through the retry path first.
    assert!(doc["retries"].as_u64().unwrap() >= doc["ooms"].as_u64().unwrap());
    let phases: Vec<&str> = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["ramp", "exhaust", "churn", "recover"]);
}

#[test]
fn capped_host_memory() {
    let (code, doc, stderr) = stress(&[
        "--device",
        "host:512MiB",
        "--ops",
        "400",
        "--threads",
        "4",
        "--max-size",
        "2MiB",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_clean(&doc);
    assert!(
        doc["cpu_fallbacks"].as_u64().unwrap() >= 1,
        "exhaust must spill to the CPU"
    );
    assert_eq!(doc["device"]["backend"], "host");
    assert_eq!(doc["device_free_before"], 512u64 << 20);
    assert_eq!(doc["device_free_after"], 512u64 << 20);
}

#[test]
fn without_cpu_fallback_the_typed_error_is_returned_and_survived() {
    let (code, doc, stderr) = stress(&[
        "--device",
        "host:256MiB",
        "--ops",
        "200",
        "--no-cpu-fallback",
        "--max-size",
        "1MiB",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_clean(&doc);
    assert_eq!(doc["cpu_fallbacks"], 0);
    assert_eq!(doc["oom_errors"], doc["ooms"]);
    assert!(doc["oom_errors"].as_u64().unwrap() >= 1);
}

#[test]
fn injected_failures_are_survived() {
    let (code, doc, stderr) = stress(&[
        "--device",
        "host:256MiB",
        "--ops",
        "300",
        "--inject-failures",
        "0.1",
        "--max-size",
        "1MiB",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_clean(&doc);
    assert!(doc["injected_failures"].as_u64().unwrap() > 0);
    assert_eq!(doc["escaped_errors"], 0);
}

#[test]
fn a_planted_corruption_is_caught() {
    let (code, doc, stderr) = stress(&[
        "--device",
        "host:128MiB",
        "--phase",
        "churn",
        "--ops",
        "50",
        "--plant-corruption",
        "--max-size",
        "256KiB",
    ]);
    assert_eq!(code, 1);
    assert_eq!(doc["passed"], false);
    assert!(doc["corruptions"].as_u64().unwrap() >= 1);
    assert!(
        stderr.contains("corruption: 1 buffers did not read back as written"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn phases_can_be_selected_and_sim_is_refused() {
    let (code, doc, _) = stress(&["--device", "host:64MiB", "--phase", "ramp"]);
    assert_eq!(code, 0);
    let phases: Vec<&str> = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["ramp", "recover"], "recover always runs");
    let (code, _, stderr) = stress(&["--device", "sim:1GiB"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("sim:SIZE holds no data"), "{stderr}");
}

#[test]
fn real_opencl_and_vulkan_devices() {
    for backend in ["opencl", "vulkan"] {
        if !common::device_present(backend) {
            continue;
        }
        let (code, doc, stderr) = stress(&[
            "--device",
            &format!("{backend}:0"),
            "--max-pool",
            "256MiB",
            "--ops",
            "200",
            "--max-size",
            "1MiB",
            "--threads",
            "2",
        ]);
        assert_eq!(code, 0, "{backend}: {stderr}");
        assert_clean(&doc);
        assert_eq!(doc["device"]["backend"], backend);
        // PoCL and lavapipe hand out host RAM: the leak check is the backend's own count.
        assert_eq!(doc["free_compared"], false, "{backend}");
        assert!(doc["device_held_after"].is_u64(), "{backend}");
    }
}

#[test]
fn cuda_stand_in_driver() {
    let dir = common::fake_gpu_drivers("stress-cuda", &[]);
    let out = gpumem()
        .env("LD_LIBRARY_PATH", &dir)
        .env("GPUMEM_FAKE_TOTAL", "1073741824")
        .args([
            "--json",
            "stress",
            "--device",
            "cuda:0",
            "--ops",
            "200",
            "--max-size",
            "1MiB",
            "--max-pool",
            "256MiB",
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
    assert_clean(&doc);
    // The stand-in driver's cuMemGetInfo shows the memory came back.
    assert_eq!(doc["device_free_after"], 1u64 << 30);
}

#[cfg(unix)]
#[test]
fn ctrl_c_ends_the_phase_frees_everything_and_reports() {
    interrupted_by(libc::SIGINT, 130);
}

#[test]
fn sigterm_ends_the_phase_frees_everything_and_reports() {
    interrupted_by(libc::SIGTERM, 143);
}

fn interrupted_by(signal: libc::c_int, code: i32) {
    let args = [
        "--json",
        "stress",
        "--device",
        "host:256MiB",
        "--phase",
        "churn",
        "--duration",
        "60s",
        "--max-size",
        "1MiB",
    ];
    let out = common::run_until_signal(&args, std::time::Duration::from_millis(3000), signal, code);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["interrupted"], true);
    // Cut short, it has not passed, though no check failed.
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["failures"], serde_json::json!([]));
    assert_eq!(doc["leaked_buffers"], 0);
    assert_eq!(doc["corruptions"], 0);
    assert!(doc["duration_s"].as_f64().unwrap() < 30.0);
}

/// `--export-markdown` and `--export-junit`: a phase a row and a test case; a corrupted buffer
/// fails the run's checks, named in the failure.
#[test]
fn exports_name_each_phase_and_the_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (md, xml) = (dir.path().join("s.md"), dir.path().join("s.xml"));
    let out = gpumem()
        .args([
            "stress",
            "--device",
            "host:128MiB",
            "--phase",
            "churn",
            "--ops",
            "50",
        ])
        .args([
            "--plant-corruption",
            "--max-size",
            "256KiB",
            "--export-markdown",
        ])
        .arg(&md)
        .arg("--export-junit")
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("### gpumem stress: failed"), "{md}");
    assert!(md.contains("| churn | "), "{md}");
    assert!(
        md.contains("- corruption: 1 buffers did not read back as written"),
        "{md}"
    );
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(xml.contains("name=\"churn\""), "{xml}");
    assert!(
        xml.contains(
            "checks\"><failure message=\"corruption: 1 buffers did not read back as written"
        ),
        "{xml}"
    );
}

/// Each phase reports its progress against a total fixed when it starts (the bar's length used
/// to grow with the count, so it never filled).
#[test]
fn each_phase_reports_against_a_fixed_total() {
    use gpumem::alloc::{MemoryConfig, Pool};
    use gpumem::backend::HostDevice;
    use gpumem::workload::stress::{run_stress, DeviceBaseline, StressOptions, StressPhase};
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    let device = Arc::new(HostDevice::new(Some(64 << 20)));
    let config = MemoryConfig::default()
        .with_gpu_memory_fraction(1.0)
        .with_min_free_bytes(0);
    let pool = Pool::new(device.clone(), config).unwrap();
    let (baseline, _) = DeviceBaseline::read(device.as_ref()).unwrap();
    for ops in [Some(2_000), None] {
        let options = StressOptions {
            phases: vec![
                StressPhase::Ramp,
                StressPhase::Exhaust,
                StressPhase::Churn,
                StressPhase::Recover,
            ],
            threads: 2,
            duration: std::time::Duration::from_millis(200),
            ops,
            max_size: 1 << 20,
            seed: 7,
            plant_corruption: false,
            interrupt: Arc::new(AtomicBool::new(false)),
        };
        let seen: Mutex<BTreeMap<String, (u64, u64, u64)>> = Mutex::new(BTreeMap::new());
        let progress = |phase: StressPhase, done: u64, total: u64| {
            let mut seen = seen.lock().unwrap();
            let e = seen.entry(format!("{phase:?}")).or_insert((total, 0, 0));
            assert_eq!(e.0, total, "{phase:?}: the total changed");
            assert!(done <= total, "{phase:?}: {done} of {total}");
            e.1 = e.1.max(done);
            e.2 += 1;
        };
        let outcome = run_stress(&pool, device.as_ref(), baseline, &options, &|| 0, &progress);
        assert!(outcome.passed, "{outcome:?}");
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert_eq!(seen["Ramp"].0, 100);
        assert_eq!(seen["Churn"].0, ops.map_or(200, |o| 2 * o));
    }
}
