//! `select --lora` against llama.cpp's own LoRA buffers
//! (`tools/llamacpp-reference/measure_lora.py`: lora_buffers.cpp loads the model and adapter as
//! llama-server does, on a ggml-rpc-server device lending the CPU): each factor lands on the
//! device of the matrix it adapts, so each device's LoRA bytes are llama.cpp's to the 0.01 MiB
//! it prints, at every -ngl measured; the launch applies the adapter; an adapter for another
//! model, or a file that is not one, is refused as llama.cpp refuses it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use crate::common;

use serde_json::Value;

const FIXTURE: &str = "llamacpp-lora/llama-shape-lora.json";

/// The fixture, the model and each adapter, written as sparse files in `dir`.
fn setup(dir: &Path) -> (Value, PathBuf) {
    let text = std::fs::read_to_string(common::fixture(FIXTURE)).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let model = dir.join("model.gguf");
    common::write_described_gguf(
        "model",
        &serde_json::json!({ "gguf": doc["model_gguf"] }),
        &model,
    );
    for (name, described) in doc["adapters"].as_object().unwrap() {
        let path = dir.join(format!("{name}.gguf"));
        common::write_described_gguf(name, &serde_json::json!({ "gguf": described }), &path);
    }
    (doc, model)
}

fn select(model: &Path, extra: &[String], device_mib: u64) -> std::process::Output {
    common::gpumem()
        .args(["--json", "select", "--engine", "llama.cpp", "--gguf"])
        .arg(model)
        .args(extra)
        .args(["--context", "4096", "--ram", "16GiB"])
        // The reference's device is an rpc-server lending a CPU: the CPU backend's buffers.
        .args(["--llamacpp-device", "cpu-rules"])
        .arg("--device")
        .arg(format!("sim:{device_mib}MiB"))
        .output()
        .unwrap()
}

fn mib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1048576.0)
}

#[test]
fn each_devices_lora_buffer_is_llama_cpps() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, model) = setup(dir.path());
    let mut checked = 0;
    for row in doc["rows"].as_array().unwrap() {
        let adapter = dir
            .path()
            .join(format!("{}.gguf", row["adapter"].as_str().unwrap()));
        let lora = ["--lora".to_string(), adapter.display().to_string()];
        let out = select(&model, &lora, row["device_mib"].as_u64().unwrap());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{row}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        let account = &json["plan"]["llamacpp"];
        assert_eq!(account["n_gpu_layers"], row["ngl"], "{row}");
        let share = &account["lora"];
        let printed = |d: &str| row["lora_mib"][d].as_f64().map(|m| format!("{m:.2}"));
        let gpu = share["devices_bytes"][0].as_u64().unwrap();
        let host = share["host_bytes"].as_u64().unwrap();
        assert_eq!(printed("gpu0").unwrap_or_else(|| mib(0)), mib(gpu), "{row}");
        assert_eq!(
            printed("host").unwrap_or_else(|| mib(0)),
            mib(host),
            "{row}"
        );
        assert_eq!(share["counted_by_llamacpp_fit"], false);
        // The launch applies it.
        let argv = common::launch_argv(&json);
        let at = argv.iter().position(|a| a == "--lora").unwrap();
        assert_eq!(argv[at + 1], adapter.display().to_string());
        checked += 1;
    }
    assert!(checked >= 6, "{checked}");
}

// With the whole model on the device llama.cpp's compute buffers are those without the
// adapter (its products fit in memory the graph frees anyway): gpumem's are unchanged too.
#[test]
fn a_whole_model_on_the_device_keeps_its_compute_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, model) = setup(dir.path());
    for row in doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ngl"] == 5)
    {
        assert_eq!(row["compute_mib"], row["compute_mib_without"], "{row}");
        let adapter = dir
            .path()
            .join(format!("{}.gguf", row["adapter"].as_str().unwrap()));
        let lora = ["--lora".to_string(), adapter.display().to_string()];
        let size = row["device_mib"].as_u64().unwrap();
        let compute = |out: std::process::Output| {
            let json: Value = serde_json::from_slice(&out.stdout).unwrap();
            json["plan"]["llamacpp"]["devices"][0]["compute"].clone()
        };
        assert_eq!(
            compute(select(&model, &lora, size)),
            compute(select(&model, &[], size))
        );
        let json: Value = serde_json::from_slice(&select(&model, &lora, size).stdout).unwrap();
        assert_eq!(
            mib(json["plan"]["llamacpp"]["devices"][0]["compute"]
                .as_u64()
                .unwrap()),
            format!("{:.2}", row["compute_mib"]["gpu0"].as_f64().unwrap())
        );
    }
}

