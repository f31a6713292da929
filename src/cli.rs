//! Command-line interface.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// rolecall: per-organization role catalog with server-side permission
/// enforcement, and signed webhook deliveries.
#[derive(Debug, Parser)]
#[command(name = "rolecall", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server until SIGTERM or SIGINT.
    Serve {
        /// A TOML file overlaid on the built-in defaults (config/default.toml);
        /// ROLECALL_<SECTION>__<KEY> environment variables override both.
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Call the admin API of a running server: create users, tokens and
    /// organizations, change plans. The admin token comes from
    /// ROLECALL_ADMIN__TOKEN, else from <data dir>/admin-token.
    Admin(crate::admin_cli::AdminArgs),
    /// Drive a server with load scenarios and report throughput and latency
    /// (see BENCHMARKS.md).
    Load(crate::load::LoadArgs),
}
