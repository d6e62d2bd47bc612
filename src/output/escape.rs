//! Text from files and drivers (GGUF names, inventory hosts, device names, paths) reaches the
//! terminal only through these functions, so a hostile value cannot move the cursor, retitle
//! the window, split a one-line error over several lines, or reorder what is shown (bidi
//! overrides and isolates, which make `gpu` U+202E `exe.txt` read as `gputxt.exe`). Invisible format
//! characters and the Unicode line and paragraph separators are escaped as C0 controls are.

use std::borrow::Cow;
use std::fmt::Write as _;

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// Whether `c` is written as an escape: a control character, or one that prints nothing
/// yet changes how the rest of the line looks (bidi controls, zero-width and other invisible
/// format characters, the Unicode line and paragraph separators).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{ad}'
                | '\u{600}'..='\u{605}'
                | '\u{61c}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0001}'
                | '\u{e0020}'..='\u{e007f}'
        )
}

/// `text` on one line: every control character (newlines included) written as an escape such
/// as `\n` or `\u{1b}`. For error and warning lines.
///
/// ```
/// use gpumem::output::one_line;
/// assert_eq!(one_line("a\nb\x1b[2J"), "a\\nb\\u{1b}[2J");
/// assert_eq!(one_line("plain"), "plain");
/// assert_eq!(one_line("gpu\u{202e}exe.txt"), "gpu\\u{202e}exe.txt");
/// ```
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A rendered report made safe for a terminal: newlines stay, colour sequences (`ESC [ digits;
/// m`, the only escapes the tables emit) stay, every other control character is escaped.
///
/// ```
/// use gpumem::output::terminal_text;
/// assert_eq!(terminal_text("\x1b[32mok\x1b[0m\n"), "\x1b[32mok\x1b[0m\n");
/// assert_eq!(terminal_text("gpu\x1b]0;pwned\x07"), "gpu\\u{1b}]0;pwned\\u{7}");
/// assert_eq!(terminal_text("a\u{2067}b\u{2069}\n"), "a\\u{2067}b\\u{2069}\n");
/// ```
pub fn terminal_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| hidden(c) && c != '\n') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b' {
            if let Some(len) = sgr_len(rest) {
                out.push_str(&rest[..len]);
                rest = &rest[len..];
                continue;
            }
        }
        if hidden(c) && c != '\n' {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

// Length of a Select Graphic Rendition sequence at the start of `s`, if one is there.
fn sgr_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("\x1b[")?;
    let params = body
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (body.as_bytes().get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// Text for an XML attribute: markup and control characters escaped or dropped.
pub(super) fn xml_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}
