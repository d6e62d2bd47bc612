//! `--engine sglang`: SGLang 0.5.23's own pool, defaults, words and launch command, as printed.

#![allow(clippy::unwrap_used)]

use crate::common::{self, gpumem};

/// Llama-3.1-8B on one H100 with SGLang's defaults: the fraction its memory hook picks for
/// 81,559 MiB (reserve 512 + 1.5 × 8,192 + 128 + 2 × 256 + 8 × 58 MiB), its pool, the lines it
/// prints as it words them, and the command that starts it so.
#[test]
fn llama_on_an_h100_as_sglang_sizes_it() {
    let out = gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--engine",
            "sglang",
            "--device",
            "sim:h100",
            "--context-length",
            "131072",
            "--color",
            "never",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "SGLang 0.5.23 on each GPU (TP 1), --mem-fraction-static 0.83 (its default for\n    \
         81,559 MiB GPUs, keeping 13,904 MiB out):\n",
        "  SGLang would print:\n    KV Cache is allocated. dtype: torch.bfloat16, #tokens: \
         416436, K size: 25.42 GB, V size: 25.42 GB\n    max_total_num_tokens=416436, \
         chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, \
         context_len=131072\n",
        "CUDA_VISIBLE_DEVICES=0 python -m sglang.launch_server \\\n        --model-path \
         meta-llama/Llama-3.1-8B --tp 1 --mem-fraction-static 0.83 \\\n        \
         --context-length 131072\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    let doc = common::json_ok(gpumem().args([
        "--json",
        "select",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "sglang",
        "--device",
        "sim:h100",
        "--context",
        "128k",
    ]));
    let fit = &doc["plan"]["sglang"];
    assert_eq!(doc["plan"]["accounting"], "sglang");
    assert_eq!(fit["mem_fraction_static"], 0.83);
    assert_eq!(fit["default_reserve_mib"], 13_904);
    assert_eq!(fit["cell_bytes"], 131_072);
    assert_eq!(fit["max_total_num_tokens"], 416_436);
    assert_eq!(fit["outcome"]["outcome"], "serves");
    // The pool is P × f − weights: P the total less the modelled start-up.
    let pool = fit["pool_bytes"].as_u64().unwrap();
    assert_eq!(pool / 131_072, 416_436);
    assert_eq!(doc["launch"][0]["engine"], "sglang");
}

/// `estimate --engine sglang` is the need `select --engine sglang` reports on the same GPUs.
#[test]
fn estimate_for_sglang_is_selects_need() {
    let args = [
        "--model",
        "qwen3-8b",
        "--context",
        "8k",
        "--engine",
        "sglang",
        "--device",
        "sim:rtx4090",
        "--kv-dtype",
        "fp8",
    ];
    let est = common::json_ok(gpumem().args(["--json", "estimate"]).args(args));
    let sel = common::json_ok(gpumem().args(["--json", "select"]).args(args));
    assert_eq!(est["engine"], "sglang");
    assert_eq!(est["needed_bytes"], sel["required_bytes"]);
    assert_eq!(est["account"], sel["plan"]["sglang"]);
    // An fp8 pool (fp8_e4m3): one byte a value, 36 layers × 8 heads × 2 × 128.
    assert_eq!(est["account"]["cell_bytes"], 36 * 8 * 2 * 128);
    assert_eq!(est["account"]["kv_dtype"], "torch.float8_e4m3fn");
    // An RTX 4090's defaults: 4,096-token chunks, graphs to 48, fraction 0.704.
    assert_eq!(est["account"]["mem_fraction_static"], 0.704);
    assert_eq!(est["account"]["chunked_prefill_size"], 4096);
    let launch = sel["launch"][0]["commands"][0]["argv"].clone();
    assert_eq!(
        launch,
        serde_json::json!([
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "Qwen/Qwen3-8B",
            "--tp",
            "1",
            "--mem-fraction-static",
            "0.704",
            "--context-length",
            "8192",
            "--kv-cache-dtype",
            "fp8_e4m3"
        ])
    );
}

