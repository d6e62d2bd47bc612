//! `gpumem discover` against real software devices (PoCL, lavapipe) and stand-in CUDA/NVML
//! drivers.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpumem;

use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

fn discover_json(cmd: &mut Command, args: &[&str]) -> Value {
    common::json_ok(cmd.args(["--json", "discover"]).args(args))
}

/// `discover --json` that may end in exit 4 (no device on the backends asked for): the status
/// and the report, which stdout holds either way.
fn discover_json_status(cmd: &mut Command, args: &[&str]) -> (i32, Value) {
    let out = cmd
        .args(["--json", "discover"])
        .args(args)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap();
    (out.status.code().unwrap(), doc)
}

fn backend<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == name)
        .unwrap()
}

#[test]
fn lists_every_backend_with_a_reason_when_unavailable() {
    let doc = discover_json(&mut gpumem(), &[]);
    assert_eq!(doc["schema_version"], 1);
    let names: Vec<&str> = doc["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["cpu", "cuda", "nvml", "rocm", "metal", "opencl", "vulkan"]
    );
    for b in doc["backends"].as_array().unwrap() {
        if b["available"] == false {
            assert!(b["reason"].as_str().is_some_and(|r| !r.is_empty()), "{b}");
            assert_eq!(b["devices"].as_array().unwrap().len(), 0);
        } else {
            assert!(b["reason"].is_null());
        }
    }
    // No NVIDIA, AMD or Apple driver on test machines.
    let cuda = backend(&doc, "cuda");
    assert_eq!(cuda["available"], false);
    assert!(cuda["reason"]
        .as_str()
        .unwrap()
        .starts_with("library not found (tried libcuda.so"));
    assert!(backend(&doc, "nvml")["reason"]
        .as_str()
        .unwrap()
        .contains("libnvidia-ml.so.1"));
    if cfg!(not(target_os = "macos")) {
        assert!(backend(&doc, "metal")["reason"]
            .as_str()
            .unwrap()
            .starts_with("not supported on this OS"));
    }
    assert!(doc["recommended"]["backend"].is_string());
}

#[cfg(target_os = "linux")]
#[test]
fn cpu_total_equals_the_os() {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .map(|v| v.trim().trim_end_matches("kB").trim().parse().unwrap())
        .unwrap();
    let doc = discover_json(&mut gpumem(), &["--backend", "cpu"]);
    let cpu = &backend(&doc, "cpu")["devices"][0];
    assert_eq!(cpu["total_bytes"].as_u64().unwrap(), kib * 1024);
    assert_eq!(
        doc["host"]["memory_total_bytes"].as_u64().unwrap(),
        kib * 1024
    );
    assert_eq!(cpu["free_scope"], "device");
}

/// `clinfo --raw` values for device 0 of the first platform, by property name.
fn clinfo_value(property: &str) -> Result<u64, String> {
    let out = StdCommand::new("clinfo")
        .arg("--raw")
        .output()
        .map_err(|e| format!("clinfo: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let mut parts = l.split_whitespace();
            let _device = parts.next()?;
            (parts.next()? == property).then(|| parts.next()?.parse().ok())?
        })
        .ok_or_else(|| format!("clinfo reports no {property} (no OpenCL platform?)"))
}

#[test]
fn opencl_device_matches_clinfo() {
    let total = clinfo_value("CL_DEVICE_GLOBAL_MEM_SIZE");
    if !common::backend_present("opencl", total.as_ref().map(|_| ()).map_err(Clone::clone)) {
        return;
    }
    let doc = discover_json(&mut gpumem(), &["--backend", "opencl"]);
    let opencl = backend(&doc, "opencl");
    assert_eq!(opencl["available"], true, "{opencl}");
    let device = &opencl["devices"][0];
    assert_eq!(device["total_bytes"].as_u64(), Some(total.unwrap()));
    assert_eq!(
        device["max_alloc_bytes"].as_u64(),
        Some(clinfo_value("CL_DEVICE_MAX_MEM_ALLOC_SIZE").unwrap())
    );
}

