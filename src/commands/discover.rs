//! `gpumem discover`.

use anyhow::Result;

use super::options::discover_options;
use crate::backend::{discover_with, host_info, recommend, same_gpus};
use crate::cli::{DiscoverArgs, DiscoverFormat, GlobalArgs};
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::discover::{prometheus, DiscoverReport};
use crate::output::Output;

/// Runs `gpumem discover`: exits 0 whatever is missing, because "no GPU here" is an answer, not
/// a failure; but with `--backend`, where none of the backends named has a device, exits 4
/// after the report, as a CI step asking for that GPU must fail.
pub fn run(args: &DiscoverArgs, global: &GlobalArgs, out: &Output) -> Result<Exit> {
    let backends = discover_with(&discover_options(args));
    let report = DiscoverReport {
        host: host_info(),
        recommended: recommend(&backends),
        same_gpu: same_gpus(&backends),
        backends,
    };
    match (args.format, global.json) {
        (DiscoverFormat::Prometheus, false) => out.write_stdout(&prometheus(&report))?,
        (DiscoverFormat::Json, _) | (_, true) => out.emit_json(&report)?,
        (DiscoverFormat::Table, false) => out.emit(&report)?,
    }
    if !args.backends.is_empty() && report.backends.iter().all(|b| b.devices.is_empty()) {
        let why: Vec<String> = report
            .backends
            .iter()
            .map(|b| match &b.reason {
                Some(reason) => format!("{}: {reason}", b.backend),
                None => format!("{}: no devices", b.backend),
            })
            .collect();
        return Err(CliError::AfterReport(
            Exit::DeviceUnavailable,
            format!("no device on the backends asked for ({})", why.join("; ")),
        )
        .into());
    }
    Ok(Exit::Success)
}
