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
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut buf).unwrap();
    files.push((root.join("man/gpumem.1"), String::from_utf8(buf).unwrap()));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("gpumem-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("gpumem {}", sub.get_name()));
        let mut buf = Vec::new();
        clap_mangen::Man::new(page).render(&mut buf).unwrap();
        files.push((
            root.join(format!("man/{name}.1")),
            String::from_utf8(buf).unwrap(),
        ));
    }
    files
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
