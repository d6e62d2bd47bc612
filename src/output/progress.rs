//! indicatif progress bars that disappear when nobody is watching.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use super::thousands;

/// A progress bar on stderr, or nothing when hidden.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Creates a bar of `total` steps; `visible` false gives a hidden bar that costs nothing.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a rate shown whole; a float cast saturates"
    )]
    pub fn new(visible: bool, total: u64, label: &str) -> Self {
        let bar = if visible {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{prefix:>12} [{bar:30}] {count}/{total} {rate} {eta}")
            {
                // Counts with separators and whole rates, as every report prints them.
                let style = style
                    .with_key("count", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{}", thousands(s.pos()));
                    })
                    .with_key("total", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{}", thousands(s.len().unwrap_or(0)));
                    })
                    .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{}/s", thousands(s.per_sec() as u64));
                    });
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        } else {
            ProgressBar::hidden()
        };
        bar.set_prefix(label.to_string());
        Progress { bar }
    }

    /// Advances by `n` steps.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Moves the bar to `pos` (a no-op when the bar is hidden).
    pub fn set(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
