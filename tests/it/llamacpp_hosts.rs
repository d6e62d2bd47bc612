//! llama.cpp over several hosts: one `llama-server` reaching the other hosts' GPUs as RPC
//! devices, every layer on GPUs or some left in the server's RAM.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::select::{select, GIB};
use crate::common;

/// A discover document of `host`: 64 GiB of RAM and one CUDA GPU of `gpu_gib` GiB, all free.
fn cuda_host(dir: &Path, host: &str, gpu_gib: u64) -> PathBuf {
    let gpu = json!({"index": 0, "name": "NVIDIA RTX 4090", "device_type": "gpu",
                     "total_bytes": gpu_gib * GIB, "free_bytes": gpu_gib * GIB});
    common::one_gpu_host(
        dir,
        &format!("{host}.json"),
        (host, "Xeon"),
        (64 * GIB, 64 * GIB),
        ("cuda", gpu),
    )
}

/// `select`'s plan for Qwen2.5-32B at q8_0 and 8,192 tokens over these hosts.
fn plan_over(inventories: &[&Path]) -> Value {
    let args = super::llamacpp_vulkan::q8_llamacpp_args("qwen2.5-32b", inventories);
    let (code, doc) = select(&args);
    assert_eq!(code, 0, "{doc}");
    doc["plan"].clone()
}

// llama.cpp over two hosts whose GPUs hold the model only together: one llama-server reaches
// the other host's GPU as an RPC device, which llama.cpp orders first; its fit splits the
// layers over both (every layer on a GPU), the server's own GPU placed first in the plan.
#[test]
fn llamacpp_fits_across_hosts_with_the_other_hosts_gpus_as_rpc_devices() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        cuda_host(dir.path(), "box-a", 24),
        cuda_host(dir.path(), "box-b", 32),
    );
    // One host alone leaves layers in its RAM.
    assert_eq!(plan_over(&[&b])["kind"], "cpu_offload");
    let plan = plan_over(&[&a, &b]);
    assert_eq!(plan["kind"], "cross_host", "{plan}");
    assert_eq!(common::plan_hosts(&plan), ["box-b", "box-a"]);
    let fit = &plan["llamacpp"];
    assert_eq!(fit["n_gpu_layers"], 65);
    assert_eq!(fit["rpc_devices"], 1);
    // llama.cpp's order: box-a's GPU (RPC0) first, then box-b's own.
    let devices = fit["devices"].as_array().unwrap();
    let total = |d: &Value| {
        ["model", "context", "compute"]
            .iter()
            .map(|k| d[k].as_u64().unwrap())
            .sum::<u64>()
    };
    let placed = |host: &str| {
        plan["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["host"] == host)
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(total(&devices[0]), placed("box-a"), "{plan}");
    assert_eq!(total(&devices[1]), placed("box-b"), "{plan}");
}

// Across hosts llama.cpp's fit may leave layers in the server's RAM: Qwen2.5-32B at q8_0 on
// a 12 GiB GPU and a 16 GiB one takes more layers over both than on either alone, the rest in
// the server's RAM, whose products ggml offloads to the server's own GPU (the RPC device takes
// none), and the launch says how many layers (`-ngl`).
#[test]
fn llamacpp_across_hosts_leaves_layers_in_the_servers_ram() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        cuda_host(dir.path(), "box-a", 12),
        cuda_host(dir.path(), "box-b", 16),
    );
    let alone = plan_over(&[&b])["gpu_layers"].as_u64().unwrap();
    let plan = &plan_over(&[&a, &b]);
    assert_eq!(plan["kind"], "cross_host", "{plan}");
    let fit = &plan["llamacpp"];
    let ngl = fit["n_gpu_layers"].as_u64().unwrap();
    assert!(ngl > alone && ngl < 65, "{ngl} {alone}");
    assert_eq!(fit["rpc_devices"], 1);
    assert_eq!(fit["rpc_device_rules"], json!(["cuda"]));
    // The layers left (-ngl counts the output layer) are in the server's RAM.
    let ram = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["backend"] == "cpu")
        .unwrap();
    assert_eq!(ram["host"], "box-b");
    assert_eq!(ram["layers"].as_u64().unwrap(), 64 - (ngl - 1));
    // Their matrix products run on the server's GPU, whose compute buffer holds a copy of each
    // weight in turn (a 5120 × 27,648 q8_0 matrix the largest), not on the RPC device.
    let compute = |d: usize| fit["devices"][d]["compute"].as_u64().unwrap();
    assert!(compute(1) > 5120 * 27_648 * 34 / 32, "{fit}");
    assert!(compute(0) < compute(1), "{fit}");
}

