//! Logging setup: `pretty` for people or `json` (one object per line).
//!
//! A request's lines carry its id: in json as `span.request_id` (and as
//! `request_id` on the access line), in pretty output in the span prefix.

use std::io::IsTerminal;

use tracing::level_filters::LevelFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. Safe to call more than once (later calls
/// are ignored), which tests rely on.
pub fn init(config: &LogConfig) {
    let level = config
        .level
        .parse::<LevelFilter>()
        .unwrap_or(LevelFilter::INFO);
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false);
    let _ = match config.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Pretty => builder
            .with_ansi(std::io::stdout().is_terminal())
            .try_init(),
    };
}

/// An error and every error that caused it, outermost first, joined by
/// `: `, so a 500's log line says what really failed.
pub fn cause_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}
