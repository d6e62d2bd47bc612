//! `gpumem select` over sim devices and saved inventories: every plan kind, reasons, exit 3.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpumem;

use super::select_inventory::inventory;

use serde_json::{json, Value};

pub(crate) fn select(args: &[&str]) -> (i32, Value) {
    let out = gpumem()
        .args(["--json", "select"])
        .args(args)
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    assert!(
        code == 0 || code == 3,
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, serde_json::from_slice(&out.stdout).unwrap())
}

pub(crate) const GIB: u64 = 1 << 30;

pub(crate) fn gpu(index: u64, name: &str, total: u64, free: u64) -> Value {
    json!({"index": index, "name": name, "vendor": "NVIDIA", "device_type": "gpu", "total_bytes": total,
           "free_bytes": free, "free_scope": "device", "max_alloc_bytes": total, "unified_memory": false,
           "compute_capability": "8.0", "driver_version": "CUDA 12.8", "pci_bus_id": null, "uuid": null})
}

#[test]
fn single_device_with_the_most_headroom() {
    let (code, doc) = select(&[
        "--model",
        "mistral-7b",
        "--device",
        "sim:24GiB",
        "--device",
        "sim:48GiB",
    ]);
    assert_eq!(code, 0);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["plan"]["kind"], "single");
    assert_eq!(doc["plan"]["placements"][0]["device"], 1);
    assert_eq!(doc["plan"]["placements"][0]["layers"], 32);
    assert_eq!(doc["candidates"].as_array().unwrap().len(), 2);
    assert!(doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["fits"] == true));
}

#[test]
fn bytes_and_reasons() {
    let (code, doc) = select(&["--bytes", "30GiB", "--device", "sim:24GiB"]);
    assert_eq!(code, 3);
    assert_eq!(doc["plan"]["kind"], "none");
    // 24 GiB: reserve min(500 MB + 100 MB + 10 %, 2 GB) = 2 GB; usable min(90 %, total − reserve).
    let usable = (24 * GIB) as f64 * 0.9;
    assert_eq!(doc["candidates"][0]["usable_bytes"], usable as u64);
    assert_eq!(
        doc["candidates"][0]["reason"],
        "needs 30.00 GiB, 21.60 GiB usable of 24.00 GiB total after the 90 % memory fraction"
    );
    assert_eq!(doc["plan"]["shortfall_bytes"], 30 * GIB - usable as u64);
    let (code, doc) = select(&[
        "--bytes",
        "30GiB",
        "--device",
        "sim:24GiB",
        "--memory-fraction",
        "1.0",
        "--reserve-cap",
        "0",
        "--min-free",
        "0",
    ]);
    assert_eq!(code, 3);
    assert_eq!(doc["candidates"][0]["usable_bytes"], 24 * GIB);
}

#[test]
fn tensor_parallel_over_identical_devices() {
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-70b",
        "--fragmentation-reserve",
        "0",
        "--context",
        "2048",
        "--device",
        "sim:80GiB",
        "--device",
        "sim:80GiB",
        "--device",
        "sim:80GiB",
    ]);
    assert_eq!(code, 0);
    assert_eq!(doc["plan"]["kind"], "tensor_parallel");
    assert_eq!(
        doc["plan"]["placements"].as_array().unwrap().len(),
        2,
        "the smallest N that fits"
    );
}

#[test]
fn layer_split_over_unequal_devices() {
    let dir = tempfile::tempdir().unwrap();
    let inv = inventory(
        dir.path(),
        "mixed-box",
        vec![
            gpu(0, "V100", 32 * GIB, 32 * GIB),
            gpu(1, "RTX 6000 Ada", 48 * GIB, 48 * GIB),
        ],
        64 * GIB,
    );
    let (code, doc) = select(&[
        "--model",
        "qwen2.5-32b",
        "--inventory",
        inv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["kind"], "layer_split");
    let placements = doc["plan"]["placements"].as_array().unwrap();
    let layers: Vec<u64> = placements
        .iter()
        .map(|p| p["layers"].as_u64().unwrap())
        .collect();
    assert_eq!(layers.iter().sum::<u64>(), 64);
    // The larger card gets more layers.
    assert_eq!(placements[0]["device"], 1);
    assert!(layers[0] > layers[1]);
    assert!(placements.iter().all(|p| p["host"] == "mixed-box"));
}

#[test]
fn cpu_offload_keeps_most_layers_on_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let inv = inventory(
        dir.path(),
        "workstation",
        vec![gpu(0, "RTX 4090", 24 * GIB, 23 * GIB)],
        256 * GIB,
    );
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-70b",
        "--inventory",
        inv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(doc["plan"]["kind"], "cpu_offload");
    let gpu_layers = doc["plan"]["gpu_layers"].as_u64().unwrap();
    assert!(gpu_layers > 0 && gpu_layers < 80, "{gpu_layers}");
    assert_eq!(doc["plan"]["placements"][1]["backend"], "cpu");
    assert_eq!(doc["plan"]["placements"][1]["layers"], 80 - gpu_layers);
}

#[test]
fn nothing_fits_exit_3_with_shortfall_and_max_context() {
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-8b",
        "--context",
        "32768",
        "--batch",
        "8",
        "--device",
        "sim:24GiB",
        "--engine",
        "llama.cpp",
    ]);
    assert_eq!(code, 3);
    assert_eq!(doc["plan"]["kind"], "none");
    assert!(doc["plan"]["shortfall_bytes"].as_u64().unwrap() > 0);
    let max = doc["plan"]["max_context"].as_u64().unwrap();
    assert!(max > 1024 && max < 32768, "{max}");
    // That context does fit.
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-8b",
        "--context",
        &max.to_string(),
        "--batch",
        "8",
        "--device",
        "sim:24GiB",
        "--engine",
        "llama.cpp",
    ]);
    assert_eq!(code, 0, "{doc}");
    let out = gpumem()
        .args([
            "select",
            "--bytes",
            "1TiB",
            "--device",
            "sim:24GiB",
            "--color",
            "never",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("No plan fits: the closest candidate is 0.98 TiB short."));
}

