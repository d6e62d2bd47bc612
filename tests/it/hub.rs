//! `--model ORG/NAME[:QUANT]` read from a loopback stand-in for the Hub (`HF_ENDPOINT`): the
//! weights are the headers' bytes exactly, only headers are fetched, the cache answers a second
//! run and any offline run with no request, and every failure is one line with its exit code.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::hub_standin::{
    kinds, llama_tensors, repo, safetensors_repo, Body, Fault, FaultKind, HubStandin,
};
use crate::common::{described_gguf_bytes, fixture, gpumem, json_ok, one_line_error};

fn tiny_config(tie: bool) -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "tie_word_embeddings": tie,
        "torch_dtype": "bfloat16"
    })
}

/// gpumem with the stand-in as the Hub and empty caches under `home`.
fn hub_cmd(hub: &HubStandin, home: &Path) -> assert_cmd::Command {
    let mut cmd = gpumem();
    cmd.env("HF_ENDPOINT", &hub.endpoint)
        .env("HOME", home)
        .env("HF_HOME", home.join("hf"))
        .env("GPUMEM_CACHE_DIR", home.join("gpumem"))
        .env("HF_HUB_DOWNLOAD_TIMEOUT", "2")
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_HUB_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy");
    cmd
}

fn estimate(hub: &HubStandin, home: &Path, model: &str) -> Value {
    json_ok(hub_cmd(hub, home).args(["estimate", "--model", model, "--json"]))
}

fn head_bytes(files: &[(String, Body)]) -> u64 {
    files
        .iter()
        .map(|(_, b)| match b {
            Body::Small(b) => b.len() as u64,
            Body::Large { head, .. } => head.len() as u64,
        })
        .sum()
}

#[test]
fn a_sharded_checkpoint_is_its_headers_bytes_and_a_second_run_asks_nothing() {
    let config = tiny_config(false);
    let tensors = llama_tensors(&config, "BF16", false);
    let (files, total) = safetensors_repo(&config, &tensors, 3);
    let fetched_at_most = head_bytes(&files);
    let hub = HubStandin::start(vec![repo("org/tiny-llama", files)], Duration::ZERO);
    let home = tempfile::tempdir().unwrap();
    let doc = estimate(&hub, home.path(), "org/tiny-llama");
    assert_eq!(doc["weights_bytes"], total, "{doc}");
    assert_eq!(doc["model"]["name"], "org/tiny-llama");
    assert_eq!(doc["model"]["source"], "safetensors");
    assert_eq!(doc["settings"]["dtype"], "file");
    // Info, config.json, the index, and per shard a redirect and one Range: 9 requests. The
    // bytes are the small files and the headers, plus what a Range asks past a header (256 a
    // tensor and 8 KiB): no tensor data.
    let k = kinds(&hub.log());
    assert_eq!(
        (k["info"], k["resolve"], k["range"]),
        (1, 5, 3),
        "{:#?}",
        hub.log()
    );
    let spare = 3 * (8 << 10) + 256 * tensors.len() as u64;
    assert!(
        hub.bytes() <= fetched_at_most + spare,
        "{} > {fetched_at_most}",
        hub.bytes()
    );
    assert!(hub.bytes() * 100 < total, "{} of {total}", hub.bytes());
    for line in hub.log().iter().filter(|l| l.contains("/cdn/")) {
        assert!(line.contains(" bytes=0-"), "{line}");
    }
    // The same model from gpumem's cache: the same answer, no request, also offline.
    let before = hub.requests();
    assert_eq!(estimate(&hub, home.path(), "org/tiny-llama"), doc);
    let offline = json_ok(hub_cmd(&hub, home.path()).args([
        "estimate",
        "--model",
        "org/tiny-llama",
        "--json",
        "--offline",
    ]));
    assert_eq!(offline, doc);
    // A revision by its commit is answered from the cache too; one the Hub lacks is a usage
    // error naming it.
    let commit = repo("org/tiny-llama", Vec::new()).commit;
    let at = estimate(&hub, home.path(), &format!("org/tiny-llama@{commit}"));
    assert_eq!(at["weights_bytes"], doc["weights_bytes"]);
    assert_eq!(hub.requests(), before);
    let err = one_line_error(
        hub_cmd(&hub, home.path()).args(["estimate", "--model", "org/tiny-llama@v9"]),
        2,
    );
    assert!(
        err.contains("/api/models/org/tiny-llama/revision/v9"),
        "{err}"
    );
    let before = hub.requests();
    // vLLM serves it by the same id.
    let plan = json_ok(hub_cmd(&hub, home.path()).args([
        "select",
        "--model",
        "org/tiny-llama",
        "--engine",
        "vllm",
        "--device",
        "sim:h100",
        "--json",
    ]));
    assert_eq!(plan["launch"][0]["engine"], "vllm", "{plan}");
    let argv = &plan["launch"][0]["commands"][0]["argv"];
    assert_eq!(
        (&argv[0], &argv[1], &argv[2]),
        (&json!("vllm"), &json!("serve"), &json!("org/tiny-llama")),
        "{plan}"
    );
    assert_eq!(hub.requests(), before);
}

