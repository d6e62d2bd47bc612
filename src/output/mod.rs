//! The one output layer: every report is rendered here, as tables for people or as a versioned
//! JSON document for machines. Library modules compute and never print; commands build a report
//! and hand it to [`Output`].

pub mod bench;
pub mod discover;
mod engine;
mod engine_ollama;
mod engine_sglang;
mod escape;
pub mod estimate;
pub mod estimate_compare;
pub mod estimate_ollama;
mod estimate_pytorch;
pub mod estimate_sglang;
pub mod estimate_vllm;
pub mod export;
mod json;
mod launch;
mod progress;
pub mod prometheus;
pub mod runs;
pub mod select;
pub mod stress;
mod table;
pub mod timeline;
pub mod transfer;

use std::io::{self, IsTerminal, Write};

use serde::Serialize;

pub use escape::{one_line, terminal_text};
pub use json::{document, error_document, SCHEMA_VERSION};
pub use progress::Progress;
pub use table::{new_table, table_width, Style};

/// A report that can be shown as text (tables) and serialized as JSON.
pub trait Report: Serialize {
    /// The human rendering: one or more comfy-table tables and short lines.
    fn render_text(&self, style: &Style) -> String;

    /// The rendering `--quiet` prints, where the report has a shorter one than
    /// [`Report::render_text`] (`None`: the whole of it).
    fn render_brief(&self, _style: &Style) -> Option<String> {
        None
    }
}

/// Machine or human output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables and lines for a person.
    Text,
    /// One JSON document on stdout.
    Json,
}

/// Where and how results are written.
#[derive(Debug, Clone)]
pub struct Output {
    format: Format,
    style: Style,
    quiet: bool,
    show_progress: bool,
}

impl Output {
    /// Builds the output settings from the global flags.
    pub fn new(format: Format, color: bool, quiet: bool) -> Self {
        let show_progress = !quiet && io::stdout().is_terminal() && io::stderr().is_terminal();
        Output {
            format,
            style: Style {
                color,
                width: Some(80),
            },
            quiet,
            show_progress,
        }
    }

    /// Tables fit in `width` columns (`None`: `--wide`).
    pub fn with_width(mut self, width: Option<u16>) -> Self {
        self.style.width = width;
        self
    }

    /// The format chosen from `--json`/`--format`.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether output is JSON.
    pub fn is_json(&self) -> bool {
        self.format == Format::Json
    }

    /// The text style (colour on or off).
    pub fn style(&self) -> &Style {
        &self.style
    }

    /// Writes a report to stdout in the chosen format.
    pub fn emit<R: Report>(&self, report: &R) -> io::Result<()> {
        match self.format {
            Format::Json => self.emit_json(report),
            Format::Text => {
                let brief = self
                    .quiet
                    .then(|| report.render_brief(&self.style))
                    .flatten();
                let text = brief.unwrap_or_else(|| report.render_text(&self.style));
                let text = match self.style.width {
                    Some(width) => table::fit_width(&text, usize::from(width)),
                    None => table::unmark(&text),
                };
                self.write_stdout(&terminal_text(&text))
            }
        }
    }

    /// Writes a report as JSON whatever the global format (for `--format json`).
    pub fn emit_json<R: Serialize>(&self, report: &R) -> io::Result<()> {
        let doc = document(report).map_err(io::Error::other)?;
        self.write_stdout(&format!("{doc:#}\n"))
    }