#[test]
fn usage_errors() {
    let out = gpumem().args(["select"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = gpumem()
        .args(["select", "--bytes", "1GiB", "--device", "cuda:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn library_api() {
    let err = gpumem::plan::select_backend_for_model(u64::MAX / 2).unwrap_err();
    assert!(err.to_string().starts_with("no backend can hold"));
    assert!(err.tried.iter().any(|(b, _)| b == "cuda"), "{err}");
    let (backend, _) = gpumem::plan::select_backend_for_model(1 << 20).unwrap();
    assert!(matches!(backend, gpumem::backend::BackendKind::Cpu) || backend.is_gpu());
    let err = gpumem::plan::init_backend_with_memory_check(None, u64::MAX / 2)
        .err()
        .unwrap();
    assert!(
        err.tried
            .iter()
            .any(|(b, why)| b == "cpu:0"
                && matches!(why, gpumem::plan::Rejected::TooSmall { usable } if *usable < u64::MAX / 2)),
        "{err}"
    );
    assert!(gpumem::plan::init_backend_with_memory_check(None, 1 << 20).is_ok());
}

// A hybrid under vLLM is planned with vLLM's own state pages (vLLM 0.33's `MambaSpec` and
// `_align_hybrid_block_size`): Nemotron-Nano-9B-v2 keeps, per Mamba-2 layer and request, a
// bf16 conv state of 3 × (10,240 + 2 × 8 × 128) and an f32 scan state of 10,240 × 128
// (5,316,608 bytes), so an attention block (8 KV heads of 128 in bf16: 4,096 bytes a token)
// grows to 16 × ⌈5,316,608 / 65,536⌉ = 1,312 tokens; 4 attention and 27 Mamba layers make
// groups of 4 (7 of them Mamba's, padded), a block of 4 pages; a 32,768-token request takes
// ⌈32,768 / 1,312⌉ = 25 attention blocks and 3 state pages in each Mamba group (prefix
// caching's align mode: the running state, the last block's and Mamba-2's prefill
// checkpoint): 46 blocks.
#[test]
fn a_hybrid_under_vllm_takes_its_state_pages() {
    let plan = |model: &str| {
        let (code, doc) = select(&[
            "--model",
            model,
            "--context",
            "32768",
            "--device",
            "sim:80GiB",
        ]);
        assert_eq!(
            (code, &doc["plan"]["accounting"]),
            (0, &json!("vllm")),
            "{doc}"
        );
        doc
    };
    let doc = plan("nemotron-nano-9b-v2");
    let e = &doc["plan"]["engine"];
    assert_eq!(e["block_size"], 1312);
    assert_eq!(e["block_bytes"], 4 * 1312 * 4096);
    assert_eq!(e["blocks_per_request"], 46);
    let blocks = e["num_blocks"].as_u64().unwrap();
    assert_eq!(e["kv_tokens"].as_u64().unwrap(), blocks * 32768 / 46);
    let c = &doc["plan"]["capacity"];
    assert_eq!(
        c["max_concurrent_sequences"].as_u64().unwrap(),
        c["kv_tokens"].as_u64().unwrap() / 32768
    );
    // A pure Mamba-2 model has no attention and no prefix caching: one state page a request.
    let doc = plan("mamba-codestral-7b");
    assert_eq!(doc["plan"]["engine"]["blocks_per_request"], 1);
    assert_eq!(doc["plan"]["engine"]["block_size"], 16);
}

// vLLM's capacity is its own: concurrency is whole requests of the context (⌊tokens / context⌋),
// and the longest --max-model-len it estimates is one it starts with, one token more it refuses.
#[test]
fn vllm_capacity_and_estimated_max_model_len_agree_with_its_own_refusal() {
    let run = |context: &str| {
        select(&[
            "--model",
            "llama-3.1-8b",
            "--context",
            context,
            "--device",
            "sim:24GiB",
        ])
    };
    let (code, doc) = run("32768");
    assert_eq!(code, 0, "{doc}");
    let c = &doc["plan"]["capacity"];
    let tokens = c["kv_tokens"].as_u64().unwrap();
    assert_eq!(
        c["max_concurrent_sequences"].as_u64().unwrap(),
        tokens / 32768
    );
    assert_eq!(doc["plan"]["engine"]["kv_tokens"].as_u64().unwrap(), tokens);
    // The trained context is more than the KV cache holds: vLLM refuses and estimates.
    let (code, doc) = run("131072");
    assert_eq!(code, 3, "{doc}");
    assert_eq!(
        doc["plan"]["engine"]["outcome"]["outcome"],
        "model_len_too_long"
    );
    let longest = doc["plan"]["max_context"].as_u64().unwrap();
    assert_eq!(
        doc["plan"]["engine"]["outcome"]["estimated_max_model_len"],
        longest
    );
    assert!(longest > 32768 && longest < 131_072, "{longest}");
    assert_eq!(run(&longest.to_string()).0, 0);
    assert_eq!(run(&(longest + 1).to_string()).0, 3);
    // Past the model's own context: named as that, not as memory.
    let out = gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--device",
            "sim:24GiB",
            "--context",
        ])
        .arg("200000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "gpumem: error: --context 200,000 is past llama-3.1-8b's trained context of 131,072 \
         tokens (max_position_embeddings): give --context 131072 or less, or \
         --allow-longer-context\n"
    );
    // Allowed, vLLM itself refuses it whatever the memory.
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-8b",
        "--context",
        "200000",
        "--allow-longer-context",
        "--device",
        "sim:24GiB",
    ]);
    assert_eq!(code, 3);
    assert_eq!(
        doc["plan"]["engine"]["outcome"],
        serde_json::json!({"outcome": "longer_than_trained", "trained": 131_072})
    );
}

