//! The gpumem binary: parse, dispatch, map errors to exit codes.

use std::io::{self, IsTerminal};
use std::process::ExitCode;

use clap::Parser;
use gpumem::cli::{Cli, ColorWhen, GlobalArgs};
use gpumem::error::CliError;
use gpumem::exit::Exit;
use gpumem::output::{Format, Output};

fn main() -> ExitCode {
    // A driver probe in a child process (see backend::Isolation): no CLI, one backend, JSON out.
    if let Some(code) = gpumem::backend::run_probe_child() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return clap_exit(&err),
    };
    init_logging(&cli.global);
    let out = Output::new(
        if cli.global.json {
            Format::Json
        } else {
            Format::Text
        },
        use_color(cli.global.color),
        cli.global.quiet,
    )
    .with_width(gpumem::output::table_width(cli.global.wide));
    match gpumem::commands::run(cli.command, &cli.global, &out) {
        Ok(exit) => exit.into(),
        Err(err) if gpumem::error::is_broken_pipe(&err) => Exit::Success.into(),
        Err(err) => {
            let model_error = err.downcast_ref::<gpumem::model::ModelError>();
            let unknown_model = match model_error {
                Some(gpumem::model::ModelError::UnknownModel { .. }) => true,
                Some(gpumem::model::ModelError::Hub(e)) => e.is_missing(),
                _ => false,
            };
            let hub_unavailable = matches!(model_error, Some(gpumem::model::ModelError::Hub(_)));
            let device_unavailable = err.downcast_ref::<gpumem::backend::OpenError>().is_some();
            let exit = match err.downcast_ref::<CliError>() {
                Some(CliError::Usage(_)) => Exit::Usage,
                Some(CliError::Interrupted(exit, _) | CliError::AfterReport(exit, _)) => *exit,
                // A name that is not a model is a usage error, like any other bad value.
                _ if unknown_model => Exit::Usage,
                _ if hub_unavailable => Exit::HubUnavailable,
                _ if device_unavailable => Exit::DeviceUnavailable,
                _ => Exit::Failure,
            };
            let message = gpumem::error::error_line(&err);
            eprintln!("gpumem: error: {}", gpumem::output::one_line(&message));
            if !matches!(
                err.downcast_ref::<CliError>(),
                Some(CliError::AfterReport(..))
            ) {
                let _ = out.emit_error(&message, exit.code());
            }
            exit.into()
        }
    }
}

/// Help and version go to stdout with 0; usage errors print clap's first line and exit 2.
fn clap_exit(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp => {
            let _ = err.print();
            Exit::Success.into()
        }
        ErrorKind::DisplayVersion => {
            let _ = err.print();
            // With -v or --verbose beside --version, the engines' releases each estimate
            // follows (clap stops at --version, so the words are read as they were given).
            let verbose = std::env::args_os()
                .skip(1)
                .take_while(|a| a != "--")
                .any(|a| {
                    a == "--verbose"
                        || a.to_str().is_some_and(|s| {
                            s.len() > 1
                                && s.starts_with('-')
                                && !s.starts_with("--")
                                && s[1..].chars().all(|c| c == 'v')
                        })
                });
            if verbose {
                print!("{}", gpumem::output::engines_modelled());
            }
            Exit::Success.into()
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            Exit::Usage.into()
        }
        _ => {
            // clap's message is its first paragraph (a value may hold newlines of its own);
            // usage and tips follow a blank line.
            let rendered = err.render().to_string();
            // Its own line breaks (before "[possible values: …]") become spaces.
            let first = rendered
                .split("\n\n")
                .next()
                .unwrap_or("error: invalid usage")
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ");
            let first = first.strip_prefix("error: ").unwrap_or(&first);
            let message = format!("{first}{} (see 'gpumem --help')", suggestion(err));
            eprintln!("gpumem: error: {}", gpumem::output::one_line(&message));
            // Parsing failed, so the flags are not known: look for --json among the words
            // before any `--`, as the parser would have.
            let json = std::env::args_os()
                .skip(1)
                .take_while(|a| a != "--")
                .any(|a| a == "--json");
            if json {
                let out = Output::new(Format::Json, false, true);
                let _ = out.emit_error(&message, Exit::Usage.code());
            }
            Exit::Usage.into()
        }
    }
}

/// clap's nearest match for a mistyped flag, subcommand or value: "; did you mean '--model'?".
fn suggestion(err: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let kinds = [
        ContextKind::SuggestedArg,
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedValue,
    ];
    kinds
        .iter()
        .find_map(|k| match err.get(*k)? {
            ContextValue::String(s) => Some(s.clone()),
            ContextValue::Strings(v) => v.first().cloned(),
            _ => None,
        })
        .map(|s| format!(" (did you mean '{s}'?)"))
        .unwrap_or_default()
}

fn use_color(when: ColorWhen) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && io::stdout().is_terminal()
        }
    }
}

fn init_logging(global: &GlobalArgs) {
    let level = match (global.quiet, global.verbose) {
        (true, _) => log::LevelFilter::Error,
        (false, 0) => log::LevelFilter::Warn,
        (false, 1) => log::LevelFilter::Info,
        (false, 2) => log::LevelFilter::Debug,
        (false, _) => log::LevelFilter::Trace,
    };
    env_logger::Builder::new()
        .filter_level(level)
        .format_timestamp_millis()
        .target(env_logger::Target::Stderr)
        .init();
}
