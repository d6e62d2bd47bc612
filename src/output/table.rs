//! comfy-table defaults shared by every report.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};

/// How text output looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Whether ANSI colour is allowed.
    pub color: bool,
}

impl Style {
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
    table.set_header(headers.iter().map(|h| style.header(h)));
    table
}
