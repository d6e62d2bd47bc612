//! Completions and man pages are generated from the clap definitions and committed; this test
//! regenerates them and fails with a diff when the committed copies are stale.
//!
//! Refresh them with: `GPUMEM_BLESS=1 cargo test generated_files`

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;
use gpumem::cli::Cli;

fn generated() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for (shell, name) in [
        (Shell::Bash, "gpumem.bash"),
        (Shell::Zsh, "_gpumem"),
        (Shell::Fish, "gpumem.fish"),
        (Shell::PowerShell, "_gpumem.ps1"),
        (Shell::Elvish, "gpumem.elv"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "gpumem", &mut buf);
        files.push((
            root.join("completions").join(name),
            String::from_utf8(buf).unwrap(),
        ));
    }
    let mut cmd = Cli::command();
    cmd.build();
    let subcommands: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .filter(|s| s != "help")
        .collect();
    files.push((
        root.join("man/gpumem.1"),
        man_page(cmd.clone(), None, &subcommands),
    ));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("gpumem-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("gpumem {}", sub.get_name()));
        files.push((
            root.join(format!("man/{name}.1")),
            man_page(page, Some(sub.get_name()), &subcommands),
        ));
    }
    files
}

/// A man page: clap's sections (the long help's tail left out), then EXAMPLES, ENVIRONMENT,
/// EXIT STATUS and SEE ALSO from the same tables `--help` prints.
fn man_page(cmd: clap::Command, sub: Option<&str>, subcommands: &[String]) -> String {
    use clap_mangen::roff::{bold, roman, Roff};
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf).unwrap();
    man.render_name_section(&mut buf).unwrap();
    man.render_synopsis_section(&mut buf).unwrap();
    man.render_description_section(&mut buf).unwrap();
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut buf).unwrap();
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut buf).unwrap();
    }
    let mut roff = Roff::new();
    let examples: Vec<_> = gpumem::cli::EXAMPLES
        .iter()
        .filter(|(c, _, _)| sub.is_none_or(|s| *c == s))
        .collect();
    roff.control("SH", ["EXAMPLES"]);
    for (_, what, lines) in examples {
        roff.control("PP", []).text([roman(format!("{what}:"))]);
        roff.control("RS", ["4"]).control("nf", []);
        for line in lines.lines() {
            roff.text([roman(line.trim_start())]);
        }
        roff.control("fi", []).control("RE", []);
    }
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, meaning) in gpumem::cli::ENVIRONMENT {
        roff.control("TP", [])
            .text([bold(*name)])
            .text([roman(*meaning)]);
    }
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in gpumem::exit::TABLE {
        roff.control("TP", [])
            .text([bold(*code)])
            .text([roman(meaning.replace('`', ""))]);
    }
    roff.control("PP", [])
        .text([roman(gpumem::exit::NOTE.replace('`', ""))]);
    roff.control("SH", ["SEE ALSO"]);
    let others: Vec<String> = std::iter::once("gpumem".to_string())
        .chain(subcommands.iter().map(|s| format!("gpumem-{s}")))
        .filter(|page| sub.is_none_or(|s| *page != format!("gpumem-{s}")))
        .filter(|page| sub.is_some() || page != "gpumem")
        .map(|page| format!("{page}(1)"))
        .collect();
    roff.text([roman(format!(
        "{}. The guides in docs/ beside the source: commands.md, engines.md, ci.md, \
         configuration.md, json-schema.md.",
        others.join(", ")
    ))]);
    roff.to_writer(&mut buf).unwrap();
    man.render_version_section(&mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

/// The README's exit-code table is the one `--help` and the man pages print.
#[test]
fn readme_exit_codes_are_the_table() {
    let readme =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let rows: Vec<&str> = readme
        .lines()
        .skip_while(|l| *l != "## Exit codes")
        .skip(4)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let expected: Vec<String> = gpumem::exit::TABLE
        .iter()
        .map(|(code, meaning)| format!("| {code} | {meaning} |"))
        .collect();
    assert_eq!(rows, expected);
}

#[test]
fn completions_and_man_pages_are_current() {
    let bless = std::env::var_os("GPUMEM_BLESS").is_some();
    let mut stale = Vec::new();
    for (path, content) in generated() {
        let current = fs::read_to_string(&path).unwrap_or_default();
        if current == content {
            continue;
        }
        if bless {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &content).unwrap();
        } else {
            let diff: Vec<String> = content
                .lines()
                .zip(current.lines().chain(std::iter::repeat("<missing>")))
                .filter(|(new, old)| new != old)
                .take(3)
                .map(|(new, old)| format!("    committed: {old}\n    generated: {new}"))
                .collect();
            stale.push(format!("{}\n{}", path.display(), diff.join("\n")));
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files; run `GPUMEM_BLESS=1 cargo test generated_files`:\n{}",
        stale.join("\n")
    );
}

/// Completions offer catalog models, device specs and precisions, not file names.
#[test]
fn completions_offer_models_devices_and_precisions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let fish = fs::read_to_string(root.join("gpumem.fish")).unwrap();
    let flag = |sub: &str, long: &str| {
        fish.split("\ncomplete ")
            .find(|l| {
                l.contains(&format!("__fish_gpumem_using_subcommand {sub}\""))
                    && l.contains(&format!(" -l {long} "))
            })
            .unwrap_or_else(|| panic!("{sub} --{long} has no completion"))
            .to_string()
    };
    assert!(flag("estimate", "model").contains("llama-3.1-8b"));
    assert!(flag("estimate", "dtype").contains("q4_k_m"));
    assert!(flag("estimate", "kv-dtype").contains("q8_0"));
    assert!(flag("select", "device").contains("sim:80GiB"));
    for sub in ["bench-alloc", "stress"] {
        let device = flag(sub, "device");
        assert!(
            device.contains("vulkan:0") && device.contains(" -f "),
            "{device}"
        );
    }
}
