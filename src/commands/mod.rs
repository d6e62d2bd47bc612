//! One module per subcommand: each turns parsed flags into library calls and a report for the
//! output layer. Nothing here computes what a library module could.

mod bench_alloc;
mod discover;
mod estimate;
mod exports;
pub mod options;
mod select;
mod signals;
mod stress;

use anyhow::Result;

use crate::cli::{Command, GlobalArgs};
use crate::exit::Exit;
use crate::model::{LoadOptions, ModelSource, SourceSpec};
use crate::output::Output;

/// Runs one subcommand and says how it ended; errors are mapped to exit codes by the caller.
pub fn run(command: Command, global: &GlobalArgs, out: &Output) -> Result<Exit> {
    match command {
        Command::Discover(args) => discover::run(&args, global, out),
        Command::Estimate(args) => estimate::run(&args, out),
        Command::Select(args) => select::run(&args, out),
        Command::BenchAlloc(args) => bench_alloc::run(&args, out),
        Command::Stress(args) => stress::run(&args, out),
    }
}

/// Reads a model from its source and prints what the user should know about it (an unknown
/// family estimated generically, a vision tower not counted, …).
fn load_model(spec: &SourceSpec, options: &LoadOptions, out: &Output) -> Result<ModelSource> {
    let model = crate::model::load_with(spec, options)?;
    for warning in &model.warnings {
        out.warn(&crate::output::estimate::warning_text(warning));
    }
    Ok(model)
}
