//! Where a run talks to its user: on a terminal a progress bar with ETA and the live
//! per-interval lines printed above it; otherwise plain lines; nothing with `--quiet`.
//! With `--json`, stdout is kept for the final summary.json, so lines go to stderr.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Console {
    quiet: bool,
    json: bool,
    bar: Option<ProgressBar>,
}

impl Console {
    pub fn new(quiet: bool, json: bool) -> Self {
        Console {
            quiet,
            json,
            bar: None,
        }
    }

    /// Start a bar of `len` units (seconds or rows) if stderr is a terminal.
    pub fn start_bar(&mut self, len: u64, what: &str) {
        let style = ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} ETA {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        self.start(Some(len), style, what);
    }

    /// A progress line without a length (a run whose end is not known ahead): the position
    /// and the elapsed time.
    pub fn start_spinner(&mut self, what: &str) {
        let style = ProgressStyle::with_template("{prefix} {spinner} {pos} s {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        self.start(None, style, what);
    }

    /// Replaces the progress display with one of `len` (none: unknown) if stderr is a
    /// terminal and the console is not quiet.
    fn start(&mut self, len: Option<u64>, style: ProgressStyle, what: &str) {
        self.finish_bar();
        if self.quiet || !std::io::stderr().is_terminal() {
            return;
        }
        let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
        bar.set_style(style);
        bar.set_prefix(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(500));
        self.bar = Some(bar);
    }

    pub fn set_position(&self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
    }

    pub fn finish_bar(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }

    /// A live line (per-interval output, phase changes).
    pub fn line(&self, s: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(b) => b.println(s),
            None if self.json => eprintln!("{s}"),
            None => println!("{s}"),
        }
    }

    /// Final text results: printed unless `--json` (then the JSON is the result).
    pub fn result(&self, s: &str) {
        if !self.json {
            println!("{s}");
        }
    }

    pub fn json(&self, s: &str) {
        if self.json {
            println!("{s}");
        }
    }
}
