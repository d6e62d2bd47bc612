//! `--export-markdown` and `--export-junit` for `bench-alloc` and `stress`: each file written
//! whole, never onto an input. The step summary GitHub reads holds every earlier step's section
//! too: the run's is added after them, and the file replaced in one step.

use std::path::Path;

use anyhow::{Context, Result};

use super::options::markdown_path;

/// Writes the exports asked for: `markdown` to `--export-markdown`'s file (or after
/// `$GITHUB_STEP_SUMMARY`'s sections), `junit` to `--export-junit`'s.
pub fn write(
    markdown_flag: &Option<Option<std::path::PathBuf>>,
    junit_flag: Option<&Path>,
    inputs: &[&Path],
    markdown: impl FnOnce() -> String,
    junit: impl FnOnce() -> String,
) -> Result<()> {
    if let Some(path) = markdown_path(markdown_flag)? {
        let mut text = if matches!(markdown_flag, Some(None)) {
            crate::input::read_bounded(&path, 64 << 20, "$GITHUB_STEP_SUMMARY")
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&markdown());
        crate::input::write_atomic(&path, text.as_bytes(), inputs)
            .with_context(|| format!("writing --export-markdown {}", path.display()))?;
    }
    if let Some(path) = junit_flag {
        crate::input::write_atomic(path, junit().as_bytes(), inputs)
            .with_context(|| format!("writing --export-junit {}", path.display()))?;
    }
    Ok(())
}
