//! `gpumem select`.

use anyhow::Result;

use crate::cli::SelectArgs;

use crate::error::CliError;
use crate::exit::Exit;
use crate::output::Output;

/// Runs `gpumem select`.
pub fn run(_args: &SelectArgs, _out: &Output) -> Result<Exit> {
    Err(CliError::NotImplemented {
        command: "select",
        issue: 6,
    }
    .into())
}