#[test]
fn fp8_weights_with_block_scales_are_counted_as_stored() {
    let mut config = tiny_config(true);
    config["quantization_config"] = json!({ "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128] });
    let tensors = llama_tensors(&config, "BF16", true);
    let (files, total) = safetensors_repo(&config, &tensors, 1);
    let hub = HubStandin::start(vec![repo("org/tiny-fp8", files)], Duration::ZERO);
    let home = tempfile::tempdir().unwrap();
    let doc = estimate(&hub, home.path(), "org/tiny-fp8");
    assert_eq!(doc["weights_bytes"], total, "{doc}");
    // Far under the bf16 size of the same parameters: the checkpoint's own precision.
    assert!(total < doc["model"]["parameters"].as_u64().unwrap() * 2);
    let k = kinds(&hub.log());
    assert_eq!(
        (k["info"], k["resolve"], k["range"]),
        (1, 2, 1),
        "{:#?}",
        hub.log()
    );
}

/// A GGUF repository as unsloth publishes them: quantizations side by side, one split in
/// parts, and projectors.
fn gguf_repo() -> (Vec<(String, Body)>, u64) {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("llamacpp-server-fit/llama-3.1-8b-shape-q8_0.json"))
            .unwrap(),
    )
    .unwrap();
    let (head, size) = described_gguf_bytes("q8", &json!({ "gguf": doc["gguf_header"] }));
    let mmproj = std::fs::read(fixture("tiny-mmproj.gguf")).unwrap();
    let split: Vec<(String, Body)> = (1..=3)
        .map(|k| {
            let bytes = std::fs::read(fixture(&format!(
                "tiny-split/tiny-split-{k:05}-of-00003.gguf"
            )))
            .unwrap();
            let size = bytes.len() as u64;
            (
                format!("Q4_K_M/M-Q4_K_M-{k:05}-of-00003.gguf"),
                Body::Large { head: bytes, size },
            )
        })
        .collect();
    let mut files = vec![
        ("README.md".to_string(), Body::Small(b"# a model".to_vec())),
        ("M-Q8_0.gguf".into(), Body::Large { head, size }),
        (
            "mmproj-F16.gguf".into(),
            Body::Large {
                size: mmproj.len() as u64,
                head: mmproj,
            },
        ),
    ];
    files.extend(split);
    (files, size)
}

#[test]
fn a_gguf_tag_reads_the_file_llama_cpp_picks_and_its_projector() {
    let (files, _) = gguf_repo();
    let hub = HubStandin::start(vec![repo("org/M-GGUF", files)], Duration::ZERO);
    let home = tempfile::tempdir().unwrap();
    // The same header read from a local file gives the same weights.
    let local = home.path().join("m.gguf");
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("llamacpp-server-fit/llama-3.1-8b-shape-q8_0.json"))
            .unwrap(),
    )
    .unwrap();
    crate::common::write_described_gguf("q8", &json!({ "gguf": doc["gguf_header"] }), &local);
    let want = json_ok(gpumem().args(["estimate", "--gguf"]).arg(&local).args([
        "--mmproj",
        &fixture("tiny-mmproj.gguf"),
        "--json",
    ]));
    let got = estimate(&hub, home.path(), "org/M-GGUF:q8_0");
    assert_eq!(got["weights_bytes"], want["weights_bytes"]);
    assert_eq!(got["projector_bytes"], want["projector_bytes"]);
    assert_eq!(got["kv_cache_bytes"], want["kv_cache_bytes"]);
    assert_eq!(got["model"]["source"], "gguf");
    assert!(
        !hub.log().iter().any(|l| l.contains("Q4_K_M")),
        "{:#?}",
        hub.log()
    );
    // select names the repository as llama-server's -hf takes it.
    let plan = json_ok(hub_cmd(&hub, home.path()).args([
        "select",
        "--model",
        "org/M-GGUF:q8_0",
        "--device",
        "sim:24GiB",
        "--json",
    ]));
    let argv: Vec<&str> = plan["launch"][0]["commands"][0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        &argv[..3],
        ["llama-server", "-hf", "org/M-GGUF:q8_0"],
        "{plan}"
    );
}

