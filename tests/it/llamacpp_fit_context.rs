//! `select --fit-context` chooses the context as llama.cpp does when `llama-server` starts
//! without `-c`: for the GGUF each `llamacpp-fit-context/*.json` fixture describes (written
//! here as a sparse file), on simulated GPUs of each recorded size, the `llama-server` command
//! carries the `-c`, `-ngl`, `--tensor-split` and `-ot` that `llama-fit-params` printed
//! (`tools/llamacpp-reference/measure_fit.py --ctx 0`). Every differing case is named.

#![allow(clippy::unwrap_used)]

use crate::common;

use serde_json::Value;

fn check(name: &str, dir: &std::path::Path) -> (usize, Vec<String>) {
    let path = common::fixture(&format!("llamacpp-fit-context/{name}"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let gguf = dir.join(name.replace(".json", ".gguf"));
    common::write_described_gguf(
        name,
        &serde_json::json!({ "gguf": doc["gguf_header"] }),
        &gguf,
    );
    let rpc = doc["rpc"].as_array().unwrap();
    let mut failures = Vec::new();
    let rows = doc["rows"].as_array().unwrap();
    for row in rows {
        let (sizes, args) = common::fit_row_select(&gguf, row, &["--fit-context".into()]);
        let json = common::json_ok(common::gpumem().args(&args));
        let argv = common::launch_argv(&json);
        let c = argv.iter().position(|a| a == "-c").unwrap();
        let at = argv.iter().position(|a| a == "-ngl").unwrap();
        let all = json["plan"]["llamacpp"]["repeating_layers"]
            .as_u64()
            .unwrap()
            + 1;
        let printed = row["printed"].as_str().unwrap();
        let want = common::fit_params_as_server_args(printed, rpc, all);
        let ctx = row["ctx"].as_u64().unwrap().to_string();
        if argv[c + 1] != ctx || argv[at..] != want[..] {
            failures.push(format!(
                "{name} on {sizes:?} MiB: gpumem -c {} {}, llama.cpp {printed}",
                argv[c + 1],
                argv[at..].join(" ")
            ));
        }
    }
    (rows.len(), failures)
}

#[test]
fn the_context_is_the_one_llama_cpp_fits() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = std::fs::read_dir(common::fixture("llamacpp-fit-context")).unwrap();
    let mut names: Vec<String> = fixtures
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let (mut cases, mut failures) = (0, Vec::new());
    for name in &names {
        let (n, f) = check(name, dir.path());
        cases += n;
        failures.extend(f);
    }
    assert!(cases >= 20, "{cases} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fit_context_is_llama_cpp_s_alone() {
    let err = common::one_line_error(
        common::gpumem().args([
            "select",
            "--model",
            "llama-3.1-8b",
            "--engine",
            "vllm",
            "--fit-context",
            "--device",
            "sim:24GiB",
        ]),
        2,
    );
    assert!(err.contains("--fit-context"), "{err}");
}
