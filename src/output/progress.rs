//! indicatif progress bars that disappear when nobody is watching.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar on stderr, or nothing when hidden.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Creates a bar of `total` steps; `visible` false gives a hidden bar that costs nothing.
    pub fn new(visible: bool, total: u64, label: &str) -> Self {
        let bar = if visible {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{prefix:>12} [{bar:40}] {pos}/{len} {per_sec} {eta}")
            {
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