    /// Writes raw text to stdout (formats other than table/JSON, e.g. Prometheus).
    pub fn write_stdout(&self, text: &str) -> io::Result<()> {
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())?;
        if !text.ends_with('\n') && !text.is_empty() {
            out.write_all(b"\n")?;
        }
        out.flush()
    }

    /// Writes the JSON error document on stdout when output is JSON (the one-line message goes
    /// to stderr from `main` either way).
    pub fn emit_error(&self, message: &str, exit_code: u8) -> io::Result<()> {
        if self.is_json() {
            let doc = error_document(message, exit_code);
            self.write_stdout(&format!("{doc:#}\n"))?;
        }
        Ok(())
    }

    /// A short note for a person on stderr; silent with --quiet or JSON output.
    pub fn note(&self, message: &str) {
        if !self.quiet && !self.is_json() {
            let _ = writeln!(io::stderr(), "{}", terminal_text(message));
        }
    }

    /// A warning on stderr (shown with --json too; silent only with --quiet).
    pub fn warn(&self, message: &str) {
        if !self.quiet {
            let _ = writeln!(io::stderr(), "gpumem: warning: {}", one_line(message));
        }
    }

    /// A progress bar on stderr, hidden unless stdout and stderr are terminals and not --quiet.
    pub fn progress(&self, total: u64, label: &str) -> Progress {
        Progress::new(self.show_progress, total, label)
    }
}

/// A rate as a whole count with separators.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a float cast saturates; a rate of operations"
)]
pub(crate) fn per_sec(rate: f64) -> String {
    thousands(rate.round().max(0.0) as u64)
}

/// Nanoseconds in the unit that reads best (ns, µs, ms), two decimals above ns.
pub(crate) fn ns(v: u64) -> String {
    if v >= 1_000_000 {
        format!("{:.2} ms", v as f64 / 1e6)
    } else if v >= 1_000 {
        format!("{:.2} µs", v as f64 / 1e3)
    } else {
        format!("{v} ns")
    }
}

/// `n` with thousands separators: 1234567 -> "1,234,567".
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `line` wrapped at `width` columns by words, its leading indent kept and continuation
/// lines indented four more.
pub(crate) fn wrap_into(text: &mut String, line: &str, width: usize) {
    use std::fmt::Write as _;
    let body = line.trim_start_matches(' ');
    let indent = &line[..line.len() - body.len()];
    let mut current = indent.to_string();
    for word in unbroken_words(body) {
        let would = current.chars().count() + 1 + word.chars().count();
        if current.len() > indent.len() && would > width {
            let _ = writeln!(text, "{current}");
            current = format!("{indent}    {word}");
        } else {
            if current.len() > indent.len() {
                current.push(' ');
            }
            current.push_str(&word);
        }
    }
    if current.len() > indent.len() {
        let _ = writeln!(text, "{current}");
    }
}

/// `body`'s words, a unit kept with the number before it ("90 %", "126.36 GiB") so that a
/// wrapped line never leaves a figure without its unit.
fn unbroken_words(body: &str) -> Vec<String> {
    const UNITS: [&str; 12] = [
        "%", "B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "ms", "µs",
    ];
    let mut words: Vec<String> = Vec::new();
    for word in body.split(' ') {
        let unit = UNITS.contains(&word.trim_end_matches([',', '.', ';', ':', ')']));
        match words.last_mut() {
            Some(last) if unit && last.ends_with(|c: char| c.is_ascii_digit()) => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    words
}

/// What `gpumem --version --verbose` adds under the version: each engine modelled and its
/// release, one a line.
pub fn engines_modelled() -> String {
    let mut text = String::from("engines modelled:\n");
    for e in crate::plan::engines::MODELLED {
        text.push_str(&format!(
            "  {:<10} {:<7} {}\n",
            e.engine, e.version, e.source
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::wrap_into;

    #[test]
    fn a_wrapped_line_keeps_each_figure_with_its_unit() {
        let mut text = String::new();
        wrap_into(&mut text, "  usable after the 90 % memory fraction", 22);
        assert_eq!(
            text,
            "  usable after the\n      90 % memory\n      fraction\n"
        );
        let mut text = String::new();
        wrap_into(&mut text, "needs 874.99 GiB, 126.36 GiB usable", 18);
        assert_eq!(text, "needs 874.99 GiB,\n    126.36 GiB\n    usable\n");
    }
}