#[test]
fn launch_commands_for_the_engines_that_load_the_model() {
    // A catalog model: vLLM from its Hugging Face repository, tensor parallel on both cards.
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-70b",
        "--context",
        "8192",
        "--fragmentation-reserve",
        "0",
        "--device",
        "sim:80GiB",
        "--device",
        "sim:80GiB",
    ]);
    assert_eq!(code, 0, "{doc}");
    let launch = doc["launch"].as_array().unwrap();
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0]["engine"], "vllm");
    assert_eq!(
        launch[0]["commands"][0]["shell"],
        "CUDA_VISIBLE_DEVICES=0,1 vllm serve meta-llama/Llama-3.1-70B --max-model-len 8192 \
         --gpu-memory-utilization 0.92 --tensor-parallel-size 2"
    );
    // Asking for llama.cpp with a catalog model says why there is no command.
    let (_, doc) = select(&[
        "--model",
        "llama-3.1-8b",
        "--device",
        "sim:80GiB",
        "--engine",
        "llama.cpp",
    ]);
    assert_eq!(doc["launch"][0]["unavailable"], "needs_gguf");
    // A GGUF file: llama-server with every layer on the GPU, -c shared by the -np slots in
    // one KV cache.
    let gguf = common::fixture("tiny-llama.gguf");
    let (code, doc) = select(&[
        "--gguf",
        &gguf,
        "--device",
        "sim:8GiB",
        "--batch",
        "4",
        "--context",
        "2048",
    ]);
    assert_eq!(code, 0, "{doc}");
    let argv: Vec<&str> = doc["launch"][0]["commands"][0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        argv,
        [
            "llama-server",
            "-m",
            gguf.as_str(),
            "-c",
            "8192",
            "-np",
            "4",
            "-ngl",
            "3"
        ]
    );
    // Each of the -np sequences keeps a KV stream of its own (llama-server's default).
    assert_eq!(doc["plan"]["llamacpp"]["kv_unified"], false);
    // --bytes plans have nothing to launch.
    let (_, doc) = select(&["--bytes", "1GiB", "--device", "sim:8GiB"]);
    assert_eq!(doc["launch"], json!([]));
}

// A quantized cache is planned and launched as llama.cpp takes it: `-ctk`/`-ctv` on the
// command; llama.cpp has no fp8 cache, and refuses a quantized V cache with `-fa off`
// (`llama_init_from_model`): both usage errors, one line each.
#[test]
fn llamacpp_launch_carries_the_cache_type_it_was_planned_with() {
    let gguf = common::fixture("tiny-llama.gguf");
    let args = |extra: &[&'static str]| {
        let mut a = vec!["--gguf", gguf.as_str(), "--device", "sim:8GiB"];
        a.extend_from_slice(extra);
        a
    };
    let (code, doc) = select(&args(&["--kv-dtype", "q8_0"]));
    assert_eq!(code, 0, "{doc}");
    let argv = doc["launch"][0]["commands"][0]["argv"].as_array().unwrap();
    let tail: Vec<&str> = argv[argv.len() - 4..]
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(tail, ["-ctk", "q8_0", "-ctv", "q8_0"]);
    let (_, doc) = select(&args(&[]));
    let argv = doc["launch"][0]["commands"][0]["argv"].to_string();
    assert!(!argv.contains("-ctk"), "{argv}");
    for (extra, want) in [
        (
            &["--kv-dtype", "fp8"][..],
            "gpumem: error: llama.cpp has no fp8 KV cache: give --kv-dtype f16, bf16, f32, q8_0 \
             or q4_0\n",
        ),
        (
            &["--dtype", "fp8"][..],
            "gpumem: error: llama.cpp has no fp8 weights (not a GGUF type): give --dtype q8_0, \
             q4_k_m or another GGUF type\n",
        ),
        (
            &["--dtype", "int4_g128"][..],
            "gpumem: error: llama.cpp has no int4_g128 weights (not a GGUF type): give --dtype \
             q8_0, q4_k_m or another GGUF type\n",
        ),
        (
            &["--kv-dtype", "q4_0", "--flash-attn", "off"][..],
            "gpumem: error: llama.cpp quantizes the V cache only with flash attention: --kv-dtype \
             q4_0 needs --flash-attn on or auto\n",
        ),
    ] {
        let out = gpumem().arg("select").args(args(extra)).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(String::from_utf8_lossy(&out.stderr), want);
    }
}

// usable − needed past 64 bits is not clamped to a figure it is not: JSON says null there and
// the exact difference everywhere else.
#[test]
fn headroom_past_64_bits_is_null_not_clamped() {
    let (code, doc) = select(&["--bytes", "9300000000000000000", "--device", "sim:8GiB"]);
    assert_eq!(code, 3);
    let c = &doc["candidates"][0];
    assert!(c["headroom_bytes"].is_null(), "{c}");
    assert_eq!(c["needed_bytes"], 9_300_000_000_000_000_000u64);
    let (_, doc) = select(&["--bytes", "9000000000000000000", "--device", "sim:8GiB"]);
    let c = &doc["candidates"][0];
    let want = c["usable_bytes"].as_i64().unwrap() - 9_000_000_000_000_000_000i64;
    assert_eq!(c["headroom_bytes"], want);
}

