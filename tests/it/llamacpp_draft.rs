//! `select --model-draft` against llama.cpp's own figures for a target with a draft beside it
//! (`tools/llamacpp-reference/measure_draft.py`: breakdown.cpp runs llama-server's derivation
//! of the draft's parameters and its fit of both, on ggml-rpc-server devices lending CPUs):
//! Llama-3.1-8B's shape with Llama-3.2-1B's as the draft, both Q8_0. Each device's model,
//! context and compute bytes, the target's and the draft's, are llama.cpp's to the byte; the
//! `-c`, `-ngl` and `--tensor-split` are the ones its fit chose with the draft counted beside
//! the target; and the launch drafts with it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use crate::common;

use serde_json::Value;

const FIXTURE: &str = "llamacpp-draft/llama-3.1-8b-with-llama-3.2-1b-q8_0.json";

/// The fixture and its two GGUFs, written as sparse files in `dir`.
fn setup(dir: &Path) -> (Value, PathBuf, PathBuf) {
    let text = std::fs::read_to_string(common::fixture(FIXTURE)).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let target = dir.join("target.gguf");
    let draft = dir.join("draft.gguf");
    common::write_described_gguf(
        "target",
        &serde_json::json!({ "gguf": doc["target_gguf"] }),
        &target,
    );
    common::write_described_gguf(
        "draft",
        &serde_json::json!({ "gguf": doc["draft_gguf"] }),
        &draft,
    );
    (doc, target, draft)
}

/// `--context` per sequence and `--batch` for llama-server's `-c` over `-np` streams.
fn context_args(ctx: u64, np: u64) -> Vec<String> {
    vec![
        "--context".into(),
        (ctx / np).to_string(),
        "--batch".into(),
        np.to_string(),
    ]
}

fn draft_args(draft: &Path, n_max: u64) -> Vec<String> {
    vec![
        "--model-draft".into(),
        draft.display().to_string(),
        "--spec-draft-n-max".into(),
        n_max.to_string(),
    ]
}

/// A device's `[model, context, compute]` as the fixture and gpumem's account give it.
fn bytes(d: &Value) -> [u64; 3] {
    ["model", "context", "compute"].map(|k| d[k].as_u64().unwrap())
}

/// Each measured row with the target on one large device (every layer there) or on none: the
/// account's GPU and host rows are the target's and the draft's together, and the draft's own
/// rows its alone (with `-ngld` set, part of the draft in RAM).
#[test]
fn the_draft_and_target_buffers_are_llama_cpps() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, target, draft) = setup(dir.path());
    let mut checked = 0;
    for row in doc["rows"].as_array().unwrap() {
        let n = |k: &str| row[k].as_u64();
        let (ngl, ngld) = (n("ngl").unwrap(), n("ngld"));
        let on_cpu = ngl == 0 && ngld == Some(0);
        let on_gpu = !on_cpu;
        // With part of the target on the device only the draft's rows are compared: select
        // offloads every layer of the target to a device that holds it.
        let whole = ngl == 33;
        let mut args: Vec<String> = ["--json", "select", "--engine", "llama.cpp", "--gguf"]
            .into_iter()
            .map(String::from)
            .chain([target.display().to_string()])
            .chain(draft_args(&draft, n("n_max").unwrap()))
            .chain(context_args(n("ctx").unwrap(), n("np").unwrap()))
            .collect();
        if row["flash_attention"] == "off" {
            args.extend(["--flash-attn".into(), "off".into()]);
        }
        if let (true, Some(n)) = (on_gpu, ngld) {
            args.extend(["--gpu-layers-draft".into(), n.to_string()]);
        }
        if on_gpu {
            args.extend(
                ["--device", "sim:64GiB", "--llamacpp-device", "cpu-rules"].map(String::from),
            );
        } else {
            let inv =
                crate::select_inventory::inventory(dir.path(), "ram-only", Vec::new(), 64 << 30);
            args.extend(["--inventory".into(), inv.display().to_string()]);
        }
        let json = common::json_ok(common::gpumem().args(&args));
        let account = &json["plan"]["llamacpp"];
        let label = format!("{row}");
        let measured = |who: &str, i: usize| bytes(&row[who][i]);
        let sum = |i: usize| {
            let (t, d) = (measured("target", i), measured("draft", i));
            [t[0] + d[0], t[1] + d[1], t[2] + d[2]]
        };
        let draft_acc = &account["draft"];
        if on_gpu {
            assert_eq!(
                bytes(&draft_acc["devices"][0]),
                measured("draft", 0),
                "draft GPU: {label}"
            );
            assert_eq!(draft_acc["n_gpu_layers"], ngld.unwrap_or(17), "{label}");
        }
        if whole {
            assert_eq!(bytes(&account["devices"][0]), sum(0), "GPU: {label}");
        }
        if whole || on_cpu {
            assert_eq!(bytes(&account["host"]), sum(1), "host: {label}");
        }
        assert_eq!(
            bytes(&draft_acc["host"]),
            measured("draft", 1),
            "draft host: {label}"
        );
        checked += 1;
    }
    assert_eq!(checked, 7);
}

