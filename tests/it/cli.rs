//! The built binary's contract: help, exit codes, one-line errors, JSON that parses.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpumem;

use predicates::prelude::*;

/// Asserts stderr holds exactly one line starting with gpumem's error prefix.
fn one_line_error(output: &std::process::Output) -> String {
    let stderr = String::from_utf8(output.stderr.clone()).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one line on stderr, got: {stderr:?}"
    );
    assert!(
        lines[0].starts_with("gpumem: error: "),
        "unexpected stderr: {stderr:?}"
    );
    lines[0].to_string()
}

#[test]
fn help_lists_the_five_subcommands_and_exit_codes() {
    let out = gpumem()
        .arg("--help")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let help = String::from_utf8(out).unwrap();
    for sub in ["discover", "estimate", "select", "bench-alloc", "stress"] {
        assert!(help.contains(sub), "--help does not list {sub}");
    }
    assert!(help.contains("\n  3        does not fit"), "{help}");
    assert!(
        help.contains("Examples:\n  # every backend and device"),
        "{help}"
    );
    // Each subcommand's help shows its own examples only.
    let out = gpumem().args(["stress", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("gpumem stress --device vulkan:0 --duration 30s"),
        "{help}"
    );
    assert!(!help.contains("gpumem discover --format"), "{help}");
}

#[test]
fn version_exits_zero() {
    gpumem()
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::starts_with("gpumem "));
}