// What llama.cpp refuses to load is refused before planning, in one line naming the file.
#[test]
fn an_adapter_for_another_model_or_no_adapter_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, model) = setup(dir.path());
    // The adapter of a model with more layers than this one.
    let mut other = doc["adapters"]["qv-head-r16-f32"].clone();
    let tensors = other["tensors"].as_array_mut().unwrap();
    let mut extra = tensors[0].clone();
    extra[0] = Value::from("blk.9.attn_q.weight.lora_a");
    let mut extra_b = tensors[1].clone();
    extra_b[0] = Value::from("blk.9.attn_q.weight.lora_b");
    tensors.extend([extra, extra_b]);
    let wrong = dir.path().join("wrong.gguf");
    common::write_described_gguf("wrong", &serde_json::json!({ "gguf": other }), &wrong);
    let args = ["--lora".to_string(), wrong.display().to_string()];
    let out = select(&model, &args, 4096);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("adapts 'blk.9.attn_q.weight', which the model does not have"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // The model itself given as an adapter.
    let args = ["--lora".to_string(), model.display().to_string()];
    let out = select(&model, &args, 4096);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("general.type") && stderr.contains("not a LoRA adapter GGUF"),
        "{stderr}"
    );
    // Another engine's plan takes no --lora.
    let out = common::gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--engine",
            "vllm",
            "--lora",
        ])
        .arg(&wrong)
        .args(["--device", "sim:h100"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lora is llama.cpp's"));
}

// A vision-language model served with a draft and an adapter, all three beside the model: the
// account has each one's share and the launch carries every flag llama-server needs.
#[test]
fn a_vlm_with_a_draft_and_an_adapter_launches_with_every_flag() {
    let dir = tempfile::tempdir().unwrap();
    let adapter = dir.path().join("adapter.gguf");
    let described = serde_json::json!({ "gguf": {
        "metadata": {
            "general.architecture": "llama",
            "general.type": "adapter",
            "adapter.type": "lora",
            "adapter.lora.alpha": 16.5,
        },
        "tensors": [
            ["blk.0.attn_q.weight.lora_a", [256, 8], 1],
            ["blk.0.attn_q.weight.lora_b", [8, 256], 1],
        ],
    }});
    common::write_described_gguf("adapter", &described, &adapter);
    let model = common::fixture("tiny-llama.gguf");
    let mmproj = common::fixture("tiny-mmproj.gguf");
    let out = common::gpumem()
        .args(["--json", "select", "--engine", "llama.cpp", "--gguf"])
        .arg(&model)
        .arg("--mmproj")
        .arg(&mmproj)
        .arg("--model-draft")
        .arg(&model)
        .arg("--lora")
        .arg(&adapter)
        .args(["--context", "2048", "--device", "sim:8GiB"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let account = &json["plan"]["llamacpp"];
    assert!(account["draft"].is_object());
    assert!(account["projector"]["weights_bytes"].as_u64().unwrap() > 0);
    // Two factors of 256 x 8 f16 values, on the GPU with every layer.
    assert_eq!(account["lora"]["devices_bytes"][0], 2 * 256 * 8 * 2);
    let argv = common::launch_argv(&json);
    let after = |flag: &str| argv[argv.iter().position(|a| a == flag).unwrap() + 1].clone();
    assert_eq!(after("-m"), model);
    assert_eq!(after("-md"), model);
    assert_eq!(after("--mmproj"), mmproj);
    assert_eq!(after("--lora"), adapter.display().to_string());
}
