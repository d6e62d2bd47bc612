//! Helpers shared by integration tests: the binary under test, fixtures, the stand-in driver
//! libraries and backend gating.

#![allow(dead_code, clippy::unwrap_used)]

pub mod hub_standin;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpumem::model::{ggml_type, GgufFile, GgufTensor, GgufValue};
use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;

static BUILD: Mutex<()> = Mutex::new(());

/// The gpumem binary, without any LD_LIBRARY_PATH of the test process (stand-in drivers reach
/// it only when a test puts them there), and offline: no test may reach the real Hub (the Hub
/// tests lift this for their loopback stand-in).
pub fn gpumem() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("gpumem").unwrap();
    cmd.env_remove("LD_LIBRARY_PATH")
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        // llama.cpp's fit margin, which gpumem reads as llama-server does: the tests say theirs.
        .env_remove("LLAMA_ARG_FIT_TARGET");
    cmd
}

/// A file under `tests/fixtures/`, as a string for command lines.
pub fn fixture(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
        .to_string_lossy()
        .into_owned()
}

/// Compiles a stand-in driver from `tests/fakes/<source>` into its own folder as `lib_name`
/// and returns that folder (to put on LD_LIBRARY_PATH). `variant` names the folder so that
/// differently built copies (e.g. with a symbol left out) do not collide.
pub fn fake_driver(source: &str, lib_name: &str, variant: &str, defines: &[&str]) -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fake-drivers")
        .join(variant);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(lib_name);
    let src = root.join("tests/fakes").join(source);
    let fresh = out.exists()
        && std::fs::metadata(&out).unwrap().modified().unwrap()
            >= std::fs::metadata(&src).unwrap().modified().unwrap();
    if !fresh {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let tmp = dir.join(format!("{lib_name}.tmp"));
        let status = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&tmp)
            .arg(&src)
            .args(defines)
            .arg("-lpthread")
            .status()
            .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}': {e}"));
        assert!(status.success(), "building {source} failed");
        std::fs::rename(&tmp, &out).unwrap();
    }
    dir
}

/// The stand-in libcuda (and its NVML sibling in the same folder).
pub fn fake_gpu_drivers(variant: &str, cuda_defines: &[&str]) -> PathBuf {
    let dir = fake_driver("fake_cuda.c", "libcuda.so", variant, cuda_defines);
    fake_driver("fake_nvml.c", "libnvidia-ml.so", variant, &[]);
    dir
}

/// Whether CI demands this backend (GPUMEM_REQUIRE_BACKENDS=opencl,vulkan).
pub fn required(backend: &str) -> bool {
    std::env::var("GPUMEM_REQUIRE_BACKENDS")
        .map(|v| v.split(',').any(|b| b.trim().eq_ignore_ascii_case(backend)))
        .unwrap_or(false)
}

/// Returns false (and says why) when a backend's real device is absent and not required; panics
/// when it is required.
pub fn backend_present(backend: &str, present: Result<(), String>) -> bool {
    match present {
        Ok(()) => true,
        Err(why) if required(backend) => {
            panic!("{backend} is required (GPUMEM_REQUIRE_BACKENDS) but unavailable: {why}")
        }
        Err(why) => {
            eprintln!("skipping: {backend} unavailable here ({why})");
            false
        }
    }
}

/// Runs test `name` (`module_path!()::test_name`) of the current test binary again in a child process with the stand-in driver
/// folder on LD_LIBRARY_PATH (the dynamic loader reads it only at process start). Returns true in
/// the child, where the test body should run; in the parent it asserts the child passed.
pub fn in_child_with_drivers(name: &str, lib_dir: &Path, envs: &[(&str, &str)]) -> bool {
    if std::env::var_os("GPUMEM_TEST_CHILD").is_some() {
        return true;
    }
    // The harness names a test by its path below the crate: `area::test_name`; callers
    // give `module_path!()::test_name`, whose first part is the crate's.
    let name = name.split_once("::").map_or(name, |(_, below)| below);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env("GPUMEM_TEST_CHILD", "1")
        .env("LD_LIBRARY_PATH", lib_dir);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child run of {name} failed:\n{text}");
    assert!(text.contains("1 passed"), "child ran no test:\n{text}");
    false
}

/// Whether device 0 of `backend` can be opened for allocation (see `backend_present`).
pub fn device_present(backend: &str) -> bool {
    let opened = gpumem::backend::open_device(&format!("{backend}:0").parse().unwrap())
        .map(|_| ())
        .map_err(|e| e.to_string());
    backend_present(backend, opened)
}

