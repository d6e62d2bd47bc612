//! `gpumem select` over inventories: discover documents, nvidia-smi CSV and kubectl node lists
//! from many hosts, MIG, cordoned nodes, hostile names and the inventory caps.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::select::{gpu, select, GIB};
use crate::common::{self, gpumem};

/// A saved `gpumem discover --json` document for a host with these GPUs and RAM.
pub(crate) fn inventory(dir: &Path, host: &str, gpus: Vec<Value>, ram: u64) -> PathBuf {
    let doc = json!({
        "schema_version": 1,
        "host": {"hostname": host, "os": "Linux", "cpu": "EPYC", "cpus": 64, "memory_total_bytes": ram,
                 "memory_available_bytes": ram, "gpumem_version": "0.1.0"},
        "backends": [
            {"backend": "cpu", "available": true, "reason": null, "probe_ms": 1.0,
             "devices": [{"index": 0, "name": "EPYC", "vendor": "AMD", "device_type": "cpu", "total_bytes": ram,
                          "free_bytes": ram, "free_scope": "device", "max_alloc_bytes": ram, "unified_memory": true,
                          "compute_capability": null, "driver_version": null, "pci_bus_id": null, "uuid": null}]},
            {"backend": "cuda", "available": !gpus.is_empty(), "reason": if gpus.is_empty() { json!("no devices") } else { json!(null) },
             "probe_ms": 1.0, "devices": gpus},
            {"backend": "rocm", "available": false, "reason": "library not found", "probe_ms": 0.1, "devices": []}
        ],
        "recommended": {"backend": "cuda", "device": 0}
    });
    let path = dir.join(format!("{host}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

#[test]
fn inventories_from_several_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let a = inventory(
        dir.path(),
        "host-a",
        vec![gpu(0, "RTX 3090", 24 * GIB, 20 * GIB)],
        64 * GIB,
    );
    let b = inventory(
        dir.path(),
        "host-b",
        vec![
            gpu(0, "A100", 80 * GIB, 79 * GIB),
            gpu(1, "A100", 80 * GIB, 79 * GIB),
        ],
        512 * GIB,
    );
    let (code, doc) = select(&[
        "--model",
        "qwen2.5-32b",
        "--inventory",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(doc["plan"]["kind"], "single");
    assert_eq!(doc["plan"]["placements"][0]["host"], "host-b");
    let hosts: Vec<&str> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["host"].as_str().unwrap())
        .collect();
    assert!(hosts.contains(&"host-a") && hosts.contains(&"host-b"));
    let rejected = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["host"] == "host-a" && c["backend"] == "cuda")
        .unwrap();
    assert_eq!(rejected["fits"], false);
    assert!(rejected["reason"].as_str().unwrap().starts_with("needs "));
}

#[test]
fn malformed_inventories_name_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let fail = |path: &Path| {
        let out = gpumem()
            .args([
                "select",
                "--bytes",
                "1GiB",
                "--inventory",
                path.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        stderr
    };
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{ nope").unwrap();
    assert!(fail(&bad).contains("bad.json"));
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"schema_version":1,"pool":{}}"#).unwrap();
    let msg = fail(&foreign);
    assert!(
        msg.contains("foreign.json") && msg.contains("backends"),
        "{msg}"
    );
    let typed = dir.path().join("typed.json");
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(inventory(dir.path(), "h", vec![gpu(0, "X", GIB, GIB)], GIB))
            .unwrap(),
    )
    .unwrap();
    doc["backends"][1]["devices"][0]["total_bytes"] = json!("lots");
    std::fs::write(&typed, doc.to_string()).unwrap();
    let msg = fail(&typed);
    assert!(
        msg.contains("field 'backends[1].devices[0].total_bytes'"),
        "{msg}"
    );
    let version = dir.path().join("v2.json");
    doc["schema_version"] = json!(2);
    doc["backends"][1]["devices"][0]["total_bytes"] = json!(1);
    std::fs::write(&version, doc.to_string()).unwrap();
    assert!(fail(&version).contains("schema_version"));
}

// Names from an inventory reach the terminal escaped: no cursor movement, window titles or
// extra lines from a hostile file.
#[test]
fn control_bytes_in_inventory_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let inv = inventory(
        dir.path(),
        "evil",
        vec![gpu(0, "A100\x1b]0;pwned\x07\x1b[2J\nX", 80 * GIB, 80 * GIB)],
        64 * GIB,
    );
    let out = gpumem()
        .args(["select", "--bytes", "1GiB", "--inventory"])
        .arg(&inv)
        .assert()
        .code(0);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(
        text.contains("A100\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\nX"),
        "{text}"
    );
}

/// A `kubectl get nodes -o json` list: an 8×H100 node (6 allocatable), a cordoned 4×A100 node,
/// a 2×L4 node and a CPU-only node, with GPU Feature Discovery labels.
fn kube_nodes() -> Value {
    let node = |name: &str, labels: Value, gpus: Option<&str>, memory: &str, cordoned: bool| {
        let mut allocatable = json!({"cpu": "96", "memory": memory, "pods": "110"});
        if let Some(g) = gpus {
            allocatable["nvidia.com/gpu"] = json!(g);
        }
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": name, "labels": labels},
               "spec": {"unschedulable": cordoned},
               "status": {"allocatable": allocatable, "capacity": allocatable}})
    };
    let gfd = |count: &str, mib: &str, product: &str| {
        json!({"kubernetes.io/arch": "amd64", "nvidia.com/gpu.count": count,
               "nvidia.com/gpu.memory": mib, "nvidia.com/gpu.product": product})
    };
    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [
        node("h100-a", gfd("8", "81559", "NVIDIA-H100-80GB-HBM3"), Some("6"), "2113362184Ki", false),
        node("a100-b", gfd("4", "81920", "NVIDIA-A100-SXM4-80GB"), Some("4"), "1056681092Ki", true),
        node("l4-c", gfd("2", "23034", "NVIDIA-L4"), Some("2"), "257Gi", false),
        node("cpu-d", json!({"kubernetes.io/arch": "arm64"}), None, "128Gi", false),
    ]})
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn inventories_as_fleets_have_them() {
    let dir = tempfile::tempdir().unwrap();
    let kube = write(dir.path(), "cluster.json", &kube_nodes().to_string());
    // nvidia-smi with header and units, and without either.
    let smi = write(
        dir.path(),
        "gpu-box.csv",
        "index, name, memory.total [MiB], memory.free [MiB], pci.bus_id, uuid\n\
         0, NVIDIA GeForce RTX 4090, 24564 MiB, 23990 MiB, 00000000:01:00.0, GPU-aaa\n",
    );
    let bare = write(
        dir.path(),
        "bare.csv",
        "0, NVIDIA A10, 23028, 22500, 00000000:17:00.0, GPU-bbb\n\
         1, NVIDIA A10, 23028, [N/A], 00000000:65:00.0, GPU-ccc\n",
    );
    // The few lines a person writes by hand.
    let hand = write(
        dir.path(),
        "hand.json",
        r#"{"host": {"hostname": "laptop"},
            "backends": [{"backend": "cuda", "devices": [{"name": "RTX 3060", "total_bytes": 12884901888}]}]}"#,
    );
    let (code, doc) = select(&[
        "--bytes",
        "1GiB",
        "--inventory",
        kube.to_str().unwrap(),
        "--inventory",
        smi.to_str().unwrap(),
        "--inventory",
        bare.to_str().unwrap(),
        "--inventory",
        hand.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc}");
    let count = |host: &str, backend: &str| {
        doc["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["host"] == host && c["backend"] == backend)
            .count()
    };
    assert_eq!(count("h100-a", "cuda"), 6, "only allocatable GPUs");
    assert_eq!(
        count("a100-b", "cuda"),
        0,
        "a cordoned node schedules nothing"
    );
    assert_eq!(count("l4-c", "cuda"), 2);
    assert_eq!(count("cpu-d", "cpu"), 1);
    assert_eq!(count("gpu-box", "cuda"), 1);
    assert_eq!(count("bare", "cuda"), 2);
    assert_eq!(count("laptop", "cuda"), 1);
    let h100 = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["host"] == "h100-a" && c["backend"] == "cuda")
        .unwrap();
    assert_eq!(h100["usable"]["base_bytes"], 81_559u64 << 20);
    assert_eq!(h100["name"], "NVIDIA-H100-80GB-HBM3");
    let a10 = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["host"] == "bare" && c["device"] == 1)
        .unwrap();
    assert_eq!(
        a10["usable"]["base_is_free"], false,
        "[N/A] free: planned from the total"
    );
    // The most headroom among single devices: an H100.
    assert_eq!(doc["plan"]["placements"][0]["host"], "h100-a");
    // Why two nodes offer fewer GPUs than they have.
    assert_eq!(
        doc["held_back"],
        json!([
            {"host": "h100-a", "gpus": 8, "allocatable": 6, "cordoned": false, "mig_enabled": []},
            {"host": "a100-b", "gpus": 4, "allocatable": 0, "cordoned": true, "mig_enabled": []}
        ])
    );
    let text = gpumem()
        .args(["select", "--bytes", "1GiB", "--inventory"])
        .arg(&kube)
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("h100-a: 6 of 8 GPUs allocatable (2 in use or unschedulable)"),
        "{text}"
    );
    assert!(
        text.contains("a100-b: 0 of 4 GPUs allocatable (the node is cordoned)"),
        "{text}"
    );

    // 400 GB: no single card; tensor parallel over the six schedulable H100s of one node.
    let (code, doc) = select(&["--bytes", "400GB", "--inventory", kube.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["kind"], "tensor_parallel");
    assert_eq!(doc["plan"]["placements"].as_array().unwrap().len(), 6);
}

