//! `gpumem estimate` on bad input: malformed and absurd configs, estimates past 64 bits,
//! hostile model stores, FIFOs, split GGUFs that are not what they claim, garbage quantization
//! configs; each one clear line and its exit code, never a panic.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::{json, Value};

use super::estimate::{estimate_json, fixture, llama_config, one_line_failure};
use crate::common::{self, gpumem};

#[test]
fn bad_input_fails_cleanly() {
    assert!(
        one_line_failure(&["estimate", "--model", "gpt-5"], 2).contains("unknown model 'gpt-5'")
    );
    // A file where a name goes: the line says which flag takes it.
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    let line = one_line_failure(&["estimate", "--model", path], 1);
    assert!(
        line.contains("is a path, not a model name") && line.contains("--gguf FILE"),
        "{line}"
    );
    assert!(
        one_line_failure(&["estimate", "--model", "mistral-7b", "--dtype", "q9"], 2)
            .contains("unknown --dtype 'q9'")
    );
    assert!(
        one_line_failure(&["estimate"], 2).contains("--model, --config, --gguf or --safetensors")
    );
    assert!(
        one_line_failure(&["estimate", "--gguf", "/nonexistent.gguf"], 1)
            .contains("/nonexistent.gguf")
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.gguf");
    std::fs::write(
        &bad,
        b"GGUF\x03\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff\0\0\0\0\0\0\0\0",
    )
    .unwrap();
    assert!(
        one_line_failure(&["estimate", "--gguf", bad.to_str().unwrap()], 1)
            .contains("implausible tensor count")
    );
    let truncated = dir.path().join("truncated.gguf");
    let full = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    std::fs::write(&truncated, &full[..full.len() / 2]).unwrap();
    assert!(
        one_line_failure(&["estimate", "--gguf", truncated.to_str().unwrap()], 1)
            .contains("truncated")
    );
    let json = dir.path().join("config.json");
    std::fs::write(&json, "{not json").unwrap();
    assert!(
        one_line_failure(&["estimate", "--config", json.to_str().unwrap()], 1)
            .contains("not valid JSON")
    );
    let st = dir.path().join("x.safetensors");
    std::fs::write(&st, 1_000_000u64.to_le_bytes()).unwrap();
    assert!(
        one_line_failure(&["estimate", "--safetensors", st.to_str().unwrap()], 1)
            .contains("header length")
    );
}

fn config_failure(config: serde_json::Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    one_line_failure(&["estimate", "--config", path.to_str().unwrap()], 1)
}

// Shapes whose arithmetic would wrap or vanish are refused, naming the field; none may give a
// small or zero figure.
#[test]
fn absurd_shapes_are_refused_with_the_field_named() {
    let mut mla = llama_config();
    mla["model_type"] = "deepseek_v3".into();
    mla["kv_lora_rank"] = (1u64 << 63).into();
    mla["qk_rope_head_dim"] = (1u64 << 63).into();
    mla["qk_nope_head_dim"] = 128.into();
    mla["v_head_dim"] = 128.into();
    let e = config_failure(mla);
    assert!(
        e.contains("kv_lora_rank") && e.contains("implausibly large"),
        "{e}"
    );

    let cases: [(&[(&str, u64)], &str); 4] = [
        // Refused before anything walks the layers (a walk of 10^18 would never end).
        (
            &[("num_hidden_layers", 1 << 60)],
            "num_hidden_layers' is 1152921504606846976, implausibly large (at most 1024)",
        ),
        (
            &[
                ("hidden_size", 16),
                ("num_attention_heads", 64),
                ("num_key_value_heads", 64),
            ],
            "head_dim' is 0: num_attention_heads (64) exceeds hidden_size (16)",
        ),
        (&[("num_key_value_heads", 0)], "num_key_value_heads"),
        (
            &[
                ("hidden_size", 1 << 20),
                ("intermediate_size", 1 << 22),
                ("num_hidden_layers", 1_024),
            ],
            "parameters, implausibly many",
        ),
    ];
    for (fields, want) in cases {
        let mut config = llama_config();
        for (k, v) in fields {
            config[*k] = (*v).into();
        }
        let e = config_failure(config);
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn an_estimate_past_64_bits_is_refused_not_clamped() {
    let e = one_line_failure(
        &[
            "estimate",
            "-m",
            "llama-3.1-405b",
            "--batch",
            "4294967295",
            "--context",
            "4294967295",
            // Past its trained context, which is refused first otherwise.
            "--allow-longer-context",
        ],
        1,
    );
    assert!(e.contains("KV cache would exceed 2^64 bytes"), "{e}");
}

#[test]
fn safetensors_indexes_that_name_nothing_or_too_much_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("model.safetensors.index.json");
    std::fs::write(&index, r#"{"metadata": {}, "weight_map": {}}"#).unwrap();
    let e = one_line_failure(&["estimate", "--safetensors", index.to_str().unwrap()], 1);
    assert!(
        e.contains("weight_map") && e.contains("names no tensors"),
        "{e}"
    );

    // 100,000 distinct shards: refused at once, not opened one by one.
    let map: serde_json::Map<String, serde_json::Value> = (0..100_000)
        .map(|i| (format!("t{i}"), format!("shard-{i}.safetensors").into()))
        .collect();
    std::fs::write(&index, serde_json::json!({ "weight_map": map }).to_string()).unwrap();
    let e = one_line_failure(&["estimate", "--safetensors", index.to_str().unwrap()], 1);
    assert!(e.contains("more than 10000 shard files"), "{e}");

    // A header with no tensors is not a model of 0 parameters.
    let empty = dir.path().join("empty.safetensors");
    let mut bytes = 2u64.to_le_bytes().to_vec();
    bytes.extend(b"{}");
    std::fs::write(&empty, bytes).unwrap();
    let e = one_line_failure(&["estimate", "--safetensors", empty.to_str().unwrap()], 1);
    assert!(e.contains("holds no tensors"), "{e}");
}

#[test]
fn unknown_model_types_are_refused_unless_generic_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let mut config = llama_config();
    config["model_type"] = "frobnicator".into();
    std::fs::write(&path, config.to_string()).unwrap();
    let e = one_line_failure(&["estimate", "--config", path.to_str().unwrap()], 1);
    assert!(
        e.contains("model_type 'frobnicator' has no shape rules") && e.contains("--allow-generic"),
        "{e}"
    );
    let out = gpumem()
        .args(["estimate", "--allow-generic", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("frobnicator"));
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

// Every file of a model store goes through the bounded, regular-file-only reader: a ref that is
// /dev/zero, a FIFO or far too long, a FIFO config.json and a FIFO or oversized Ollama manifest
// are each named as what they are (one line, exit 1), never read without bound, never waited
// on, and never reported as "not in the local store".
#[test]
fn hostile_model_store_files_are_named_not_read() {
    let home = tempfile::tempdir().unwrap();
    let hub = home.path().join("hub");
    let models = home.path().join("ollama");
    let hf = |model: &str, refs: &dyn Fn(&Path), config: &dyn Fn(&Path)| {
        let repo = hub.join(format!("models--acme--{model}"));
        let snapshot = repo.join("snapshots/0123abcd");
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        refs(&repo.join("refs/main"));
        config(&snapshot.join("config.json"));
    };
    let good_ref = |p: &Path| std::fs::write(p, "0123abcd\n").unwrap();
    let good_config = |p: &Path| {
        std::fs::copy(fixture("tiny-sharded/config.json"), p).unwrap();
    };
    hf(
        "zero",
        &|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
        &good_config,
    );
    hf("fifo", &|p| mkfifo(p), &good_config);
    hf(
        "long",
        &|p| std::fs::write(p, "a".repeat(10_000)).unwrap(),
        &good_config,
    );
    hf(
        "badref",
        &|p| std::fs::write(p, "../../x\n").unwrap(),
        &good_config,
    );
    hf("fifoconfig", &good_ref, &|p| mkfifo(p));
    let manifests = models.join("manifests/registry.ollama.ai/library/tiny");
    std::fs::create_dir_all(&manifests).unwrap();
    mkfifo(&manifests.join("fifo"));
    std::fs::write(manifests.join("huge"), " ".repeat((1 << 20) + 1)).unwrap();
    let cases = [
        (
            "acme/zero",
            "refs/main: not a regular file (a character device)",
        ),
        ("acme/fifo", "refs/main: not a regular file (a FIFO)"),
        (
            "acme/long",
            "refs/main: 10000 bytes is larger than the 4096-byte limit",
        ),
        ("acme/badref", "refs/main: is not a revision"),
        (
            "acme/fifoconfig",
            "config.json: not a regular file (a FIFO)",
        ),
        ("ollama:tiny:fifo", "fifo: not a regular file (a FIFO)"),
        (
            "ollama:tiny:huge",
            "is larger than the 1048576-byte limit for an Ollama manifest",
        ),
        ("ollama:a/b/c", "'ollama:a/b/c' is not an Ollama model name"),
    ];
    for (name, want) in cases {
        let err = common::one_line_error(
            gpumem()
                .env("HF_HOME", home.path())
                .env("OLLAMA_MODELS", &models)
                .env_remove("HOME")
                .args(["estimate", "--model", name])
                .timeout(std::time::Duration::from_secs(60)),
            1,
        );
        assert!(err.contains(want), "{name}: {err}");
        assert!(!err.contains("not in the local store"), "{name}: {err}");
    }
}

// Each shard of a split GGUF is a file of its own saying its own place: shards that are
// symlinks to shard 1 (a 217 KB set of 10,000 once read 20 M tensors) or a copy of another
// shard (once counted twice) are refused, naming the shard.
#[test]
fn split_gguf_shards_must_be_distinct_files_in_their_place() {
    let names: Vec<String> = (1..=3)
        .map(|k| format!("tiny-split-0000{k}-of-00003.gguf"))
        .collect();
    let shard = |k: usize| fixture(&format!("tiny-split/{}", names[k - 1]));
    let links = tempfile::tempdir().unwrap();
    std::fs::copy(shard(1), links.path().join(&names[0])).unwrap();
    for name in &names[1..] {
        std::os::unix::fs::symlink(links.path().join(&names[0]), links.path().join(name)).unwrap();
    }
    let hard = tempfile::tempdir().unwrap();
    std::fs::copy(shard(1), hard.path().join(&names[0])).unwrap();
    std::fs::copy(shard(2), hard.path().join(&names[1])).unwrap();
    std::fs::hard_link(hard.path().join(&names[1]), hard.path().join(&names[2])).unwrap();
    let copied = tempfile::tempdir().unwrap();
    std::fs::copy(shard(1), copied.path().join(&names[0])).unwrap();
    std::fs::copy(shard(2), copied.path().join(&names[1])).unwrap();
    std::fs::copy(shard(2), copied.path().join(&names[2])).unwrap();
    let cases = [
        (
            &links,
            "tiny-split-00002-of-00003.gguf: is the same file as shard 1",
        ),
        (
            &hard,
            "tiny-split-00003-of-00003.gguf: is the same file as shard 2",
        ),
        (
            &copied,
            "tiny-split-00003-of-00003.gguf: says it is shard 2 (split.no), not shard 3",
        ),
    ];
    for (dir, want) in cases {
        let first = dir.path().join(&names[0]);
        for args in [
            vec!["estimate", "--gguf", first.to_str().unwrap()],
            vec![
                "estimate",
                "--gguf",
                &shard(1),
                "--mmproj",
                first.to_str().unwrap(),
            ],
        ] {
            let e = one_line_failure(&args, 1);
            assert!(e.contains(want), "{e}");
        }
    }
}

// quantization_config values transformers would refuse are refused, naming the field; the
// layouts gpumem counts still read.
#[test]
fn garbage_quantization_configs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("tiny-sharded/config.json")).unwrap(),
    )
    .unwrap();
    let cases = [
        (
            json!({"quant_method": "gptq", "bits": -4}),
            "field 'quantization_config.bits' is -4, expected one of 2, 3, 4, 8",
        ),
        (
            json!({"quant_method": 4}),
            "field 'quantization_config.quant_method' is a number, expected a method name",
        ),
        (
            json!("gptq"),
            "field 'quantization_config' is a string, expected an object",
        ),
        (
            json!({"bits": 4}),
            "field 'quantization_config.quant_method' is missing",
        ),
        (
            json!({"quant_method": "awq", "bits": 4, "group_size": -7}),
            "field 'quantization_config.group_size' is -7, expected a positive group size or -1",
        ),
        (
            json!({"quant_method": "bitsandbytes", "load_in_4bit": "yes"}),
            "field 'quantization_config.load_in_4bit' is \"yes\", expected true or false",
        ),
        (
            json!({"quant_method": "compressed-tensors", "format": "pack-quantized",
                   "config_groups": {"g": {"weights": {"num_bits": "four"}}}}),
            "field 'quantization_config.config_groups.*.weights.num_bits' is \"four\", expected an integer",
        ),
    ];
    for (i, (q, want)) in cases.into_iter().enumerate() {
        let mut config = base.clone();
        config["quantization_config"] = q;
        let path = dir.path().join(format!("config-{i}.json"));
        std::fs::write(&path, config.to_string()).unwrap();
        let e = one_line_failure(&["estimate", "--config", path.to_str().unwrap()], 1);
        assert!(e.contains(want), "{e}");
    }
    // Older bitsandbytes configs name no method; transformers reads load_in_4bit.
    let mut config = base.clone();
    config["quantization_config"] = json!({"load_in_4bit": true});
    let path = dir.path().join("bnb.json");
    std::fs::write(&path, config.to_string()).unwrap();
    estimate_json(&["--config", path.to_str().unwrap()]);
}

// A value echoed from a file is bounded: a megabyte model_type makes a one-line error of a
// few hundred bytes.
#[test]
fn echoed_values_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut config: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("tiny-sharded/config.json")).unwrap(),
    )
    .unwrap();
    config["model_type"] = json!("x".repeat(1 << 20));
    let path = dir.path().join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let e = one_line_failure(&["estimate", "--config", path.to_str().unwrap()], 1);
    assert!(e.len() < 1024, "{} bytes", e.len());
    assert!(e.contains("(1048576 characters)"), "{e}");
}

