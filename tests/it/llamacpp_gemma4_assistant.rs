//! `select --model-draft` with a Gemma 4 assistant (`gemma4-assistant`) beside its Gemma 4
//! target, against llama.cpp's own figures (`tools/llamacpp-reference/measure_assistant.py`:
//! assistant_buffers.cpp loads the assistant in the MTP context llama-server gives it, reading
//! the target's caches): 4 of Gemma 4 31B's layers with a small assistant at its head sizes,
//! both f16, at 4,096 and 32,768 tokens, flash attention off and on, all in RAM and all on an
//! RPC device. Each model, context and compute byte count is llama.cpp's, the assistant's and
//! the target's, and the assistant has no cache of its own.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use crate::common;

use serde_json::Value;

const FIXTURE: &str = "llamacpp-draft/gemma-4-with-assistant-layout.json";

/// The target's token embeddings (262,144 × 5,376 f16), which its head is tied to.
const TIED_HEAD: u64 = 262_144 * 5_376 * 2;

/// The fixture and its two GGUFs, written as sparse files in `dir`.
fn setup(dir: &Path) -> (Value, PathBuf, PathBuf) {
    let text = std::fs::read_to_string(common::fixture(FIXTURE)).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let target = dir.join("target.gguf");
    let draft = dir.join("assistant.gguf");
    for (name, key, path) in [
        ("target", "target_gguf", &target),
        ("assistant", "draft_gguf", &draft),
    ] {
        common::write_described_gguf(name, &serde_json::json!({ "gguf": doc[key] }), path);
    }
    (doc, target, draft)
}

/// A device's `[model, context, compute]` as the fixture and gpumem's account give it.
fn bytes(d: &Value) -> [u64; 3] {
    ["model", "context", "compute"].map(|k| d[k].as_u64().unwrap())
}

/// `select` of the target with the assistant beside it, as `row` ran them: all in RAM (an
/// inventory without GPUs) or all on one large device under the CPU backend's rules.
fn plan(dir: &Path, (target, draft): (&Path, &Path), row: &Value) -> Value {
    let mut args: Vec<String> = ["--json", "select", "--engine", "llama.cpp", "--gguf"]
        .map(String::from)
        .into_iter()
        .chain([target.display().to_string(), "--model-draft".into()])
        .chain([draft.display().to_string(), "--context".into()])
        .chain([row["ctx"].to_string()])
        .collect();
    if row["flash_attention"] == "off" {
        args.extend(["--flash-attn".into(), "off".into()]);
    }
    if row["ngl"] == 0 {
        let inv = crate::select_inventory::inventory(dir, "ram-only", Vec::new(), 64 << 30);
        args.extend(["--inventory".into(), inv.display().to_string()]);
    } else {
        args.extend(["--device", "sim:64GiB", "--llamacpp-device", "cpu-rules"].map(String::from));
    }
    common::json_ok(common::gpumem().args(&args))
}

/// Every measured row: the assistant's own rows and the account's (the target's and the
/// assistant's together) are llama.cpp's to the byte, with no cache for the assistant.
#[test]
fn the_assistant_and_target_buffers_are_llama_cpps() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, target, draft) = setup(dir.path());
    let rows = doc["rows"].as_array().unwrap();
    for row in rows {
        let json = plan(dir.path(), (&target, &draft), row);
        let account = &json["plan"]["llamacpp"];
        let label = format!(
            "ctx {} fa {} ngl {}",
            row["ctx"], row["flash_attention"], row["ngl"]
        );
        let measured = |who: &str, i: usize| bytes(&row[who][i]);
        let sum = |i: usize| {
            let (t, d) = (measured("target", i), measured("draft", i));
            [t[0] + d[0], t[1] + d[1], t[2] + d[2]]
        };
        let assistant = &account["draft"];
        let on_gpu = row["ngl"] != 0;
        if on_gpu {
            assert_eq!(
                bytes(&assistant["devices"][0]),
                measured("draft", 0),
                "{label}"
            );
            assert_eq!(bytes(&account["devices"][0]), sum(0), "GPU: {label}");
            assert_eq!(assistant["n_gpu_layers"], 5, "{label}");
        }
        let host = usize::from(on_gpu);
        assert_eq!(
            bytes(&assistant["host"]),
            measured("draft", host),
            "{label}"
        );
        let mut want = sum(host);
        if !on_gpu {
            // The dry run counts the target's tied head a second time on the CPU, where a load
            // maps it once (gemma-4-layout.json's CPU_Mapped buffer, 6552.36 MiB, is the
            // device's and host's together less it); the assistant's it counts once.
            want[0] -= TIED_HEAD;
            assert_eq!(want[0] - measured("draft", 0)[0], 6_870_648_960, "{label}");
        }
        assert_eq!(bytes(&account["host"]), want, "host: {label}");
        // No cache of its own, on any device.
        let devices = assistant["devices"].as_array().unwrap();
        assert!(devices
            .iter()
            .chain([&assistant["host"]])
            .all(|d| d["context"] == 0));
    }
    assert_eq!(rows.len(), 8);
}

/// The launch drafts with it as llama-server's MTP drafter, which it does not infer from the
/// file.
#[test]
fn the_launch_drafts_with_the_assistant_as_draft_mtp() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, target, draft) = setup(dir.path());
    let json = plan(dir.path(), (&target, &draft), &doc["rows"][4]);
    let argv = common::launch_argv(&json);
    let value = |flag: &str| argv.iter().position(|a| a == flag).map(|i| &argv[i + 1]);
    assert_eq!(value("--spec-type").unwrap(), "draft-mtp");
    assert_eq!(value("-md").unwrap(), &draft.display().to_string());
    assert_eq!(json["plan"]["llamacpp"]["draft"]["spec_type"], "draft-mtp");
}

/// Beside a target that is not Gemma 4 llama.cpp cannot run it (it views the target's caches
/// as a Gemma 4's): one line says so.
#[test]
fn an_assistant_beside_another_family_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, draft) = setup(dir.path());
    let out = common::gpumem()
        .args(["select", "--engine", "llama.cpp", "--gguf"])
        .arg(common::fixture("tiny-llama.gguf"))
        .args([
            "--context",
            "1024",
            "--device",
            "sim:24GiB",
            "--model-draft",
        ])
        .arg(&draft)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpumem: error: gemma-4-assistant-layout is a Gemma 4 assistant: llama.cpp drafts with \
         it only for a Gemma 4 target, whose caches it reads (tiny-llama is llama)\n"
    );
}
