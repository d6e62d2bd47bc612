//! Truncated, oversized and corrupted model files: every parser ends in a typed error, never a
//! panic or a huge allocation.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use gpumem::model::{read_config, read_gguf, read_safetensors, DEFAULT_WEIGHT_PRECISION};
use gpumem::plan::engines::estimate::estimate;
use gpumem::plan::engines::Settings;
use proptest::prelude::*;

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(path),
    )
    .unwrap()
}

fn with_file<T>(name: &str, bytes: &[u8], f: impl FnOnce(&Path) -> T) -> T {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    f(&path)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gguf_truncations_fail_cleanly(cut in 0usize..70_000) {
        let full = fixture("tiny-llama.gguf");
        let cut = cut.min(full.len() - 1);
        let result = with_file("t.gguf", &full[..cut], read_gguf);
        prop_assert!(result.is_err());
    }

    #[test]
    fn gguf_corruptions_never_panic(edits in prop::collection::vec((0usize..70_000, any::<u8>()), 1..8)) {
        let mut bytes = fixture("tiny-llama.gguf");
        for (at, value) in edits {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        // Either parses (the edit hit data or a harmless field) or fails with a message.
        if let Err(e) = with_file("c.gguf", &bytes, read_gguf) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn safetensors_corruptions_never_panic(edits in prop::collection::vec((0usize..600, any::<u8>()), 1..6), cut in any::<bool>()) {
        let mut bytes = fixture("tiny-sharded/model-00002-of-00002.safetensors");
        for (at, value) in edits {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        if cut {
            bytes.truncate(bytes.len() / 3);
            prop_assert!(with_file("c.safetensors", &bytes, read_safetensors).is_err());
        } else if let Err(e) = with_file("c.safetensors", &bytes, read_safetensors) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn config_garbage_never_panics(text in "\\PC{0,400}") {
        let _ = with_file("config.json", text.as_bytes(), read_config);
    }

    #[test]
    fn config_numbers_never_panic(hidden in any::<u64>(), layers in any::<u64>(), heads in 0u64..1024, kv in 0u64..1024, vocab in any::<u64>()) {
        let text = format!(r#"{{"model_type":"llama","hidden_size":{hidden},"num_hidden_layers":{layers},"num_attention_heads":{heads},"num_key_value_heads":{kv},"vocab_size":{vocab}}}"#);
        if let Ok((arch, _)) = with_file("config.json", text.as_bytes(), read_config) {
            // Counting must not overflow-panic on absurd but well-formed configs.
            let p = arch.params();
            prop_assert!(p.active <= p.total);
        }
    }

    // Whatever numbers a config holds, an estimate is refused or has every part present: no
    // wraparound to a small KV cache, no head_dim of 0.
    #[test]
    fn shape_numbers_never_give_a_vanishing_estimate(
        hidden in any::<u64>(), heads in any::<u64>(), kv_lora in any::<u64>(),
        rope in any::<u64>(), nope in any::<u64>(), mla in any::<bool>(),
        batch in 1u64..=u64::from(u32::MAX), context in 1u64..=u64::from(u32::MAX),
    ) {
        let mut config = serde_json::json!({
            "model_type": if mla { "deepseek_v3" } else { "llama" },
            "hidden_size": hidden, "intermediate_size": 1024, "num_hidden_layers": 4,
            "num_attention_heads": heads, "vocab_size": 1000,
            "kv_lora_rank": kv_lora, "qk_rope_head_dim": rope, "qk_nope_head_dim": nope,
            "v_head_dim": 64,
        });
        if !mla {
            config["num_key_value_heads"] = heads.into();
        }
        let read = with_file("config.json", config.to_string().as_bytes(), read_config);
        if let Ok((arch, _)) = read {
            let settings = Settings {
                dtype: Some(DEFAULT_WEIGHT_PRECISION),
                batch,
                flash_attention: true,
                ..Settings::inference(context, DEFAULT_WEIGHT_PRECISION)
            };
            prop_assert!(arch.head_dim > 0 && arch.kv_elements_per_token_layer() > 0);
            if let Ok(b) = estimate(&arch, None, &settings) {
                prop_assert!(b.weights_bytes > 0 && b.kv_cache_bytes > 0 && b.activation_bytes > 0);
                prop_assert!(b.total_bytes >= b.weights_bytes + b.kv_cache_bytes);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // Recurrent and hybrid configs and quantization configs with any numbers: refused naming a
    // field, or estimated with every part present (a state or a cache, never nothing).
    #[test]
    fn hybrid_and_quantized_configs_never_panic(
        family in 0usize..6, hidden in any::<u64>(), a in any::<u64>(), b in any::<u64>(),
        c in 0u64..100_000, quant in 0usize..6, bits in any::<i64>(), group in any::<i64>(),
    ) {
        let mut config = match family {
            0 => serde_json::json!({"model_type": "qwen3_next", "hidden_size": hidden,
                "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2,
                "head_dim": 256, "vocab_size": 1000, "linear_num_key_heads": a,
                "linear_num_value_heads": b, "linear_key_head_dim": c, "linear_value_head_dim": 128,
                "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64}),
            1 => serde_json::json!({"model_type": "mamba2", "hidden_size": hidden,
                "num_hidden_layers": 4, "vocab_size": 1000, "state_size": a, "n_groups": b,
                "head_dim": c}),
            2 => serde_json::json!({"model_type": "jamba", "hidden_size": hidden,
                "num_hidden_layers": 8, "num_attention_heads": 8, "vocab_size": 1000,
                "attn_layer_period": a % 10, "attn_layer_offset": b % 10, "mamba_d_state": c,
                "mamba_dt_rank": a, "num_experts": 4, "num_experts_per_tok": 2,
                "expert_layer_period": b, "expert_layer_offset": c}),
            3 => serde_json::json!({"model_type": "nemotron_h", "hidden_size": hidden,
                "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
                "vocab_size": 1000, "intermediate_size": c,
                // Two bits a block, of a length that may not match the layers.
                "hybrid_override_pattern": (0..(3 + b % 3))
                    .map(|i| ['M', '*', '-', 'E'][(a >> (2 * i) & 3) as usize])
                    .collect::<String>(),
                "mamba_num_heads": a % 300, "mamba_head_dim": b, "n_groups": c % 20,
                "ssm_state_size": a >> 50}),
            4 => serde_json::json!({"model_type": "falcon_h1", "hidden_size": hidden,
                "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
                "vocab_size": 1000, "intermediate_size": c, "mamba_d_ssm": a,
                "mamba_n_heads": b, "mamba_n_groups": c % 20, "mamba_d_state": a >> 40,
                "mamba_rms_norm": c % 2 == 0}),
            _ => serde_json::json!({"model_type": "granitemoehybrid", "hidden_size": hidden,
                "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 1000,
                "mamba_n_heads": a, "mamba_d_state": b, "mamba_n_groups": c,
                "shared_intermediate_size": 512, "num_local_experts": 0,
                "layer_types": ["mamba", "attention", "mamba", "mamba"]}),
        };
        let methods = ["gptq", "awq", "fp8", "compressed-tensors", "bitsandbytes", "none"];
        config["quantization_config"] = serde_json::json!({"quant_method": methods[quant],
            "bits": bits, "group_size": group, "weight_block_size": [group, bits],
            "format": "pack-quantized", "load_in_4bit": bits % 2 == 0,
            "config_groups": {"g": {"weights": {"num_bits": bits, "group_size": group,
                "strategy": "group", "symmetric": group % 2 == 0}}}});
        let path_text = config.to_string();
        let read = with_file("config.json", path_text.as_bytes(), |p| {
            gpumem::model::load(&gpumem::model::SourceSpec::Config(p.to_path_buf()))
        });
        if let Ok(source) = read {
            let settings = Settings::inference(4096, DEFAULT_WEIGHT_PRECISION);
            if let Ok(b) = estimate(&source.arch, source.file_weights, &settings) {
                prop_assert!(b.weights_bytes > 0 && b.kv_cache_bytes > 0 && b.activation_bytes > 0);
            }
        }
    }
}

#[test]
fn hostile_gguf_counts_do_not_allocate() {
    // A header claiming 2^40 metadata entries in a 40-byte file.
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend((1u64 << 40).to_le_bytes());
    bytes.extend([0u8; 16]);
    let err = with_file("h.gguf", &bytes, read_gguf).unwrap_err();
    assert!(
        err.to_string().contains("implausible metadata count"),
        "{err}"
    );
    // A sane header cut short (the first 40 bytes of a 28-tensor file): truncated, not corrupt.
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(28u64.to_le_bytes());
    bytes.extend(20u64.to_le_bytes());
    bytes.extend([0u8; 16]);
    let err = with_file("t.gguf", &bytes, read_gguf)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("truncated: 28 tensors and 20 metadata entries need at least 932 bytes, the file has 40"),
        "{err}"
    );
    // A string claiming 2^60 bytes.
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    bytes.extend((1u64 << 60).to_le_bytes());
    bytes.extend([0u8; 32]);
    let err = with_file("s.gguf", &bytes, read_gguf).unwrap_err();
    assert!(err.to_string().contains("runs past the end"), "{err}");
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e30f64..1e30).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A count as Kubernetes or a hostile file may write it.
fn count_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..20).prop_map(|n| n.to_string()),
        (0u64..5000).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        "[-0-9a-zA-Z.]{0,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    // kubectl node lists with any counts, sizes and quantities: a typed refusal or at most
    // the inventory cap of devices, never a panic.
    #[test]
    fn kubectl_documents_never_panic(
        nodes in prop::collection::vec(
            (count_text(), count_text(), "[0-9a-zA-Z]{0,8}", any::<bool>(),
             prop::collection::vec(("[a-z0-9.]{1,6}", count_text(), count_text()), 0..3)),
            0..40),
    ) {
        let items: Vec<serde_json::Value> = nodes
            .iter()
            .enumerate()
            .map(|(i, (gpus, count, memory, cordoned, migs))| {
                let mut labels = serde_json::json!({"nvidia.com/gpu.count": count,
                    "nvidia.com/gpu.memory": "81920"});
                let mut allocatable = serde_json::json!({"nvidia.com/gpu": gpus, "memory": memory});
                for (profile, slices, mib) in migs {
                    allocatable[format!("nvidia.com/mig-{profile}")] = serde_json::json!(slices);
                    labels[format!("nvidia.com/mig-{profile}.memory")] = serde_json::json!(mib);
                }
                serde_json::json!({"metadata": {"name": format!("n{i}"), "labels": labels},
                    "spec": {"unschedulable": cordoned}, "status": {"allocatable": allocatable}})
            })
            .collect();
        let text = serde_json::json!({"items": items}).to_string();
        match with_file("nodes.json", text.as_bytes(), gpumem::plan::read_inventory) {
            Ok(devices) => prop_assert!(devices.len() <= gpumem::plan::MAX_INVENTORY_DEVICES),
            Err(e) => prop_assert!(e.to_string().contains("nodes.json")),
        }
    }

    // nvidia-smi CSV text of any shape: a typed refusal or one host's GPUs, at most the row cap.
    #[test]
    fn nvidia_smi_csvs_never_panic(
        header in any::<bool>(),
        rows in prop::collection::vec(
            prop::collection::vec(
                prop_oneof!["[0-9]{0,22}", "[0-9]{1,6} MiB", Just("[N/A]".to_string()),
                            Just("Enabled".to_string()), "\\PC{0,10}"],
                0..7)
                .prop_map(|fields| fields.join(", ")),
            0..30),
    ) {
        let mut text = String::new();
        if header {
            text.push_str("index, name, memory.total [MiB], memory.free [MiB], mig.mode.current\n");
        }
        for row in rows {
            text.push_str(&row);
            text.push('\n');
        }
        match with_file("gpus.csv", text.as_bytes(), gpumem::plan::read_inventory) {
            Ok(devices) => prop_assert!(devices.len() <= gpumem::plan::MAX_NODE_DEVICES),
            Err(e) => prop_assert!(e.to_string().contains("gpus.csv")),
        }
    }

    // A Hugging Face cache entry with any refs/main bytes and snapshot names, and an Ollama
    // manifest of any JSON: found, refused or missed, never a panic.
    #[test]
    fn model_store_entries_never_panic(
        refs in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
        snapshot in "[0-9a-f.]{1,12}",
        config in prop::option::of(json_value()),
        manifest in json_value(),
        digest in prop::option::of("[0-9a-f]{64}"),
        name in "[a-z0-9._:/-]{0,16}",
    ) {
        use gpumem::model::stores::{locate_in, StoreRoots};
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("hub/models--acme--m");
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        if snapshot != "." && snapshot != ".." {
            let snap = repo.join("snapshots").join(&snapshot);
            std::fs::create_dir_all(&snap).unwrap();
            if let Some(config) = &config {
                std::fs::write(snap.join("config.json"), config.to_string()).unwrap();
            }
        }
        if let Some(refs) = &refs {
            std::fs::write(repo.join("refs/main"), refs).unwrap();
        }
        let ollama = dir.path().join("ollama");
        let manifests = ollama.join("manifests/registry.ollama.ai/library/m");
        std::fs::create_dir_all(&manifests).unwrap();
        let mut manifest = manifest;
        if let Some(d) = &digest {
            manifest = serde_json::json!({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                "digest": format!("sha256:{d}")}], "other": manifest});
            std::fs::create_dir_all(ollama.join("blobs")).unwrap();
            std::fs::write(ollama.join(format!("blobs/sha256-{d}")), fixture("tiny-llama.gguf")).unwrap();
        }
        std::fs::write(manifests.join("latest"), manifest.to_string()).unwrap();
        let roots = StoreRoots { hf_hub: Some(dir.path().join("hub")), ollama: Some(ollama) };
        for name in ["acme/m", "ollama:m", "ollama:m:latest", name.as_str()] {
            if let Ok(Some((spec, _))) = locate_in(name, &roots) {
                let _ = gpumem::model::load(&spec);
            }
        }
    }

    // Any quantization_config value, and any value under each key gpumem reads: counted or
    // refused naming a field of quantization_config, never a panic.
    #[test]
    fn quantization_configs_never_panic(
        whole in json_value(),
        fields in prop::collection::vec(
            (prop::sample::select(vec!["quant_method", "bits", "group_size", "load_in_4bit",
                "load_in_8bit", "bnb_4bit_use_double_quant", "weight_block_size", "format",
                "config_groups", "modules_to_not_convert", "ignore"]),
             prop_oneof![json_value(),
                prop::sample::select(vec!["gptq", "awq", "fp8", "bitsandbytes", "mxfp4",
                    "compressed-tensors", "pack-quantized"]).prop_map(serde_json::Value::from)]),
            0..6),
        replace in any::<bool>(),
    ) {
        let mut config: serde_json::Value =
            serde_json::from_slice(&fixture("tiny-sharded/config.json")).unwrap();
        config["quantization_config"] = if replace {
            whole
        } else {
            let mut q = serde_json::json!({});
            for (k, v) in fields {
                q[k] = v;
            }
            q
        };
        let read = with_file("config.json", config.to_string().as_bytes(), |p| {
            gpumem::model::load(&gpumem::model::SourceSpec::Config(p.to_path_buf()))
        });
        if let Err(e) = read {
            prop_assert!(e.to_string().contains("quantization_config"), "{e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    // Split-GGUF sets whose shards are right, missing, copies, symlinks or hard links of
    // another, or corrupted: the whole model exactly, or a refusal.
    #[test]
    fn split_gguf_sets_are_whole_or_refused(
        kinds in prop::collection::vec((0u8..6, 1usize..=3, 0usize..2000, any::<u8>()), 3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let name = |k: usize| format!("tiny-split-0000{k}-of-00003.gguf");
        let mut right = true;
        // Real shards first, so that links have a target.
        for k in 1..=3 {
            std::fs::write(dir.path().join(name(k)), fixture(&format!("tiny-split/{}", name(k)))).unwrap();
        }
        for (i, &(kind, other, at, byte)) in kinds.iter().enumerate() {
            let k = i + 1;
            let path = dir.path().join(name(k));
            if k == 1 && kind >= 2 {
                continue; // shard 1 is the one named; keep it real
            }
            match kind {
                0 => {}
                1 => { std::fs::remove_file(&path).unwrap(); right = false; }
                2 => {
                    std::fs::write(&path, fixture(&format!("tiny-split/{}", name(other)))).unwrap();
                    right &= other == k;
                }
                3 | 4 if other != k => {
                    std::fs::remove_file(&path).unwrap();
                    if kind == 3 {
                        std::os::unix::fs::symlink(dir.path().join(name(other)), &path).unwrap();
                    } else if std::fs::hard_link(dir.path().join(name(other)), &path).is_err() {
                        // The other shard was removed above: this one is missing too.
                    }
                    right = false;
                }
                _ => {
                    let mut bytes = std::fs::read(&path).unwrap();
                    let at = at % bytes.len();
                    right &= bytes[at] == byte;
                    bytes[at] = byte;
                    std::fs::write(&path, bytes).unwrap();
                }
            }
        }
        let read = gpumem::model::load(&gpumem::model::SourceSpec::Gguf(dir.path().join(name(1))));
        match read {
            Ok(source) if right => prop_assert_eq!(source.arch.params().total, 78_144),
            // A corruption that still parses (tensor data, a metadata value gpumem does not read).
            Ok(_) => {}
            Err(e) => prop_assert!(!right, "a whole, uncorrupted set was refused: {e}"),
        }
    }
}

/// A baseline as `bench-alloc --save-baseline` writes it, for the parser tests below.
fn baseline_json(samples: &[f64]) -> Vec<u8> {
    use gpumem::workload::baseline::{Baseline, Metric, Replayed, Summary};
    let metrics = [Metric::OpsPerSec, Metric::HitRate]
        .into_iter()
        .map(|m| (m, Summary::of(samples).unwrap()))
        .collect();
    let b = Baseline::new(
        "host:0 (host)".into(),
        Replayed {
            workload: "random".into(),
            ops: 2000,
            seed: Some(42),
            preset: "arena".into(),
            max_live_bytes: Some(1 << 30),
            fingerprint: "00112233445566778899".into(),
        },
        metrics,
    );
    serde_json::to_vec(&b).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Saved baselines round-trip whatever the samples, and statistics that do not follow from
    /// the samples are refused.
    #[test]
    fn baselines_round_trip(samples in prop::collection::vec(-1e12f64..1e12, 1..40)) {
        use gpumem::workload::baseline::Baseline;
        let bytes = baseline_json(&samples);
        let b = Baseline::from_json(&bytes).unwrap();
        prop_assert_eq!(b.metrics.values().next().unwrap().samples.clone(), samples.clone());
        let mut doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let median = doc["metrics"]["hit-rate"]["median"].as_f64().unwrap();
        doc["metrics"]["hit-rate"]["median"] = serde_json::Value::from(median * 2.0 + 1.0);
        prop_assert!(Baseline::from_json(&serde_json::to_vec(&doc).unwrap()).is_err());
    }

    /// Corrupted or cut baselines end in a typed error, never a panic.
    #[test]
    fn baseline_corruptions_never_panic(
        edits in prop::collection::vec((0usize..2000, any::<u8>()), 1..8),
        cut in 0usize..2000,
    ) {
        use gpumem::workload::baseline::Baseline;
        let mut bytes = baseline_json(&[1.0, 2.0, 3.0]);
        for (at, value) in edits {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        bytes.truncate(cut.max(1).min(bytes.len()));
        if let Err(e) = Baseline::from_json(&bytes) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    /// `--max-regression` values: any text parses to a gate or a typed error; a parsed gate
    /// names a known metric and a percentage in range.
    #[test]
    fn regression_gates_parse_or_say_why(text in ".{0,40}") {
        use gpumem::workload::baseline::RegressionGate;
        match text.parse::<RegressionGate>() {
            Ok(g) => prop_assert!((0.0..=1000.0).contains(&g.max_pct)),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    // An encoder's header with its shape keys set to anything: read, then estimated, either to
    // a figure or to a typed error, never a panic.
    #[test]
    fn encoder_headers_with_any_shape_never_panic(
        pooling in -3i64..9,
        heads in 0u64..40,
        width in 0u64..2048,
        layers in 0u64..40,
        ffn in 0u64..8192,
    ) {
        let name = "bge-small-en-v1.5-shape";
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/llamacpp/{name}.json")),
        )
        .unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let meta = &mut doc["gguf"]["metadata"];
        meta["bert.pooling_type"] = serde_json::json!(pooling.max(0));
        meta["bert.attention.head_count"] = serde_json::json!(heads);
        meta["bert.embedding_length"] = serde_json::json!(width);
        meta["bert.block_count"] = serde_json::json!(layers);
        meta["bert.feed_forward_length"] = serde_json::json!(ffn);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.gguf");
        crate::common::write_described_gguf(name, &doc, &path);
        let file = read_gguf(&path).unwrap();
        match gpumem::model::arch_from_gguf(&path, &file) {
            Ok(arch) => {
                let s = Settings::inference(512, gpumem::model::kv_precision("f16").unwrap());
                if let Err(e) = estimate(&arch, None, &s) {
                    prop_assert!(!e.to_string().is_empty());
                }
                // Half the layers on a device: the scheduler's split of the encoder's graph.
                let _ = gpumem::plan::engines::llamacpp::offloaded_compute_buffers(&arch, &s, None, layers / 2);
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // A device's UUID and PCI address as any API may spell them: parsing never panics, a
    // device is itself whenever either parses, and the spellings of one address agree.
    #[test]
    fn device_identities_parse_or_are_ignored(
        uuid in "(GPU-|MIG-)?[0-9a-fA-F-]{0,40}|\\PC{0,40}",
        pci in "[0-9a-fA-F:.]{0,20}|\\PC{0,24}",
        (domain, bus, dev, func) in (any::<u16>(), any::<u8>(), 0u8..32, 0u8..8),
    ) {
        use gpumem::device::PhysicalId;
        let id = PhysicalId::new(Some(&uuid), Some(&pci));
        let _ = id.same_device(&PhysicalId::new(None, None));
        let short = format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}");
        let long = format!("{:08X}:{bus:02X}:{dev:02X}.{func}", u32::from(domain));
        prop_assert!(PhysicalId::new(None, Some(&short)).same_device(&PhysicalId::new(None, Some(&long))));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // `--speculative-config`: any text is read or refused with a reason, never a panic; a
    // reading keeps the JSON for the launch and a token count from 1 to 64.
    #[test]
    fn speculative_configs_read_or_refuse(json in "\\PC{0,80}",
                                          method in "(mtp|eagle|eagle3|ngram|deepseek_mtp|suffix|)",
                                          tokens in proptest::option::of(-3i64..100)) {
        use gpumem::commands::options::parse_speculative;
        let _ = parse_speculative(&json);
        let mut obj = serde_json::Map::new();
        if !method.is_empty() {
            obj.insert("method".into(), method.clone().into());
        }
        if let Some(t) = tokens {
            obj.insert("num_speculative_tokens".into(), t.into());
        }
        let text = serde_json::Value::Object(obj).to_string();
        match parse_speculative(&text) {
            Ok(s) => {
                prop_assert_eq!(&s.json, &text);
                prop_assert!((1..=64).contains(&s.tokens));
            }
            Err(why) => prop_assert!(!why.is_empty()),
        }
    }
}