/// `select` as printed (text), with its exit code.
pub(crate) fn select_text(args: &[&str]) -> (i32, String) {
    let out = gpumem()
        .args(["select", "--color", "never"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

// When nothing fits, the shortfall is the closest plan's (two GPUs here, not one GPU's: two
// pipeline stages, which skip the NVLink all-reduce buffers a TP pair would hold), and every
// suggestion, given as the flag it names, makes the plan fit.
#[test]
fn the_shortfall_is_the_closest_plans_and_every_suggestion_fits() {
    let base = [
        "--model",
        "llama-3.1-70b",
        "--context",
        "131072",
        "--device",
        "sim:80GiB",
        "--device",
        "sim:80GiB",
    ];
    let (code, doc) = select(&base);
    assert_eq!(code, 3);
    let engine = &doc["plan"]["engine"];
    assert_eq!(engine["pipeline_parallel"], 2, "{doc}");
    let outcome = &engine["outcome"];
    let short =
        outcome["needed_bytes"].as_u64().unwrap() - outcome["available_bytes"].as_u64().unwrap();
    assert_eq!(doc["plan"]["shortfall_bytes"].as_u64().unwrap(), short);
    let (_, text) = select_text(&base);
    // Sentences wrap at 80 columns.
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains(
            "No plan fits: the closest, vLLM with --tensor-parallel-size 1 \
             --pipeline-parallel-size 2, is 15.39 GiB short per GPU."
        ),
        "{text}"
    );
    let suggestions = doc["suggestions"].as_array().unwrap();
    let changes: Vec<&str> = suggestions
        .iter()
        .map(|s| s["change"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["context", "dtype", "ram", "more_gpus"], "{doc}");
    for s in suggestions {
        let mut args: Vec<String> = base.iter().map(|a| a.to_string()).collect();
        match s["change"].as_str().unwrap() {
            "context" => args[3] = s["context"].to_string(),
            "dtype" => args.extend(["--dtype".into(), s["dtype"].as_str().unwrap().into()]),
            // Offload is vLLM's --cpu-offload-gb, planned by the generic rule.
            "ram" => args.extend([
                "--ram".into(),
                format!("{}GiB", s["bytes"].as_u64().unwrap() >> 30),
            ]),
            "more_gpus" => {
                for _ in 2..s["count"].as_u64().unwrap() {
                    args.extend(["--device".into(), "sim:80GiB".into()]);
                }
            }
            other => panic!("unexpected suggestion {other}"),
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(select(&args).0, 0, "{s} does not fit: {args:?}");
    }
}

// The verdict column says how a plan uses each device; fractional sizes are rounded to bytes.
#[test]
fn the_verdict_names_each_rank_and_fractional_sizes_are_bytes() {
    let args = [
        "--model",
        "llama-3.1-70b",
        "--context",
        "8192",
        "--gpu-memory-utilization",
        "0.95",
        "--device",
        "sim:79.19GiB",
        "--device",
        "sim:79.19GiB",
    ];
    let (code, text) = select_text(&args);
    assert_eq!(code, 0);
    assert!(text.contains("used: TP rank 0 of 2"), "{text}");
    assert!(text.contains("used: TP rank 1 of 2"), "{text}");
    assert!(!text.contains("rejected"), "{text}");
    let (_, doc) = select(&args);
    // 79.19 × 2^30 = 85,029,615,042.56.
    assert_eq!(
        doc["candidates"][0]["usable"]["base_bytes"],
        85_029_615_043u64
    );
    assert_eq!(
        doc["candidates"][1]["rank"],
        json!({"rank": 1, "of": 2, "stage": 0, "stages": 1})
    );
    // Llama-3.1-70B on two H100s at 0.95, as vLLM runs it: TP 2 with room for three sequences
    // once the weights (65.7 GiB a rank), the sampler's peak, NCCL's buffers and the CUDA-graph
    // estimate are taken (vLLM 0.19 left 3.04 GiB on the same pair for Qwen2.5-72B, before it
    // took the graphs).
    let c = &doc["plan"]["capacity"];
    assert_eq!(c["max_concurrent_sequences"].as_u64(), Some(3), "{c}");
}

// A plan in system RAM gets no vLLM command (no GPU flags), and hypothetical RAM beside a
// simulated GPU gives llama.cpp its CPU-offload plan.
#[test]
fn cpu_plans_get_no_gpu_flags_and_ram_beside_a_sim_gpu_offloads() {
    let dir = tempfile::tempdir().unwrap();
    let inv = inventory(dir.path(), "ram-box", vec![], 64 * GIB);
    let (code, doc) = select(&[
        "--model",
        "qwen2.5-0.5b",
        "--inventory",
        inv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["placements"][0]["backend"], "cpu");
    assert_eq!(
        doc["launch"],
        json!([{"engine": "vllm", "unavailable": "no_gpu"}])
    );
    let base = [
        "--model",
        "llama-3.1-8b",
        "--dtype",
        "q8_0",
        "--engine",
        "llama.cpp",
        "--device",
        "sim:6GiB",
        "--context",
        "8192",
    ];
    let (code, doc) = select(&base);
    assert_eq!(code, 3);
    assert_eq!(
        doc["suggestions"][0],
        json!({"change": "ram", "bytes": 16 * GIB})
    );
    let mut with_ram = base.to_vec();
    with_ram.extend(["--ram", "16GiB"]);
    let (code, doc) = select(&with_ram);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["kind"], "cpu_offload");
    assert_eq!(doc["plan"]["placements"][1]["host"], "sim");
    // llama.cpp's own fit: llama-fit-params gives -ngl 18 for this shape on a 6 GiB device
    // (tests/fixtures/llamacpp-fit/).
    assert_eq!(doc["plan"]["accounting"], "llama_cpp");
    assert_eq!(doc["plan"]["gpu_layers"], 18, "{doc}");
}

// Llama-3.1-8B at 32k on a 24 GB card: vLLM runs it, and so does the plan.
#[test]
fn llama_3_1_8b_at_32k_on_a_24_gb_card_plans_as_vllm_runs_it() {
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-8b",
        "--context",
        "32768",
        "--device",
        "sim:24GiB",
    ]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["accounting"], "vllm");
    assert_eq!(doc["plan"]["engine"]["outcome"]["outcome"], "serves");
    assert_eq!(
        doc["candidates"][0]["rank"],
        json!({"rank": 0, "of": 1, "stage": 0, "stages": 1})
    );
}

// Where no tensor-parallel size serves (Llama-3.1-70B's 64 heads do not split three ways),
// vLLM's pipeline stages do, partitioned as vLLM partitions layers (27/27/26), and the
// launch command says so.
#[test]
fn vllm_pipeline_stages_follow_its_layer_partition() {
    let mut args = vec!["--model", "llama-3.1-70b", "--context", "8192"];
    for _ in 0..3 {
        args.extend(["--device", "sim:64GiB"]);
    }
    let (code, doc) = select(&args);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["accounting"], "vllm");
    assert_eq!(doc["plan"]["kind"], "layer_split");
    assert_eq!(doc["plan"]["engine"]["stage_layers"], json!([27, 27, 26]));
    let layers: Vec<u64> = doc["plan"]["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["layers"].as_u64().unwrap())
        .collect();
    assert_eq!(layers, [27, 27, 26]);
    assert_eq!(
        doc["candidates"][2]["rank"],
        json!({"rank": 0, "of": 1, "stage": 2, "stages": 3})
    );
    let shell = doc["launch"][0]["commands"][0]["shell"].as_str().unwrap();
    assert!(shell.ends_with("--pipeline-parallel-size 3"), "{shell}");
    let (_, text) = select_text(&args);
    assert!(text.contains("used: stage 3 of 3"), "{text}");
}

// The text report fits an 80-column terminal: the table keeps to short verdicts (the reasons
// follow it as wrapped sentences), long names are cut in it and given whole below, and launch
// commands break with backslashes.
#[test]
fn the_text_report_fits_80_columns() {
    let cases: [&[&str]; 3] = [
        &[
            "--model",
            "llama-3.1-70b",
            "--context",
            "8192",
            "--device",
            "sim:64GiB",
            "--device",
            "sim:64GiB",
            "--device",
            "sim:64GiB",
        ],
        &[
            "--model",
            "llama-3.1-8b",
            "--dtype",
            "q8_0",
            "--engine",
            "llama.cpp",
            "--device",
            "sim:2GiB",
            "--device",
            "sim:2GiB",
            "--ram",
            "32GiB",
        ],
        &[
            "--model",
            "llama-3.1-70b",
            "--context",
            "131072",
            "--device",
            "sim:80GiB",
        ],
    ];
    for args in cases {
        let (_, text) = select_text(args);
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{args:?}: {line}");
        }
    }
}

/// `select --mode train` plans PyTorch's training step, not a serving engine: the need is
/// `estimate --mode train`'s (the step's peak, the CUDA context and the allocator's slack)
/// against all of a GPU's memory; no serving command is printed; a step no single GPU holds
/// gets exit 3 with the closest GPU's shortfall.
#[test]
fn training_is_planned_by_pytorchs_step() {
    let train = [
        "--model",
        "llama-3.2-1b",
        "--mode",
        "train",
        "--context",
        "4096",
    ];
    let need = common::json_ok(gpumem().args(["--json", "estimate"]).args(train))["total_bytes"]
        .as_u64()
        .unwrap();
    let (code, doc) = select(&[&train[..], &["--device", "sim:24GiB"]].concat());
    assert_eq!(code, 0);
    assert_eq!(doc["plan"]["accounting"], "pytorch_training");
    assert_eq!(doc["plan"]["kind"], "single");
    assert_eq!(doc["required_bytes"], need);
    assert_eq!(doc["candidates"][0]["usable_bytes"], 24u64 << 30);
    assert_eq!(doc["launch"], Value::Array(vec![]));
    let (code, doc) = select(&[&train[..], &["--device", "sim:20GiB"]].concat());
    assert_eq!(code, 3);
    assert_eq!(doc["plan"]["shortfall_bytes"], need - (20u64 << 30));
    let (code, text) = select_text(&[&train[..], &["--device", "sim:24GiB"]].concat());
    assert_eq!(code, 0);
    assert!(
        text.contains("PyTorch 2.15 training: the step's peak"),
        "{text}"
    );
    assert!(!text.contains("vllm serve"), "{text}");
}

/// `select` for llama.cpp serving Llama-3.1-8B at 131,072 tokens over a q8_0 cache on `device`.
fn long_context_llama(device: &'static str, extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = vec![
        "--model",
        "llama-3.1-8b",
        "--engine",
        "llama.cpp",
        "--context",
        "131072",
        "--kv-dtype",
        "q8_0",
        "--device",
        device,
    ];
    a.extend_from_slice(extra);
    a
}