#[test]
fn version_verbose_names_each_engine_release_modelled() {
    let expected = concat!(
        "engines modelled:\n",
        "  llama.cpp  b11312  vendored by llama-cpp-python 0.3.36\n",
        "  vLLM       0.33    its Python source; public start-up logs\n",
        "  SGLang     0.5.23  its Python source; public start-up logs\n",
        "  Ollama     0.33    its Go source (v0.33.0-rc2); llama-server's fit\n",
        "  PyTorch    2.15    transformers 5.24, deepspeed 0.19; MemTracker\n",
    );
    for args in [
        ["--version", "--verbose"],
        ["-V", "-v"],
        ["--verbose", "--version"],
    ] {
        gpumem()
            .args(args)
            .assert()
            .success()
            .stdout(format!("gpumem {}\n{expected}", env!("CARGO_PKG_VERSION")));
    }
    // Without -v only the version line.
    gpumem()
        .arg("--version")
        .assert()
        .success()
        .stdout(format!("gpumem {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let output = gpumem().arg("bogus").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(one_line_error(&output).contains("'bogus'"));
}

#[test]
fn negative_batch_is_a_one_line_usage_error() {
    let output = gpumem()
        .args(["estimate", "--batch", "-1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(one_line_error(&output).contains("--batch"));
}

#[test]
fn malformed_size_names_the_flag() {
    for (flag, value) in [
        ("--min-free", "12XB"),
        ("--min-free", "1.5"),
        ("--bytes", "lots"),
    ] {
        let output = gpumem().args(["select", flag, value]).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
        let line = one_line_error(&output);
        assert!(line.contains(flag), "{line}");
        assert!(line.contains(value), "{line}");
    }
}

#[test]
fn malformed_device_spec_is_a_usage_error() {
    let output = gpumem()
        .args(["bench-alloc", "--device", "gpu:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(one_line_error(&output).contains("unknown backend 'gpu'"));
}

#[test]
fn conflicting_model_sources_are_rejected() {
    let output = gpumem()
        .args(["estimate", "--model", "x", "--config", "c.json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    one_line_error(&output);
}

#[test]
fn errors_with_json_still_print_a_parsable_document() {
    let output = gpumem()
        .args(["--json", "estimate", "--model", "no-such-model"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let line = one_line_error(&output);
    assert!(line.contains("unknown model 'no-such-model'"), "{line}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["error"]["exit_code"], 2);
}

// A mistyped flag, subcommand, model or backend is a usage error (exit 2) whose one line names
// the nearest right word.
#[test]
fn typos_say_what_was_probably_meant() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["discvoer"],
            "unrecognized subcommand 'discvoer' (did you mean 'discover'?)",
        ),
        (
            &["estimate", "--model", "lama-3.1-8b"],
            "unknown model 'lama-3.1-8b' (did you mean 'llama-3.1-8b'?)",
        ),
        (
            &["select", "--bytes", "1GiB", "--device", "vulcan:0"],
            "unknown backend 'vulcan' (did you mean 'vulkan'?)",
        ),
        (
            &["estimate", "--contxt", "4096"],
            "(did you mean '--context'?)",
        ),
    ];
    for (args, want) in cases {
        let output = gpumem().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let line = one_line_error(&output);
        assert!(line.contains(want), "{args:?}: {line}");
    }
    // Nothing near: no guess.
    let output = gpumem()
        .args(["estimate", "--model", "gpt-5"])
        .output()
        .unwrap();
    assert!(!one_line_error(&output).contains("did you mean"));
}

#[test]
fn quiet_and_verbose_conflict() {
    let output = gpumem().args(["-q", "-v", "discover"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

/// Every file input refuses what is not a regular file at once (a FIFO would block, /dev/zero
/// would never end), with one line naming the path.
#[test]
fn non_regular_inputs_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("input.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["estimate", "--config", fifo],
            "not a regular file (a FIFO)",
        ),
        (
            vec!["estimate", "--gguf", fifo],
            "not a regular file (a FIFO)",
        ),
        (
            vec!["estimate", "--safetensors", fifo],
            "not a regular file (a FIFO)",
        ),
        (
            vec!["select", "--bytes", "1GiB", "--inventory", fifo],
            "not a regular file (a FIFO)",
        ),
        (
            vec!["bench-alloc", "--device", "sim:1GiB", "--trace", fifo],
            "not a regular file (a FIFO)",
        ),
        (
            vec!["estimate", "--config", "/dev/zero"],
            "not a regular file (a character device)",
        ),
        (
            vec!["select", "--bytes", "1GiB", "--inventory", "/dev/urandom"],
            "not a regular file (a character device)",
        ),
        (
            vec!["estimate", "--gguf", "/"],
            "not a regular file (a directory)",
        ),
    ];
    for (args, want) in cases {
        let out = gpumem()
            .args(&args)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = one_line_error(&out);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn out_of_range_values_are_usage_errors_with_json() {
    for args in [
        vec!["--json", "estimate", "-m", "mistral-7b", "--batch", "0"],
        vec![
            "--json",
            "bench-alloc",
            "--device",
            "sim:80GiB",
            "-n",
            "1000000000",
        ],
        vec![
            "--json",
            "bench-alloc",
            "--device",
            "sim:1GiB",
            "--min-speedup",
            "NaN",
        ],
        vec![
            "--json",
            "bench-alloc",
            "--device",
            "sim:1GiB",
            "--min-speedup",
            "inf",
        ],
        vec![
            "--json",
            "stress",
            "--device",
            "host:64MiB",
            "--max-size",
            "0",
        ],
    ] {
        let out = gpumem().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        one_line_error(&out);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["error"]["exit_code"], 2, "{args:?}");
    }
    // A report whose headroom is beyond 64 bits still serializes, and exits 3 like text mode.
    let out = gpumem()
        .args([
            "--json",
            "select",
            "--device",
            "sim:80GiB",
            "--bytes",
            "9300000000000000000",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["plan"]["kind"], "none");
}

#[test]
fn an_inventory_is_one_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.json");
    let doc = r#"{"schema_version": 1, "backends": []}"#;
    std::fs::write(&path, format!("{doc}\n{doc}\n")).unwrap();
    let out = gpumem()
        .args(["select", "--bytes", "1GiB", "--inventory"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line_error(&out).contains("trailing data after the document"));
}

/// Columns a printed line takes (characters, less ANSI colour).
fn visible(line: &str) -> usize {
    let mut width = 0;
    let mut escape = false;
    for c in line.chars() {
        match (escape, c) {
            (false, '\u{1b}') => escape = true,
            (true, 'm') => escape = false,
            (true, _) => {}
            (false, _) => width += 1,
        }
    }
    width
}

/// Every command's text fits the terminal width it is given ($COLUMNS off a terminal), and
/// `--wide` gives the columns a narrow terminal leaves out.
#[test]
fn text_output_fits_80_and_120_columns() {
    let commands: [&[&str]; 8] = [
        &["discover"],
        &["estimate", "--model", "llama-3.1-8b"],
        &["estimate", "--list-models"],
        &[
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--mode",
            "train",
            "--context",
            "4096",
        ],
        &[
            "select",
            "--model",
            "llama-3.1-70b",
            "--device",
            "sim:80GiB",
            "--device",
            "sim:80GiB",
        ],
        &[
            "select",
            "--model",
            "llama-3.1-8b",
            "--dtype",
            "q8_0",
            "--engine",
            "llama.cpp",
            "--device",
            "sim:8GiB",
            "--ram",
            "32GiB",
        ],
        &[
            "bench-alloc",
            "--device",
            "host:64MiB",
            "-n",
            "300",
            "--runs",
            "2",
        ],
        &[
            "stress",
            "--device",
            "host:64MiB",
            "--phase",
            "churn",
            "--ops",
            "40",
            "--max-size",
            "256KiB",
        ],
    ];
    for width in [80, 120] {
        for args in commands {
            let out = gpumem()
                .env("COLUMNS", width.to_string())
                .args(args)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!text.is_empty(), "{args:?}");
            for line in text.lines() {
                assert!(
                    visible(line) <= width,
                    "{args:?} at {width}: {} columns:\n{line}",
                    visible(line)
                );
            }
        }
    }
    let narrow = gpumem()
        .env("COLUMNS", "80")
        .arg("discover")
        .output()
        .unwrap();
    let narrow = String::from_utf8_lossy(&narrow.stdout);
    assert!(
        !narrow.contains("capability") && narrow.contains("device 0: unified memory;"),
        "{narrow}"
    );
    let wide = gpumem()
        .env("COLUMNS", "80")
        .args(["--wide", "discover"])
        .output()
        .unwrap();
    let wide = String::from_utf8_lossy(&wide.stdout);
    assert!(
        wide.contains("capability") && wide.lines().any(|l| visible(l) > 80),
        "{wide}"
    );
}

#[test]
fn select_help_is_grouped_and_short_help_is_short() {
    let long =
        String::from_utf8(gpumem().args(["select", "--help"]).output().unwrap().stdout).unwrap();
    for heading in [
        "\nModel:\n",
        "\nWorkload:\n",
        "\nTraining (--mode train):\n",
        "\nWhere:\n",
        "\nvLLM (--engine vllm):\n",
        "\nllama.cpp (--engine llama.cpp):\n",
        "\nSGLang (--engine sglang):\n",
        "\nOllama (--engine ollama):\n",
        "\nGeneric rule (plans no engine models):\n",
    ] {
        assert!(
            long.contains(heading),
            "{heading:?} missing from select --help"
        );
    }
    let short =
        String::from_utf8(gpumem().args(["select", "-h"]).output().unwrap().stdout).unwrap();
    assert!(short.lines().count() <= 100, "{}", short.lines().count());
    // The engines' and training flags are in --help only, and -h says so.
    assert!(!short.contains("--gpu-memory-utilization"), "{short}");
    assert!(!short.contains("--fsdp"), "{short}");
    assert!(short.contains("--device <SPEC>"), "{short}");
    assert!(short.ends_with(
        "The training, vLLM, SGLang, Ollama, llama.cpp and generic-rule flags: see --help.\n"
    ));
}
