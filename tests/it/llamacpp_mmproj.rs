//! A multimodal projector's image buffer against llama.cpp's own: each fixture in
//! `tests/fixtures/llamacpp-mmproj/` is a projector GGUF's header and what llama.cpp b11312's
//! clip reserved for it on the CPU, flash attention on and off (`tools/llamacpp-reference/
//! measure_mmproj.py`): its printed compute buffer (MiB, two decimals) and
//! `mtmd_get_memory_usage`'s bytes, the weights and the buffer together, which llama-server
//! adds to its fit's margin.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::common::{self, fixture, gpumem, write_described_gguf};

fn fixtures() -> Vec<(String, Value)> {
    fixtures_in("llamacpp-mmproj")
}

fn fixtures_in(dir: &str) -> Vec<(String, Value)> {
    let dir = fixture(dir);
    let mut docs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let doc = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (name, doc)
        })
        .collect();
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    docs
}

/// `estimate --json` of a small GGUF with the projector beside it, flash attention on or off.
fn estimate_with(mmproj: &std::path::Path, flash_attention: bool) -> Value {
    let mut cmd = gpumem();
    cmd.args(["--json", "estimate", "--gguf", &fixture("tiny-llama.gguf")])
        .arg("--mmproj")
        .arg(mmproj);
    // llama-server's -fa auto, which clip follows, is on for the CPU.
    if !flash_attention {
        cmd.args(["--flash-attn", "off"]);
    }
    common::json_ok(&mut cmd)
}