// On CUDA (simulated GPUs are CUDA's) llama.cpp's flash attention holds f16 copies of a q8_0
// cache's K and V beside its output (ggml-cuda's `get_alloc_size`): Llama-3.1-8B at 131,072
// tokens needs 512 MiB more compute buffer than the CPU backend's rules give, and no longer
// fits a 24 GiB GPU with llama.cpp's 1 GiB margin; with the CPU backend's rules (an
// rpc-server on a CPU) it does.
#[test]
fn llamacpp_on_cuda_holds_flash_attentions_f16_copies_of_a_quantized_cache() {
    let args = long_context_llama;
    let (code, doc) = select(&args("sim:24GiB", &[]));
    assert_eq!(code, 3, "{doc}");
    let (code, text) = select_text(&args("sim:24GiB", &[]));
    assert_eq!(code, 3);
    assert!(
        text.contains("No plan fits: the closest candidate is 138.60 MiB short."),
        "{text}"
    );
    let (code, doc) = select(&args("sim:24GiB", &["--llamacpp-device", "cpu-rules"]));
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["plan"]["llamacpp"]["device_rules"], "cpu-rules");
    let gpu = &doc["plan"]["llamacpp"]["devices"][0];
    let (_, cuda) = select(&args("sim:32GiB", &[]));
    assert_eq!(cuda["plan"]["llamacpp"]["device_rules"], "cuda");
    let on_cuda = &cuda["plan"]["llamacpp"]["devices"][0];
    assert_eq!(on_cuda["context"], gpu["context"]);
    // K and V of one layer in f16 (2 × 131,072 cells × 1,024 values × 2 bytes) held with the
    // f16 mask (131,072 × 512 × 2 bytes): the attention stage now binds, above the logits'.
    let (cuda_compute, cpu_compute) = (
        on_cuda["compute"].as_u64().unwrap(),
        gpu["compute"].as_u64().unwrap(),
    );
    assert!(cuda_compute >= (512 + 128) << 20, "{cuda_compute}");
    assert!(
        cuda_compute >= cpu_compute + (256 << 20),
        "{cuda_compute} vs {cpu_compute}"
    );
}

