//! The CI examples in `examples/ci/`: both workflows parse and call the shared step script, and
//! the script itself, run here on the host device, keeps a baseline, passes unchanged reruns,
//! fails a regression and tells a lost GPU apart.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/ci")
        .join(name)
}

fn load(name: &str) -> Yaml {
    let text = std::fs::read_to_string(example(name)).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(docs.len(), 1, "{name}");
    docs.remove(0)
}

/// The step script names every variable a workflow sets.
fn check_variables(vars: &Yaml, what: &str) {
    let script = std::fs::read_to_string(example("gpumem-bench.sh")).unwrap();
    let vars = vars
        .as_hash()
        .unwrap_or_else(|| panic!("{what}: no variables"));
    for key in vars.keys() {
        let key = key.as_str().unwrap();
        assert!(
            script.contains(&format!("#   {key} ")),
            "{what}: {key} is not documented in the script"
        );
    }
}

#[test]
fn github_workflow_parses_and_keeps_the_baseline_per_runner() {
    let wf = load("github-actions.yml");
    let job = &wf["jobs"]["bench-alloc"];
    let runs_on: Vec<&str> = job["runs-on"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(
        runs_on.contains(&"self-hosted") && runs_on.contains(&"gpu"),
        "{runs_on:?}"
    );
    check_variables(&job["env"], "github-actions.yml");
    let steps = job["steps"].as_vec().unwrap();
    let uses = |action: &str| {
        steps
            .iter()
            .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(action)))
            .unwrap_or_else(|| panic!("no step uses {action}"))
    };
    let (restore, save) = (uses("actions/cache/restore@"), uses("actions/cache/save@"));
    let baseline = job["env"]["BENCH_BASELINE"].as_str().unwrap();
    assert_eq!(restore["with"]["path"].as_str(), Some(baseline));
    assert_eq!(save["with"]["path"].as_str(), Some(baseline));
    assert_eq!(restore["with"]["key"], save["with"]["key"]);
    assert!(restore["with"]["key"]
        .as_str()
        .unwrap()
        .contains("runner.name"));
    assert!(steps
        .iter()
        .any(|s| s["run"].as_str() == Some("examples/ci/gpumem-bench.sh")));
    let upload = uses("actions/upload-artifact@");
    assert_eq!(upload["if"].as_str(), Some("always()"));
    // A self-hosted runner gets a toolchain, the binary is cached by its source, and the
    // JUnit reporter may publish its check.
    uses("dtolnay/rust-toolchain@");
    let binary = uses("actions/cache@");
    assert!(binary["with"]["key"]
        .as_str()
        .unwrap()
        .contains("hashFiles('Cargo.lock', 'src/**')"));
    assert_eq!(wf["permissions"]["checks"].as_str(), Some("write"));
    let junit = uses("mikepenz/action-junit-report@");
    assert_eq!(junit["if"].as_str(), Some("always()"));
    // A pull request restores main's baseline: a prefix of the key main saves under.
    let prefix = restore["with"]["restore-keys"].as_str().unwrap().trim();
    assert!(save["with"]["key"].as_str().unwrap().starts_with(prefix));
}