// A config.json beside safetensors that is there but not a file is named as what it is, not
// passed over as missing (which would estimate the weights without a shape).
#[test]
fn a_fifo_config_beside_safetensors_is_named() {
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(fixture("tiny-sharded")).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap() != "config.json" {
            std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
        }
    }
    mkfifo(&dir.path().join("config.json"));
    let e = common::one_line_error(
        gpumem()
            .args(["estimate", "--safetensors"])
            .arg(dir.path())
            .timeout(std::time::Duration::from_secs(60)),
        1,
    );
    assert!(
        e.contains("config.json: not a regular file (a FIFO)"),
        "{e}"
    );
}

#[test]
fn a_context_is_taken_as_people_write_it() {
    let at = |c: &str| {
        crate::common::json_ok(crate::common::gpumem().args([
            "--json",
            "estimate",
            "-m",
            "llama-3.1-8b",
            "--context",
            c,
        ]))
    };
    // k is 1,024 tokens: 32k is the 32,768 a model is trained at, the same estimate.
    assert_eq!(at("32k"), at("32768"));
    assert_eq!(at("128K")["kv_cache_bytes"], at("131072")["kv_cache_bytes"]);
    let e = one_line_failure(&["estimate", "-m", "llama-3.1-8b", "--context", "32kb"], 2);
    assert_eq!(
        e,
        "gpumem: error: invalid value '32kb' for '--context <CONTEXT>': '32kb' is not a number \
         of tokens; expected e.g. 4096, 32k (32,768) or 128k (131,072) (see 'gpumem --help')\n"
    );
}

