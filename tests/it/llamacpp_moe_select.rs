//! `select` plans a model with routed experts for llama.cpp as `llama-server --fit` runs it:
//! for the GGUF a `llamacpp-server-fit/*-moe.json` fixture describes, written here as a sparse
//! file, on simulated GPUs of each recorded size with system RAM beside them, the
//! `llama-server` command carries the `-ngl`, `--tensor-split` and `-ot` that llama-server's
//! fit chose (`measure_fit.py --server`: llama.cpp's fit with logits for one token a sequence).

#![allow(clippy::unwrap_used)]

use crate::common;

use serde_json::Value;

#[test]
fn select_plans_experts_in_ram_as_llama_cpp_fits() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases = 0;
    for name in ["qwen3-30b-a3b-shape-f16-moe", "mixtral-shape-f16-moe"] {
        let (doc, gguf) = common::server_fit_fixture(name, dir.path());
        let rpc = doc["rpc"].as_array().unwrap();
        for row in doc["rows"].as_array().unwrap() {
            let context = ["--context".into(), row["ctx"].to_string()];
            let (sizes, args) = common::fit_row_select(&gguf, row, &context);
            let out = common::gpumem().args(&args).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{name} {sizes:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let json: Value = serde_json::from_slice(&out.stdout).unwrap();
            let argv = common::launch_argv(&json);
            let at = argv.iter().position(|a| a == "-ngl").unwrap();
            let all = json["plan"]["llamacpp"]["repeating_layers"]
                .as_u64()
                .unwrap()
                + 1;
            let want =
                common::fit_params_as_server_args(row["printed"].as_str().unwrap(), rpc, all);
            assert_eq!(argv[at..], want[..], "{name} on {sizes:?} MiB");
            // What the overrides leave in system RAM is planned there.
            let ram = json["plan"]["placements"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(ram["backend"], "cpu", "{name} on {sizes:?} MiB");
            assert_eq!(
                json["plan"]["kind"], "cpu_offload",
                "{name} on {sizes:?} MiB"
            );
            cases += 1;
        }
    }
    assert!(cases >= 10, "{cases}");
}

// The text plan says what llama.cpp's fit keeps in system RAM, in an 80-column terminal.
// CUDA offloads the host's batched operators, so the GPU's compute buffer holds
// copies of the largest expert tensors and layer 10 keeps its whole FFN in RAM.
#[test]
fn the_text_plan_names_the_experts_kept_in_ram() {
    let (text, unwrapped) = qwen3_moe_plan_text(&[]);
    assert!(
        unwrapped.contains("Plan: CPU offload — 48 layers on cuda:0 on sim (14.72 GiB), the experts of 38 layers in its system RAM (43.35 GiB)"),
        "{text}"
    );
    assert!(
        text.contains("  -ot: the feed-forward weights of layer 10 in system RAM\n")
            && text.contains("  -ot: the routed experts of layers 11–47 in system RAM\n"),
        "{text}"
    );
}

/// The text plan of Qwen3-30B-A3B (f16, 8,192 tokens) on a 16 GiB GPU beside 64 GiB of RAM,
/// in an 80-column terminal, as printed and with its continuation lines joined.
fn qwen3_moe_plan_text(extra: &[&str]) -> (String, String) {
    let out = common::gpumem()
        .args(["select", "--model", "qwen3-30b-a3b", "--dtype", "f16"])
        .args(["--engine", "llama.cpp", "--device", "sim:16GiB"])
        .args(["--ram", "64GiB", "--context", "8192"])
        .args(extra)
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{extra:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    let unwrapped = text.replace("\n    ", " ");
    (text, unwrapped)
}

// Too little system RAM beside a GPU that holds its share of the fit: the RAM is what is short,
// by what llama.cpp's fit leaves there, and more RAM is suggested.
#[test]
fn too_little_ram_for_the_experts_is_the_ram_s_shortfall() {
    let out = common::gpumem()
        .args([
            "--json",
            "select",
            "--model",
            "qwen3-30b-a3b",
            "--dtype",
            "f16",
        ])
        .args([
            "--engine",
            "llama.cpp",
            "--device",
            "sim:16GiB",
            "--ram",
            "8GiB",
        ])
        .args(["--context", "8192"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["plan"]["kind"], "none");
    let cpu = common::candidate(&json, "cpu");
    let gpu = common::candidate(&json, "cuda");
    assert_eq!(
        (gpu["fits"].as_bool(), cpu["fits"].as_bool()),
        (Some(true), Some(false))
    );
    let short = cpu["needed_bytes"].as_u64().unwrap() - (8 << 30);
    assert_eq!(
        json["plan"]["shortfall_bytes"].as_u64(),
        Some(short),
        "{json}"
    );
    assert_eq!(json["suggestions"][0]["change"], "ram", "{json}");
    assert!(json["suggestions"][0]["bytes"].as_u64().unwrap() > 8 << 30);
}

// `--no-op-offload` plans llama.cpp with its operator offload off: the GPU holds no copy of a
// host weight, so its compute buffer is the rpc-server's (as `llama-fit-params` measured it)
// and layer 10 keeps its up projections on the GPU. The text header and the launch say so.
#[test]
fn without_operator_offload_the_fit_keeps_more_on_the_gpu() {
    let (text, unwrapped) = qwen3_moe_plan_text(&["--no-op-offload"]);
    assert!(
        unwrapped.contains("Plan: CPU offload — 48 layers on cuda:0 on sim (14.76 GiB), the experts of 38 layers in its system RAM (43.03 GiB)"),
        "{text}"
    );
    assert!(
        unwrapped.contains("llama.cpp b11312 on CUDA (-fa on, --no-op-offload, -ngl 49,"),
        "{text}"
    );
    assert!(
        text.contains("  -ot: the feed-forward gate and down weights of layer 10 in system RAM\n"),
        "{text}"
    );
}

// llama-server's own flags for what the plan assumed: -fa off and --no-op-offload.
#[test]
fn flash_attention_off_and_no_op_offload_reach_the_launch() {
    let gguf = common::fixture("tiny-llama.gguf");
    let base = ["--json", "select", "--gguf", &gguf, "--device", "sim:2GiB"];
    let run = |extra: &[&str]| {
        let out = common::gpumem().args(base).args(extra).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{extra:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let default = run(&[]);
    let argv = common::launch_argv(&default);
    assert!(
        !argv.iter().any(|a| a == "-fa" || a == "--no-op-offload"),
        "{argv:?}"
    );
    assert_eq!(default["plan"]["llamacpp"]["flash_attention"], true);
    assert_eq!(default["plan"]["llamacpp"]["op_offload"], true);
    // A simulated GPU is planned with ggml-cuda's rules, measured on an H200.
    assert_eq!(default["plan"]["llamacpp"]["device_rules"], "cuda");
    assert_eq!(
        default["plan"]["llamacpp"]["device_rules_basis"],
        "measured"
    );
    let off = run(&["--flash-attn", "off", "--no-op-offload"]);
    let argv = common::launch_argv(&off);
    assert!(
        argv.ends_with(&["-fa".into(), "off".into(), "--no-op-offload".into()]),
        "{argv:?}"
    );
    assert_eq!(off["plan"]["llamacpp"]["flash_attention"], false);
    assert_eq!(off["plan"]["llamacpp"]["op_offload"], false);
    // Without flash attention the scores are computed whole: more compute on the GPU.
    let compute = |d: &Value| d["plan"]["llamacpp"]["devices"][0]["compute"].as_u64();
    assert!(compute(&off) > compute(&default), "{off}");
}

// llama.cpp's flags need llama.cpp's plan, and cannot contradict --flash-attention.
#[test]
fn llama_cpp_flags_outside_its_plan_are_usage_errors() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["--flash-attn", "off"],
            "gpumem: error: --flash-attn is llama.cpp's: it needs a GGUF model or --engine llama.cpp\n",
        ),
        (
            &["--no-op-offload"],
            "gpumem: error: --no-op-offload is llama.cpp's: it needs a GGUF model or --engine llama.cpp\n",
        ),
        (
            &["--engine", "llama.cpp", "--flash-attention", "--flash-attn", "off"],
            "gpumem: error: --flash-attention and --flash-attn off contradict each other\n",
        ),
    ];
    for (extra, want) in cases {
        let out = common::gpumem()
            .args(["select", "--model", "llama-3.1-8b", "--device", "sim:24GiB"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), want, "{extra:?}");
    }
}

// A catalog model whose first layers are dense before its MoE layers (DeepSeek-V3's three,
// Kimi-Linear's one) is counted without tensors: every MoE layer holds at least the experts an
// override moves off it, so the plan places them (it once subtracted past zero and panicked).
#[test]
fn select_places_overrides_on_dense_lead_moe_from_the_catalog() {
    for (model, device, ram) in [
        ("deepseek-v3", "sim:h100", "1536GiB"),
        ("kimi-linear-48b-a3b", "sim:rtx4090", "128GiB"),
    ] {
        let out = common::gpumem()
            .args(["select", "--model", model, "--engine", "llama.cpp"])
            .args(["--device", device, "--ram", ram, "--json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{model}: {stderr}");
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["plan"]["kind"], "cpu_offload", "{model}");
        let overrides = json["plan"]["llamacpp"]["overrides"].as_array().unwrap();
        assert!(!overrides.is_empty(), "{model}");
        let placements = json["plan"]["placements"].as_array().unwrap();
        let ram = placements.last().unwrap();
        assert_eq!(ram["backend"], "cpu", "{model}");
    }
}
