//! `gpumem stress`.

use anyhow::Result;

use crate::cli::StressArgs;

use crate::error::CliError;
use crate::exit::Exit;
use crate::output::Output;

/// Runs `gpumem stress`.
pub fn run(_args: &StressArgs, _out: &Output) -> Result<Exit> {
    Err(CliError::NotImplemented {
        command: "stress",
        issue: 8,
    }
    .into())
}