// nvidia-smi's `--query-gpu` rows give a MIG-mode GPU's whole memory, which no process can have:
// such a GPU is left out and the report says why and where its slices can be listed.
#[test]
fn nvidia_smi_gpus_in_mig_mode_are_left_out_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write(
        dir.path(),
        "dgx.csv",
        "index, name, memory.total [MiB], memory.free [MiB], mig.mode.current\n\
         0, NVIDIA A100-SXM4-80GB, 81920 MiB, 81000 MiB, Enabled\n\
         1, NVIDIA A100-SXM4-80GB, 81920 MiB, 81000 MiB, Disabled\n\
         2, NVIDIA A100-SXM4-80GB, 81920 MiB, 81000 MiB, Enabled\n",
    );
    let (code, doc) = select(&["--bytes", "1GiB", "--inventory", csv.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc}");
    let devices: Vec<&Value> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["backend"] == "cuda")
        .map(|c| &c["device"])
        .collect();
    assert_eq!(devices, [&json!(1)]);
    assert_eq!(
        doc["held_back"],
        json!([{"host": "dgx", "gpus": 3, "allocatable": 1, "cordoned": false, "mig_enabled": [0, 2]}])
    );
    let out = gpumem()
        .args(["select", "--bytes", "1GiB", "--inventory"])
        .arg(&csv)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("dgx: 1 of 3 GPUs planned (GPU 0, GPU 2 are in MIG mode"),
        "{text}"
    );
    // Every GPU in MIG mode: nothing to plan on, said as such (exit 3), not a parse error.
    let all = write(
        dir.path(),
        "mig-only.csv",
        "index, name, memory.total [MiB], mig.mode.current\n0, NVIDIA H100, 81559 MiB, Enabled\n",
    );
    let (code, doc) = select(&["--bytes", "1GiB", "--inventory", all.to_str().unwrap()]);
    assert_eq!(code, 3, "{doc}");
    assert_eq!(doc["held_back"][0]["mig_enabled"], json!([0]));
}