// On Apple silicon (`--llamacpp-device metal`, which a discovered Metal GPU selects) the plan
// follows ggml-metal's rules as read from its source, and says so: its flash attention
// reserves K and V in f16 whatever the cache's type (512 MiB for Llama-3.1-8B at 131,072 cells,
// beyond the CPU backend's rules).
#[test]
fn llamacpp_on_metal_plans_by_its_source_and_labels_it_unmeasured() {
    let args = |rules: &'static str| long_context_llama("sim:32GiB", &["--llamacpp-device", rules]);
    let (code, doc) = select(&args("metal"));
    assert_eq!(code, 0, "{doc}");
    let plan = &doc["plan"]["llamacpp"];
    assert_eq!(plan["device_rules"], "metal");
    assert_eq!(plan["device_rules_basis"], "from_source");
    assert_eq!(plan["unmeasured_rules"], json!(["metal_buffers"]));
    let (_, cpu) = select(&args("cpu-rules"));
    let compute = |d: &Value| {
        d["plan"]["llamacpp"]["devices"][0]["compute"]
            .as_u64()
            .unwrap()
    };
    assert!(compute(&doc) >= compute(&cpu) + (256 << 20), "{doc}");
    let (code, text) = select_text(&args("metal"));
    assert_eq!(code, 0);
    for line in [
        "llama.cpp b11312 on Metal (-fa on",
        "(unmeasured: ggml-metal's buffers, read from its source)",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
}

#[test]
fn the_json_names_the_engine_release_that_judged_the_plan() {
    let release = |args: &[&str]| select(args).1["engine_release"].clone();
    let model = ["--model", "llama-3.1-8b", "--device", "sim:24GiB"];
    assert_eq!(
        release(&[&model[..], &["--engine", "vllm"]].concat()),
        json!({"engine": "vLLM", "version": "0.33", "source": "its Python source; public start-up logs"})
    );
    assert_eq!(
        release(&[&model[..], &["--engine", "llama.cpp"]].concat())["version"],
        "b11312"
    );
    // A byte count is judged by the generic rule: no engine's release.
    assert_eq!(
        release(&["--bytes", "1GiB", "--device", "sim:24GiB"]),
        Value::Null
    );
}

#[test]
fn a_named_gpu_is_planned_at_the_total_its_driver_reports() {
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--device",
        "sim:h100",
    ]);
    assert_eq!(code, 0);
    let c = &doc["candidates"][0];
    assert_eq!(c["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(c["backend"], "cuda");
    // vLLM's budget: ⌈81,559 MiB × 0.92⌉.
    assert_eq!(c["usable_bytes"], 78_679_145_186u64);
    let (code, doc) = select(&["--model", "llama-3.1-8b", "--device", "sim:mi300x"]);
    assert_eq!(code, 0);
    assert_eq!(doc["candidates"][0]["backend"], "rocm");
    // A bare number is refused, naming the units, as printed.
    let out = gpumem()
        .args(["select", "--model", "llama-3.1-8b", "--device", "sim:24"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "gpumem: error: invalid value 'sim:24' for '--device <SPEC>': 'sim:24' has no unit; \
         write it as sim:24GiB (binary: 2^30 bytes) or sim:24GB (decimal: 10^9 bytes), or name \
         a GPU (sim:h100, sim:rtx4090, ...) (see 'gpumem --help')\n"
    );
}

#[test]
fn vllm_with_no_gpu_says_what_each_device_lacks() {
    // A host with system RAM only: vLLM's accounting has no GPU to judge, so the generic
    // rule's figures stand (they were 0 B on every row, "0 B short").
    let dir = tempfile::tempdir().unwrap();
    let inv = inventory(dir.path(), "cpu-box", vec![], 16 * GIB);
    let (code, doc) = select(&[
        "--model",
        "llama-3.1-70b",
        "--engine",
        "vllm",
        "--inventory",
        inv.to_str().unwrap(),
    ]);
    assert_eq!(code, 3, "{doc}");
    assert_eq!(doc["plan"]["accounting"], "generic_after_vllm");
    let need = doc["required_bytes"].as_u64().unwrap();
    assert!(need > 140 * GIB, "{doc}");
    let cpu = &doc["candidates"][0];
    assert_eq!(cpu["needed_bytes"], need);
    let usable = cpu["usable_bytes"].as_u64().unwrap();
    assert!(usable > 0 && usable < 16 * GIB, "{doc}");
    assert_eq!(doc["plan"]["shortfall_bytes"], need - usable);
    // The text says whose rule judged the rows, and does not speak of a plan there is not.
    let out = common::gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-70b",
            "--engine",
            "vllm",
            "--inventory",
        ])
        .arg(&inv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "With no GPU here vLLM's own accounting judges nothing; the verdicts above are by\n    \
             gpumem's generic rule (--memory-fraction).\n"
        ),
        "{text}"
    );
    assert!(!text.contains("this plan is"), "{text}");
}

#[test]
fn qlora_checkpoints_as_peft_does_unless_told_not_to() {
    let train = [
        "--model",
        "llama-3.1-8b",
        "--mode",
        "train",
        "--recipe",
        "qlora",
        "--context",
        "2048",
        "--device",
        "sim:24GiB",
    ];
    // PEFT's prepare_model_for_kbit_training turns gradient checkpointing on: it fits.
    let (code, doc) = select(&train);
    assert_eq!(code, 0, "{doc}");
    let (code, _) = select(&[&train[..], &["--no-checkpointing"]].concat());
    assert_eq!(code, 3);
    let est = |extra: &[&str]| {
        common::json_ok(
            gpumem()
                .args(["--json", "estimate"])
                .args(&train[..8])
                .args(extra),
        )["settings"]["checkpointing"]
            .clone()
    };
    assert_eq!(est(&[]), true);
    assert_eq!(est(&["--no-checkpointing"]), false);
    // LoRA follows HF Trainer's gradient_checkpointing=False.
    assert_eq!(
        common::json_ok(gpumem().args([
            "--json",
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--mode",
            "train",
            "--recipe",
            "lora",
        ]))["settings"]["checkpointing"],
        false
    );
}