/// Weights past `P × f` are refused as SGLang refuses them, exit 3; on a host of eight the
/// model runs over all of them, as people serve it, the fewest-GPU layout named beside.
#[test]
fn refusal_and_the_whole_host() {
    let out = gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-70b",
            "--engine",
            "sglang",
            "--device",
            "sim:h100",
            "--color",
            "never",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "  SGLang refuses: Loaded weights leave no GPU memory for the KV cache under\n      \
             --mem-fraction-static=0.83 (65.62 GiB short).\n"
        ),
        "{text}"
    );
    let mut args = vec![
        "--json",
        "select",
        "--model",
        "llama-3.1-70b",
        "--engine",
        "sglang",
    ];
    for _ in 0..8 {
        args.extend(["--device", "sim:h100"]);
    }
    let doc = common::json_ok(gpumem().args(&args));
    let fit = &doc["plan"]["sglang"];
    assert_eq!(fit["tensor_parallel"], 8);
    // Eight ranks: more per rank for the graphs (batch 512), 0.812.
    assert_eq!(fit["mem_fraction_static"], 0.812);
    assert_eq!(fit["fewest_gpus"], serde_json::json!([4, 402_410]));
    let argv = doc["launch"][0]["commands"][0]["argv"].to_string();
    assert!(argv.contains("\"--tp\",\"8\""), "{argv}");
}

/// SGLang's flags by their names, and contradictions in one line (exit 2).
#[test]
fn sglang_flags_and_their_refusals() {
    let err = common::one_line_error(
        gpumem().args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--engine",
            "sglang",
            "--device",
            "sim:h100",
            "--device",
            "sim:h100",
            "--device",
            "sim:h100",
            "--tp",
            "3",
        ]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --tp-size 3: SGLang requires it to divide the model's 32 attention heads\n"
    );
    let err = common::one_line_error(
        gpumem().args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--device",
            "sim:h100",
            "--tp-size",
            "1",
        ]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --tp-size is SGLang's: it needs --engine sglang\n"
    );
    // No GPU to plan on (the test machines have none): named, not a 0 B shortfall.
    let err = common::one_line_error(
        gpumem().args(["select", "--model", "llama-3.1-8b", "--engine", "sglang"]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: SGLang serves from GPUs and none is here: give --device sim:h100 (or \
         another GPU, or sim:SIZE)\n"
    );
    // vLLM's spelling, --tensor-parallel-size, is SGLang's alias too; a fraction given is kept.
    let doc = common::json_ok(gpumem().args([
        "--json",
        "select",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "sglang",
        "--device",
        "sim:h100",
        "--device",
        "sim:h100",
        "--tensor-parallel-size",
        "2",
        "--mem-fraction-static",
        "0.9",
    ]));
    assert_eq!(doc["plan"]["sglang"]["tensor_parallel"], 2);
    assert_eq!(doc["plan"]["sglang"]["mem_fraction_static"], 0.9);
    assert_eq!(
        doc["plan"]["sglang"]["default_reserve_mib"],
        serde_json::Value::Null
    );
}

/// Speculative decoding as SGLang 0.5.23 sizes it: the EAGLE draft's weights (a decoder layer
/// of the target's and its 2 × hidden → hidden projection) come out of `P × f`, its KV layer
/// grows each token's cell by a 32nd on Llama-2-7B, 48 requests run at once, and the launch
/// carries the flags.
#[test]
fn an_eagle_draft_in_the_pool() {
    let args = [
        "--json",
        "select",
        "--model",
        "llama-2-7b",
        "--dtype",
        "f16",
        "--engine",
        "sglang",
        "--device",
        "sim:h100",
        "--context",
        "4096",
    ];
    let plain = common::json_ok(gpumem().args(args));
    let eagle = common::json_ok(gpumem().args(args).args([
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-draft-model-path",
        "lmsys/sglang-EAGLE-llama2-chat-7B",
    ]));
    let (p, e) = (&plain["plan"]["sglang"], &eagle["plan"]["sglang"]);
    assert_eq!(p["cell_bytes"], 524_288);
    assert_eq!(e["cell_bytes"], 524_288 + 524_288 / 32);
    // A layer's share of Llama-2-7B's weights past its embeddings and head (202,383,360
    // parameters a layer, and the final norm's 4,096 shared over the 32) and fc (2 × 4096 ×
    // 4096), f16.
    let draft = (202_383_360u64 + 4096 / 32 + 2 * 4096 * 4096) * 2;
    assert_eq!(e["draft"]["weights_bytes"], draft);
    assert_eq!(
        e["weights_bytes"].as_u64().unwrap(),
        p["weights_bytes"].as_u64().unwrap() + draft
    );
    assert_eq!(e["max_running_requests"], 48);
    let argv = eagle["launch"][0]["commands"][0]["argv"].to_string();
    assert!(
        argv.ends_with(
            "\"--speculative-algorithm\",\"EAGLE\",\"--speculative-draft-model-path\",\
             \"lmsys/sglang-EAGLE-llama2-chat-7B\"]"
        ),
        "{argv}"
    );
}
