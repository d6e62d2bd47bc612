//! PyTorch's training memory against PyTorch's own `MemTracker` (`tests/fixtures/pytorch/`,
//! recorded by `tools/pytorch-reference/` on fake tensors with torch 2.15 and transformers
//! 5.24): for every recorded step, gpumem's peak must lie within [1.00, 1.05]× of the tracker's
//! and fall in the same phase; the same for transformers' `generate` (`generate-*.json`). Every
//! failing record is named.

#![allow(clippy::unwrap_used)]

use crate::common;

use gpumem::model::{read_config, ModelArch};
use gpumem::plan::engines::pytorch::generate::{generate_peak, GeneratePhase, GenerateRun};
use gpumem::plan::engines::pytorch::training::Optimizer;
use gpumem::plan::engines::pytorch::training::{
    training_peak, AttnImplementation, Ddp, DeepSpeed, Fsdp, Lora, LoraTargets, Phase, Recipe,
    TrainingRun, ZeroStage,
};
use serde_json::Value;

fn records() -> Vec<(String, Value)> {
    records_of("train-")
}

fn records_of(prefix: &str) -> Vec<(String, Value)> {
    let dir = common::fixture("pytorch");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
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

/// The record's model, from its config.json beside the records.
fn arch_of(r: &Value) -> ModelArch {
    let config = common::fixture(&format!(
        "pytorch/configs/{}.json",
        r["model"].as_str().unwrap()
    ));
    read_config(std::path::Path::new(&config)).unwrap().0
}

fn lora_of(r: &Value) -> Lora {
    Lora {
        rank: u32::try_from(r["lora"]["rank"].as_u64().unwrap()).unwrap(),
        targets: match r["lora"]["targets"].as_str().unwrap() {
            "all-linear" => LoraTargets::ALL_LINEAR,
            "attention" => LoraTargets::ATTENTION,
            other => panic!("LoRA targets {other}"),
        },
    }
}

fn run_of(r: &Value) -> TrainingRun {
    TrainingRun {
        recipe: match r["recipe"].as_str().unwrap() {
            "bf16" => Recipe::Bf16,
            "fp32-autocast" => Recipe::Fp32Autocast,
            "mixed-fp32-master" => Recipe::MixedFp32Master,
            "lora" => Recipe::Lora(lora_of(r)),
            "qlora" => Recipe::Qlora(lora_of(r)),
            other => panic!("recipe {other}"),
        },
        optimizer: match r["optimizer"].as_str().unwrap() {
            "adamw" => Optimizer::Adamw,
            "adam" => Optimizer::Adam,
            "sgd" => Optimizer::Sgd,
            "adamw8bit" => Optimizer::Adamw8bit,
            "adafactor" => Optimizer::Adafactor,
            other => panic!("optimizer {other}"),
        },
        // What the record ran: FSDP2's the per-tensor loop, DeepSpeed's records name none.
        foreach: r["foreach"].as_bool().unwrap_or(true),
        batch: r["batch"].as_u64().unwrap(),
        seq: r["seq"].as_u64().unwrap(),
        checkpointing: r["checkpointing"].as_bool().unwrap(),
        // Records before gradient accumulation was recorded ran one micro-batch a step.
        grad_accum: r["grad_accum"].as_u64().unwrap_or(1),
        // DeepSpeed's records name their ZeRO stage; FSDP2's their world size alone.
        fsdp: r["world"]
            .as_u64()
            .filter(|_| r["stage"].is_null())
            .map(|world| Fsdp {
                world,
                reshard_after_forward: r["reshard_after_forward"].as_bool().unwrap(),
            }),
        deepspeed: r["world"].as_u64().and_then(|world| {
            let stage = match r["stage"].as_u64()? {
                1 => ZeroStage::One,
                2 => ZeroStage::Two,
                3 => ZeroStage::Three,
                other => panic!("ZeRO stage {other}"),
            };
            Some(DeepSpeed {
                world,
                stage,
                offload_optimizer: r["offload_optimizer"].as_bool().unwrap_or(false),
            })
        }),
        ddp: r["ddp"]["bucket_view"].as_bool().map(|bucket_view| Ddp {
            bucket_view,
            zero1: r["ddp"]["zero1"].as_u64(),
        }),
        // What the record ran: SDPA, or eager where transformers chose it or was asked to.
        attention: match r["attn"].as_str() {
            Some("eager") => AttnImplementation::Eager,
            _ => AttnImplementation::Sdpa,
        },
    }
}

#[test]
fn training_peaks_match_memtracker() {
    let records = records();
    assert!(records.len() >= 54, "only {} records", records.len());
    check_training(&records);
}

// One rank of FSDP2 against FSDPMemTracker (tests/fixtures/pytorch/fsdp-*.json, a fake process
// group of 2, 4 or 8 ranks): the same bound, per rank.
#[test]
fn fsdp_rank_peaks_match_fsdp_memtracker() {
    let records = records_of("fsdp-");
    assert!(records.len() >= 20, "only {} records", records.len());
    for world in [2, 4, 8] {
        assert!(
            records.iter().any(|(_, r)| r["world"] == world),
            "no record at world size {world}"
        );
    }
    check_training(&records);
}

// One rank of DeepSpeed's ZeRO stage 1, 2 or 3 against MemTracker
// (tests/fixtures/pytorch/deepspeed-*.json, deepspeed 0.19.8 on a fake process group, its last
// rank): the same bound. gpumem gives the fullest rank's peak: where another rank was
// recorded too (`…-rankN.json`: under ZeRO-Offload the rank holding the embedding can be the
// fuller; under gradient accumulation the rank whose partition touches the most), the fuller
// of the two is the reference.
#[test]
fn deepspeed_rank_peaks_match_memtracker() {
    let mut records: Vec<(String, Value)> = Vec::new();
    for (name, r) in records_of("deepspeed-") {
        // A rank's record beside the last rank's: `…-rankN`.
        let config = match name.rsplit_once("-rank") {
            Some((config, n)) if n.parse::<u32>().is_ok() => config.to_string(),
            _ => name.clone(),
        };
        // The fuller GPU, then the fuller host (ranks alike on the GPU can differ there).
        let total = |r: &Value| {
            let host = r["host_peak"]["Total"].as_u64().unwrap_or(0);
            (r["peak"]["Total"].as_u64().unwrap(), host)
        };
        match records.iter_mut().find(|(n, _)| *n == config) {
            Some(kept) if total(&kept.1) >= total(&r) => {}
            Some(kept) => kept.1 = r,
            None => records.push((config, r)),
        }
    }
    for stage in [1, 2, 3] {
        let n = records.iter().filter(|(_, r)| r["stage"] == stage).count();
        assert!(n >= 3, "only {n} records at stage {stage}");
    }
    check_training(&records);
}

/// Every record's peak within [1.00, 1.05]× of the tracker's and in its phase.
fn check_training(records: &[(String, Value)]) {
    let mut failures = Vec::new();
    let mut worst: (f64, String) = (1.0, String::new());
    for (name, r) in records {
        let arch = arch_of(r);
        let theirs = r["peak"]["Total"].as_u64().unwrap();
        let params = r["parameters"].as_u64().unwrap();
        assert_eq!(arch.params().total, params, "{name}: parameters");
        let ours = match training_peak(&arch, &run_of(r)) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let ratio = ours.total as f64 / theirs as f64;
        eprintln!(
            "{name}: {ratio:.4} {:?} ours p{} g{} o{} a{} t{} theirs {}",
            ours.phase,
            ours.parameters,
            ours.gradients,
            ours.optimizer_state,
            ours.activations,
            ours.temporaries,
            r["peak"]
        );
        let phase = match r["peak_phase"].as_str().unwrap() {
            "forward" => Phase::Forward,
            "backward" => Phase::Backward,
            _ => Phase::Optimizer,
        };
        if (ratio - 1.0).abs() > (worst.0 - 1.0).abs() {
            worst = (ratio, name.clone());
        }
        if !(1.0..=1.05).contains(&ratio) || ours.phase != phase {
            failures.push(format!(
                "{name}: {} vs MemTracker {theirs} ({ratio:.4}), {:?} vs {phase:?}",
                ours.total, ours.phase
            ));
        }
        // ZeRO-Offload's records: the host's peak too, to the byte; only theirs have one.
        let host = r["host_peak"]["Total"].as_u64().unwrap_or(0);
        if ours.host != host {
            failures.push(format!("{name}: host {} vs MemTracker {host}", ours.host));
        }
    }
    eprintln!("worst ratio {:.4} ({})", worst.0, worst.1);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generate_peaks_match_memtracker() {
    // Plain greedy generate; the assisted and LoRA records are held in generate_features.rs.
    let records: Vec<_> = records_of("generate-")
        .into_iter()
        .filter(|(_, r)| r.get("assistant").is_none() && r.get("lora").is_none())
        .collect();
    assert!(records.len() >= 29, "only {} records", records.len());
    let mut failures = Vec::new();
    for (name, r) in &records {
        let arch = arch_of(r);
        let theirs = r["peak"]["Total"].as_u64().unwrap();
        let run = GenerateRun {
            batch: r["batch"].as_u64().unwrap(),
            prompt: r["prompt"].as_u64().unwrap(),
            new_tokens: r["new_tokens"].as_u64().unwrap(),
            lora: None,
        };
        let ours = match generate_peak(&arch, &run) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let ratio = ours.total as f64 / theirs as f64;
        let phase = match r["peak_phase"].as_str().unwrap() {
            "prefill" => GeneratePhase::Prefill,
            _ => GeneratePhase::Decode,
        };
        eprintln!("{name}: {ratio:.4} {:?}", ours.phase);
        if !(1.0..=1.05).contains(&ratio) || ours.phase != phase {
            failures.push(format!(
                "{name}: {} vs MemTracker {theirs} ({ratio:.4}), {:?} vs {phase:?}",
                ours.total, ours.phase
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// `--attn-implementation eager` walks the step as transformers' eager attention runs it: the
// CLI's figure for Llama-3.2-1B at 1,024 tokens is MemTracker's for that record, above the SDPA
// step's; SDPA for a family transformers runs only eagerly is refused with the reason, and the
// estimate falls back to the closed formula.
#[test]
fn the_attention_implementation_is_walked_or_refused() {
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(common::fixture(
            "pytorch/train-llama-3.2-1b-bf16-adamw-b1-s1024-eager.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let config = common::fixture("pytorch/configs/llama-3.2-1b.json");
    let train = |model: &[&str], extra: &[&str]| -> Value {
        let out = common::gpumem()
            .args(["--json", "estimate"])
            .args(model)
            .args(["--mode", "train", "--context", "1024"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let config_arg = ["--config", config.as_str()];
    let eager = train(&config_arg, &["--attn-implementation", "eager"]);
    let total = |d: &Value| d["training_step"]["peak"]["total"].as_u64().unwrap();
    assert_eq!(
        total(&eager),
        record["peak"]["Total"].as_u64().unwrap(),
        "{eager}"
    );
    let sdpa = train(&config_arg, &["--attn-implementation", "sdpa"]);
    assert_eq!(total(&sdpa), total(&train(&config_arg, &[])));
    assert!(total(&sdpa) < total(&eager));
    let refused = train(
        &["--model", "gemma-2-2b"],
        &["--attn-implementation", "sdpa"],
    );
    assert_eq!(
        refused["training_unwalked"],
        "PyTorch's step is not yet walked with SDPA for Gemma 2 or gpt-oss (transformers runs \
         them eagerly)"
    );
    assert!(refused["training_step"].is_null(), "{refused}");
}

// The attention implementation is a training flag: without --mode train it is a usage error,
// one line, exit 2.
#[test]
fn the_attention_implementation_needs_a_training_step() {
    let err = common::one_line_error(
        common::gpumem().args([
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--attn-implementation",
            "eager",
        ]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --attn-implementation is transformers' under training: add --mode train\n"
    );
}