// PoCL and lavapipe allocate host RAM: their free memory is never more than the host has
// available (their own figure is the machine's total), so concurrent runs cannot each plan for
// all of it. Slack covers memory that changes between the two probes.
#[test]
fn host_backed_devices_report_no_more_free_than_the_host() {
    let present = clinfo_value("CL_DEVICE_GLOBAL_MEM_SIZE").map(|_| ());
    if !common::backend_present("opencl", present) {
        return;
    }
    let doc = discover_json(
        &mut gpumem(),
        &[
            "--backend",
            "cpu",
            "--backend",
            "opencl",
            "--backend",
            "vulkan",
        ],
    );
    let host_free = backend(&doc, "cpu")["devices"][0]["free_bytes"]
        .as_u64()
        .unwrap();
    for name in ["opencl", "vulkan"] {
        for d in backend(&doc, name)["devices"].as_array().unwrap() {
            if d["unified_memory"] != true {
                continue;
            }
            let free = d["free_bytes"].as_u64().expect("host-backed free is known");
            assert!(
                free <= d["total_bytes"].as_u64().unwrap() && free <= host_free + host_free / 20,
                "{name}: {free} free, host {host_free}"
            );
        }
    }
}

/// Sum of device-local heap sizes of GPU0 from `vulkaninfo`.
fn vulkaninfo_device_local_heaps() -> Result<u64, String> {
    let out = StdCommand::new("vulkaninfo")
        .output()
        .map_err(|e| format!("vulkaninfo: {e}"))?;
    if !out.status.success() {
        return Err("vulkaninfo failed (no Vulkan driver?)".into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // The first device's memory section; heaps look like:
    //   memoryHeaps[0]:
    //       size   = 2147483648 (0x80000000) (2.00 GiB)
    //       flags: count = 1
    //           MEMORY_HEAP_DEVICE_LOCAL_BIT
    let section = text
        .split("VkPhysicalDeviceMemoryProperties")
        .nth(1)
        .ok_or("no memory properties")?;
    let section = section.split("memoryTypes").next().unwrap_or(section);
    let mut total = 0;
    for heap in section.split("memoryHeaps[").skip(1) {
        let size: u64 = heap
            .lines()
            .find_map(|l| {
                l.trim().strip_prefix("size").map(|v| {
                    v.trim_start_matches([' ', '='])
                        .split_whitespace()
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
            })
            .and_then(|v| v.parse().ok())
            .ok_or("unparsable heap size")?;
        if heap.contains("MEMORY_HEAP_DEVICE_LOCAL_BIT") {
            total += size;
        }
    }
    Ok(total)
}

#[test]
fn vulkan_device_matches_vulkaninfo() {
    let heaps = vulkaninfo_device_local_heaps();
    if !common::backend_present("vulkan", heaps.as_ref().map(|_| ()).map_err(Clone::clone)) {
        return;
    }
    let doc = discover_json(&mut gpumem(), &["--backend", "vulkan"]);
    let vulkan = backend(&doc, "vulkan");
    assert_eq!(vulkan["available"], true, "{vulkan}");
    assert_eq!(
        vulkan["devices"][0]["total_bytes"].as_u64(),
        Some(heaps.unwrap())
    );
    assert!(vulkan["devices"][0]["compute_capability"]
        .as_str()
        .unwrap()
        .starts_with("Vulkan 1."));
}

#[test]
fn backend_flag_limits_probing() {
    let doc = discover_json(&mut gpumem(), &["--backend", "cpu", "--backend", "metal"]);
    let names: Vec<&str> = doc["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu", "metal"]);
}

#[test]
fn fake_cuda_and_nvml_devices_are_enumerated_and_merged() {
    let dir = common::fake_gpu_drivers("discover-full", &[]);
    let doc = discover_json(
        gpumem()
            .env("LD_LIBRARY_PATH", &dir)
            .env("GPUMEM_FAKE_DEVICES", "2")
            .env("GPUMEM_FAKE_TOTAL", "85899345920"),
        &["--backend", "cuda", "--backend", "nvml"],
    );
    let cuda = backend(&doc, "cuda");
    assert_eq!(cuda["available"], true, "{cuda}");
    let devices = cuda["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    let d1 = &devices[1];
    assert_eq!(d1["name"], "Fake GPU 1");
    assert_eq!(d1["total_bytes"], 85_899_345_920u64);
    assert_eq!(d1["free_bytes"], 85_899_345_920u64);
    assert_eq!(d1["free_scope"], "device");
    assert_eq!(d1["compute_capability"], "9.0");
    assert_eq!(d1["driver_version"], "CUDA 12.8");
    assert_eq!(d1["pci_bus_id"], "0000:02:00.0");
    assert_eq!(d1["uuid"], "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f");
    // NVML's view is merged into the CUDA row of the same GPU (bus ids differ in domain width).
    assert_eq!(d1["nvml"]["used_bytes"], 1u64 << 30);
    assert_eq!(d1["nvml"]["reserved_bytes"], 300u64 << 20);
    assert_eq!(d1["nvml"]["processes"][0]["pid"], 4242);
    assert_eq!(d1["nvml"]["mig_enabled"], false);
    let nvml = backend(&doc, "nvml");
    assert_eq!(
        nvml["devices"][0]["driver_version"],
        "570.86.15 (CUDA 12.8)"
    );
    assert_eq!(doc["recommended"]["backend"], "cuda");
}

#[test]
fn fake_cuda_error_paths_are_reasons_not_panics() {
    let dir = common::fake_gpu_drivers("discover-full", &[]);
    let reason = |envs: &[(&str, &str)], dir: &std::path::Path| {
        let mut cmd = gpumem();
        cmd.env("LD_LIBRARY_PATH", dir);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        // Where neither backend has a device the report ends in exit 4 (tested below).
        let (_, doc) = discover_json_status(&mut cmd, &["--backend", "cuda", "--backend", "nvml"]);
        (
            backend(&doc, "cuda")["reason"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            backend(&doc, "nvml")["reason"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    };
    assert_eq!(
        reason(&[("GPUMEM_FAKE_DEVICES", "0")], &dir).0,
        "no devices"
    );
    assert_eq!(
        reason(&[("GPUMEM_FAKE_INIT_ERROR", "3")], &dir).0,
        "driver not loaded: cuInit returned CUDA_ERROR_NOT_INITIALIZED"
    );
    assert!(reason(&[("GPUMEM_FAKE_NVML_INIT_ERROR", "9")], &dir)
        .1
        .starts_with("driver not loaded"));
    let missing = common::fake_gpu_drivers("discover-no-meminfo", &["-DOMIT_MEMGETINFO"]);
    assert_eq!(
        reason(&[], &missing).0,
        "libcuda lacks the function cuMemGetInfo_v2"
    );
}

#[test]
fn a_hung_driver_times_out_instead_of_hanging_the_tool() {
    let dir = common::fake_gpu_drivers("discover-full", &[]);
    let start = Instant::now();
    let doc = discover_json(
        gpumem()
            .env("LD_LIBRARY_PATH", &dir)
            .env("GPUMEM_FAKE_INIT_DELAY_MS", "20000"),
        &[
            "--backend",
            "cuda",
            "--backend",
            "cpu",
            "--timeout",
            "1500ms",
        ],
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(backend(&doc, "cuda")["reason"], "timed out after 1.5 s");
    assert_eq!(backend(&doc, "cpu")["available"], true);
}

#[test]
fn prometheus_format_has_gauges_for_every_device() {
    let dir = common::fake_gpu_drivers("discover-full", &[]);
    let output = gpumem()
        .env("LD_LIBRARY_PATH", &dir)
        .args([
            "discover",
            "--backend",
            "cuda",
            "--backend",
            "cpu",
            "--format",
            "prometheus",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("# TYPE gpumem_device_memory_total_bytes gauge"));
    assert!(text.contains(
        "gpumem_device_memory_total_bytes{backend=\"cuda\",device=\"0\",name=\"Fake GPU 0\",uuid=\"GPU-10111213-1415-1617-1819-1a1b1c1d1e1f\"} 25769803776"
    ));
    assert!(text.contains("gpumem_device_memory_free_bytes{backend=\"cpu\",device=\"0\""));
}

#[test]
fn table_output_lists_unavailable_backends_and_recommendation() {
    let output = gpumem()
        .args([
            "discover",
            "--backend",
            "cpu",
            "--backend",
            "metal",
            "--color",
            "never",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("CPU"));
    assert!(text.contains("Recommended backend: cpu (device 0)"));
    if cfg!(not(target_os = "macos")) {
        assert!(text.contains("✗ metal: not supported on this OS"));
    }
}

#[test]
fn closed_pipe_exits_zero_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = StdCommand::new(env!("CARGO_BIN_EXE_gpumem"))
        .args(["--json", "discover", "--backend", "cpu"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
}

// A broken file where the driver should be is not "library not found": it is named, with the
// loader's reason, and every other backend is still reported.
#[test]
fn unloadable_driver_files_are_named_with_the_loaders_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("libcuda.so.1"), b"").unwrap();
    std::fs::write(dir.path().join("libnvidia-ml.so.1"), b"not a library\n").unwrap();
    std::fs::create_dir(dir.path().join("libamdhip64.so")).unwrap();
    let doc = discover_json(
        gpumem().env("LD_LIBRARY_PATH", dir.path()),
        &[
            "--backend",
            "cuda",
            "--backend",
            "nvml",
            "--backend",
            "rocm",
            "--backend",
            "cpu",
        ],
    );
    for (name, file) in [
        ("cuda", "libcuda.so.1"),
        ("nvml", "libnvidia-ml.so.1"),
        ("rocm", "libamdhip64.so"),
    ] {
        let b = backend(&doc, name);
        let reason = b["reason"].as_str().unwrap();
        assert_eq!(b["available"], false);
        assert!(
            reason.contains(file) && reason.contains("is not a loadable library"),
            "{name}: {reason}"
        );
    }
    assert_eq!(backend(&doc, "cpu")["available"], true);
}

// A driver that kills its process takes down only the probe child: the backend is reported
// with the signal and the call, and every other backend is still listed.
#[test]
fn a_crashing_driver_is_reported_not_fatal() {
    let dir = common::fake_gpu_drivers("discover-full", &[]);
    for (crash, signal) in [("segv", "SIGSEGV"), ("abort", "SIGABRT")] {
        let doc = discover_json(
            gpumem()
                .env("LD_LIBRARY_PATH", &dir)
                .env("GPUMEM_FAKE_INIT_CRASH", crash),
            &["--backend", "cuda", "--backend", "cpu"],
        );
        assert_eq!(
            backend(&doc, "cuda")["reason"],
            format!("driver crashed: {signal} in cuInit")
        );
        assert_eq!(backend(&doc, "cpu")["available"], true);
    }
    // select discovers the same way and still plans on what is left.
    let plan = common::json_ok(
        gpumem()
            .env("LD_LIBRARY_PATH", &dir)
            .env("GPUMEM_FAKE_INIT_CRASH", "segv")
            .args(["--json", "select", "--bytes", "1MiB"]),
    );
    assert_eq!(plan["plan"]["kind"], "single");
}

#[test]
fn asking_for_a_backend_with_no_device_exits_4_after_the_report() {
    let dir = common::fake_gpu_drivers("discover-full", &[]);
    let out = gpumem()
        .env("LD_LIBRARY_PATH", &dir)
        .env("GPUMEM_FAKE_DEVICES", "0")
        .args(["discover", "--backend", "cuda", "--color", "never"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("✗ cuda: no devices"));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "gpumem: error: no device on the backends asked for (cuda: no devices)\n"
    );
    // With --json, stdout holds the report alone: one document, no error document after it.
    let (code, doc) = discover_json_status(
        gpumem()
            .env("LD_LIBRARY_PATH", &dir)
            .env("GPUMEM_FAKE_DEVICES", "0"),
        &["--backend", "cuda"],
    );
    assert_eq!(code, 4);
    assert_eq!(backend(&doc, "cuda")["reason"], "no devices");
    // One backend with a device is enough; without --backend, no GPU here is an answer.
    let (code, _) = discover_json_status(
        gpumem()
            .env("LD_LIBRARY_PATH", &dir)
            .env("GPUMEM_FAKE_DEVICES", "0"),
        &["--backend", "cuda", "--backend", "cpu"],
    );
    assert_eq!(code, 0);
}