#[test]
fn quiet_prints_the_verdict_and_the_launch_command_only() {
    let out = gpumem()
        .args([
            "select",
            "-q",
            "--model",
            "llama-3.1-8b",
            "--device",
            "sim:24GiB",
            "--color",
            "never",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Plan: single device — cuda:0 on sim\n\
         \n\
         Launch with vLLM:\n  \
         on sim:\n    \
         CUDA_VISIBLE_DEVICES=0 vllm serve meta-llama/Llama-3.1-8B \\\n        \
         --max-model-len 4096 --gpu-memory-utilization 0.92\n"
    );
    // Nothing fits: what the closest lacks, and what would make it fit.
    let out = gpumem()
        .args([
            "select",
            "-q",
            "--model",
            "llama-3.1-70b",
            "--device",
            "sim:24GiB",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("No plan fits: the closest, vLLM with --tensor-parallel-size 1"),
        "{text}"
    );
    assert!(text.contains("It fits with any one of these"), "{text}");
    assert!(!text.contains("needs"), "{text}");
}

/// `--dtype q4_k_m` on a catalog model is the file llama-quantize writes for it, tensor by
/// tensor: Llama-3.1-8B's model buffers with every layer on the GPU add up to the recorded
/// file's tensor bytes, and each is what `llama-fit-params -fitp on` printed for that file
/// (4403 MiB on the device, 281 MiB on the host; it rounds down to whole MiB).
#[test]
fn a_k_quant_mix_is_the_file_llama_quantize_writes() {
    let recorded: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::fixture("llamacpp-quantize/llama-3.1-8b.json")).unwrap(),
    )
    .unwrap();
    let written = recorded["written"]["Q4_K_M"]["tensor_bytes"]
        .as_u64()
        .unwrap();
    let doc = common::json_ok(gpumem().args([
        "select",
        "--model",
        "llama-3.1-8b",
        "--dtype",
        "q4_k_m",
        "--engine",
        "llama.cpp",
        "--device",
        "sim:8GiB",
        "--json",
    ]));
    let fit = &doc["plan"]["llamacpp"];
    assert_eq!(fit["n_gpu_layers"], 33, "{doc}");
    let (gpu, host) = (
        fit["devices"][0]["model"].as_u64().unwrap(),
        fit["host"]["model"].as_u64().unwrap(),
    );
    assert_eq!(gpu + host, written);
    assert_eq!((gpu >> 20, host >> 20), (4403, 281));
}

/// DeepSeek-V3 is planned as it ships, in FP8 with its block scales (not 1.34 TB of bf16), and
/// on a host of eight H200s vLLM serves it as people do, TP 8, with the fewest-GPU layout that
/// serves it (TP 2 × PP 3 on six) named beside it.
#[test]
fn deepseek_v3_ships_in_fp8_and_is_served_over_the_whole_host() {
    let est = common::json_ok(gpumem().args(["estimate", "--model", "deepseek-v3", "--json"]));
    assert_eq!(est["weights_bytes"], 673_150_582_112u64);
    assert_eq!(est["settings"]["dtype"], "file");
    let mut cmd = gpumem();
    cmd.args([
        "select",
        "--model",
        "deepseek-v3",
        "--engine",
        "vllm",
        "--json",
    ]);
    for _ in 0..8 {
        cmd.args(["--device", "sim:h200"]);
    }
    let doc = common::json_ok(&mut cmd);
    let engine = &doc["plan"]["engine"];
    assert_eq!(
        (&engine["tensor_parallel"], &engine["pipeline_parallel"]),
        (&json!(8), &json!(1)),
        "{doc}"
    );
    assert_eq!(
        engine["fewest_gpus"],
        // Each rank holds its stage's MoE routers whole (vLLM's `ReplicatedLinear`).
        json!({ "tensor_parallel": 2, "pipeline_parallel": 3, "gpus": 6, "kv_tokens": 686_928 })
    );
    let shell = doc["launch"][0]["commands"][0]["shell"].as_str().unwrap();
    assert!(
        shell.contains("vllm serve deepseek-ai/DeepSeek-V3"),
        "{shell}"
    );
    assert!(shell.ends_with("--tensor-parallel-size 8"), "{shell}");
}

/// A checkpoint given by its folder is launched by a path vLLM takes for a folder, never a bare
/// name it would look up as a Hub id.
#[test]
fn a_config_folder_is_launched_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("m")).unwrap();
    std::fs::copy(
        common::fixture("pytorch/configs/qwen3-0.6b.json"),
        dir.path().join("m/config.json"),
    )
    .unwrap();
    let doc = common::json_ok(gpumem().current_dir(dir.path()).args([
        "select",
        "--config",
        "m/config.json",
        "--engine",
        "vllm",
        "--device",
        "sim:24GiB",
        "--json",
    ]));
    assert_eq!(doc["launch"][0]["commands"][0]["argv"][2], "./m", "{doc}");
}

