//! llama.cpp on a Vulkan GPU: `select` lays out ggml-vulkan's buffers by the limits the
//! device's driver reports (`discover` reads them; an inventory carries them): operator
//! offload of the CPU layers' products, and tensors beyond the storage range left on the CPU.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::select::{select, GIB};
use crate::common;

/// A saved `gpumem discover --json` document for a host with one Vulkan GPU of `total` bytes
/// and these limits.
fn vulkan_host(dir: &Path, total: u64, limits: &Value) -> PathBuf {
    let gpu = json!({"index": 0, "name": "AMD Radeon RX 7600 (RADV NAVI33)",
                     "device_type": "gpu", "total_bytes": total, "free_bytes": total,
                     "vulkan_limits": limits});
    common::one_gpu_host(
        dir,
        "radeon-box.json",
        ("radeon-box", "Ryzen"),
        (64 * GIB, 64 * GIB),
        ("vulkan", gpu),
    )
}

/// Mesa's lavapipe's limits, as `vulkaninfo` prints them here.
fn lavapipe() -> Value {
    json!({"offset_alignment": 16, "map_alignment": 64, "storage_range": 134_217_728,
           "max_allocation": 2_147_483_648_u64, "max_buffer": 4_294_967_295_u64})
}

/// `select` for llama.cpp serving `model` in q8_0 at 8,192 tokens over `inventories`.
pub(crate) fn q8_llamacpp_args<'a>(model: &'a str, inventories: &[&'a Path]) -> Vec<&'a str> {
    let mut args = vec![
        "--model",
        model,
        "--engine",
        "llama.cpp",
        "--dtype",
        "q8_0",
        "--context",
        "8192",
    ];
    for i in inventories {
        args.extend(["--inventory", i.to_str().unwrap()]);
    }
    args
}

/// [`q8_llamacpp_args`] for Llama-3.1-8B over `inventory`, with `extra`.
fn llamacpp_args<'a>(inventory: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = q8_llamacpp_args("llama-3.1-8b", &[inventory]);
    args.extend_from_slice(extra);
    args
}

fn llamacpp(inventory: &Path, extra: &[&str]) -> Value {
    let (code, doc) = select(&llamacpp_args(inventory, extra));
    assert_eq!(code, 0, "{doc}");
    doc["plan"]["llamacpp"].clone()
}

// A Vulkan GPU too small for the whole model: the plan follows ggml-vulkan (the device's own
// limits reported back), whose operator offload runs the CPU layers' products on the GPU with
// each weight copied into its compute buffer; the CPU backend's rules (no offload) would leave
// that buffer smaller.
#[test]
fn a_vulkan_gpu_is_planned_with_its_drivers_limits_and_operator_offload() {
    let dir = tempfile::tempdir().unwrap();
    let limits = json!({"offset_alignment": 4, "map_alignment": 64, "storage_range": 4_294_967_295_u64,
                        "max_allocation": 4_294_967_295_u64, "max_buffer": 4_294_967_295_u64});
    let host = vulkan_host(dir.path(), 8 * GIB, &limits);
    let plan = llamacpp(&host, &[]);
    assert_eq!(plan["device_rules"], "vulkan");
    assert_eq!(plan["vulkan_limits"], limits);
    assert_eq!(plan["op_offload"], true);
    let layers = plan["n_gpu_layers"].as_u64().unwrap();
    assert!((1..33).contains(&layers), "partial offload: {plan}");
    let cpu = llamacpp(&host, &["--llamacpp-device", "cpu-rules"]);
    assert_eq!(cpu["device_rules"], "cpu-rules");
    assert!(cpu.get("vulkan_limits").is_none(), "{cpu}");
    let compute = |p: &Value, d: &str| match d {
        "gpu" => p["devices"][0]["compute"].as_u64().unwrap(),
        _ => p["host"]["compute"].as_u64().unwrap(),
    };
    // What llama.cpp's Vulkan backend reserved on lavapipe with 8 or 24 of the 33 layers on
    // it at 8,192 tokens (`llama-3.1-8b-shape-q8_0-vulkan-in-order.json`): the CPU layers'
    // weights copied in turn (a feed-forward matrix, 14,336 × 4,096 in q8_0, the largest).
    assert_eq!(compute(&plan, "gpu"), 164_104_192, "{plan}");
    assert!(
        compute(&plan, "gpu") > compute(&cpu, "gpu") + (48 << 20),
        "{cpu}"
    );
    assert!(compute(&plan, "host") < compute(&cpu, "host") / 4, "{cpu}");
}

