//! Progress of a long operator command on stderr: indicatif's bar on a
//! terminal, a line every few seconds otherwise (a log file or a CI job
//! should not fill with redraws, and still shows the command is moving).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{HumanCount, ProgressBar, ProgressStyle};

/// The bar on a terminal.
const TEMPLATE: &str = "[{bar:30}] {percent:>3}%  {human_pos} of {human_len} {msg}  {elapsed}";

/// How often a line is written when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// Progress of `total` units of work.
pub struct Progress {
    bar: ProgressBar,
    what: &'static str,
    total: u64,
    /// When the last line was written, when stderr is not a terminal.
    lines: Option<Option<Instant>>,
}

impl Progress {
    /// A bar for `total` units of `what` ("records").
    pub fn new(what: &'static str, total: u64) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = if terminal {
            let style = ProgressStyle::with_template(TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            ProgressBar::new(total).with_style(style).with_message(what)
        } else {
            ProgressBar::hidden()
        };
        Progress {
            bar,
            what,
            total,
            lines: (!terminal).then_some(None),
        }
    }

    /// `done` units are done.
    pub fn set(&mut self, done: u64) {
        self.bar.set_position(done);
        if let Some(last) = &mut self.lines {
            let due = last.is_none_or(|at| at.elapsed() >= LINE_EVERY);
            if due || done >= self.total {
                *last = Some(Instant::now());
                eprintln!("{}", line(self.what, done, self.total));
            }
        }
    }

    /// Leaves the finished bar on screen.
    pub fn finish(&self) {
        self.bar.finish();
    }
}

/// `1,234 of 2,468 records (50%)`.
fn line(what: &str, done: u64, total: u64) -> String {
    let percent = match total {
        0 => 100,
        total => done.min(total) * 100 / total,
    };
    format!(
        "{} of {} {what} ({percent}%)",
        HumanCount(done),
        HumanCount(total)
    )
}

#[cfg(test)]
mod tests {
    use super::{line, TEMPLATE};

    #[test]
    fn the_bar_template_is_valid() {
        assert!(indicatif::ProgressStyle::with_template(TEMPLATE).is_ok());
    }

    #[test]
    fn a_line_shows_the_counts_and_the_share() {
        assert_eq!(
            line("records", 1_234, 2_468),
            "1,234 of 2,468 records (50%)"
        );
        assert_eq!(line("records", 0, 0), "0 of 0 records (100%)");
        assert_eq!(
            line("records", 1_000_000, 1_000_000),
            "1,000,000 of 1,000,000 records (100%)"
        );
    }
}
