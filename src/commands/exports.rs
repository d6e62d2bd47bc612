//! `--export-markdown`, `--export-junit` and `--export-prometheus` for `bench-alloc` and
//! `stress`: each file written whole, never onto an input; a FIFO, a device or standard output
//! written through (see [`crate::input::write_output`]). The step summary GitHub reads holds
//! every earlier step's section too: the run's is added after them, and the file replaced in one
//! step.

use std::path::Path;

use anyhow::{Context, Result};

use super::options::markdown_path;
use crate::cli::Exports;
use crate::error::CliError;
use crate::exit::Exit;

/// A run's three exports, rendered only when asked for.
pub struct Renderers<M, J, P> {
    /// The Markdown section.
    pub markdown: M,
    /// The JUnit XML document.
    pub junit: J,
    /// The Prometheus exposition.
    pub prometheus: P,
}

/// Writes the exports asked for: Markdown to `--export-markdown`'s file (or after
/// `$GITHUB_STEP_SUMMARY`'s sections), JUnit and Prometheus to theirs.
pub fn write<M, J, P>(flags: &Exports, inputs: &[&Path], render: Renderers<M, J, P>) -> Result<()>
where
    M: FnOnce() -> String,
    J: FnOnce() -> String,
    P: FnOnce() -> String,
{
    if let Some(path) = markdown_path(&flags.export_markdown)? {
        let mut text = if matches!(flags.export_markdown, Some(None)) {
            crate::input::read_bounded(&path, 64 << 20, "$GITHUB_STEP_SUMMARY")
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&(render.markdown)());
        crate::input::write_output(&path, text.as_bytes(), inputs)
            .context("writing --export-markdown")?;
    }
    if let Some(path) = &flags.export_junit {
        crate::input::write_output(path, (render.junit)().as_bytes(), inputs)
            .context("writing --export-junit")?;
    }
    if let Some(path) = &flags.export_prometheus {
        crate::input::write_output(path, (render.prometheus)().as_bytes(), inputs)
            .context("writing --export-prometheus")?;
    }
    Ok(())
}

/// An output that could not be written once the report is out: exit 1 with the error's line,
/// and no second JSON document after the report. A closed standard output stays the broken
/// pipe it is (a quiet exit 0, as for the report itself).
pub fn after_report(err: anyhow::Error) -> anyhow::Error {
    if crate::error::is_broken_pipe(&err) {
        return err;
    }
    CliError::AfterReport(Exit::Failure, crate::error::error_line(&err)).into()
}
