//! A progress bar on stderr: redrawn in place on a terminal, a line now and
//! then otherwise (a log file or a CI job should not fill with redraws).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Width of the bar in characters.
const WIDTH: usize = 30;

/// Progress of `total` units of work.
pub struct Progress {
    what: &'static str,
    total: u64,
    terminal: bool,
    started: Instant,
    drawn: Option<Instant>,
}

impl Progress {
    /// A bar for `total` units of `what` ("records").
    pub fn new(what: &'static str, total: u64) -> Self {
        Progress {
            what,
            total,
            terminal: std::io::stderr().is_terminal(),
            started: Instant::now(),
            drawn: None,
        }
    }

    /// `done` units are done: redraws, at most ten times a second on a
    /// terminal and once every five seconds elsewhere, and always at the end.
    pub fn set(&mut self, done: u64) {
        let every = if self.terminal {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        };
        let due = self.drawn.is_none_or(|at| at.elapsed() >= every);
        if due || done >= self.total {
            self.drawn = Some(Instant::now());
            self.draw(done);
        }
    }

    /// Ends the bar's line.
    pub fn finish(&mut self) {
        if self.terminal && self.drawn.is_some() {
            eprintln!();
        }
    }

    fn draw(&self, done: u64) {
        let line = line(self.what, done, self.total, self.started.elapsed());
        let mut stderr = std::io::stderr().lock();
        let drawn = if self.terminal {
            write!(stderr, "\r{line}\x1b[K")
        } else {
            writeln!(stderr, "{line}")
        };
        // A closed stderr must not stop the work it reports on.
        let _ = drawn.and_then(|()| stderr.flush());
    }
}

/// `[=========>          ]  45%  1,234 of 2,700 records  3 s`.
fn line(what: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let fraction = if total == 0 {
        1.0
    } else {
        (done as f64 / total as f64).min(1.0)
    };
    let filled = (fraction * WIDTH as f64).round() as usize;
    let bar: String = (0..WIDTH)
        .map(|i| match i.cmp(&filled) {
            std::cmp::Ordering::Less => '=',
            std::cmp::Ordering::Equal => '>',
            std::cmp::Ordering::Greater => ' ',
        })
        .collect();
    format!(
        "[{bar}] {:>3}%  {} of {} {what}  {} s",
        (fraction * 100.0).floor() as u64,
        grouped(done),
        grouped(total),
        elapsed.as_secs()
    )
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_shows_the_bar_the_share_and_the_counts() {
        assert_eq!(
            line("records", 1_234, 2_468, Duration::from_secs(3)),
            "[===============>              ]  50%  1,234 of 2,468 records  3 s"
        );
        assert_eq!(
            line("records", 0, 0, Duration::ZERO),
            "[==============================] 100%  0 of 0 records  0 s"
        );
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(grouped(999), "999");
    }
}