#[test]
fn gitlab_job_parses_and_reports_junit() {
    let ci = load("gitlab-ci.yml");
    let job = &ci["gpumem-bench-alloc"];
    assert_eq!(job["tags"][0].as_str(), Some("gpu"));
    check_variables(&job["variables"], "gitlab-ci.yml");
    let script: Vec<&str> = job["script"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(
        script.contains(&"examples/ci/gpumem-bench.sh"),
        "{script:?}"
    );
    let out = job["variables"]["BENCH_OUT"].as_str().unwrap();
    assert_eq!(
        job["artifacts"]["reports"]["junit"].as_str(),
        Some(format!("{out}/junit.xml").as_str())
    );
    let baseline = job["variables"]["BENCH_BASELINE"].as_str().unwrap();
    assert_eq!(job["cache"]["paths"][0].as_str(), Some(baseline));
    // A merge request's branch falls back to the default branch's baseline.
    let key = job["cache"]["key"].as_str().unwrap();
    let fallback = job["cache"]["fallback_keys"][0].as_str().unwrap();
    assert_eq!(
        key.replace("$CI_COMMIT_REF_SLUG", "$CI_DEFAULT_BRANCH"),
        fallback
    );
    assert_eq!(job["allow_failure"]["exit_codes"][0].as_i64(), Some(4));
}

/// Runs the step script in `dir` on the host device with a workload whose gated figures do not
/// depend on timing.
fn step(dir: &Path, device: &str, update: bool) -> Output {
    std::process::Command::new("bash")
        .arg(example("gpumem-bench.sh"))
        .current_dir(dir)
        .env("BENCH_GPUMEM", assert_cmd::cargo::cargo_bin("gpumem"))
        .env("BENCH_DEVICE", device)
        .env("BENCH_ARGS", "--workload same-size -n 300 --size 256KiB")
        .env("BENCH_RUNS", "3")
        .env("BENCH_WARMUP", "1")
        .env(
            "BENCH_GATES",
            "hit-rate:10 peak-reserved:10 fragmentation:10",
        )
        .env("BENCH_UPDATE", if update { "1" } else { "0" })
        .env("GITHUB_STEP_SUMMARY", dir.join("step-summary.md"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap()
}

fn expect(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    stderr
}

#[test]
fn the_step_script_keeps_a_baseline_passes_reruns_and_fails_a_regression() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("gpumem-baseline.json");
    let first = expect(&step(dir.path(), "host:64MiB", true), 0);
    assert!(
        first.contains("no baseline at gpumem-baseline.json yet"),
        "{first}"
    );
    assert!(first.contains("baseline updated"), "{first}");
    let saved = std::fs::read(&baseline).unwrap();
    for _ in 0..5 {
        expect(&step(dir.path(), "host:64MiB", false), 0);
        let summary = dir.path().join("gpumem-out/junit.xml");
        assert!(std::fs::read_to_string(summary)
            .unwrap()
            .contains("failures=\"0\""));
    }
    assert_eq!(
        std::fs::read(&baseline).unwrap(),
        saved,
        "reruns off main keep the baseline"
    );
    let page = std::fs::read_to_string(dir.path().join("step-summary.md")).unwrap();
    assert_eq!(
        page.matches("### gpumem bench-alloc: passed").count(),
        6,
        "{page}"
    );

    // The baseline's hit rate 12 % above this build's.
    crate::common::scale_baseline_metric(&baseline, "hit-rate", 1.12);
    let doctored = std::fs::read(&baseline).unwrap();
    let failed = expect(&step(dir.path(), "host:64MiB", true), 1);
    assert!(
        failed.contains("regressed against the baseline: hit-rate -10.7%"),
        "{failed}"
    );
    assert!(
        failed.contains("gpumem-bench: the pool regressed"),
        "{failed}"
    );
    let junit = std::fs::read_to_string(dir.path().join("gpumem-out/junit.xml")).unwrap();
    assert!(junit.contains("failures=\"1\""), "{junit}");
    // A failed run never replaces the baseline, even on main.
    assert_eq!(std::fs::read(&baseline).unwrap(), doctored);

    // A lost GPU: exit 4, said as such.
    let lost = expect(&step(dir.path(), "cuda:7", false), 4);
    assert!(lost.contains("the GPU is missing or unusable"), "{lost}");
}

/// The inventories the select guide uses are shipped and plan as it says.
#[test]
fn shipped_inventories_plan_the_guides_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/inventories");
    let out = crate::common::gpumem()
        .args([
            "--json",
            "select",
            "--model",
            "llama-3.1-70b",
            "--context",
            "8192",
        ])
        .arg("--inventory")
        .arg(dir.join("cluster.json"))
        .arg("--inventory")
        .arg(dir.join("gpu-box.csv"))
        .output()
        .unwrap();
    expect(&out, 0);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts: Vec<&str> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["host"].as_str())
        .collect();
    for host in ["h100-a", "l4-c", "cpu-d", "gpu-box"] {
        assert!(hosts.contains(&host), "{host} missing: {hosts:?}");
    }
    // The cordoned node's GPUs are held back, not planned on.
    assert!(!doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["host"] == "a100-b" && c["backend"] == "cuda"));
    assert_eq!(doc["plan"]["kind"], "tensor_parallel");
    assert_eq!(doc["plan"]["placements"][0]["host"], "h100-a");
}
