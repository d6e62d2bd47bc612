//! vLLM's serving features that change memory, as `select --engine vllm` plans them:
//! speculative decoding (`--speculative-config`) and LoRA adapters (`--enable-lora`), their
//! terms in the account and JSON, their flags in the launch, and their usage errors as printed.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::common;

// `--speculative-config` as vLLM takes it: an MTP draft's weights and KV layer join the plan,
// the hybrid's attention block grows as vLLM's log says (2,144 tokens for Qwen3.6-35B-A3B with
// 3 MTP tokens and an fp8 cache), and the launch carries the JSON as given.
#[test]
fn a_speculative_config_joins_the_plan_and_the_launch() {
    let json = r#"{"method":"qwen3_5_mtp","num_speculative_tokens":3}"#;
    let run = |spec: Option<&str>| {
        let mut args = vec![
            "--json",
            "select",
            "--model",
            "qwen3.5-35b-a3b",
            "--engine",
            "vllm",
            "--device",
            "sim:h200",
            "--kv-dtype",
            "fp8",
        ];
        if let Some(s) = spec {
            args.extend(["--speculative-config", s]);
        }
        let out = common::gpumem().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let (with, without) = (run(Some(json)), run(None));
    let draft = &with["plan"]["engine"]["draft"];
    assert_eq!(draft["algorithm"], "MTP");
    assert_eq!(
        (draft["layers"].as_u64(), draft["tokens"].as_u64()),
        (Some(1), Some(3))
    );
    assert!(draft["weights_bytes"].as_u64().unwrap() > 1 << 30);
    assert_eq!(with["plan"]["engine"]["block_size"], 2144);
    assert_eq!(without["plan"]["engine"]["block_size"], 2096);
    assert!(without["plan"]["engine"]["draft"].is_null());
    let kv = |doc: &Value| doc["plan"]["engine"]["kv_tokens"].as_u64().unwrap();
    assert!(kv(&with) < kv(&without), "{} {}", kv(&with), kv(&without));
    assert!(with
        .to_string()
        .contains(&serde_json::to_string(json).unwrap()));
    // A draft model of its own, or JSON vLLM would not take, is a usage error.
    for (spec, why) in [
        (
            r#"{"model":"Qwen/Qwen3.5-0.8B","num_speculative_tokens":3}"#,
            "method (none: a draft model) is not modelled (gpumem models eagle, eagle3, mtp and \
             ngram drafts; a draft model of its own is not)",
        ),
        (
            r#"{"method":"eagle3"}"#,
            "num_speculative_tokens is missing",
        ),
        (
            r#"{"method":"mtp","num_speculative_tokens":0}"#,
            "num_speculative_tokens 0 is not from 1 to 64",
        ),
    ] {
        let out = common::gpumem()
            .args(["select", "--model", "qwen3.5-35b-a3b", "--engine", "vllm"])
            .args(["--device", "sim:h200", "--speculative-config", spec])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{spec}");
        assert_eq!(
            String::from_utf8(out.stderr).unwrap().trim_end(),
            format!("gpumem: error: --speculative-config: {why}")
        );
    }
}

// `--enable-lora`: the slots vLLM preallocates join the weights (Llama-3.1-8B, 4 slots of rank
// 64: 32 layers × 4 × (64 × (5 × 4096 + 4096 + 14336) + 64 × (4096 + 2 × 1024 + 2 × 14336 +
// 2 × 4096)) × 2 bytes, and Llama's class wraps its embedding and logits too: 2 × 4 × 64 ×
// (128,256 + 4096) × 2 bytes), the launch carries the flags, and vLLM's own refusals are usage
// errors.
#[test]
fn lora_slots_join_the_weights_and_the_launch() {
    let run = |extra: &[&str]| {
        let out = common::gpumem()
            .args([
                "--json",
                "select",
                "--model",
                "llama-3.1-8b",
                "--engine",
                "vllm",
            ])
            .args(["--device", "sim:h100"])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, with, _) = run(&["--enable-lora", "--max-loras", "4", "--max-lora-rank", "64"]);
    assert_eq!(code, Some(0));
    let (_, without, _) = run(&[]);
    let (with, without): (Value, Value) = (
        serde_json::from_str(&with).unwrap(),
        serde_json::from_str(&without).unwrap(),
    );
    let slots =
        32u64 * 4 * (64 * (5 * 4096 + 4096 + 14336) + 64 * (4096 + 2048 + 28672 + 8192)) * 2
            + 2 * 4 * 64 * (128_256 + 4096) * 2;
    assert_eq!(with["plan"]["engine"]["lora"][1], slots);
    let weights = |doc: &Value| {
        doc["plan"]["engine"]["terms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["term"] == "weights")
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(weights(&with) - weights(&without), slots);
    let launch = with.to_string();
    assert!(
        launch.contains(r#""--enable-lora","--max-loras","4","--max-lora-rank","64""#),
        "{launch}"
    );
    let (code, _, err) = run(&["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim_end(),
        "gpumem: error: --max-cpu-loras 2 is below --max-loras 4: vLLM keeps at least the GPU's \
         adapters in host memory"
    );
    let (code, _, err) = run(&["--enable-lora", "--max-lora-rank", "12"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("'12' is not a rank vLLM takes (1, 8, 16, 32, 64, 128, 256, 320 or 512)"),
        "{err}"
    );
    let (code, _, err) = run(&["--max-loras", "4"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--enable-lora"), "{err}");
    // Experts' slots are not modelled: refused, never planned without them.
    let out = common::gpumem()
        .args([
            "select",
            "--model",
            "qwen3-30b-a3b",
            "--engine",
            "vllm",
            "--enable-lora",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap().trim_end(),
        "gpumem: error: --enable-lora on a mixture of experts: vLLM's LoRA slots on routed \
         experts are not modelled (dense models only)"
    );
}

// A model vLLM's own accounting does not cover (DeepSeek-V4's compressed attention) is planned
// by the generic rule, and the plan says so; one it covers (Gemma 4 among them) does not say it.
#[test]
fn a_model_outside_vllms_account_is_said_to_be_planned_generically() {
    let text = |model: &str, devices: &[&str]| {
        let mut args = vec![
            "select", "--model", model, "--engine", "vllm", "--dtype", "fp8",
        ];
        for d in devices {
            args.extend(["--device", d]);
        }
        let out = common::gpumem().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{model}");
        String::from_utf8(out.stdout).unwrap()
    };
    let line = "vLLM's own accounting does not cover this model; this plan is by gpumem's";
    assert!(text("deepseek-v4-flash", &["sim:h200"; 8]).contains(line));
    assert!(!text("gemma-4-31b", &["sim:h100"]).contains(line));
    assert!(!text("llama-3.1-8b", &["sim:h100"]).contains(line));
    // Where nothing fits (Kimi-K3 on one H100), the verdicts say whose rule judged them.
    let out = common::gpumem()
        .args([
            "select", "--model", "kimi-k3", "--engine", "vllm", "--device", "sim:h100",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("vLLM's own accounting does not cover this model; the verdicts above are"),
        "{text}"
    );
    // MiniMax-M3's sparse attention (its indexer's pool) is outside vLLM's account too.
    let out = common::gpumem()
        .args(["select", "--model", "minimax-m3", "--engine", "vllm"])
        .args(["--device"; 8].iter().flat_map(|d| [*d, "sim:h200"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(line));
    // Seven H200s would hold it, but its 64 heads do not split 7 ways: vLLM refuses that size,
    // so the generic rule takes all 8.
    assert!(
        text.contains("Plan: tensor parallel over 8 devices"),
        "{text}"
    );
    assert!(text.contains("--tensor-parallel-size 8"), "{text}");
}

// A vision-language model served with a draft and LoRA slots: the account has the encoder's,
// the draft's and the slots' terms, and the launch carries every flag vLLM needs.
#[test]
fn a_vlm_with_a_draft_and_lora_slots_launches_with_every_flag() {
    let spec = r#"{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}"#;
    let mm = r#"{"image":2,"video":0}"#;
    let out = crate::common::gpumem()
        .args(["--json", "select", "--engine", "vllm", "--config"])
        .arg(crate::common::fixture(
            "vllm/configs/qwen2.5-vl-3b-instruct.json",
        ))
        .args(["--device", "sim:l4", "--context", "8192"])
        .args(["--limit-mm-per-prompt", mm, "--speculative-config", spec])
        .args(["--enable-lora", "--max-loras", "2", "--max-lora-rank", "16"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let engine = &json["plan"]["engine"];
    assert!(engine["encoder"].is_object(), "{engine}");
    assert!(engine["draft"].is_object(), "{engine}");
    assert_eq!(engine["lora"][0]["max_loras"], 2, "{engine}");
    assert!(engine["lora"][1].as_u64().unwrap() > 0, "{engine}");
    let argv = crate::common::launch_argv(&json);
    let after = |flag: &str| argv[argv.iter().position(|a| a == flag).unwrap() + 1].clone();
    assert_eq!(after("--speculative-config"), spec);
    assert_eq!(after("--limit-mm-per-prompt"), mm);
    assert_eq!(after("--max-loras"), "2");
    assert_eq!(after("--max-lora-rank"), "16");
    assert!(argv.iter().any(|a| a == "--enable-lora"));
}