// Without 64-bit indexing a Vulkan device runs no op on a tensor beyond its storage range
// (Mesa's lavapipe: 128 MiB). The output head of Llama-3.1-8B in q8_0 (558 MB) then stays in
// host memory beside the token embeddings, as llama.cpp placed it on lavapipe
// (`llama-3.1-8b-shape-q8_0-vulkan*.json`: 1,116,340,224 host model bytes with every layer on
// the device).
#[test]
fn a_head_beyond_the_storage_range_stays_in_host_memory() {
    let dir = tempfile::tempdir().unwrap();
    let host = vulkan_host(dir.path(), 12 * GIB, &lavapipe());
    let plan = llamacpp(&host, &[]);
    assert_eq!(plan["n_gpu_layers"], 33, "{plan}");
    assert_eq!(plan["host"]["model"], 1_116_340_224_u64, "{plan}");
    let wide = vulkan_host(
        dir.path(),
        12 * GIB,
        &json!({"offset_alignment": 16, "map_alignment": 64, "storage_range": null,
                "max_allocation": 2_147_483_648_u64, "max_buffer": 4_294_967_295_u64}),
    );
    let plan = llamacpp(&wide, &[]);
    assert_eq!(plan["host"]["model"], 558_170_112_u64, "{plan}");
}

// A Vulkan GPU from an inventory that does not carry its limits (one saved before `discover`
// read them) is still planned as ggml-vulkan runs it, with the widest limits a driver reports.
#[test]
fn a_vulkan_gpu_without_known_limits_takes_the_widest() {
    let dir = tempfile::tempdir().unwrap();
    let host = vulkan_host(dir.path(), 8 * GIB, &Value::Null);
    let plan = llamacpp(&host, &[]);
    assert_eq!(plan["device_rules"], "vulkan");
    assert_eq!(plan["vulkan_limits"]["offset_alignment"], 256);
    assert_eq!(plan["vulkan_limits"]["storage_range"], 4_294_967_295_u64);
    assert_eq!(plan["op_offload"], true);
}

// Mesa's lavapipe is a Vulkan device run in software on the CPU: llama.cpp does not take it as
// a GPU (ggml-vulkan skips CPU-type devices), so the plan is the CPU's and its verdict says
// what it is (it used to read "system RAM" beside the cpu row).
#[test]
fn a_software_vulkan_device_is_no_llama_cpp_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let path = vulkan_host(dir.path(), 2 * GIB, &lavapipe());
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"gpu\"", "\"cpu\"")).unwrap();
    let inventory = path.display().to_string();
    let args = "--model llama-3.1-8b --engine llama.cpp --dtype q8_0 --inventory";
    let mut argv: Vec<&str> = args.split(' ').collect();
    argv.push(&inventory);
    let (code, doc) = select(&argv);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["gpu_layers"], 0, "{doc}");
    let lavapipe = crate::common::candidate(&doc, "vulkan");
    assert!(
        lavapipe["reason"]
            .as_str()
            .unwrap()
            .starts_with("a software device on the CPU"),
        "{lavapipe}"
    );
    assert_eq!(lavapipe["fits"], false);
}

/// An Apple silicon host's discover document: 32 GiB of RAM of which `ram_free` is free, its
/// GPU's working set 21 GiB, the GPU's memory that RAM.
fn apple_host(dir: &Path, ram_free: u64) -> PathBuf {
    let gpu = json!({"index": 0, "name": "Apple M4", "device_type": "integrated_gpu",
                     "total_bytes": 21 * GIB, "free_bytes": 21 * GIB, "unified_memory": true});
    common::one_gpu_host(
        dir,
        &format!("m4-mini-{ram_free}.json"),
        ("m4-mini", "Apple M4"),
        (32 * GIB, ram_free),
        ("metal", gpu),
    )
}

// A discovered Apple GPU (the Metal backend) is planned with ggml-metal's rules, read from its
// source and labelled so in the plan. Its memory is the host's RAM: what llama.cpp puts on the
// GPU and what it leaves on the host must fit that RAM together, so with 9 GiB of it free
// Llama-3.1-8B in q8_0 (8.53 GiB on the GPU, 0.54 GiB on the host) gets no plan, where a
// discrete GPU of the same size would take it.
#[test]
fn an_apple_gpu_is_planned_with_metals_rules_out_of_the_hosts_ram() {
    let dir = tempfile::tempdir().unwrap();
    let plan = llamacpp(&apple_host(dir.path(), 32 * GIB), &[]);
    assert_eq!(plan["device_rules"], "metal", "{plan}");
    assert_eq!(plan["device_rules_basis"], "from_source");
    assert_eq!(plan["n_gpu_layers"], 33, "{plan}");
    let tight = apple_host(dir.path(), 9 * GIB);
    let (code, doc) = select(&llamacpp_args(&tight, &[]));
    assert_eq!(code, 3, "{doc}");
    let ram = &doc["candidates"][0];
    assert_eq!(ram["backend"], "cpu", "{doc}");
    assert_eq!(
        ram["reason"],
        "system RAM, also the GPU's memory: needs 9.08 GiB with the GPU's share, has 9.00 GiB"
    );
    let gpu = doc["candidates"][1]["needed_bytes"].as_u64().unwrap();
    let needed = ram["needed_bytes"].as_u64().unwrap();
    assert!(needed > gpu && needed > 9 * GIB, "{doc}");
    assert_eq!(
        doc["plan"]["shortfall_bytes"].as_u64().unwrap(),
        needed - 9 * GIB
    );
    // The smaller cache offered is one llama.cpp has (it has no fp8 cache), and it fits.
    assert_eq!(
        doc["suggestions"],
        json!([{"change": "kv_dtype", "dtype": "q8_0"}])
    );
}