/// A draft for llama.cpp named by its Hub GGUF is read like a model and launched with `-hfd`,
/// with the same bytes as the same header in a local file.
#[test]
fn a_draft_named_by_its_hub_gguf_is_launched_with_hfd() {
    let (files, _) = gguf_repo();
    let hub = HubStandin::start(vec![repo("org/M-GGUF", files)], Duration::ZERO);
    let home = tempfile::tempdir().unwrap();
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("llamacpp-server-fit/llama-3.1-8b-shape-q8_0.json"))
            .unwrap(),
    )
    .unwrap();
    let local = home.path().join("m.gguf");
    crate::common::write_described_gguf("q8", &json!({ "gguf": doc["gguf_header"] }), &local);
    let plan = |draft: &str| {
        json_ok(
            hub_cmd(&hub, home.path())
                .args(["select", "--engine", "llama.cpp", "--gguf"])
                .arg(&local)
                .args(["--model-draft", draft, "--device", "sim:48GiB", "--json"]),
        )
    };
    let remote = plan("org/M-GGUF:q8_0");
    let file = plan(local.to_str().unwrap());
    let draft = |p: &Value| p["plan"]["llamacpp"]["draft"].clone();
    assert_eq!(
        draft(&remote)["devices"],
        draft(&file)["devices"],
        "{remote}"
    );
    assert_eq!(draft(&remote)["load"], json!({ "hub": "org/M-GGUF:q8_0" }));
    let argv = crate::common::launch_argv(&remote);
    let at = argv.iter().position(|a| a == "-hfd").unwrap();
    assert_eq!(argv[at + 1], "org/M-GGUF:q8_0");
}