// Weights and image buffer together equal llama.cpp's bytes for every recorded row, and the
// buffer reads as clip printed it; no warning says the buffer is left out.
#[test]
fn projector_buffers_equal_llamacpp_clip() {
    let docs = fixtures();
    assert!(docs.len() >= 10, "{docs:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (name, doc) in &docs {
        let gguf = dir.path().join(format!("{name}.gguf"));
        write_described_gguf(name, doc, &gguf);
        for row in doc["rows"].as_array().unwrap() {
            let fa = row["flash_attention"].as_bool().unwrap();
            assert_eq!(row["clip_says_flash_attention"], fa, "{name}");
            let got = estimate_with(&gguf, fa);
            let (weights, compute) = (
                got["projector_bytes"].as_u64().unwrap(),
                got["projector_compute_bytes"].as_u64().unwrap(),
            );
            let mib = format!("{:.2}", compute as f64 / 1048576.0);
            let printed = format!("{:.2}", row["cpu_compute_mib"].as_f64().unwrap());
            if weights + compute != row["memory_usage_bytes"].as_u64().unwrap() || mib != printed {
                failures.push(format!(
                    "{name} fa {fa}: {weights} + {compute} ({mib} MiB) vs {} ({printed} MiB)",
                    row["memory_usage_bytes"]
                ));
            }
            let warnings = got["warnings"].to_string();
            assert!(!warnings.contains("encode an image"), "{name}: {warnings}");
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

const FIT: &str = "llamacpp-mmproj-fit/llama-3.1-8b-q8_0-with-gemma-3-mmproj.json";

/// `select`'s `-c`, `-ngl` and `--tensor-split` from its launch.
fn fitted(doc: &Value) -> (Option<String>, Option<String>, Option<String>) {
    let argv = common::launch_argv(doc);
    let value = |flag: &str| {
        argv.iter()
            .position(|a| a == flag)
            .map(|i| argv[i + 1].clone())
    };
    (value("-c"), value("-ngl"), value("--tensor-split"))
}

/// llama.cpp's printed fit as the same three, `-ngl -1` as every layer.
fn printed_fit(printed: &str, ctx: u64) -> (Option<String>, Option<String>, Option<String>) {
    let want = common::fit_params_as_server_args(printed, &[], 33);
    let value = |flag: &str| {
        want.iter()
            .position(|a| a == flag)
            .map(|i| want[i + 1].clone())
    };
    let c = printed
        .split(' ')
        .skip_while(|w| *w != "-c")
        .nth(1)
        .map_or(ctx.to_string(), str::to_string);
    (Some(c), value("-ngl"), value("--tensor-split"))
}

// llama-server's fit with the projector kept free on its GPU, as it adds mtmd's memory to the
// fit's margin there (breakdown.cpp with BREAKDOWN_MMPROJ_BY_GPU: the GPU's own target, as on a
// build whose GPUs come first in the registry): the same `-c`, `-ngl` and `-ts` in every
// recorded case, and the launch names the projector. The fixture also holds the fit without
// the projector, and llama-server's own over ggml-rpc, which adds it to another device's margin.
#[test]
fn the_fit_keeps_the_projector_free_as_llama_server_does() {
    let dir = tempfile::tempdir().unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(fixture(FIT)).unwrap()).unwrap();
    let model = dir.path().join("model.gguf");
    write_described_gguf(
        "model",
        &serde_json::json!({ "gguf": doc["model_gguf"] }),
        &model,
    );
    let (_, mmproj_doc) = fixtures()
        .into_iter()
        .find(|(n, _)| n == "gemma-3-4b-mmproj-shape")
        .unwrap();
    let mmproj = dir.path().join("mmproj.gguf");
    write_described_gguf("mmproj", &mmproj_doc, &mmproj);
    let mut failures = Vec::new();
    let fits = doc["fits"].as_array().unwrap();
    for row in fits {
        let n = |k: &str| row[k].as_u64().unwrap();
        let mut extra: Vec<String> = vec!["--mmproj".into(), mmproj.display().to_string()];
        if row["fit_context"] == true {
            extra.push("--fit-context".into());
        } else {
            extra.extend([
                "--context".into(),
                (n("ctx") / n("np")).to_string(),
                "--batch".into(),
                n("np").to_string(),
            ]);
        }
        if row["flash_attention"] == "off" {
            extra.extend(["--flash-attn".into(), "off".into()]);
        }
        let (sizes, args) = common::fit_row_select(&model, row, &extra);
        let json = common::json_ok(gpumem().args(&args));
        let ours = fitted(&json);
        let printed = row["on_its_gpu"]["printed"].as_str().unwrap();
        let mut theirs = printed_fit(printed, n("ctx"));
        if theirs.2.is_none() {
            theirs.2 = common::default_split(&sizes);
        }
        if ours != theirs {
            failures.push(format!(
                "{sizes:?} MiB: gpumem {ours:?}, llama.cpp {printed}"
            ));
        }
        let argv = common::launch_argv(&json);
        let at = argv.iter().position(|a| a == "--mmproj").unwrap();
        assert_eq!(argv[at + 1], mmproj.display().to_string());
        // The account's projector share is what clip's memory usage says on that device.
        let p = &json["plan"]["llamacpp"]["projector"];
        let on_gpu = row["on_its_gpu"]["mmproj_memory"][0]["bytes"]
            .as_u64()
            .unwrap();
        assert_eq!(
            p["weights_bytes"].as_u64().unwrap() + p["compute_bytes"].as_u64().unwrap(),
            on_gpu,
            "{p}"
        );
    }
    assert_eq!(fits.len(), 10);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// The largest image a Qwen or Gemma 4 tower accepts: each fixture in `tests/fixtures/llamacpp-mmproj-max/`
// is what clip's buffer grew to when it encoded that image after its warm-up
// (`measure_mmproj_max.py`: the projector's own 4096 tokens, and `--image-max-tokens N`), in
// bytes from ggml's scheduler. Both buffers equal clip's for every row; the total counts the
// larger.
#[test]
fn largest_image_buffers_equal_llamacpp_clip() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut rows_seen = 0;
    for (name, doc) in fixtures_in("llamacpp-mmproj-max") {
        let gguf_doc: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(doc["gguf_from"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        let gguf = dir.path().join(format!("{name}.gguf"));
        write_described_gguf(&name, &gguf_doc, &gguf);
        for row in doc["rows"].as_array().unwrap() {
            rows_seen += 1;
            let fa = row["flash_attention"].as_bool().unwrap();
            let mut cmd = gpumem();
            cmd.args(["--json", "estimate", "--gguf", &fixture("tiny-llama.gguf")])
                .arg("--mmproj")
                .arg(&gguf);
            if !fa {
                cmd.args(["--flash-attn", "off"]);
            }
            if let Some(n) = row["image_max_tokens"].as_u64() {
                cmd.args(["--image-max-tokens", &n.to_string()]);
            }
            let got = common::json_ok(&mut cmd);
            let ours = (
                got["projector_compute_bytes"].as_u64().unwrap(),
                got["projector_largest_image_compute_bytes"]
                    .as_u64()
                    .unwrap(),
            );
            let theirs = (
                row["warmup_compute_bytes"].as_u64().unwrap(),
                row["largest_compute_bytes"].as_u64().unwrap(),
            );
            let printed = format!("{:.2}", ours.0 as f64 / 1048576.0);
            let clip_printed = format!("{:.2}", row["warmup_cpu_compute_mib"].as_f64().unwrap());
            if ours != theirs || printed != clip_printed {
                failures.push(format!(
                    "{name} fa {fa} max {}: gpumem {ours:?}, clip {theirs:?}",
                    row["image_max_tokens"]
                ));
            }
        }
    }
    assert!(rows_seen >= 28, "{rows_seen}");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `--image-max-tokens` reaches llama-server's command, and the plan names both buffers.
#[test]
fn select_passes_image_max_tokens_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_, doc) = fixtures()
        .into_iter()
        .find(|(n, _)| n == "small-qwen2.5-vl-wa-2-shape")
        .unwrap();
    let gguf = dir.path().join("mmproj.gguf");
    write_described_gguf("mmproj", &doc, &gguf);
    let mut cmd = gpumem();
    cmd.args(["--json", "select", "--gguf", &fixture("tiny-llama.gguf")])
        .args(["--device", "sim:80GiB", "--engine", "llama.cpp"])
        .arg("--mmproj")
        .arg(&gguf)
        .args(["--image-max-tokens", "6400"]);
    let json = common::json_ok(&mut cmd);
    let argv = common::launch_argv(&json);
    let at = argv.iter().position(|a| a == "--image-max-tokens").unwrap();
    assert_eq!(argv[at + 1], "6400");
    let p = &json["plan"]["llamacpp"]["projector"];
    assert_eq!(p["image_max_tokens"], 6400);
    // Measured on the CPU backend; the plan's GPU follows its own rules, so only the order is
    // asserted here.
    assert!(
        p["largest_image_compute_bytes"].as_u64().unwrap() > p["compute_bytes"].as_u64().unwrap(),
        "{p}"
    );
}

/// An `--image-max-tokens` under the tower's minimum (Qwen's 8) is refused in one line, as clip
/// refuses to load the projector then (`image_max_pixels` under `image_min_pixels`).
#[test]
fn image_max_tokens_under_the_towers_minimum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, doc) = fixtures()
        .into_iter()
        .find(|(n, _)| n == "small-qwen2.5-vl-wa-2-shape")
        .unwrap();
    let gguf = dir.path().join("mmproj.gguf");
    write_described_gguf("mmproj", &doc, &gguf);
    let out = gpumem()
        .args(["estimate", "--gguf", &fixture("tiny-llama.gguf")])
        .arg("--mmproj")
        .arg(&gguf)
        .args(["--image-max-tokens", "7"])
        .output()
        .unwrap();
    // The flag's largest value is still replayed, not left at the warm-up's buffer.
    let json = common::json_ok(
        gpumem()
            .args(["--json", "estimate", "--gguf", &fixture("tiny-llama.gguf")])
            .arg("--mmproj")
            .arg(&gguf)
            .args(["--image-max-tokens", "1048576"]),
    );
    let largest = json["projector_largest_image_compute_bytes"]
        .as_u64()
        .unwrap();
    assert!(
        largest > 64 * json["projector_compute_bytes"].as_u64().unwrap(),
        "{json}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "gpumem: error: {}: --image-max-tokens 7 is under the 8 tokens this projector's \
             images take at least; llama.cpp refuses to load it\n",
            gguf.display()
        )
    );
}
