//! Text from files and drivers (GGUF names, inventory hosts, device names, paths) reaches the
//! terminal only through these functions, so a hostile value cannot move the cursor, retitle
//! the window or split a one-line error over several lines.

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

/// `text` on one line: every control character (newlines included) written as an escape such
/// as `\n` or `\u{1b}`. For error and warning lines.
///
/// ```
/// use gpumem::output::one_line;
/// assert_eq!(one_line("a\nb\x1b[2J"), "a\\nb\\u{1b}[2J");
/// assert_eq!(one_line("plain"), "plain");
/// ```
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
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
/// ```
pub fn terminal_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
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
        if c.is_control() && c != '\n' {
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
