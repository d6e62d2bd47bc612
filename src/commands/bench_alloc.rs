//! `gpumem bench-alloc`.

use anyhow::Result;

use crate::cli::BenchAllocArgs;

use crate::error::CliError;
use crate::exit::Exit;
use crate::output::Output;

/// Runs `gpumem bench-alloc`.
pub fn run(_args: &BenchAllocArgs, _out: &Output) -> Result<Exit> {
    Err(CliError::NotImplemented {
        command: "bench-alloc",
        issue: 7,
    }
    .into())
}
