//! The `rolecall` binary: the server, and the operator tools built on the
//! library but not part of it (the admin CLI, the load tool).
#![forbid(unsafe_code)]

mod admin_cli;
mod cli;
mod load;
mod progress;
mod storage_cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command};
use rolecall::config::Config;
use rolecall::startup::{Application, EXIT_CONFIG};
use rolecall::storage::PgStore;

/// jemalloc instead of the system's allocator: sled copies a tree node on
/// every insert, and glibc's malloc and free are near the top of a sled
/// burst's profile. With jemalloc the burst delivers about 14 % more
/// events/s (BENCHMARKS.md, paired). Most of what a burst frees goes back
/// to the system within half a minute (jemalloc's decay), and resident
/// memory stays within about 12 MB of glibc's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config } => serve(config.as_deref()),
        Command::Admin(args) => match admin_cli::run(args) {
            Ok(output) => {
                if !output.is_empty() {
                    println!("{output}");
                }
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("rolecall admin: {err}");
                ExitCode::FAILURE
            }
        },
        Command::Migrate { config } => migrate(config.as_deref()),
        Command::Storage(args) => match storage_cli::run(args) {
            Ok(output) => {
                println!("{output}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("rolecall storage: {err}");
                ExitCode::FAILURE
            }
        },
        Command::Load(args) => match load::run(args) {
            Ok(_) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("rolecall load: {err}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `rolecall migrate`: the schema of `storage.postgres_url` to this build's.
fn migrate(config_path: Option<&std::path::Path>) -> ExitCode {
    let settings = Config::load(config_path, std::env::vars())
        .map_err(|err| err.to_string())
        .and_then(|config| rolecall::storage::postgres::Settings::of(&config.storage));
    let settings = match settings {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("rolecall migrate: {err}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let outcome = actix_web::rt::System::new().block_on(PgStore::migrate(&settings));
    match outcome {
        Ok(migrated) if migrated.from == migrated.to => {
            println!("the schema is at version {}: nothing to do", migrated.to);
            ExitCode::SUCCESS
        }
        Ok(migrated) => {
            println!(
                "migrated the schema from version {} to {}",
                migrated.from, migrated.to
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!(
                "rolecall migrate: {}",
                rolecall::telemetry::cause_chain(&err)
            );
            ExitCode::FAILURE
        }
    }
}

fn serve(config_path: Option<&std::path::Path>) -> ExitCode {
    let config = match Config::load(config_path, std::env::vars()) {
        Ok(config) => config,
        Err(err) => return failed(&err, EXIT_CONFIG),
    };
    rolecall::telemetry::init(&config.log);
    let outcome = actix_web::rt::System::new().block_on(async move {
        let app = Application::build(config).await?;
        app.run_until_signalled().await
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => failed(&err, err.exit_code()),
    }
}

/// Says why `rolecall serve` stopped, on one line of standard error (no
/// backtrace, no second copy in the log), and gives its exit code.
fn failed(err: &dyn std::fmt::Display, code: u8) -> ExitCode {
    let said = err.to_string();
    let one_line: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    eprintln!("rolecall: {}", one_line.join("; "));
    ExitCode::from(code)
}