/// llama.cpp's fit with the draft counted beside the target, on one or two devices of each
/// recorded size, with the context set or chosen by the fit: the same `-c`, `-ngl` and `-ts`.
#[test]
fn the_fit_counts_the_draft_as_llama_cpp_does() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, target, draft) = setup(dir.path());
    let mut failures = Vec::new();
    let fits = doc["fits"].as_array().unwrap();
    for row in fits {
        let n = |k: &str| row[k].as_u64().unwrap();
        let mut extra = draft_args(&draft, n("n_max"));
        if row["fit_context"] == true {
            extra.push("--fit-context".into());
        } else {
            extra.extend(context_args(n("ctx"), n("np")));
        }
        let (sizes, args) = common::fit_row_select(&target, row, &extra);
        let json = common::json_ok(common::gpumem().args(&args));
        let argv = common::launch_argv(&json);
        let value = |flag: &str| {
            argv.iter()
                .position(|a| a == flag)
                .map(|i| argv[i + 1].clone())
        };
        let printed = row["printed"].as_str().unwrap();
        let want = common::fit_params_as_server_args(printed, &[], 33);
        let want_value = |flag: &str| {
            want.iter()
                .position(|a| a == flag)
                .map(|i| want[i + 1].clone())
        };
        let ours = (value("-c"), value("-ngl"), value("--tensor-split"));
        // Without -ts llama.cpp splits by free memory, which the launch writes out.
        let split = want_value("--tensor-split").or_else(|| common::default_split(&sizes));
        let theirs = (Some(n("ctx").to_string()), want_value("-ngl"), split);
        if ours != theirs {
            failures.push(format!(
                "{sizes:?} MiB: gpumem {ours:?}, llama.cpp {printed}"
            ));
        }
        // The launch drafts with it.
        assert_eq!(value("--spec-type").as_deref(), Some("draft-simple"));
        assert_eq!(value("-md").unwrap(), draft.display().to_string());
    }
    assert_eq!(fits.len(), 10);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Without the draft the same device holds more of the target: the fit's answer moves.
#[test]
fn without_the_draft_the_fit_keeps_more_layers() {
    let dir = tempfile::tempdir().unwrap();
    let (_, target, draft) = setup(dir.path());
    let ngl = |with: bool| {
        let mut extra = context_args(8192, 1);
        if with {
            extra.extend(draft_args(&draft, 3));
        }
        let row = serde_json::json!({ "device_mib": 8192 });
        let (_, args) = common::fit_row_select(&target, &row, &extra);
        let json = common::json_ok(common::gpumem().args(&args));
        json["plan"]["gpu_layers"].as_u64().unwrap()
    };
    assert_eq!(ngl(true), 20);
    assert!(ngl(false) > 20);
}

/// The draft is llama.cpp's flag: another engine refuses it, as does a draft that is not a GGUF.
#[test]
fn a_draft_for_another_engine_or_not_a_gguf_is_a_usage_error() {
    let out = common::gpumem()
        .args(["select", "--model", "llama-3.1-8b", "--engine", "vllm"])
        .args(["--model-draft", "draft.gguf", "--device", "sim:80GiB"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        "gpumem: error: --model-draft is llama.cpp's (-md): it needs a GGUF model or --engine \
         llama.cpp; vLLM takes --speculative-config, SGLang --speculative-algorithm\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let (_, target, _) = setup(dir.path());
    let out = common::gpumem()
        .args(["select", "--engine", "llama.cpp", "--gguf"])
        .arg(&target)
        .args(["--model-draft", "llama-3.2-1b", "--device", "sim:80GiB"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("llama.cpp loads a draft from a GGUF"), "{err}");
}