#[test]
fn a_gguf_type_is_refused_where_no_gguf_is_loaded() {
    let e = one_line_failure(
        &[
            "estimate",
            "-m",
            "llama-3.1-8b",
            "--dtype",
            "q4_k_m",
            "--mode",
            "train",
        ],
        2,
    );
    assert_eq!(
        e,
        "gpumem: error: --dtype q4_k_m is a GGUF type, which llama.cpp runs; a training step \
         loads a checkpoint: give --dtype bf16, f16 or f32, or --recipe qlora for 4-bit layers\n"
    );
    // select takes the same settings.
    let e = one_line_failure(
        &[
            "select",
            "-m",
            "llama-3.1-8b",
            "--dtype",
            "q8_0",
            "--mode",
            "train",
            "--device",
            "sim:24GiB",
        ],
        2,
    );
    assert!(e.contains("--dtype q8_0 is a GGUF type"), "{e}");
    // transformers' generate is walked in bf16: a GGUF type, or int4, would be a bf16 figure
    // under another name.
    let e = one_line_failure(
        &[
            "estimate",
            "-m",
            "llama-3.1-8b",
            "--dtype",
            "q4_k_m",
            "--engine",
            "transformers",
        ],
        2,
    );
    assert_eq!(
        e,
        "gpumem: error: --engine transformers walks generate in bf16, not --dtype q4_k_m (a GGUF \
         type, which llama.cpp runs): give --dtype bf16 or f16, or drop --engine transformers\n"
    );
    let e = one_line_failure(
        &[
            "estimate",
            "-m",
            "llama-3.1-8b",
            "--dtype",
            "int4",
            "--engine",
            "transformers",
        ],
        2,
    );
    assert!(e.contains("not --dtype int4: give"), "{e}");
}

