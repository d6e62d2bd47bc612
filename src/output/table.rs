//! comfy-table defaults shared by every report.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use std::io::IsTerminal;

use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};

use super::wrap_into;

/// The columns tables fit in: none with `--wide`; else the terminal's width when stdout is one,
/// else `$COLUMNS`, else 80.
pub fn table_width(wide: bool) -> Option<u16> {
    if wide {
        return None;
    }
    let terminal = std::io::stdout()
        .is_terminal()
        .then(|| Table::new().width())
        .flatten();
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok());
    Some(terminal.or(columns).unwrap_or(80).max(40))
}

/// How text output looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Whether ANSI colour is allowed.
    pub color: bool,
    /// Columns tables must fit in (`None`: `--wide`, every column at its full width).
    pub width: Option<u16>,
}

/// Below this many columns a report drops its detail columns into lines under the table.
pub const NARROW: u16 = 120;

impl Style {
    /// Whether the terminal is too narrow for a report's detail columns.
    pub fn narrow(&self) -> bool {
        self.width.is_some_and(|w| w < NARROW)
    }

    /// A header cell, bold when colour is on.
    pub fn header(&self, text: &str) -> Cell {
        let cell = Cell::new(text);
        if self.color {
            cell.add_attribute(Attribute::Bold)
        } else {
            cell
        }
    }

    /// Text that reads as good (green) or bad (red) when colour is on, outside tables.
    pub fn paint(&self, text: &str, good: bool) -> String {
        if self.color {
            format!("\x1b[{}m{text}\x1b[0m", if good { 32 } else { 31 })
        } else {
            text.to_string()
        }
    }

    /// A cell that reads as good (green) or bad (red) when colour is on.
    pub fn verdict(&self, text: &str, good: bool) -> Cell {
        let cell = Cell::new(text);
        if self.color {
            cell.fg(if good { Color::Green } else { Color::Red })
        } else {
            cell
        }
    }
}

/// A table with gpumem's preset, headers and colour setting applied.
pub fn new_table(style: &Style, headers: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if style.color {
        table.enforce_styling();
    } else {
        table.force_no_tty();
    }
    if let Some(width) = style.width {
        table.set_width(width);
    }
    table.set_header(headers.iter().map(|h| style.header(h)));
    table
}

/// Wraps every prose line wider than `width` columns; table rows are left to comfy-table.
pub(super) fn fit_width(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        // An engine's own line, kept whole as the engine prints it.
        if let Some(verbatim) = line.strip_prefix(VERBATIM) {
            out.push_str(verbatim);
            out.push('\n');
            continue;
        }
        let table_row = line.starts_with(['┌', '│', '╞', '└', '├', '╡', '+', '|', '=']);
        if table_row || visible_width(line) <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        let mut wrapped = String::new();
        wrap_into(&mut wrapped, body, width.saturating_sub(indent));
        for part in wrapped.lines() {
            out.push_str(&" ".repeat(indent));
            out.push_str(part);
            out.push('\n');
        }
    }
    out
}

/// Marks a line of a report as an engine's own words, never wrapped (and removed on output).
pub(super) const VERBATIM: char = '\u{1}';

/// `text` with the [`VERBATIM`] marks removed, for output that is not wrapped.
pub(super) fn unmark(text: &str) -> String {
    text.replace(VERBATIM, "")
}

/// Columns a line takes on a terminal: characters, less ANSI colour sequences.
pub(super) fn visible_width(line: &str) -> usize {
    let mut width = 0;
    let mut in_escape = false;
    for c in line.chars() {
        match (in_escape, c) {
            (false, '\u{1b}') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => width += 1,
        }
    }
    width
}