#[test]
fn a_split_gguf_is_every_part_and_a_missing_tag_names_the_tags_there_are() {
    let (files, _) = gguf_repo();
    let hub = HubStandin::start(vec![repo("org/M-GGUF", files)], Duration::ZERO);
    let home = tempfile::tempdir().unwrap();
    let want = json_ok(gpumem().args([
        "estimate",
        "--gguf",
        &fixture("tiny-split/tiny-split-00001-of-00003.gguf"),
        "--json",
    ]));
    let got = estimate(&hub, home.path(), "org/M-GGUF:Q4_K_M");
    assert_eq!(got["weights_bytes"], want["weights_bytes"]);
    let err = one_line_error(
        hub_cmd(&hub, home.path()).args(["estimate", "--model", "org/M-GGUF:Q5_K_M"]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: org/M-GGUF has no GGUF file for the tag Q5_K_M; it has Q8_0, Q4_K_M\n"
    );
}

#[test]
fn gated_missing_and_offline_repositories_end_in_one_line() {
    let config = tiny_config(true);
    let (files, _) = safetensors_repo(&config, &llama_tensors(&config, "BF16", false), 1);
    let mut gated = repo("org/gated", files);
    gated.gated_token = Some("hf_secret".into());
    let hub = HubStandin::start(vec![gated], Duration::ZERO);
    let home = tempfile::tempdir().unwrap();
    let err = one_line_error(
        hub_cmd(&hub, home.path()).args(["estimate", "--model", "org/gated"]),
        5,
    );
    assert!(
        err.starts_with("gpumem: error: org/gated is gated: accept its licence at "),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}/org/gated and set HF_TOKEN", hub.endpoint)),
        "{err}"
    );
    let err = one_line_error(
        hub_cmd(&hub, home.path()).args(["estimate", "--model", "org/nope"]),
        2,
    );
    assert_eq!(
        err,
        format!(
            "gpumem: error: org/nope is not on {0} (HTTP 401 for {0}/api/models/org/nope/revision/main); \
             check the id, or set HF_TOKEN if the repository is private\n",
            hub.endpoint
        )
    );
    // With the token (from the token file huggingface_hub writes) it is read.
    std::fs::create_dir_all(home.path().join("hf")).unwrap();
    std::fs::write(home.path().join("hf/token"), "hf_secret\n").unwrap();
    estimate(&hub, home.path(), "org/gated");
    let before = hub.requests();
    let err = one_line_error(
        hub_cmd(&hub, home.path()).env("HF_HUB_OFFLINE", "1").args([
            "estimate",
            "--model",
            "org/other",
        ]),
        5,
    );
    assert!(
        err.contains("org/other is not in the Hugging Face cache ("),
        "{err}"
    );
    assert!(err.contains(") or gpumem's cache ("), "{err}");
    assert!(err.contains("HF_HUB_OFFLINE is set"), "{err}");
    assert_eq!(hub.requests(), before);
    let err = one_line_error(
        hub_cmd(&hub, home.path())
            .env("HF_ENDPOINT", "hub.example")
            .args(["estimate", "--model", "org/other"]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: HF_ENDPOINT is 'hub.example', not an http:// or https:// address\n"
    );
}

#[test]
fn busy_and_broken_replies_are_retried_and_a_stall_gives_up_in_one_line() {
    let config = tiny_config(true);
    let tensors = llama_tensors(&config, "BF16", false);
    let (files, total) = safetensors_repo(&config, &tensors, 1);
    let hub = HubStandin::start(
        vec![repo("org/flaky", files.clone()), repo("org/stalled", files)],
        Duration::ZERO,
    );
    hub.fault(Fault {
        pattern: "/api/models/org/flaky".into(),
        times: 1,
        kind: FaultKind::TooMany(1),
    });
    hub.fault(Fault {
        pattern: "/org/flaky/resolve/".into(),
        times: 1,
        kind: FaultKind::Unavailable,
    });
    hub.fault(Fault {
        pattern: "/cdn/org/flaky".into(),
        times: 1,
        kind: FaultKind::Truncate,
    });
    let home = tempfile::tempdir().unwrap();
    let doc = estimate(&hub, home.path(), "org/flaky");
    assert_eq!(doc["weights_bytes"], total);
    // The 429 and the 503 cost one request more each; the reply cut short is asked again
    // through its redirect: 4 + 4.
    assert_eq!(hub.requests(), 8, "{:#?}", hub.log());
    hub.fault(Fault {
        pattern: "/api/models/org/stalled".into(),
        times: 100,
        kind: FaultKind::Stall(Duration::from_secs(3)),
    });
    let err = one_line_error(
        hub_cmd(&hub, home.path())
            .env("HF_HUB_DOWNLOAD_TIMEOUT", "0.5")
            .args(["estimate", "--model", "org/stalled"]),
        5,
    );
    assert!(
        err.starts_with(&format!(
            "gpumem: error: {}/api/models/org/stalled/revision/main: ",
            hub.endpoint
        )),
        "{err}"
    );
    assert!(err.contains("(after 4 attempts)"), "{err}");
}

/// Catalog names are aliases of Hub ids: an instruct name plans the base shape under its own
/// repository, and a catalog model's id answers from the bundled config when the Hub cannot be
/// asked, saying so.
#[test]
fn catalog_names_and_ids_answer_offline_from_the_bundled_config() {
    let home = tempfile::tempdir().unwrap();
    let base = json_ok(gpumem().args(["estimate", "--model", "llama-3.1-8b", "--json"]));
    let instruct =
        json_ok(gpumem().args(["estimate", "--model", "llama-3.1-8b-instruct", "--json"]));
    assert_eq!(instruct["model"]["name"], "llama-3.1-8b-instruct");
    assert_eq!(instruct["weights_bytes"], base["weights_bytes"]);
    let plan = json_ok(gpumem().args([
        "select",
        "--model",
        "llama-3.1-8b-instruct",
        "--engine",
        "vllm",
        "--device",
        "sim:h100",
        "--json",
    ]));
    assert_eq!(
        plan["launch"][0]["commands"][0]["argv"][2],
        "meta-llama/Llama-3.1-8B-Instruct"
    );
    // gpumem() runs with HF_HUB_OFFLINE=1.
    let by_id = json_ok(
        gpumem()
            .env("HOME", home.path())
            .env("GPUMEM_CACHE_DIR", home.path().join("gpumem"))
            .args([
                "estimate",
                "--model",
                "meta-llama/Llama-3.1-8B-Instruct",
                "--json",
            ]),
    );
    assert_eq!(by_id["weights_bytes"], base["weights_bytes"]);
    assert_eq!(by_id["model"]["source"], "catalog");
    let warning = by_id["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with(
            "meta-llama/Llama-3.1-8B-Instruct: answered from gpumem's bundled copy of its \
             config.json (weights at --dtype, not its headers), since"
        ),
        "{warning}"
    );
    let list = json_ok(gpumem().args(["estimate", "--list-models", "--json"]));
    let llama = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "llama-3.1-8b")
        .unwrap();
    assert_eq!(llama["hf_repo"], "meta-llama/Llama-3.1-8B");
    assert_eq!(
        llama["instruct"],
        json!({ "name": "llama-3.1-8b-instruct", "hf_repo": "meta-llama/Llama-3.1-8B-Instruct" })
    );
}