// Work bounded by what models have: more experts a token than any published model routes to
// (4,096 of 4,096 in a 400-byte config) is refused by name, at once, as is a GGUF whose
// required field is present but 0 ("invalid", not "missing").
#[test]
fn what_no_model_has_is_refused_and_zero_is_not_missing() {
    let mut moe = llama_config();
    moe["model_type"] = "mixtral".into();
    moe["num_local_experts"] = 4096.into();
    moe["num_experts_per_tok"] = 4096.into();
    let e = config_failure(moe);
    assert!(
        e.ends_with("field 'num_experts_per_tok' is 4096, implausibly large (at most 128)\n"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    let key = b"llama.attention.head_count\x04\x00\x00\x00";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    bytes[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    let zero = dir.path().join("zero.gguf");
    std::fs::write(&zero, &bytes).unwrap();
    let e = one_line_failure(&["estimate", "--gguf", zero.to_str().unwrap()], 1);
    assert!(
        e.ends_with("zero.gguf: field 'llama.attention.head_count' is 0\n"),
        "{e}"
    );
}

// A GGUF's name reaches the terminal escaped in every report, colour sequences included (a
// conceal code would hide what follows it).
#[test]
fn colour_codes_from_a_file_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    let name = b"tiny-llama";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
    let evil = b"x\x1b[8mhidden";
    let mut out = bytes[..at - 8].to_vec();
    out.extend((evil.len() as u64).to_le_bytes());
    out.extend(evil);
    out.extend(&bytes[at + name.len()..]);
    let path = dir.path().join("evil.gguf");
    std::fs::write(&path, out).unwrap();
    let gguf = path.to_str().unwrap();
    for args in [
        &["estimate", "--gguf", gguf][..],
        &["select", "--gguf", gguf, "--device", "sim:h100"],
        &[
            "select", "--gguf", gguf, "--device", "sim:h100", "--engine", "ollama",
        ],
        &["select", "-q", "--gguf", gguf, "--device", "sim:h100"],
        &[
            "estimate", "--gguf", gguf, "--device", "sim:h100", "--engine", "all",
        ],
    ] {
        let out = gpumem().args(args).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains('\x1b'), "{args:?}: {text:?}");
        // (-q prints the verdict and the launch alone, no name.)
        assert!(
            args[1] == "-q" || text.contains("x\\u{1b}[8mhidden"),
            "{args:?}: {text}"
        );
    }
}

// GPUMEM_INTERNAL_PROBE in a user's environment changes nothing: only gpumem's own probe
// children (started with their argument) read it.
#[test]
fn the_internal_probe_variable_is_not_read_from_a_users_environment() {
    let out = gpumem()
        .env("GPUMEM_INTERNAL_PROBE", "\x1b[31mjunk")
        .args(["--json", "discover", "--backend", "cpu"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["backends"].as_array().is_some_and(|b| !b.is_empty()),
        "{doc}"
    );
    assert!(out.stderr.is_empty());
}
