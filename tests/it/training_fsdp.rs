//! `estimate --mode train --fsdp N` gives one FSDP2 rank's step and `select` plans N GPUs for
//! it; the flags that only make sense together are refused together.

#![allow(clippy::unwrap_used)]

use crate::common;

// One rank of Llama-3.2-1B over 2 GPUs at 2,048 tokens: FSDPMemTracker's figure
// (tests/fixtures/pytorch/fsdp-llama-3.2-1b-w2-s2048.json), through the command line.
#[test]
fn estimate_gives_one_rank_of_fsdp2() {
    let config = common::fixture("pytorch/configs/llama-3.2-1b.json");
    let rank = |extra: &[&str]| {
        let base = [
            "--json",
            "estimate",
            "--config",
            &config,
            "--mode",
            "train",
            "--recipe",
            "bf16",
            "--context",
            "2048",
            "--fsdp",
            "2",
        ];
        common::json_ok(common::gpumem().args(base).args(extra))
    };
    let doc = rank(&[]);
    let step = &doc["training_step"];
    assert_eq!(step["peak"]["total"], 11_101_776_720u64, "{step}");
    assert_eq!(step["peak"]["phase"], "backward");
    assert_eq!(step["fsdp"]["world"], 2);
    assert_eq!(step["fsdp"]["reshard_after_forward"], true);
    let kept = rank(&["--no-reshard-after-forward"]);
    assert_eq!(kept["training_step"]["peak"]["total"], 12_926_421_840u64);
    let text = common::gpumem()
        .args([
            "estimate", "--config", &config, "--mode", "train", "--fsdp", "2",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    assert!(
        text.contains(
            "  FSDP2 over 2 ranks, layers resharded after their forward: one rank's figures\n"
        ),
        "{text}"
    );
}

// QLoRA under FSDP2: Qwen2.5-0.5B over 2 GPUs at 1,024 tokens, FSDPMemTracker's figure to the
// byte (tests/fixtures/pytorch/fsdp-qwen2.5-0.5b-w2-s1024-qlora.json): the f32 rest and the NF4
// layers sharded alike, the q/k/v biases gathered in f32 and left in bf16 by bitsandbytes.
#[test]
fn estimate_gives_one_rank_of_qlora_under_fsdp2() {
    let config = common::fixture("pytorch/configs/qwen2.5-0.5b.json");
    let doc = common::json_ok(common::gpumem().args([
        "--json",
        "estimate",
        "--config",
        &config,
        "--mode",
        "train",
        "--recipe",
        "qlora",
        "--lora-rank",
        "16",
        "--context",
        "1024",
        "--fsdp",
        "2",
        // As recorded (PEFT turns checkpointing on under QLoRA; the record ran without).
        "--no-checkpointing",
    ]));
    let step = &doc["training_step"];
    assert_eq!(step["peak"]["total"], 5_320_407_848u64, "{step}");
    assert_eq!(step["peak"]["phase"], "backward");
    assert_eq!(step["recipe"]["qlora"]["rank"], 16, "{step}");
    assert!(doc["training_unwalked"].is_null(), "{doc}");
}

#[test]
fn fsdp_flags_need_training_and_each_other() {
    let err = common::one_line_error(
        common::gpumem().args(["estimate", "--model", "llama-3.2-1b", "--fsdp", "4"]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --fsdp shards a training step: add --mode train\n"
    );
    let err = common::one_line_error(
        common::gpumem().args([
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--mode",
            "train",
            "--no-reshard-after-forward",
        ]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --no-reshard-after-forward is an FSDP2 setting: add --fsdp N\n"
    );
    let err = common::one_line_error(
        common::gpumem().args(["estimate", "--model", "llama-3.2-1b", "--ddp"]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --ddp is a training step's data parallelism: add --mode train\n"
    );
    for args in [&["--ddp", "--fsdp", "2"][..], &["--ddp-bucket-view"][..]] {
        let out = common::gpumem()
            .args(["estimate", "--model", "llama-3.2-1b", "--mode", "train"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// `select` for one training step of Llama-3.1-8B at 2,048 tokens, as JSON.
const TRAIN_8B: [&str; 8] = [
    "--json",
    "select",
    "--model",
    "llama-3.1-8b",
    "--mode",
    "train",
    "--context",
    "2048",
];

// Four 80 GiB GPUs and a 40 GiB one: the rank goes on the four largest, each a rank.
#[test]
fn select_plans_one_rank_a_gpu() {
    let mut args: Vec<&str> = [&TRAIN_8B[..], &["--fsdp", "4"]].concat();
    for d in [
        "sim:80GiB",
        "sim:40GiB",
        "sim:80GiB",
        "sim:80GiB",
        "sim:80GiB",
    ] {
        args.extend(["--device", d]);
    }
    let doc = common::json_ok(common::gpumem().args(&args));
    let plan = &doc["plan"];
    assert_eq!(plan["kind"], "sharded", "{plan}");
    let devices: Vec<u64> = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["device"].as_u64().unwrap())
        .collect();
    assert_eq!(devices, [0, 2, 3, 4]);
    // torchrun on those four, one process a GPU, and how the script shards the model.
    let launch = &doc["launch"][0];
    assert_eq!(launch["engine"], "torchrun", "{launch}");
    let command = &launch["commands"][0];
    assert_eq!(
        command["argv"],
        serde_json::json!([
            "torchrun",
            "--standalone",
            "--nproc-per-node",
            "4",
            "train.py"
        ])
    );
    assert_eq!(
        command["env"],
        serde_json::json!([["CUDA_VISIBLE_DEVICES", "0,2,3,4"]])
    );
    assert_eq!(
        launch["notes"],
        serde_json::json!([{"note": "fsdp2", "reshard_after_forward": true,
                            "precision": "bf16"}])
    );
    let need = doc["required_bytes"].as_u64().unwrap();
    assert!(plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["bytes"] == need));
    // Two GPUs cannot host four ranks: no plan (exit 3).
    let out = common::gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--mode",
            "train",
            "--fsdp",
            "4",
            "--device",
            "sim:80GiB",
            "--device",
            "sim:80GiB",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}

// A step that fits no single GPU: select suggests the fewest FSDP2 ranks over the GPUs here
// that hold it (after the one-GPU change that makes it fit, LoRA), and planning with that
// suggestion succeeds.
#[test]
fn select_suggests_fsdp_when_one_gpu_is_too_small() {
    let devices = [
        "--device",
        "sim:80GiB",
        "--device",
        "sim:80GiB",
        "--device",
        "sim:40GiB",
    ];
    let base = [&TRAIN_8B[..], &devices[..]].concat();
    let out = common::gpumem().args(&base).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["suggestions"],
        serde_json::json!([
            {"change": "recipe", "recipe": "lora"},
            {"change": "fsdp", "ranks": 2}
        ])
    );
    let doc = common::json_ok(common::gpumem().args(&base).args(["--fsdp", "2"]));
    assert_eq!(doc["plan"]["kind"], "sharded");
}

// 8-bit AdamW and Adafactor are walked where the parameter tensors are listed (dense, fused,
// expert and latent-attention models); LoRA says why it is not.
#[test]
fn eight_bit_adamw_and_adafactor_are_walked_where_the_tensors_are_listed() {
    for (optimizer, name) in [("adamw8bit", "8-bit AdamW"), ("adafactor", "Adafactor")] {
        let estimate = |model: &str, extra: &[&str]| {
            common::json_ok(
                common::gpumem()
                    .args(["--json", "estimate", "--model", model, "--mode", "train"])
                    .args(["--optimizer", optimizer])
                    .args(extra),
            )
        };
        for walked in [
            "llama-3.2-1b",
            "mixtral-8x7b",
            "phi-3-mini",
            "gpt-oss-20b",
            "deepseek-v2-lite",
        ] {
            let doc = estimate(walked, &["--context", "512"]);
            assert_eq!(doc["training_step"]["recipe"], "bf16", "{walked}: {doc}");
        }
        assert_eq!(
            estimate("llama-3.2-1b", &["--recipe", "lora"])["training_unwalked"],
            format!(
                "PyTorch's step is not yet walked with {name} with LoRA or shared experts \
                 outside DeepSeek-V2"
            )
        );
    }
}

/// `select --mode train` for Llama-3.2-1B at 2,048 tokens with `flags` on `devices`: its exit
/// status and JSON.
fn select_1b(flags: &[&str], devices: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut args = vec![
        "--json",
        "select",
        "--model",
        "llama-3.2-1b",
        "--mode",
        "train",
    ];
    args.extend(["--context", "2048"]);
    args.extend(flags);
    for d in devices {
        args.extend(["--device", d]);
    }
    let out = common::gpumem().args(&args).output().unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

// `select --mode train --ddp` puts one DDP rank on every GPU of the host where most GPUs hold
// one (each the whole step and DDP's buckets), launched with torchrun; a GPU too small for a
// rank is left out, and without one that holds a rank there is no plan.
#[test]
fn select_plans_a_ddp_rank_on_each_gpu_that_holds_one() {
    let (code, json) = select_1b(&["--ddp"], &["sim:24GiB", "sim:24GiB", "sim:8GiB"]);
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["plan"]["kind"], "data_parallel");
    assert_eq!(json["plan"]["placements"].as_array().unwrap().len(), 2);
    let launch = &json["launch"][0]["commands"][0];
    assert_eq!(
        launch["argv"],
        serde_json::json!([
            "torchrun",
            "--standalone",
            "--nproc-per-node",
            "2",
            "train.py"
        ])
    );
    assert_eq!(json["launch"][0]["notes"][0]["note"], "ddp");
    let (code, json) = select_1b(&["--ddp"], &["sim:8GiB"]);
    assert_eq!(code, Some(3), "{json}");
    assert_eq!(json["plan"]["kind"], "none");
    // A DDP rank fits no 12 GiB GPU; FSDP2 over two does, offered in place of --ddp (the
    // two flags cannot go together).
    let (code, json) = select_1b(&["--ddp"], &["sim:12GiB", "sim:12GiB"]);
    assert_eq!(code, Some(3), "{json}");
    assert_eq!(
        json["suggestions"],
        serde_json::json!([
            {"change": "recipe", "recipe": "lora"},
            {"change": "fsdp", "ranks": 2, "instead_of_ddp": true}
        ])
    );
}

// ZeRO-1 (`--ddp --zero1 N`): the fullest rank's step, on exactly N GPUs of one host; the flag
// needs --ddp.
#[test]
fn zero1_plans_its_ranks_on_as_many_gpus() {
    let three = ["sim:24GiB"; 3];
    let args = |flags: &[&str]| select_1b(flags, &three).1;
    let ddp = args(&["--ddp"]);
    let zero = args(&["--ddp", "--zero1", "2"]);
    assert_eq!(zero["plan"]["kind"], "data_parallel");
    assert_eq!(zero["plan"]["placements"].as_array().unwrap().len(), 2);
    assert_eq!(ddp["plan"]["placements"].as_array().unwrap().len(), 3);
    // Half the optimizer state a rank: less than plain DDP's.
    assert!(
        zero["required_bytes"].as_u64() < ddp["required_bytes"].as_u64(),
        "{zero} {ddp}"
    );
    assert_eq!(zero["launch"][0]["notes"][0]["zero1"], true);
    let out = common::gpumem()
        .args([
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--mode",
            "train",
            "--zero1",
            "2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

// DeepSpeed's ZeRO-2 (`--deepspeed-zero2 N`): the fullest rank's step on exactly N GPUs of one
// host, with the config for DeepSpeed in the launch note; only under --mode train, not beside
// another parallelism, and refused with the reason where it is not walked.
#[test]
fn deepspeed_zero2_plans_its_ranks_and_says_what_it_does_not_walk() {
    let three = ["sim:40GiB"; 3];
    let (code, json) = select_1b(&["--deepspeed-zero2", "2", "--batch", "2"], &three);
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["plan"]["kind"], "data_parallel");
    assert_eq!(json["plan"]["placements"].as_array().unwrap().len(), 2);
    assert_eq!(
        json["launch"][0]["notes"][0],
        serde_json::json!({"note": "deepspeed", "stage": 2, "micro_batch": 2,
                           "offload_optimizer": false})
    );
    let estimate = |flags: &[&str]| {
        common::json_ok(
            common::gpumem()
                .args([
                    "--json",
                    "estimate",
                    "--model",
                    "llama-3.2-1b",
                    "--mode",
                    "train",
                ])
                .args(flags),
        )
    };
    let ds = estimate(&["--deepspeed-zero2", "4"]);
    assert_eq!(
        ds["training_step"]["deepspeed"],
        serde_json::json!({"world": 4, "stage": "2", "offload_optimizer": false}),
        "{ds}"
    );
    let refused = estimate(&["--deepspeed-zero2", "4", "--optimizer", "sgd"]);
    assert_eq!(
        refused["training_unwalked"],
        "PyTorch's step is not yet walked with DeepSpeed ZeRO other than bf16 Adam or AdamW, \
         or with eager attention or a sliding window within the sequence"
    );
    let moe = common::json_ok(common::gpumem().args([
        "--json",
        "estimate",
        "--model",
        "mixtral-8x7b",
        "--mode",
        "train",
        "--deepspeed-zero2",
        "8",
    ]));
    // Experts are walked at stage 2: the routed layer's backward and the offloaded norms.
    assert_eq!(moe["training_step"]["deepspeed"]["stage"], "2", "{moe}");
    let stage3 = |model: &str| {
        common::json_ok(common::gpumem().args([
            "--json",
            "estimate",
            "--model",
            model,
            "--mode",
            "train",
            "--deepspeed-zero3",
            "4",
            "--context",
            "256",
        ]))
    };
    assert_eq!(
        stage3("deepseek-v2-lite")["training_unwalked"],
        "PyTorch's step is not yet walked with DeepSpeed ZeRO-3 on experts in some layers only, \
         or shared experts"
    );
    // Phi-3's fused projections, Gemma's layer and experts in every layer are replayed at
    // stage 3.
    for model in ["phi-3-mini", "gemma-3-1b", "mixtral-8x7b"] {
        let walked = stage3(model);
        assert_eq!(
            walked["training_step"]["deepspeed"]["stage"], "3",
            "{walked}"
        );
    }
    assert!(
        usage_1b(&["--mode", "train", "--deepspeed-zero2", "2", "--fsdp", "2"])
            .contains("cannot be used with")
    );
    let flags = [
        "--mode",
        "train",
        "--deepspeed-zero1",
        "2",
        "--deepspeed-zero2",
        "2",
    ];
    assert!(usage_1b(&flags).contains("cannot be used with"));
    let one = estimate(&["--deepspeed-zero1", "4"]);
    assert_eq!(one["training_step"]["deepspeed"]["stage"], "1", "{one}");
}

// DeepSpeed's ZeRO-3 (`--deepspeed-zero3 N`): a quarter of everything a rank, each layer
// gathered while it runs; planned on N GPUs with stage 3 in the config, and said so in the
// human report.
#[test]
fn deepspeed_zero3_partitions_the_weights_too() {
    let estimate = |flags: &[&str]| {
        common::json_ok(
            common::gpumem()
                .args(["--json", "estimate", "--model", "llama-3.1-8b"])
                .args(["--mode", "train", "--context", "1024"])
                .args(flags),
        )
    };
    let peak = |j: &serde_json::Value| j["training_step"]["peak"]["total"].as_u64().unwrap();
    let two = estimate(&["--deepspeed-zero2", "8"]);
    let three = estimate(&["--deepspeed-zero3", "8"]);
    assert_eq!(
        three["training_step"]["deepspeed"],
        serde_json::json!({"world": 8, "stage": "3", "offload_optimizer": false}),
        "{three}"
    );
    // Stage 2 keeps the 15 GiB of bf16 weights whole on every rank, stage 3 an eighth: the
    // MemTracker record of this run (deepspeed-llama-3.1-8b-z3-w8-s1024.json) peaks in the
    // step at 29,105,923,109 bytes.
    assert_eq!(peak(&three), 29_105_923_109, "{three}");
    assert!(peak(&three) < peak(&two), "{three} {two}");
    let (code, json) = select_1b(&["--deepspeed-zero3", "2"], &["sim:40GiB"; 3]);
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["plan"]["placements"].as_array().unwrap().len(), 2);
    assert_eq!(json["launch"][0]["notes"][0]["stage"], 3, "{json}");
    let out = common::gpumem()
        .args(["estimate", "--model", "llama-3.2-1b", "--mode", "train"])
        .args(["--deepspeed-zero3", "8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("DeepSpeed ZeRO-3 over 8 ranks: weights, gradients, master weights"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    for stage in 1..=3 {
        let flag = format!("--deepspeed-zero{stage}");
        assert_eq!(
            usage_1b(&[&flag, "2"]),
            format!(
                "gpumem: error: {flag} is a training step's data parallelism: add --mode train\n"
            )
        );
    }
    let both = [
        "--mode",
        "train",
        "--deepspeed-zero2",
        "2",
        "--deepspeed-zero3",
        "2",
    ];
    assert!(usage_1b(&both).contains("cannot be used with"));
}

/// The one line `estimate` on Llama-3.2-1B prints for a usage error, exit 2.
// The FSDP2 note says how the script holds the weights for the recipe planned: a bf16
// checkpoint trains in bf16 unless asked otherwise, `--recipe mixed` is FSDP2's
// MixedPrecisionPolicy on both fully_shard calls, `--recipe fp32-autocast` autocast's.
#[test]
fn the_fsdp2_note_gives_the_precision_the_step_was_planned_with() {
    let two = ["sim:40GiB"; 2];
    let note = |recipe: &[&str]| {
        let mut flags = vec!["--fsdp", "2"];
        flags.extend(recipe);
        let (code, json) = select_1b(&flags, &two);
        assert_eq!(code, Some(0), "{json}");
        json["launch"][0]["notes"][0]["precision"].clone()
    };
    assert_eq!(note(&[]), "bf16");
    assert_eq!(note(&["--recipe", "mixed"]), "mixed");
    assert_eq!(note(&["--recipe", "fp32-autocast"]), "fp32_autocast");
    let out = common::gpumem()
        .args(["select", "--model", "llama-3.2-1b", "--mode", "train"])
        .args(["--fsdp", "2", "--recipe", "mixed"])
        .args(two.iter().flat_map(|d| ["--device", d]))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .replace("\n      ", " ");
    assert!(
        text.contains("fully_shard(model, mp_policy=mp)")
            && text.contains("reduce_dtype=torch.float32)"),
        "{text}"
    );
}

// DeepSpeed's ZeRO-Offload (`--offload-optimizer`): the GPU's step without the optimizer, the
// host's bytes beside it (MemTracker's record of this run,
// deepspeed-llama-3.2-1b-z2-w2-s1024-offload.json: host 16,590,923,792, GPU 6,370,640,144);
// `select` wants every rank's optimizer in the host's RAM and says so, and the config offloads.
#[test]
fn zero_offload_moves_the_optimizer_to_the_host_and_select_checks_its_ram() {
    let config = common::fixture("pytorch/configs/llama-3.2-1b.json");
    let args = ["--json", "estimate", "--config", &config, "--mode", "train"];
    let run = [
        "--recipe",
        "bf16",
        "--context",
        "1024",
        "--deepspeed-zero2",
        "2",
    ];
    let estimate =
        |extra: &[&str]| common::json_ok(common::gpumem().args(args).args(run).args(extra));
    let off = estimate(&["--offload-optimizer"]);
    let on = estimate(&[]);
    let peak = &off["training_step"]["peak"];
    assert_eq!(peak["host"], 16_590_923_792u64, "{peak}");
    assert_eq!(peak["optimizer_state"], 0);
    assert_eq!(peak["phase"], "backward");
    let gpu = peak["total"].as_u64().unwrap() as f64 / 6_370_640_144.0;
    assert!((1.0..=1.05).contains(&gpu), "{gpu}");
    assert_eq!(on["training_step"]["peak"]["host"], 0);
    assert!(on["training_step"]["peak"]["total"].as_u64() > peak["total"].as_u64());
    assert_eq!(off["training_step"]["deepspeed"]["offload_optimizer"], true);

    let two = ["sim:24GiB"; 2];
    let with_ram = |ram: &str| {
        let flags = [
            "--deepspeed-zero2",
            "2",
            "--offload-optimizer",
            "--ram",
            ram,
        ];
        select_1b(&flags, &two)
    };
    let (code, json) = with_ram("16GiB");
    assert_eq!(code, Some(3), "{json}");
    let cpu = common::candidate(&json, "cpu");
    // Two ranks' 16,590,923,792 bytes.
    assert_eq!(cpu["needed_bytes"], 2 * 16_590_923_792u64, "{cpu}");
    assert_eq!(
        cpu["reason"],
        "system RAM for the ranks' offloaded optimizers: needs 30.90 GiB, has 16.00 GiB"
    );
    assert_eq!(cpu["fits"], false);
    let (code, json) = with_ram("64GiB");
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["launch"][0]["notes"][0]["offload_optimizer"], true);
    assert!(usage_1b(&["--mode", "train", "--offload-optimizer"])
        .contains("--offload-optimizer is DeepSpeed's ZeRO-Offload"));
}

// Of two hosts, the one whose RAM holds the ranks' offloaded optimizers is planned on, though
// the other has the larger GPUs.
#[test]
fn zero_offload_picks_the_host_whose_ram_holds_the_optimizers() {
    use super::select::{gpu, GIB};
    use super::select_inventory::inventory;
    let dir = tempfile::tempdir().unwrap();
    let big_gpus = vec![
        gpu(0, "H100", 80 * GIB, 80 * GIB),
        gpu(1, "H100", 80 * GIB, 80 * GIB),
    ];
    let big_ram = vec![
        gpu(0, "A100", 40 * GIB, 40 * GIB),
        gpu(1, "A100", 40 * GIB, 40 * GIB),
    ];
    let a = inventory(dir.path(), "big-gpus", big_gpus, 16 * GIB);
    let b = inventory(dir.path(), "big-ram", big_ram, 256 * GIB);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let flags = [
        "--deepspeed-zero2",
        "2",
        "--offload-optimizer",
        "--inventory",
        a,
        b,
    ];
    let (code, doc) = select_1b(&flags, &[]);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(
        common::plan_hosts(&doc["plan"]),
        ["big-ram", "big-ram"],
        "{doc}"
    );
}

fn usage_1b(flags: &[&str]) -> String {
    common::one_line_error(
        common::gpumem()
            .args(["estimate", "--model", "llama-3.2-1b"])
            .args(flags),
        2,
    )
}

// A DeepSpeed step that fits nowhere is offered the fewest ranks, then the lowest stage from
// the one asked for, that fit (Llama-3.2-1B at 2,048 tokens: ZeRO-2 needs 18.2 GiB a rank on
// 2 GPUs, ZeRO-3 20.6 GiB, ZeRO-2 15.0 GiB on 3), never FSDP2 beside it.
#[test]
fn a_deepspeed_step_that_does_not_fit_is_offered_more_ranks_or_a_higher_stage() {
    let four = ["sim:16GiB"; 4];
    let (code, json) = select_1b(&["--deepspeed-zero2", "2"], &four);
    assert_eq!(code, Some(3), "{json}");
    assert_eq!(
        json["suggestions"],
        serde_json::json!([{"change": "deepspeed", "stage": 2, "ranks": 3}])
    );
    let out = common::gpumem()
        .args(["select", "--model", "llama-3.2-1b", "--mode", "train"])
        .args(["--context", "2048", "--deepspeed-zero2", "2"])
        .args(four.iter().flat_map(|d| ["--device", d]))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("  --deepspeed-zero2 3   (in its place: ZeRO-2, a rank on each of 3 GPUs)"),
        "{text}"
    );
}

// f32 weights under autocast are walked with FSDP2 (f32 shards gathered and reduced in f32);
// with checkpointing the step peaks at the forward's end, where autocast's cache holds every
// projection's bf16 copy.
#[test]
fn fsdp_walks_autocast_with_and_without_checkpointing() {
    let estimate = |extra: &[&str]| {
        let base = "--json estimate --model llama-3.2-1b --mode train --context 2048 \
                    --recipe fp32-autocast --fsdp 4";
        common::json_ok(common::gpumem().args(base.split_whitespace()).args(extra))
    };
    let walked = estimate(&[]);
    assert_eq!(walked["training_step"]["recipe"], "fp32-autocast");
    assert_eq!(walked["training_step"]["fsdp"]["world"], 4);
    assert_eq!(walked["training_step"]["peak"]["phase"], "backward");
    let checkpointed = estimate(&["--checkpointing"]);
    assert!(
        checkpointed["training_unwalked"].is_null(),
        "{checkpointed}"
    );
    assert_eq!(checkpointed["training_step"]["peak"]["phase"], "forward");
}

/// Why `estimate --mode train` with `args` does not walk the step, as its JSON says.
fn unwalked(args: &[&str]) -> String {
    let doc = common::json_ok(
        common::gpumem()
            .args(["--json", "estimate", "--mode", "train"])
            .args(args),
    );
    doc["training_unwalked"].as_str().unwrap().to_string()
}

// transformers' Adafactor and bitsandbytes' 8-bit AdamW fail on FSDP2's DTensor shards in their
// first step (measured with torch 2.15, transformers 5.24 and bitsandbytes 0.50 on a fake
// process group): the estimate says PyTorch does not run them.
#[test]
fn fsdp_says_adafactor_and_8bit_adamw_do_not_run() {
    for (optimizer, name) in [
        ("adafactor", "transformers' Adafactor"),
        ("adamw8bit", "bitsandbytes' 8-bit AdamW"),
    ] {
        let why = unwalked(&[
            "--model",
            "llama-3.2-1b",
            "--fsdp",
            "2",
            "--optimizer",
            optimizer,
        ]);
        let expected = format!("PyTorch does not run {name} under FSDP2");
        assert!(why.starts_with(&expected), "{why}");
    }
}

// DeepSeek-V2 keeps its router in f32 in a bf16 model: torch 2.15's fully_shard asserts one
// dtype among the trained parameters ("FSDP expects uniform original parameter dtype but got
// {torch.bfloat16, torch.float32}", measure_fsdp.py on DeepSeek-V2-Lite's config over 4 ranks),
// so the estimate says PyTorch does not run it.
#[test]
fn fsdp_says_a_bf16_model_with_f32_parameters_does_not_run() {
    let why = unwalked(&["--model", "deepseek-v2-lite", "--fsdp", "4"]);
    assert!(
        why.starts_with("PyTorch does not run FSDP2 on a bf16 model that keeps some parameters"),
        "{why}"
    );
    // With --recipe mixed every parameter is f32 and the step is walked, its dense first layer
    // beside the layers with experts (fsdp-deepseek-v2-lite-*-mixed.json); on CUDA AdamW's
    // foreach step over DTensor shards (PyTorch's default) adds a list the size of the rank's
    // f32 shards to Adam's two, and there the rank peaks at 512 tokens.
    let doc = common::json_ok(common::gpumem().args(
        "--json estimate --model deepseek-v2-lite --mode train --fsdp 4 --recipe mixed --context 512"
            .split(' '),
    ));
    assert!(doc["training_unwalked"].is_null(), "{doc}");
    let peak = &doc["training_step"]["peak"];
    assert_eq!(peak["phase"], "optimizer");
    let shards = peak["gradients"].as_u64().unwrap();
    assert_eq!(peak["parameters"].as_u64().unwrap(), shards);
    assert!(
        peak["optimizer_state"].as_u64().unwrap() >= 3 * shards,
        "{peak}"
    );
}

// Gradient accumulation (HF Trainer's gradient_accumulation_steps) holds every gradient
// through the forward and backward of each micro-batch after a step's first: on one GPU it is
// walked (against MemTracker: tests/fixtures/pytorch/train-*-ga*.json), and under FSDP2
// (fsdp-*-ga*.json), DDP (train-ddp-*-ga*.json), ZeRO-1 (train-zero1-*-ga*.json) and
// DeepSpeed (deepspeed-*-ga*.json), ZeRO-Offload at stages 1 and 2 included; with ZeRO-3's
// it is not yet, and the estimate says so; 0 micro-batches is a usage error.
#[test]
fn gradient_accumulation_is_walked_on_one_gpu() {
    let estimate = |extra: &[&str]| {
        common::json_ok(
            common::gpumem()
                .args("--json estimate --model llama-3.2-1b --mode train --context 2048".split(' '))
                .args(extra),
        )
    };
    let one = estimate(&[]);
    let four = estimate(&["--grad-accum", "4"]);
    let (one, four) = (&one["training_step"], &four["training_step"]);
    assert_eq!(four["grad_accum"], 4);
    assert_eq!(four["peak"]["phase"], "backward");
    // Every gradient (bf16, 1,235,814,400 parameters) is held through the backward.
    assert_eq!(four["peak"]["gradients"], 2u64 * 1_235_814_400);
    assert!(
        four["peak"]["total"].as_u64() > one["peak"]["total"].as_u64(),
        "{four} vs {one}"
    );
    // Offloaded ZeRO-2 keeps the earlier micro-batches' gradients in host memory: the GPU's
    // peak stays, the host's grows (deepspeed-*-offload-ga2*.json).
    let offloaded = |extra: &[&str]| {
        let mut args = vec!["--deepspeed-zero2", "2", "--offload-optimizer"];
        args.extend_from_slice(extra);
        estimate(&args)["training_step"]["peak"].clone()
    };
    let (once, twice) = (offloaded(&[]), offloaded(&["--grad-accum", "2"]));
    assert_eq!(twice["total"], once["total"]);
    assert!(
        twice["host"].as_u64() > once["host"].as_u64(),
        "{twice} vs {once}"
    );
    let out = common::gpumem()
        .args("estimate --model llama-3.2-1b --mode train --grad-accum 0".split(' '))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2)); // As printed: what a micro-batch after the first holds, by how the step runs.
    let text = |extra: &[&str]| {
        let out = common::gpumem()
            .args("estimate --model llama-3.2-1b --mode train --grad-accum 2".split(' '))
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout)
            .unwrap()
            .replace("\n     ", "")
    };
    assert!(text(&[]).contains("micro-batches: every gradient held"));
    let sharded = text(&["--deepspeed-zero2", "4"]);
    assert!(
        sharded.contains("micro-batches: the rank's share of the gradients held"),
        "{sharded}"
    );
}