// MIG under GPU Feature Discovery's mixed strategy: each `nvidia.com/mig-<profile>` resource is
// a slice with the memory of its `.memory` label; a slice is planned alone, never grouped.
#[test]
fn mig_slices_are_devices_of_their_own_and_never_split() {
    let dir = tempfile::tempdir().unwrap();
    let node = json!({"apiVersion": "v1", "kind": "List", "items": [{
        "metadata": {"name": "a100-mig", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig-3g.40gb.count": "2", "nvidia.com/mig-3g.40gb.memory": "40192",
            "nvidia.com/mig-3g.40gb.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb",
            "nvidia.com/mig-1g.10gb.count": "3", "nvidia.com/mig-1g.10gb.memory": "9856"}},
        "status": {"allocatable": {"memory": "512Gi",
            "nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "3"}}}]});
    let kube = write(dir.path(), "mig.json", &node.to_string());
    let (code, doc) = select(&["--bytes", "20GiB", "--inventory", kube.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc}");
    let slices: Vec<&Value> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["backend"] == "cuda")
        .collect();
    assert_eq!(slices.len(), 5);
    let big = slices
        .iter()
        .find(|c| c["mig_profile"] == "3g.40gb")
        .unwrap();
    assert_eq!(big["usable"]["base_bytes"], 40_192u64 << 20);
    assert_eq!(big["name"], "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb");
    let small = slices
        .iter()
        .find(|c| c["mig_profile"] == "1g.10gb")
        .unwrap();
    assert_eq!(small["name"], "NVIDIA-A100-SXM4-80GB MIG 1g.10gb");
    assert!(
        small["reason"]
            .as_str()
            .unwrap()
            .contains("a MIG 1g.10gb slice"),
        "{small}"
    );
    assert_eq!(doc["plan"]["kind"], "single");
    // 60 GiB would fit two 3g.40gb slices together, but slices cannot form a group: the plan
    // offloads to the node's memory instead.
    let (code, doc) = select(&["--bytes", "60GiB", "--inventory", kube.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["kind"], "cpu_offload", "{doc}");
    // A slice without its memory label is refused, naming the field.
    let mut unlabelled = node.clone();
    unlabelled["items"][0]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("nvidia.com/mig-1g.10gb.memory");
    let bad = write(dir.path(), "bad-mig.json", &unlabelled.to_string());
    let out = gpumem()
        .args(["select", "--bytes", "1GiB", "--inventory"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("field 'items[0].metadata.labels.nvidia.com/mig-1g.10gb.memory': missing"),
        "{err}"
    );
}

#[test]
fn malformed_inventories_name_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut no_memory = kube_nodes();
    no_memory["items"][2]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("nvidia.com/gpu.memory");
    let mut bad_quantity = kube_nodes();
    bad_quantity["items"][3]["status"]["allocatable"]["memory"] = json!("lots");
    // A count no node has would list billions of devices: refused at once.
    let mut huge = kube_nodes();
    huge["items"][2]["status"]["allocatable"]["nvidia.com/gpu"] = json!("99999999999");
    let cases = [
        (
            "huge.json",
            huge.to_string(),
            "field 'items[2].status.allocatable.nvidia.com/gpu': 99999999999 GPUs on one node is implausible (at most 1024)",
        ),
        (
            "nodes.json",
            no_memory.to_string(),
            "field 'items[2].metadata.labels.nvidia.com/gpu.memory': missing",
        ),
        (
            "quantity.json",
            bad_quantity.to_string(),
            "field 'items[3].status.allocatable.memory': 'lots' is not a Kubernetes quantity",
        ),
        (
            "smi.csv",
            "index, name, memory.total [MiB]\n0, A10, lots\n".to_string(),
            "line 2: memory.total is not a size in MiB",
        ),
        (
            "mig.csv",
            "index, name, memory.total [MiB], mig.mode.current\n0, A100, 81920 MiB, maybe\n"
                .to_string(),
            "line 2: mig.mode.current is 'maybe', not Enabled, Disabled or [N/A]",
        ),
        (
            "hand.json",
            r#"{"backends": [{"backend": "cuda", "devices": [{"name": "x"}]}]}"#.to_string(),
            "field 'backends[0].devices[0]': missing field `total_bytes`",
        ),
        (
            "kind.json",
            r#"{"backends": [{"backend": "tpu", "devices": []}]}"#.to_string(),
            "field 'backends[0].backend'",
        ),
    ];
    for (name, text, want) in cases {
        let path = write(dir.path(), name, &text);
        let err = common::one_line_error(
            gpumem()
                .args(["select", "--bytes", "1GiB", "--inventory"])
                .arg(&path),
            1,
        );
        assert!(err.contains(name) && err.contains(want), "{err}");
    }
}

/// A node: name, (GPU count, GPU MiB) if it has GPUs, allocatable memory.
type KubeNode<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a str);

fn kube_list(nodes: &[KubeNode]) -> Value {
    let items: Vec<Value> = nodes
        .iter()
        .map(|(name, gpu, memory)| {
            let mut labels = json!({"kubernetes.io/arch": "amd64"});
            let mut allocatable = json!({"memory": memory});
            if let Some((count, mib)) = gpu {
                labels["nvidia.com/gpu.count"] = json!(count);
                labels["nvidia.com/gpu.memory"] = json!(mib);
                labels["nvidia.com/gpu.product"] = json!("NVIDIA-H100-80GB-HBM3");
                allocatable["nvidia.com/gpu"] = json!(count);
            }
            json!({"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

#[test]
fn cross_host_layers_and_offload_to_the_same_hosts_ram() {
    let dir = tempfile::tempdir().unwrap();
    // Llama-3.1-70B at 8k over a Kubernetes node list; the plan and its placements.
    let plan_over = |name: &str, nodes: &[KubeNode], extra: &[&str]| {
        let path = write(dir.path(), name, &kube_list(nodes).to_string());
        let mut args = vec!["--model", "llama-3.1-70b", "--context", "8192"];
        args.extend_from_slice(extra);
        args.extend(["--inventory", path.to_str().unwrap()]);
        let (code, doc) = select(&args);
        assert_eq!(code, 0, "{doc}");
        doc["plan"].clone()
    };
    // One H100 on each of two nodes, and a big CPU-only node: the layers go across the two GPU
    // nodes (the CPU-only node is not used).
    let plan = plan_over(
        "two.json",
        &[
            ("ram-only", None, "2Ti"),
            ("gpu-1", Some(("1", "81559")), "512Gi"),
            ("gpu-2", Some(("1", "81559")), "512Gi"),
        ],
        &["--fragmentation-reserve", "0"],
    );
    assert_eq!(plan["kind"], "cross_host");
    assert_eq!(common::plan_hosts(&plan), ["gpu-1", "gpu-2"]);
    let layers: u64 = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["layers"].as_u64().unwrap())
        .sum();
    assert_eq!(layers, 80);

    // One GPU node only: offload to that node's RAM, never another node's.
    let plan = plan_over(
        "one.json",
        &[
            ("ram-only", None, "2Ti"),
            ("gpu-1", Some(("1", "81559")), "512Gi"),
        ],
        &[],
    );
    assert_eq!(plan["kind"], "cpu_offload");
    let placements = plan["placements"].as_array().unwrap();
    assert!(placements.iter().all(|p| p["host"] == "gpu-1"), "{plan}");
    assert_eq!(placements[1]["backend"], "cpu");
}

// Inventories that would list more devices than any fleet gpumem plans over, or lines no
// nvidia-smi writes, are refused at once with the limit named (the 1,024,000-device document
// from the hostile-input audit took 12 s and 3 GB before these caps).
#[test]
fn inventories_past_the_caps_are_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = |n: usize, gpus: &str| -> Vec<(String, String)> {
        (0..n)
            .map(|i| (format!("n{i}"), gpus.to_string()))
            .collect()
    };
    let kube = |nodes: &[(String, String)]| {
        let list: Vec<KubeNode> = nodes
            .iter()
            .map(|(name, gpus)| (name.as_str(), Some((gpus.as_str(), "81920")), "1000Gi"))
            .collect();
        kube_list(&list).to_string()
    };
    let big = write(dir.path(), "big.json", &kube(&nodes(17, "1024")));
    let half = write(dir.path(), "half.json", &kube(&nodes(9, "1000")));
    let half2 = write(dir.path(), "half2.json", &kube(&nodes(9, "1000")));
    let mut rows = String::from("index, name, memory.total [MiB]\n");
    for i in 0..1025 {
        rows.push_str(&format!("{i}, H100, 81559 MiB\n"));
    }
    let rows = write(dir.path(), "rows.csv", &rows);
    let long = format!(
        "index, name, memory.total [MiB]\n0, {}, 81559 MiB\n",
        "x".repeat(5000)
    );
    let long = write(dir.path(), "long.csv", &long);
    let cases: [(&[&PathBuf], &str); 4] = [
        (
            &[&big],
            "big.json: more than 16384 devices in one inventory",
        ),
        (
            &[&half, &half2],
            "the inventories list 18018 devices together, more than the 16384",
        ),
        (&[&rows], "rows.csv: line 1026: more than 1024 GPU rows"),
        (&[&long], "long.csv: line 2: longer than 4096 bytes"),
    ];
    for (files, want) in cases {
        let mut cmd = gpumem();
        cmd.args(["select", "--bytes", "1GiB"]);
        for f in files {
            cmd.arg("--inventory").arg(f);
        }
        let err = common::one_line_error(&mut cmd, 1);
        assert!(err.contains(want), "{err}");
    }
    // Just under the cap still plans.
    let ok = write(dir.path(), "ok.json", &kube(&nodes(8, "1024")));
    let (code, doc) = select(&["--bytes", "1GiB", "--inventory", ok.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(doc["candidates"].as_array().unwrap().len(), 8 * 1024 + 8);
}

// Bidi overrides and isolates, zero-width and other invisible characters in a host or device
// name are escaped as control bytes are: they cannot reorder what the table shows.
#[test]
fn bidi_and_invisible_characters_in_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let inv = inventory(
        dir.path(),
        "gpu\u{202e}exe.txt",
        vec![gpu(
            0,
            "A100\u{2067}x\u{2069}\u{200b}\u{2028}y",
            80 * GIB,
            80 * GIB,
        )],
        64 * GIB,
    );
    let out = gpumem()
        .args(["select", "--bytes", "1GiB", "--inventory"])
        .arg(&inv)
        .assert()
        .code(0);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for c in ['\u{202e}', '\u{2067}', '\u{2069}', '\u{200b}', '\u{2028}'] {
        assert!(!text.contains(c), "{c:?} in {text}");
    }
    assert!(text.contains("gpu\\u{202e}exe.txt"), "{text}");
    assert!(
        text.contains("A100\\u{2067}x\\u{2069}\\u{200b}\\u{2028}y"),
        "{text}"
    );
}

// Identical GPUs on two hosts: one pipeline stage a host under vLLM's own accounting, with Ray
// across them.
#[test]
fn vllm_stages_across_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let a = inventory(
        dir.path(),
        "node-a",
        vec![gpu(0, "H100", 80 * GIB, 80 * GIB)],
        512 * GIB,
    );
    let b = inventory(
        dir.path(),
        "node-b",
        vec![gpu(0, "H100", 80 * GIB, 80 * GIB)],
        512 * GIB,
    );
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-70b",
        "--context",
        "8192",
        "--inventory",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["kind"], "cross_host");
    assert_eq!(doc["plan"]["accounting"], "vllm");
    assert_eq!(doc["plan"]["engine"]["stage_layers"], json!([40, 40]));
    assert_eq!(common::plan_hosts(&doc["plan"]), ["node-a", "node-b"]);
    let commands = doc["launch"][0]["commands"].as_array().unwrap();
    let server = commands.last().unwrap()["shell"].as_str().unwrap();
    assert!(
        server.ends_with("--pipeline-parallel-size 2 --distributed-executor-backend ray"),
        "{server}"
    );
}

// A host without GPUs runs llama.cpp on its CPU (`-ngl 0`): one plan on its system RAM, with
// the KV cache and the CPU backend's compute buffer llama.cpp reserves there (a GGUF of
// Llama-3.1-8B's shape in q8_0 at 8,192 tokens, llama-server's one output a sequence:
// 1,073,741,824 and 130,035,744 bytes, as `breakdown.cpp` printed them with no device). It used
// to find no plan ("0 B short"). RAM that cannot hold it is the shortfall.
#[test]
fn a_host_without_gpus_plans_llama_cpp_on_its_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let args = |inventory: &Path| -> Vec<String> {
        "--model llama-3.1-8b --dtype q8_0 --engine llama.cpp --context 8192 --inventory"
            .split(' ')
            .map(str::to_string)
            .chain([inventory.display().to_string()])
            .collect()
    };
    let laptop = inventory(dir.path(), "laptop", vec![], 32 * GIB);
    let argv = args(&laptop);
    let (code, doc) = select(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{doc}");
    let plan = &doc["plan"];
    assert_eq!(plan["kind"], "single");
    assert_eq!(plan["gpu_layers"], 0);
    assert_eq!(plan["placements"][0]["backend"], "cpu");
    assert_eq!(plan["llamacpp"]["devices"], json!([]));
    assert_eq!(plan["llamacpp"]["host"]["context"], 1_073_741_824_u64);
    assert_eq!(plan["llamacpp"]["host"]["compute"], 130_035_744_u64);
    let host = &plan["llamacpp"]["host"];
    let total: u64 = ["model", "context", "compute"]
        .iter()
        .map(|k| host[k].as_u64().unwrap())
        .sum();
    assert_eq!(
        doc["required_bytes"], total,
        "what the model needs is the RAM's share"
    );
    let small = inventory(dir.path(), "small", vec![], 4 * GIB);
    let argv = args(&small);
    let (code, doc) = select(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 3, "{doc}");
    assert!(
        doc["plan"]["shortfall_bytes"].as_u64().unwrap() > 4 * GIB,
        "{doc}"
    );
}

// A host whose only GPU API runs in software (lavapipe): llama.cpp skips the device, and the
// verdict says so rather than suggesting a --prefer that llama.cpp does not follow.
#[test]
fn llama_cpp_says_why_it_skips_a_software_vulkan_device() {
    let dir = tempfile::tempdir().unwrap();
    let path = inventory(dir.path(), "laptop", vec![], 32 * GIB);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["backends"].as_array_mut().unwrap().push(json!(
        {"backend": "vulkan", "available": true, "devices": [{"index": 0, "name": "llvmpipe",
         "device_type": "cpu", "total_bytes": 2u64 << 30}]}
    ));
    std::fs::write(&path, doc.to_string()).unwrap();
    let mut argv: Vec<&str> = "--model llama-3.1-8b --dtype q8_0 --engine llama.cpp --context 8192"
        .split(' ')
        .collect();
    argv.extend(["--inventory", path.to_str().unwrap()]);
    let (code, doc) = select(&argv);
    assert_eq!(code, 0, "{doc}");
    let reason = common::candidate(&doc, "vulkan")["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("GGML_VK_VISIBLE_DEVICES"), "{reason}");
    assert!(!reason.contains("--prefer"), "{reason}");
}
