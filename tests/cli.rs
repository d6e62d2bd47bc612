//! The built binary's contract: help, exit codes, one-line errors, JSON that parses.

#![allow(clippy::unwrap_used)]

mod common;

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
    assert!(help.contains("3  does not fit"));
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
    assert_eq!(output.status.code(), Some(1));
    let line = one_line_error(&output);
    assert!(line.contains("unknown model 'no-such-model'"), "{line}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["error"]["exit_code"], 1);
}

#[test]
fn quiet_and_verbose_conflict() {
    let output = gpumem().args(["-q", "-v", "discover"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}