/// A training step that fits no GPU gets the one-GPU changes that make it fit, each planned
/// with: checkpointing for QLoRA without it (the 10.82 GiB short), LoRA in place of
/// full fine-tuning for a 3B model on 24 GiB, and, over several GPUs, FSDP2 too.
#[test]
fn a_training_shortfall_lists_what_makes_it_fit() {
    let suggest = |args: &[&str]| {
        let out = gpumem()
            .args(["select", "--mode", "train", "--context", "2048", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["suggestions"].clone()
    };
    assert_eq!(
        suggest(&[
            "--model",
            "llama-3.1-8b",
            "--recipe",
            "qlora",
            "--no-checkpointing",
            "--device",
            "sim:24GiB"
        ]),
        json!([{ "change": "checkpointing" }])
    );
    assert_eq!(
        suggest(&["--model", "llama-3.2-3b", "--device", "sim:24GiB"]),
        json!([{ "change": "recipe", "recipe": "lora" }])
    );
    let two = suggest(&[
        "--model",
        "llama-3.2-3b",
        "--device",
        "sim:24GiB",
        "--device",
        "sim:24GiB",
    ]);
    assert_eq!(
        two[0],
        json!({ "change": "recipe", "recipe": "lora" }),
        "{two}"
    );
    assert_eq!(two[1]["change"], "fsdp", "{two}");
}

/// `--max-context` plans the longest context that fits by the engine's own rules: one token
/// more does not plan (Llama-3.1-8B on 24 GiB: 47,824 under vLLM, 72,448 under llama.cpp).
#[test]
fn max_context_is_the_longest_that_plans() {
    for (engine, longest) in [("vllm", 47_824u64), ("llama.cpp", 72_448)] {
        let base = [
            "--model",
            "llama-3.1-8b",
            "--device",
            "sim:24GiB",
            "--engine",
            engine,
        ];
        let doc = common::json_ok(
            gpumem()
                .args(["select", "--max-context", "--json"])
                .args(base),
        );
        assert_eq!(doc["longest_context"], longest, "{engine}");
        assert_ne!(doc["plan"]["kind"], "none");
        let more = (longest + 1).to_string();
        let out = gpumem()
            .args(["select", "--context", &more])
            .args(base)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{engine}");
    }
    let text = gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--device",
            "sim:24GiB",
            "--engine",
            "vllm",
        ])
        .arg("--max-context")
        .output()
        .unwrap();
    assert!(String::from_utf8(text.stdout)
        .unwrap()
        .starts_with("The longest context that fits: 47,824 tokens\n\n"));
}

/// `--max-concurrency`: the most sequences of --context at once. Under llama.cpp it is found by
/// planning (8 of 8,192 tokens on 24 GiB; 9 does not plan); under vLLM it is the whole part of
/// the "Maximum concurrency" vLLM prints (5.84x: 5).
#[test]
fn max_concurrency_is_the_most_sequences_that_plan() {
    let base = [
        "--model",
        "llama-3.1-8b",
        "--device",
        "sim:24GiB",
        "--context",
        "8192",
    ];
    let doc = common::json_ok(
        gpumem()
            .args([
                "select",
                "--json",
                "--max-concurrency",
                "--engine",
                "llama.cpp",
            ])
            .args(base),
    );
    assert_eq!(doc["most_sequences"], 8);
    let nine = gpumem()
        .args(["select", "--engine", "llama.cpp", "--batch", "9"])
        .args(base)
        .output()
        .unwrap();
    assert_eq!(nine.status.code(), Some(3));
    let doc = common::json_ok(
        gpumem()
            .args(["select", "--json", "--max-concurrency", "--engine", "vllm"])
            .args(base),
    );
    assert_eq!(doc["most_sequences"], 5);
    assert_eq!(doc["plan"]["engine"]["max_concurrency_centi"], 584);
}

/// `--suggest-dtype`: the precision of least loss that fits, from the engine's own, planned in
/// it; the one above it does not fit (Llama-3.1-70B on 48 GiB under llama.cpp: q4_k_m, q5_k_m
/// short; Llama-3.1-8B on 16 GiB under vLLM: fp8, bf16 short; 70B under vLLM: none, exit 3).
#[test]
fn suggest_dtype_is_the_least_loss_that_fits() {
    let pick = |model: &str, gpu: &str, engine: &str| {
        let out = gpumem()
            .args([
                "select",
                "--json",
                "--suggest-dtype",
                "--model",
                model,
                "--device",
                gpu,
                "--engine",
                engine,
            ])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), doc["suggested_dtype"].clone())
    };
    assert_eq!(
        pick("llama-3.1-70b", "sim:48GiB", "llama.cpp"),
        (Some(0), json!("q4_k_m"))
    );
    assert_eq!(
        pick("llama-3.1-8b", "sim:16GiB", "vllm"),
        (Some(0), json!("fp8"))
    );
    assert_eq!(
        pick("llama-3.1-70b", "sim:48GiB", "vllm"),
        (Some(3), Value::Null)
    );
    for (model, gpu, engine, above) in [
        ("llama-3.1-70b", "sim:48GiB", "llama.cpp", "q5_k_m"),
        ("llama-3.1-8b", "sim:16GiB", "vllm", "bf16"),
    ] {
        let out = gpumem()
            .args([
                "select", "--model", model, "--device", gpu, "--engine", engine, "--dtype", above,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{model} {above}");
    }
}

// llama.cpp's fit margin: --fit-target, else LLAMA_ARG_FIT_TARGET as llama-server reads it
// (one value, or one a device when they agree); the flag wins, and a margin gpumem cannot
// plan is a usage error naming the variable.
#[test]
fn the_fit_target_sets_llama_cpps_margin() {
    let margin = |flag: Option<&str>, env: Option<&str>| {
        let mut cmd = common::gpumem();
        cmd.args([
            "--json",
            "select",
            "--engine",
            "llama.cpp",
            "--model",
            "qwen2.5-3b",
        ])
        .args(["--device", "sim:24GiB"]);
        if let Some(f) = flag {
            cmd.args(["--fit-target", f]);
        }
        if let Some(e) = env {
            cmd.env("LLAMA_ARG_FIT_TARGET", e);
        }
        let out = cmd.output().unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (
            out.status.code().unwrap(),
            json["plan"]["llamacpp"]["margin_bytes"].as_u64(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    assert_eq!(margin(None, None).1, Some(1 << 30));
    assert_eq!(margin(Some("2048"), None).1, Some(2 << 30));
    assert_eq!(margin(None, Some("3072")).1, Some(3 << 30));
    assert_eq!(margin(None, Some("512,512")).1, Some(512 << 20));
    assert_eq!(margin(Some("2048"), Some("3072")).1, Some(2 << 30));
    let (code, _, stderr) = margin(None, Some("1024,2048"));
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "gpumem: error: LLAMA_ARG_FIT_TARGET=1024,2048: gpumem plans one margin for every GPU; \
         give --fit-target MiB"
    );
    let (code, _, stderr) = margin(None, Some("lots"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("give the margin in MiB"), "{stderr}");
}
