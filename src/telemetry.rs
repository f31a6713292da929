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