/// `ollama:NAME[:TAG]` not in the local store is read from the registry
/// (`GPUMEM_OLLAMA_REGISTRY`): the manifest, then the model's and projector's GGUF headers by
/// Range; a second run asks nothing, and there is no llama.cpp command until it is pulled.
#[test]
fn an_ollama_name_not_pulled_is_read_from_the_registry() {
    let model = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    let mmproj = std::fs::read(fixture("tiny-mmproj.gguf")).unwrap();
    let (dm, dp) = (
        format!("sha256:{}", "a".repeat(64)),
        format!("sha256:{}", "b".repeat(64)),
    );
    let mut tiny = repo(
        "library/tiny",
        vec![
            (
                dm.clone(),
                Body::Large {
                    size: model.len() as u64,
                    head: model,
                },
            ),
            (
                dp.clone(),
                Body::Large {
                    size: mmproj.len() as u64,
                    head: mmproj,
                },
            ),
        ],
    );
    tiny.ollama = Some((
        "q4".into(),
        vec![
            ("application/vnd.ollama.image.model".into(), dm),
            ("application/vnd.ollama.image.projector".into(), dp),
        ],
    ));
    let hub = HubStandin::start(vec![tiny], Duration::ZERO);
    let home = tempfile::tempdir().unwrap();
    let want = json_ok(gpumem().args([
        "estimate",
        "--gguf",
        &fixture("tiny-llama.gguf"),
        "--mmproj",
        &fixture("tiny-mmproj.gguf"),
        "--json",
    ]));
    let run = || {
        let mut cmd = hub_cmd(&hub, home.path());
        cmd.env("GPUMEM_OLLAMA_REGISTRY", &hub.endpoint)
            .env("OLLAMA_MODELS", home.path().join("ollama"));
        cmd
    };
    let got = json_ok(run().args(["estimate", "--model", "ollama:tiny:q4", "--json"]));
    assert_eq!(got["weights_bytes"], want["weights_bytes"]);
    assert_eq!(got["projector_bytes"], want["projector_bytes"]);
    assert_eq!(got["model"]["name"], "ollama:tiny:q4");
    let k = kinds(&hub.log());
    assert_eq!(hub.requests(), 3, "{:#?} {k:?}", hub.log());
    // A GGUF is loaded in its own types: there is no precision to suggest for it.
    let out = run()
        .args(["select", "--model", "ollama:tiny:q4", "--suggest-dtype"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // The projector's warning comes first; the error is the last line.
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.lines().last().unwrap(),
        "gpumem: error: --suggest-dtype chooses a precision to quantize a checkpoint to; \
         ollama:tiny:q4 is a GGUF, loaded in its own types: pick another of its quantizations \
         instead"
    );
    let plan = json_ok(run().args([
        "select",
        "--model",
        "ollama:tiny:q4",
        "--device",
        "sim:24GiB",
        "--json",
    ]));
    assert_eq!(plan["launch"][0]["unavailable"], "not_pulled", "{plan}");
    assert_eq!(hub.requests(), 3);
    let err = one_line_error(run().args(["estimate", "--model", "ollama:nope"]), 2);
    assert!(err.contains("ollama:nope:latest is not on"), "{err}");
}
