//! transformers' `generate` with an assistant model and with a PEFT LoRA adapter against
//! PyTorch's own `MemTracker` (`tests/fixtures/pytorch/generate-{assisted,lora}-*.json`,
//! recorded by `tools/pytorch-reference/measure_generate_assisted.py` on fake tensors with
//! torch 2.15.0, transformers 5.24.0 and peft 0.21.2): gpumem's peak must be the tracker's to
//! the byte and fall in the same phase (a LoRA record whose peak is a decoding step: within
//! [1.00, 1.05], as the plain decoding step is held). Every failing record is named.

#![allow(clippy::unwrap_used)]

use crate::common;

use gpumem::model::{read_config, ModelArch};
use gpumem::plan::engines::pytorch::assisted::{assisted_peak, Assistant};
use gpumem::plan::engines::pytorch::generate::{
    generate_peak, GeneratePeak, GeneratePhase, GenerateRun,
};
use gpumem::plan::engines::pytorch::training::{Lora, LoraTargets};
use serde_json::Value;

fn records_of(prefix: &str) -> Vec<(String, Value)> {
    let dir = common::fixture("pytorch");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, serde_json::from_str(&text).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn arch(name: &str) -> ModelArch {
    let config = common::fixture(&format!("pytorch/configs/{name}.json"));
    read_config(std::path::Path::new(&config)).unwrap().0
}

fn run_of(r: &Value, lora: Option<Lora>) -> GenerateRun {
    GenerateRun {
        batch: r["batch"].as_u64().unwrap(),
        prompt: r["prompt"].as_u64().unwrap(),
        new_tokens: r["new_tokens"].as_u64().unwrap(),
        lora,
    }
}

/// Each record's name, gpumem's total and the tracker's, and whether the phases agree.
fn check(records: &[(String, Value)], ours: impl Fn(&Value) -> GeneratePeak) {
    let mut failures = Vec::new();
    for (name, r) in records {
        let theirs = r["peak"]["Total"].as_u64().unwrap();
        let phase = match r["peak_phase"].as_str().unwrap() {
            "prefill" | "first_round" => GeneratePhase::Prefill,
            _ => GeneratePhase::Decode,
        };
        let p = ours(r);
        eprintln!(
            "{name}: ours {} theirs {theirs} diff {}",
            p.total,
            i128::from(p.total) - i128::from(theirs)
        );
        // A plain decoding step is walked from above (pytorch_reference.rs holds it within
        // [1.00, 1.05]); with an adapter it is held the same way. Every other record is exact.
        let ratio = p.total as f64 / theirs as f64;
        let bounded = r.get("lora").is_some()
            && phase == GeneratePhase::Decode
            && (1.0..=1.05).contains(&ratio);
        if (p.total != theirs && !bounded) || p.phase != phase {
            failures.push(format!(
                "{name}: {} vs MemTracker {theirs}, {:?} vs {phase:?}",
                p.total, p.phase
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn assisted_generate_matches_memtracker() {
    let records = records_of("generate-assisted-");
    assert!(records.len() >= 4, "only {} records", records.len());
    check(&records, |r| {
        let draft = arch(r["assistant"]["model"].as_str().unwrap());
        let assistant = Assistant {
            arch: &draft,
            tokens: r["assistant"]["num_assistant_tokens"].as_u64().unwrap(),
        };
        assisted_peak(
            &arch(r["model"].as_str().unwrap()),
            &run_of(r, None),
            assistant,
        )
        .unwrap()
    });
}

#[test]
fn lora_generate_matches_memtracker() {
    let records = records_of("generate-lora-");
    assert!(records.len() >= 4, "only {} records", records.len());
    check(&records, |r| {
        let lora = Lora {
            rank: u32::try_from(r["lora"]["rank"].as_u64().unwrap()).unwrap(),
            targets: match r["lora"]["targets"].as_str().unwrap() {
                "all-linear" => LoraTargets::ALL_LINEAR,
                "q-v" => LoraTargets::QUERY_VALUE,
                other => panic!("LoRA targets {other}"),
            },
        };
        let peak = generate_peak(&arch(r["model"].as_str().unwrap()), &run_of(r, Some(lora)));
        let peak = peak.unwrap();
        assert_eq!(
            peak.adapter_parameters,
            Some(4 * r["lora"]["adapter_parameters"].as_u64().unwrap())
        );
        peak
    });
}

/// `estimate --engine transformers` carries both features end to end: Llama-3.2-1B assisted by
/// the 2-layer draft of its shape (a config.json) at a 512-token prompt and 42 new tokens, and
/// with a rank-64 all-linear adapter read from a PEFT adapter_config.json at 1,024 and 4, give
/// MemTracker's totals; the features need --engine transformers and one sequence.
#[test]
fn estimate_carries_the_assistant_and_the_adapter() {
    let base = [
        "--json",
        "estimate",
        "--model",
        "llama-3.2-1b",
        "--engine",
        "transformers",
        "--overhead",
        "0",
        "--fragmentation-reserve",
        "0",
    ];
    let draft = common::fixture("pytorch/configs/llama-3.2-1b-shape-2-layers.json");
    let doc = common::json_ok(common::gpumem().args(base).args([
        "--context",
        "512",
        "--new-tokens",
        "42",
        "--assistant-model",
        &draft,
    ]));
    assert_eq!(doc["total_bytes"], 3_305_137_984u64);
    assert_eq!(doc["generate"]["phase"], "prefill");
    assert_eq!(doc["generate"]["assistant"]["candidates"], 20);
    assert_eq!(doc["generate"]["assistant"]["parameters"], 768_626_688u64);

    let dir = tempfile::tempdir().unwrap();
    let adapter = dir.path().join("adapter_config.json");
    std::fs::write(
        &adapter,
        r#"{"peft_type": "LORA", "r": 64, "lora_alpha": 128, "target_modules":
            ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}"#,
    )
    .unwrap();
    let doc = common::json_ok(common::gpumem().args(base).args([
        "--context",
        "1024",
        "--new-tokens",
        "4",
        "--adapter-config",
        adapter.to_str().unwrap(),
    ]));
    assert_eq!(doc["total_bytes"], 2_811_646_208u64);
    assert_eq!(doc["generate"]["adapter_parameters"], 4 * 45_088_768u64);

    common::gpumem()
        .args(["estimate", "--model", "llama-3.2-1b", "--adapter-rank", "8"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("--engine transformers"));
    common::gpumem()
        .args(base)
        .args(["--batch", "2", "--assistant-model", &draft])
        .assert()
        .failure()
        .stderr(predicates::str::contains("one sequence"));
}