/// Runs gpumem with `args`, sends `signal` after `delay`, and returns its output once it exits,
/// which must be within 60 s of the signal (a hang, not a timing: a debug build on two busy
/// cores took over 20 s to write its partial report), with the exit code `code` (128 + signal).
pub fn run_until_signal(
    args: &[&str],
    delay: std::time::Duration,
    signal: libc::c_int,
    code: i32,
) -> std::process::Output {
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_gpumem"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let start = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "{args:?} did not stop on signal {signal}"
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Pids of the driver-probe children (see `gpumem::backend::CHILD_ENV`) started by a gpumem
/// run whose environment held `GPUMEM_TEST_MARK=mark`.
pub fn probe_children(mark: &str) -> Vec<u32> {
    let want = format!("GPUMEM_TEST_MARK={mark}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
            vars.contains(&want.as_bytes())
                && vars
                    .iter()
                    .any(|v| v.starts_with(gpumem::backend::CHILD_ENV.as_bytes()))
        })
        .collect()
}

/// Polls `done` every 20 ms, at most `polls` times; whether it came true.
pub fn eventually(polls: u32, mut done: impl FnMut() -> bool) -> bool {
    (0..polls).any(|_| {
        let ok = done();
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        ok
    })
}

/// Runs `cmd`, asserts exit 0 (showing stderr otherwise) and returns its JSON document.
pub fn json_ok(cmd: &mut assert_cmd::Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `cmd`, asserts it exits with `code` and a one-line message, and returns the message.
pub fn one_line_error(cmd: &mut assert_cmd::Command, code: i32) -> String {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// The GGUF header a fixture recorded, as gpumem's reader would return it.
pub fn described_file(name: &str, doc: &Value) -> GgufFile {
    let g = &doc["gguf"];
    let mut metadata = BTreeMap::new();
    for (key, value) in g["metadata"].as_object().unwrap() {
        let v = match value {
            Value::String(s) => GgufValue::Str(Some(s.clone())),
            Value::Bool(b) => GgufValue::Bool(*b),
            Value::Number(n) if n.is_u64() => GgufValue::Int(n.as_u64().unwrap().into()),
            Value::Number(n) => GgufValue::Float(n.as_f64().unwrap()),
            Value::Array(a) => GgufValue::Array {
                len: a.len() as u64,
                // Booleans (Gemma 4's sliding pattern) as 0 and 1, as the reader keeps them.
                ints: a
                    .iter()
                    .filter_map(|v| v.as_i64().or(v.as_bool().map(i64::from)))
                    .map(i128::from)
                    .collect(),
            },
            other => panic!("{name}: metadata {key} = {other}"),
        };
        metadata.insert(key.clone(), v);
    }
    let tensors: Vec<GgufTensor> = g["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let dims = t[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            let ty = ggml_type(t[2].as_u64().unwrap() as u32).unwrap();
            GgufTensor::new(t[0].as_str().unwrap().into(), dims, ty, 0).unwrap()
        })
        .collect();
    GgufFile::from_parts(3, metadata, tensors, (32, 0))
}

/// A `bench-alloc` workload on the host device whose pool figures (hit rate, fragmentation,
/// peak reserved) do not depend on timing, so the regression tests cannot flap.
pub const SAME_WORKLOAD: [&str; 8] = [
    "--device",
    "host:64MiB",
    "--workload",
    "same-size",
    "-n",
    "300",
    "--size",
    "256KiB",
];

/// Asserts a run's exit status, showing its stderr when it differs.
pub fn expect_exit(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sets one metric of a saved `bench-alloc` baseline to `factors` × its median as the runs'
/// samples, with the statistics that follow, as if those runs had been measured.
pub fn set_baseline_samples(path: &Path, metric: &str, factors: &[f64]) {
    let mut doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let now = doc["metrics"][metric]["median"].as_f64().unwrap();
    let samples: Vec<f64> = factors.iter().map(|f| f * now).collect();
    let summary = gpumem::workload::baseline::Summary::of(&samples).unwrap();
    doc["metrics"][metric] = serde_json::to_value(summary).unwrap();
    std::fs::write(path, serde_json::to_vec(&doc).unwrap()).unwrap();
}

/// Scales every figure of one metric in a saved `bench-alloc` baseline by `factor` (so its
/// statistics still follow from its samples), as if an earlier build had measured that; returns
/// the metric's median before.
pub fn scale_baseline_metric(path: &Path, metric: &str, factor: f64) -> f64 {
    let mut saved: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let m = &mut saved["metrics"][metric];
    let before = m["median"].as_f64().unwrap();
    for key in ["mean", "median", "min", "max", "stddev", "mad"] {
        m[key] = Value::from(m[key].as_f64().unwrap() * factor);
    }
    let samples: Vec<Value> = m["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| Value::from(v.as_f64().unwrap() * factor))
        .collect();
    m["samples"] = Value::from(samples);
    std::fs::write(path, serde_json::to_vec(&saved).unwrap()).unwrap();
    before
}

/// A `llamacpp-server-fit/NAME.json` fixture, and its GGUF written into `dir` from the header it
/// describes.
pub fn server_fit_fixture(name: &str, dir: &Path) -> (Value, PathBuf) {
    let path = fixture(&format!("llamacpp-server-fit/{name}.json"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let gguf = dir.join(format!("{name}.gguf"));
    write_described_gguf(
        name,
        &serde_json::json!({ "gguf": doc["gguf_header"] }),
        &gguf,
    );
    (doc, gguf)
}

/// Writes the GGUF a fixture describes (`{"gguf": {"metadata", "tensors"}}`) to `path` as
/// llama.cpp's sparse reference files were: the real header, the tensor data a hole of the
/// right length (a sparse file: nothing is written to disk).
pub fn write_described_gguf(name: &str, doc: &Value, path: &Path) {
    let (header, size) = described_gguf_bytes(name, doc);
    let file = std::fs::File::create(path).unwrap();
    std::io::Write::write_all(&mut &file, &header).unwrap();
    file.set_len(size).unwrap();
}

/// The header bytes of the GGUF a fixture describes, and the whole file's size.
pub fn described_gguf_bytes(name: &str, doc: &Value) -> (Vec<u8>, u64) {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }
    let g = &doc["gguf"];
    let metadata = g["metadata"].as_object().unwrap();
    let tensors = described_file(name, doc).tensors;
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        string(&mut out, key);
        match value {
            Value::String(s) => {
                out.extend(8u32.to_le_bytes());
                string(&mut out, s);
            }
            Value::Bool(b) => {
                out.extend(7u32.to_le_bytes());
                out.push(u8::from(*b));
            }
            Value::Number(n) if n.is_u64() => {
                out.extend(4u32.to_le_bytes());
                out.extend(u32::try_from(n.as_u64().unwrap()).unwrap().to_le_bytes());
            }
            Value::Number(n) => {
                out.extend(6u32.to_le_bytes());
                out.extend((n.as_f64().unwrap() as f32).to_le_bytes());
            }
            // Arrays as the converter writes them: Gemma 4's sliding pattern (bools) and its
            // per-layer widths and head counts (i32).
            Value::Array(items) => {
                let bools = items.iter().all(Value::is_boolean);
                out.extend(9u32.to_le_bytes());
                out.extend(if bools { 7u32 } else { 5u32 }.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for v in items {
                    match v.as_bool() {
                        Some(b) => out.push(u8::from(b)),
                        None => out.extend((v.as_i64().unwrap() as i32).to_le_bytes()),
                    }
                }
            }
            other => panic!("{name}: metadata {key} = {other}"),
        }
    }
    let mut offset = 0u64;
    for (t, described) in tensors.iter().zip(g["tensors"].as_array().unwrap()) {
        string(&mut out, &t.name);
        let dims = described[1].as_array().unwrap();
        out.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            out.extend(d.as_u64().unwrap().to_le_bytes());
        }
        out.extend((described[2].as_u64().unwrap() as u32).to_le_bytes());
        out.extend(offset.to_le_bytes());
        offset += t.bytes.div_ceil(32) * 32;
    }
    let data_start = (out.len() as u64).div_ceil(32) * 32;
    (out, data_start + offset)
}

/// llama-fit-params' `-c N -ngl N [-ts …] [-ot "…"]` as gpumem's llama-server arguments from
/// `-ngl` on: its default `-ngl -1` as every layer, `-ts` as `--tensor-split`, RPC buffers as
/// local GPUs (`CUDA0`, …), `-c` left out.
pub fn fit_params_as_server_args(printed: &str, rpc: &[Value], all_layers: u64) -> Vec<String> {
    let mut text = printed.to_string();
    for (d, endpoint) in rpc.iter().enumerate() {
        text = text.replace(
            &format!("RPC0[{}]", endpoint.as_str().unwrap()),
            &format!("CUDA{d}"),
        );
    }
    let mut args = Vec::new();
    let mut words = text.split(' ');
    while let Some(flag) = words.next() {
        let value = words.next().unwrap().trim_matches('"').to_string();
        match flag {
            "-ts" => args.extend(["--tensor-split".to_string(), value]),
            "-ngl" if value == "-1" => args.extend([flag.to_string(), all_layers.to_string()]),
            "-c" => {}
            _ => args.extend([flag.to_string(), value]),
        }
    }
    args
}

/// A recorded fit row's device sizes (`device_mib`: one size, or one a device) and the
/// `select --json --engine llama.cpp --gguf GGUF … --ram 256GiB --llamacpp-device cpu-rules
/// --device sim:<size>MiB …`
/// arguments that plan it, with `extra` after the model.
pub fn fit_row_select(gguf: &Path, row: &Value, extra: &[String]) -> (Vec<u64>, Vec<String>) {
    let sizes: Vec<u64> = match row["device_mib"].as_array() {
        Some(a) => a.iter().map(|v| v.as_u64().unwrap()).collect(),
        None => vec![row["device_mib"].as_u64().unwrap()],
    };
    let mut args: Vec<String> = ["--json", "select", "--engine", "llama.cpp", "--gguf"]
        .into_iter()
        .map(String::from)
        .chain([gguf.display().to_string()])
        .chain(extra.iter().cloned())
        .chain(["--ram".into(), "256GiB".into()])
        // The references ran on rpc-servers lending CPUs: the CPU backend's buffers.
        .chain(["--llamacpp-device".into(), "cpu-rules".into()])
        .collect();
    for size in &sizes {
        args.extend(["--device".into(), format!("sim:{size}MiB")]);
    }
    (sizes, args)
}

/// The first launch command's argv of a `select --json` document.
pub fn launch_argv(doc: &Value) -> Vec<String> {
    doc["launch"][0]["commands"][0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// The host of each placement of a `select --json` plan, in order.
pub fn plan_hosts(plan: &Value) -> Vec<&str> {
    plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap())
        .collect()
}

/// The first candidate of `backend` in a `select --json` document.
pub fn candidate<'a>(doc: &'a Value, backend: &str) -> &'a Value {
    doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["backend"] == backend)
        .unwrap_or_else(|| panic!("no {backend} candidate in {doc}"))
}

/// Writes `dir/<file>` as a `discover --json` document of one host, `host`: its RAM
/// (`(total, free)` bytes) as the cpu backend's device named `cpu`, and one GPU `device` (its
/// fields as discover writes them) of `backend`.
pub fn one_gpu_host(
    dir: &Path,
    file: &str,
    (host, cpu): (&str, &str),
    (ram_total, ram_free): (u64, u64),
    (backend, device): (&str, Value),
) -> PathBuf {
    let doc = serde_json::json!({
        "schema_version": 1,
        "host": {"hostname": host, "memory_total_bytes": ram_total,
                 "memory_available_bytes": ram_free},
        "backends": [
            {"backend": "cpu", "available": true,
             "devices": [{"index": 0, "name": cpu, "device_type": "cpu",
                          "total_bytes": ram_total, "free_bytes": ram_free}]},
            {"backend": backend, "available": true, "devices": [device]}
        ]
    });
    let path = dir.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

/// An Ollama store under `root` (`OLLAMA_MODELS`) holding the GGUF fixture as a blob, and the
/// manifests folder of `library/tiny`: the store, the folder, and the blob's digest.
pub fn ollama_store(root: &Path) -> (PathBuf, PathBuf, String) {
    let models = root.join("ollama");
    let digest = "ab".repeat(32);
    let manifests = models.join("manifests/registry.ollama.ai/library/tiny");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::create_dir_all(models.join("blobs")).unwrap();
    std::fs::copy(
        fixture("tiny-llama.gguf"),
        models.join(format!("blobs/sha256-{digest}")),
    )
    .unwrap();
    (models, manifests, digest)
}

/// The 32 repeating layers over devices of equal free memory, as llama.cpp splits every layer
/// without `-ts` (`llama_model::load_tensors`: layer `il` of 33 on the first device whose
/// cumulative share exceeds `il / 33`); none for one device.
pub fn default_split(sizes: &[u64]) -> Option<String> {
    let n = sizes.len() as u64;
    if n < 2 || sizes.iter().any(|&s| s != sizes[0]) {
        return None;
    }
    let mut counts = vec![0u64; sizes.len()];
    for il in 0..32u64 {
        counts[usize::try_from(il * n / 33).unwrap()] += 1;
    }
    Some(
        counts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
    )
}
