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
    /// Operations on a stopped installation's storage: copy a single node's sled data
    /// directory into PostgreSQL.
    Storage(crate::storage_cli::StorageArgs),
    /// Bring the PostgreSQL schema (storage.postgres_url) to this build's
    /// version, as a node does at start; refuses a newer schema.
    Migrate {
        /// A TOML file overlaid on the built-in defaults; ROLECALL_STORAGE__*
        /// environment variables override both.
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand and every flag of every subcommand explains itself in `--help`.
    #[test]
    fn every_command_and_flag_has_help_text() {
        fn check(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && arg.get_help().is_none() {
                    missing.push(format!("{path} --{}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                let sub_path = format!("{path} {}", sub.get_name());
                if sub.get_about().is_none() {
                    missing.push(sub_path.clone());
                }
                check(sub, &sub_path, missing);
            }
        }
        let mut missing = Vec::new();
        check(&Cli::command(), "rolecall", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
        Cli::command().debug_assert();
    }
}
