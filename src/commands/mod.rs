//! One module per subcommand: each turns parsed flags into library calls and a report for the
//! output layer. Nothing here computes what a library module could.

mod bench_alloc;
mod discover;
mod estimate;
pub mod options;
mod select;
mod signals;
mod stress;

use anyhow::Result;

use crate::cli::{Command, GlobalArgs};
use crate::exit::Exit;
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
