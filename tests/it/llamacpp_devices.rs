//! gpumem's placement of a GGUF over devices against llama.cpp's own per-device projection
//! (`tests/fixtures/llamacpp-devices/`, recorded by `tools/llamacpp-reference/measure_devices.py`
//! on ggml-rpc-server devices, ggml-vulkan over lavapipe and ggml-cuda on an H200): each
//! device's and the host's model, KV-cache and compute bytes, to the byte, over -ngl from 0 to
//! all, contexts, flash attention on and off, one to three devices.
//! Every failing row is named.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::described_file;
use gpumem::model::{arch_from_gguf, kv_precision};
use gpumem::model::{FfnMove, LayerMove, LayerWeights};
use gpumem::plan::engines::llamacpp::{device_uses, fit_devices, fit_one_device, place, Offload};
use gpumem::plan::engines::llamacpp::{fit_moe, MoeFit};
use gpumem::plan::engines::llamacpp::{offloaded_compute_buffers, LlamaCppRun};
use gpumem::plan::engines::Settings;
use serde_json::Value;
use std::path::Path;

fn fixture_names() -> Vec<String> {
    let dir = Path::new(&common::fixture("llamacpp-devices")).to_path_buf();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// llama.cpp's `-ot` list as the fit writes it (`blk\.N\.PATTERN=BUFFER,…`): each layer's
/// move, the buffer `CPU` or an RPC device named by its endpoint.
fn parse_overrides(ot: &str, rpc: &[Value]) -> Vec<LayerMove> {
    let kinds = [
        FfnMove::Experts,
        FfnMove::AllFfn,
        FfnMove::GateDown,
        FfnMove::Down,
    ];
    let mut moves = Vec::new();
    for entry in ot.split(',') {
        let (pattern, buffer) = entry.rsplit_once('=').unwrap();
        let layer: usize = pattern
            .strip_prefix("blk\\.")
            .and_then(|r| r.split('\\').next())
            .unwrap()
            .parse()
            .unwrap();
        let what = *kinds
            .iter()
            .find(|k| k.pattern(layer as u64).as_deref() == Some(pattern))
            .unwrap_or_else(|| panic!("pattern {pattern}"));
        let to = (buffer != "CPU").then(|| {
            rpc.iter()
                .position(|r| buffer == format!("RPC0[{}]", r.as_str().unwrap()))
                .unwrap_or_else(|| panic!("buffer {buffer}"))
        });
        if moves.len() <= layer {
            moves.resize(layer + 1, LayerMove::default());
        }
        moves[layer] = LayerMove { what, to };
    }
    moves
}

/// The rules a fixture was recorded under: the RPC client given ggml-cuda's operator offload,
/// or as built.
fn device_of(doc: &Value) -> gpumem::plan::engines::llamacpp::LlamaDevice {
    if doc["backend"]
        .as_str()
        .is_some_and(|b| b.starts_with("CUDA") || b.contains(", then CUDA"))
    {
        gpumem::plan::engines::llamacpp::LlamaDevice::Cuda
    } else if doc["vulkan_limits"].is_object() {
        let limits = serde_json::from_value(doc["vulkan_limits"].clone()).unwrap();
        gpumem::plan::engines::llamacpp::LlamaDevice::Vulkan(limits)
    } else if doc["op_offload"].as_bool() == Some(true) {
        gpumem::plan::engines::llamacpp::LlamaDevice::CpuRulesOffload
    } else {
        gpumem::plan::engines::llamacpp::LlamaDevice::CpuRules
    }
}

/// The rpc-server devices llama.cpp ordered before the build's own GPU, and what serves them:
/// the CPU, or (from a CUDA build, `cuda_sweep.py --rpc-server`) the GPU.
fn rpc_devices(doc: &Value) -> Vec<gpumem::plan::engines::llamacpp::LlamaDevice> {
    use gpumem::plan::engines::llamacpp::LlamaDevice;
    let Some(count) = doc["rpc_devices"].as_u64() else {
        return Vec::new();
    };
    let remote = match doc["rpc_backend"].as_str() {
        Some("CUDA") => LlamaDevice::Cuda,
        Some("CPU") => LlamaDevice::CpuRules,
        other => panic!("rpc_backend {other:?}"),
    };
    vec![remote; usize::try_from(count).unwrap()]
}

/// The failures of one fixture, a line each.
fn check(name: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(common::fixture(&format!("llamacpp-devices/{name}"))).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let file = described_file(name, &doc);
    let arch = arch_from_gguf(Path::new(name), &file).unwrap();
    let weights = LayerWeights::of(&file, arch.num_layers, 32);
    let mut failures = Vec::new();
    for row in doc["rows"].as_array().unwrap() {
        let devices = row["devices"].as_array().unwrap();
        let split: Vec<f32> = match row["tensor_split"].as_str() {
            Some(ts) => ts.split(',').map(|v| v.parse().unwrap()).collect(),
            None => vec![1.0; devices.len() - 1],
        };
        // llama-server's reserve: logits for the last token of each of its -np sequences
        // (recorded with -np 1).
        let server = doc["server_outputs"].as_u64();
        // A row of its own -np (every token's logits), or llama-server's.
        let parallel = row["parallel"].as_u64().or(server).unwrap_or(1);
        let unified = row["kv_unified"]
            .as_bool()
            .or(doc["kv_unified"].as_bool())
            .unwrap_or(true);
        // Without -kvu, the -np sequences keep a KV stream each of -c / -np cells.
        let streams = if unified { 1 } else { parallel };
        let settings = Settings {
            batch: streams,
            ubatch: row["ubatch"].as_u64().unwrap(),
            flash_attention: row["flash_attention"] == "on",
            llamacpp: LlamaCppRun {
                outputs: server,
                parallel,
                device: device_of(&doc),
                rpc: rpc_devices(&doc),
                keep_graph_order: doc["graph_optimize"].as_bool() == Some(false),
                ..LlamaCppRun::default()
            },
            ..Settings::inference(
                row["ctx"].as_u64().unwrap() / streams,
                kv_precision(doc["cache_type"].as_str().unwrap_or("f16")).unwrap(),
            )
        };
        let moves = match row["ot"].as_str() {
            Some(ot) => parse_overrides(ot, doc["rpc"].as_array().unwrap()),
            None => LayerMove::cpu_moe(row["cpu_moe"].as_u64().unwrap_or(0)),
        };
        let offload = Offload {
            n_gpu_layers: row["ngl"].as_u64().unwrap(),
            tensor_split: split,
            kv_offload: true,
            moves,
        };
        let ours = place(&weights, &arch, &settings, &offload);
        // Compute: every device's and the host's (last) through the placement path; one
        // device without experts on the CPU also through the -ngl path, which must agree.
        let uses = device_uses(&weights, &arch, &settings, &offload).unwrap();
        let compute: Vec<u64> = uses.iter().map(|u| u.compute).collect();
        if devices.len() == 2 && offload.moves.is_empty() {
            let first = (arch.num_layers + 1).saturating_sub(offload.n_gpu_layers);
            let (host, device) =
                offloaded_compute_buffers(&arch, &settings, Some(&weights), first).unwrap();
            assert_eq!([device, host], [compute[0], compute[1]], "{name}");
        }
        // A fixture may say why its compute buffers are held within 5 % (never below) rather
        // than to the byte.
        let within = !doc["compute_within_5_percent"].is_null();
        for (d, theirs) in devices.iter().enumerate() {
            let parts = [
                ("model", ours[d].model),
                ("context", ours[d].context),
                ("compute", compute[d]),
            ];
            for (part, mine) in parts {
                let want = theirs[part].as_u64().unwrap();
                let close = part == "compute" && within && mine >= want && mine * 100 <= want * 105;
                if mine != want && !close {
                    failures.push(format!(
                        "{name}: {}: {} {part} {mine} bytes, llama.cpp {want}",
                        row["command"].as_str().unwrap(),
                        theirs["device"].as_str().unwrap()
                    ));
                }
            }
        }
    }
    failures
}

#[test]
fn model_and_kv_bytes_per_device_match_llama_cpp() {
    let names = fixture_names();
    assert!(names.len() >= 3, "{names:?}");
    let failures: Vec<String> = names.iter().flat_map(|n| check(n)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A MoE fit as llama-fit-params prints it after the context: `-ngl N [-ts a,b] [-ot "…"]`,
/// the split's trailing zeros dropped, device `d`'s buffer named by its RPC endpoint.
fn moe_fit_text(fit: &MoeFit, rpc: &[Value]) -> String {
    let mut text = format!("-ngl {}", ngl_text(fit.n_gpu_layers));
    if let Some(ts) = &fit.tensor_split {
        let used = ts.len() - ts.iter().rev().take_while(|&&n| n == 0).count();
        if used > 1 {
            let ts: Vec<String> = ts[..used].iter().map(u64::to_string).collect();
            text += &format!(" -ts {}", ts.join(","));
        }
    }
    let overrides: Vec<String> = fit
        .overrides
        .iter()
        .map(|o| {
            let to = o.to.map_or_else(
                || "CPU".to_string(),
                // The local device after the RPC ones (Vulkan in the fixtures that have one).
                |d| match rpc.get(d) {
                    Some(r) => format!("RPC0[{}]", r.as_str().unwrap()),
                    None => format!("Vulkan{}", d - rpc.len()),
                },
            );
            format!("{}={to}", o.pattern.as_deref().unwrap())
        })
        .collect();
    if !overrides.is_empty() {
        text += &format!(" -ot \"{}\"", overrides.join(","));
    }
    text
}

/// gpumem's fit for a recorded row, as llama-fit-params prints it (`-ngl N [-ts a,b]`): one
/// device, or several, each emulated by its own margin from the same free memory.
fn our_fit(
    weights: &LayerWeights,
    arch: &gpumem::model::ModelArch,
    settings: &Settings,
    row: &Value,
    rpc: &[Value],
) -> String {
    // Each device's free memory: one figure for devices that report the host's, else a list.
    let free_of = |d: usize| match row["free_mib"].as_array() {
        Some(f) => f[d].as_u64().unwrap() << 20,
        None => row["free_mib"].as_u64().unwrap() << 20,
    };
    if arch.moe.is_some() {
        let margins: Vec<u64> = match row["fit_target_mib"].as_array() {
            Some(m) => m.iter().map(|m| m.as_u64().unwrap() << 20).collect(),
            None => vec![row["fit_target_mib"].as_u64().unwrap() << 20],
        };
        let free: Vec<u64> = (0..margins.len()).map(free_of).collect();
        let fit = fit_moe(weights, arch, settings, &free, &margins).unwrap();
        return moe_fit_text(&fit, rpc);
    }
    let Some(margins) = row["fit_target_mib"].as_array() else {
        let margin = row["fit_target_mib"].as_u64().unwrap() << 20;
        let ngl = fit_one_device(weights, arch, settings, free_of(0), margin).unwrap();
        return format!("-ngl {}", ngl_text(ngl));
    };
    let free: Vec<u64> = (0..margins.len()).map(free_of).collect();
    let margins: Vec<u64> = margins.iter().map(|m| m.as_u64().unwrap() << 20).collect();
    let fit = fit_devices(weights, arch, settings, &free, &margins).unwrap();
    // llama-fit-params leaves out the split's trailing zeros, and a split of one device.
    let ts = fit
        .tensor_split
        .map(|t| {
            let used = t.len() - t.iter().rev().take_while(|&&n| n == 0).count();
            let t: Vec<String> = t[..used].iter().map(u64::to_string).collect();
            if used > 1 {
                format!(" -ts {}", t.join(","))
            } else {
                String::new()
            }
        })
        .unwrap_or_default();
    format!("-ngl {}{ts}", ngl_text(fit.n_gpu_layers))
}

/// `-ngl` as llama.cpp prints it: `-1` for its default, every layer.
fn ngl_text(n: Option<u64>) -> String {
    n.map_or_else(|| "-1".into(), |n| n.to_string())
}

// gpumem's choice of -ngl equals llama.cpp's own fit (`llama-fit-params`, recorded by
// tools/llamacpp-reference/measure_fit.py on a ggml-rpc-server device whose size the fit margin
// emulates) on every recorded model × device size.
#[test]
fn the_layers_offloaded_are_the_ones_llama_cpp_fits() {
    let dir = Path::new(&common::fixture("llamacpp-fit")).to_path_buf();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut failures = Vec::new();
    let mut cases = 0;
    for name in &names {
        let text =
            std::fs::read_to_string(common::fixture(&format!("llamacpp-fit/{name}"))).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let header = serde_json::json!({ "gguf": doc["gguf_header"] });
        let file = described_file(name, &header);
        let arch = arch_from_gguf(Path::new(name), &file).unwrap();
        let weights = LayerWeights::of(&file, arch.num_layers, 32);
        for row in doc["rows"].as_array().unwrap() {
            cases += 1;
            let settings = Settings {
                // llama.cpp's -fa auto turns flash attention on for a device that has it.
                flash_attention: true,
                llamacpp: LlamaCppRun {
                    device: device_of(&doc),
                    rpc: rpc_devices(&doc),
                    ..LlamaCppRun::default()
                },
                ..Settings::inference(
                    row["ctx"].as_u64().unwrap(),
                    kv_precision(doc["cache_type"].as_str().unwrap_or("f16")).unwrap(),
                )
            };
            let rpc = doc["rpc"].as_array().cloned().unwrap_or_default();
            let ours = our_fit(&weights, &arch, &settings, row, &rpc);
            let printed = row["printed"].as_str().unwrap();
            // "-c N -ngl …": what follows the context.
            let theirs = printed.splitn(3, ' ').nth(2).unwrap_or("");
            if ours != theirs {
                failures.push(format!(
                    "{name}: devices of {} MiB: gpumem {ours}, llama.cpp {theirs}",
                    row["device_mib"]
                ));
            }
        }
    }
    assert!(cases >= 50, "{cases} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// `select` plans llama.cpp as `llama-server --fit` runs it: Llama-3.1-8B at q8_0 (the
// catalog's shape, counted from its parameters) on one or two devices of each recorded size
// with system RAM beside them gets the -ngl and -ts llama-server's fit chose for a GGUF of that
// shape (`llamacpp-server-fit/`: logits kept for one token a sequence), and the layers it
// leaves go to the RAM.
#[test]
fn select_offloads_as_llama_cpp_fits() {
    for fixture in ["llama-3.1-8b-shape-q8_0"] {
        let path = common::fixture(&format!("llamacpp-server-fit/{fixture}.json"));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for row in doc["rows"].as_array().unwrap() {
            let sizes: Vec<u64> = match row["device_mib"].as_array() {
                Some(a) => a.iter().map(|v| v.as_u64().unwrap()).collect(),
                None => vec![row["device_mib"].as_u64().unwrap()],
            };
            let mut args: Vec<String> = ["--json", "select", "--model", "llama-3.1-8b"]
                .into_iter()
                .chain([
                    "--dtype",
                    "q8_0",
                    "--engine",
                    "llama.cpp",
                    "--context",
                    "8192",
                ])
                .chain(["--ram", "32GiB", "--llamacpp-device", "cpu-rules"])
                .map(String::from)
                .collect();
            for size in &sizes {
                args.extend(["--device".into(), format!("sim:{size}MiB")]);
            }
            let out = common::gpumem().args(&args).output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{sizes:?}");
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            let plan = &doc["plan"];
            let theirs = row["n_gpu_layers"].as_i64().unwrap();
            let ngl = plan["gpu_layers"].as_i64().unwrap();
            assert_eq!(
                ngl,
                if theirs == -1 { 33 } else { theirs },
                "{sizes:?}: {plan}"
            );
            assert_eq!(
                plan["llamacpp"]["tensor_split"], row["tensor_split"],
                "{sizes:?}"
            );
            let kind = match (theirs, sizes.len()) {
                (-1, 1) => "single",
                (-1, _) => "layer_split",
                _ => "cpu_offload",
            };
            assert_eq!(plan["kind"], kind, "{sizes:?}");
            if theirs != -1 {
                let ram = plan["placements"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()
                    .clone();
                assert_eq!(ram["backend"], "cpu");
                // -ngl counts the output layer first: -ngl N keeps N - 1 repeating layers.
                assert_eq!(
                    ram["layers"].as_i64().unwrap(),
                    32 - (theirs - 1).max(0),
                    "{sizes:?}"
                );
                let on_gpus: i64 = plan["placements"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|p| p["backend"] != "cpu")
                    .map(|p| p["layers"].as_i64().unwrap())
                    .sum();
                assert_eq!(on_gpus + ram["layers"].as_i64().unwrap(), 32, "{sizes:?}");
            }
        }
    }
}

/// A fixture's model with its layers' f16 matrices stored as Q8_0.
fn in_q8_0(name: &str) -> (gpumem::model::GgufFile, gpumem::model::ModelArch) {
    let text =
        std::fs::read_to_string(common::fixture(&format!("llamacpp-devices/{name}"))).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    for t in doc["gguf"]["tensors"].as_array_mut().unwrap() {
        let matrix = t[1].as_array().unwrap().len() == 2;
        if t[0].as_str().unwrap().starts_with("blk.") && matrix && t[2] == 1 {
            t[2] = Value::from(8);
        }
    }
    let file = described_file(name, &doc);
    let arch = arch_from_gguf(Path::new(name), &file).unwrap();
    (file, arch)
}

fn all_on_one_device(arch: &gpumem::model::ModelArch) -> Offload {
    Offload {
        n_gpu_layers: arch.num_layers + 1,
        tensor_split: vec![1.0],
        kv_offload: true,
        moves: Vec::new(),
    }
}

/// ggml-cuda pads a quantized tensor's rows to 512 values (`MATRIX_ROW_PADDING` in its
/// `get_alloc_size`, read from the source the H200 build was made from; none of its records
/// had such a tensor). Gemma 2's shape in Q8_0 has rows of 2,304, 2,048 and 9,216 values: the
/// first take 256 values (272 bytes) more, each tensor then aligned to 128 bytes.
#[test]
fn cuda_pads_quantized_weight_rows() {
    use gpumem::plan::engines::llamacpp::{LlamaDevice, UnmeasuredRule};
    let (file, arch) = in_q8_0("gemma2-shape-cuda.json");
    let weights = LayerWeights::of(&file, arch.num_layers, 32);
    let settings = |device| Settings {
        llamacpp: LlamaCppRun {
            device,
            ..LlamaCppRun::default()
        },
        ..Settings::inference(4096, kv_precision("f16").unwrap())
    };
    let offload = all_on_one_device(&arch);
    let cuda = place(&weights, &arch, &settings(LlamaDevice::Cuda), &offload);
    let pad = |b: u64, a: u64| b.div_ceil(a) * a;
    let mut padded = 0;
    let want: u64 = file
        .tensors
        .iter()
        .map(|t| {
            // The head is tied: the embeddings are loaded again on the device.
            let extra = if t.ggml_type.name == "Q8_0" && t.dims[0] % 512 != 0 {
                padded += 1;
                (512 - t.dims[0] % 512) / 32 * 34
            } else {
                0
            };
            pad(t.bytes + extra, 128)
        })
        .sum();
    // q, k, v, gate and up: attn_output's rows are 2,048 values and ffn_down's 9,216.
    assert_eq!(padded, 5 * arch.num_layers);
    assert_eq!(cuda[0].model, want);
    let s = settings(LlamaDevice::Cuda);
    assert_eq!(
        LlamaDevice::Cuda.unmeasured_rules(&weights, &arch, &s),
        vec![UnmeasuredRule::CudaQuantizedRowPadding]
    );
    // Vulkan's buffers take no such padding.
    let vk = LlamaDevice::Vulkan(gpumem::device::VulkanLimits::UNSEEN);
    assert!(vk
        .unmeasured_rules(&weights, &arch, &settings(vk))
        .is_empty());
}

/// The cache too: Qwen2.5-0.5B's K and V rows are 128 values (two heads of 64), so a Q8_0
/// cache on ggml-cuda takes 384 values (408 bytes) more per tensor, two a layer; the host's
/// cache (`-nkvo`) is the CPU's and takes none.
#[test]
fn cuda_pads_a_quantized_cache() {
    use gpumem::plan::engines::llamacpp::LlamaDevice;
    let (file, arch) = in_q8_0("qwen2.5-0.5b-shape-f16-tied.json");
    let weights = LayerWeights::of(&file, arch.num_layers, 32);
    let settings = |device| Settings {
        llamacpp: LlamaCppRun {
            device,
            ..LlamaCppRun::default()
        },
        flash_attention: true,
        ..Settings::inference(4096, kv_precision("q8_0").unwrap())
    };
    let offload = all_on_one_device(&arch);
    let cpu = place(&weights, &arch, &settings(LlamaDevice::CpuRules), &offload);
    let cuda = place(&weights, &arch, &settings(LlamaDevice::Cuda), &offload);
    assert_eq!(cuda[0].context, cpu[0].context + arch.num_layers * 2 * 408);
    let host_cache = Offload {
        kv_offload: false,
        ..offload
    };
    let cuda = place(&weights, &arch, &settings(LlamaDevice::Cuda), &host_cache);
    let cpu = place(
        &weights,
        &arch,
        &settings(LlamaDevice::CpuRules),
        &host_cache,
    );
    assert_eq!(cuda[1].context, cpu[1].context);
}

// `--split-mode none` keeps llama.cpp to a host's first GPU (`-sm none`, llama.cpp's -mg 0):
// on two simulated GPUs of each recorded pair of sizes, with system RAM beside them, the plan
// offloads the -ngl llama-server's fit chose with `-sm none` over two ggml-rpc-server devices
// (`measure_fit.py --server --split-mode none`), to the first GPU only; without it the second
// GPU takes layers too. `--split-mode row` is refused as llama.cpp refuses it, one line.
#[test]
fn split_mode_none_fits_the_first_gpu_as_llama_cpp_does() {
    let name = "llama-3.1-8b-shape-q8_0-split-none";
    let dir = tempfile::tempdir().unwrap();
    let (doc, gguf) = common::server_fit_fixture(name, dir.path());
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        let context = ["--context".to_string(), row["ctx"].to_string()];
        let none = [&context[..], &["--split-mode".into(), "none".into()]].concat();
        let (sizes, args) = common::fit_row_select(&gguf, row, &none);
        let out = common::gpumem().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{sizes:?}");
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        let argv = common::launch_argv(&json);
        let at = argv.iter().position(|a| a == "-ngl").unwrap();
        let want = match row["n_gpu_layers"].as_i64().unwrap() {
            -1 => "33".to_string(),
            n => n.to_string(),
        };
        assert_eq!(argv[at + 1], want, "{sizes:?} MiB");
        assert!(argv.ends_with(&["-sm".into(), "none".into()]), "{argv:?}");
        assert!(!argv.contains(&"--tensor-split".to_string()), "{argv:?}");
        let env = &json["launch"][0]["commands"][0]["env"];
        assert_eq!(env, &serde_json::json!([["CUDA_VISIBLE_DEVICES", "0"]]));
        assert_eq!(gpus_used(&json), 1, "{sizes:?} MiB");
        // Without it llama.cpp's fit spreads the layers over both GPUs.
        let (_, args) = common::fit_row_select(&gguf, row, &context);
        let out = common::gpumem().args(&args).output().unwrap();
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        let argv = common::launch_argv(&json);
        assert!(!argv.contains(&"-sm".to_string()), "{argv:?}");
        assert_eq!(gpus_used(&json), 2, "{sizes:?} MiB");
    }
    let (_, args) = common::fit_row_select(&gguf, &rows[0], &["--split-mode".into(), "row".into()]);
    let out = common::gpumem().args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpumem: error: llama.cpp has no row split on CUDA, ROCm, Vulkan, Metal or RPC devices \
         (it stops with \"device CUDA0 does not support split buffers\"): give --split-mode \
         layer or none\n"
    );
}

/// The GPUs a `select --json` plan places layers on.
fn gpus_used(doc: &Value) -> usize {
    doc["plan"]["placements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["backend"] == "cuda")
        .count()
}

// DeepSeek-V4, GLM-5-next and MiniMax-M3 with -np 2 and 4, each sequence its own KV stream
// and again one cache for all (-kvu), at two contexts, flash attention on and off: the
// host's model, context and compute bytes to the byte (the compute buffer by replay).
// DeepSeek-V4 keeps a stream of every cache a sequence even under -kvu, GLM-5-next a
// recurrent state a sequence, and MiniMax-M3's sparse attention loops over the streams (one
// cache for several sequences makes it attend densely).
#[test]
fn sparse_and_compressed_attention_with_several_sequences_match_llama_cpp() {
    for name in [
        "deepseek-v4-flash-layout-np-cpu.json",
        "glm5-next-layout-np-cpu.json",
        "minimax-m3-layout-np-cpu.json",
    ] {
        let text =
            std::fs::read_to_string(common::fixture(&format!("llamacpp-devices/{name}"))).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let rows = doc["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 16, "{name}");
        assert!(
            rows.iter().all(|r| r["parallel"].as_u64() > Some(1)),
            "{name}"
        );
        let failures = check(name);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