// The other host's GPU a Vulkan one, the server's a CUDA one: the RPC device follows
// ggml-vulkan's buffer rules, the server's GPU ggml-cuda's, and the account's heading names
// both, as printed.
#[test]
fn llamacpp_across_hosts_names_the_rpc_devices_backend() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = json!({"index": 0, "name": "Radeon", "device_type": "gpu",
                     "total_bytes": 12 * GIB, "free_bytes": 12 * GIB});
    let a = common::one_gpu_host(
        dir.path(),
        "box-a.json",
        ("box-a", "Xeon"),
        (64 * GIB, 64 * GIB),
        ("vulkan", gpu),
    );
    let b = cuda_host(dir.path(), "box-b", 16);
    let inventories = [a.as_path(), b.as_path()];
    let plan = plan_over(&inventories);
    assert_eq!(plan["llamacpp"]["device_rules"], "cuda", "{plan}");
    assert_eq!(
        plan["llamacpp"]["rpc_device_rules"],
        json!(["vulkan"]),
        "{plan}"
    );
    // A third host's CUDA GPU beside it: each RPC device by its own backend.
    let c = cuda_host(dir.path(), "box-c", 8);
    let three = plan_over(&[&a, &c, &b]);
    assert_eq!(three["llamacpp"]["rpc_devices"], 2, "{three}");
    assert_eq!(
        three["llamacpp"]["rpc_device_rules"],
        json!(["vulkan", "cuda"]),
        "{three}"
    );
    let args = super::llamacpp_vulkan::q8_llamacpp_args("qwen2.5-32b", &inventories);
    let out = common::gpumem().arg("select").args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "\nllama.cpp b11312 on CUDA, RPC devices on Vulkan (-fa on, -ngl 49 -ts 21,28,\n    \
             keeping 1.00 GiB free on each GPU):\n"
        ),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["RPC", "GPU", "host"].contains(w))
        .collect();
    assert_eq!(rows, ["RPC", "GPU", "host"], "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

/// A Mac whose GPU (`gpu_gib` of working set) is its RAM, `ram_free_gib` of it free.
fn mac(dir: &Path, host: &str, gpu_gib: u64, ram_free_gib: u64) -> PathBuf {
    let gpu = json!({"index": 0, "name": "Apple M4 Max", "device_type": "integrated_gpu",
                     "total_bytes": gpu_gib * GIB, "free_bytes": gpu_gib * GIB,
                     "unified_memory": true});
    common::one_gpu_host(
        dir,
        &format!("{host}-{ram_free_gib}.json"),
        (host, "Apple M4 Max"),
        (64 * GIB, ram_free_gib * GIB),
        ("metal", gpu),
    )
}

// Two Macs, each GPU's memory its own RAM: the other Mac's share as an RPC device is held to
// that Mac's RAM, the server's share and what llama.cpp leaves on the host to the server's.
// Qwen2.5-32B at q8_0 fits over both when mac-a has 28 GiB free (its share is about 16 GiB),
// and not when it has 8 GiB, whatever mac-b has.
#[test]
fn llamacpp_across_macs_holds_each_gpus_share_to_its_own_ram() {
    let dir = tempfile::tempdir().unwrap();
    let b = mac(dir.path(), "mac-b", 24, 30);
    let roomy = mac(dir.path(), "mac-a", 21, 28);
    let plan = plan_over(&[&roomy, &b]);
    assert_eq!(plan["kind"], "cross_host", "{plan}");
    assert_eq!(plan["llamacpp"]["device_rules"], "metal", "{plan}");
    assert_eq!(
        plan["llamacpp"]["rpc_device_rules"],
        json!(["metal"]),
        "{plan}"
    );
    let on = |host: &str| {
        plan["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["host"] == host && p["backend"] == "metal")
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(on("mac-a") > 8 * GIB && on("mac-a") <= 28 * GIB, "{plan}");
    let tight = mac(dir.path(), "mac-a", 21, 8);
    let args = super::llamacpp_vulkan::q8_llamacpp_args("qwen2.5-32b", &[&tight, &b]);
    let (code, doc) = select(&args);
    assert_eq!(code, 3, "{doc}");
    assert_ne!(doc["plan"]["kind"], "cross_host", "{doc}");
}
