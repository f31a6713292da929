//! `rolecall storage`: operations on a stopped installation's storage.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use rolecall::config::Config;
use rolecall::storage::copy::copy;
use rolecall::storage::{Counts, PgStore, SledStore, Store};

use crate::progress::Progress;

/// Options of `rolecall storage`.
#[derive(Debug, Args)]
pub struct StorageArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: StorageCommand,
}

/// Storage subcommands.
#[derive(Debug, Subcommand)]
pub enum StorageCommand {
    /// Copy a single-node installation (the sled data directory of a stopped server) into an
    /// empty PostgreSQL database, in one transaction: users, tokens, organizations, roles,
    /// members, webhooks with their secrets (sealed again with storage.secret_key when one is
    /// set), audit log, resources, unfinished deliveries and the delivery log. Counts are
    /// checked on both sides before it commits.
    Copy(CopyArgs),
}

/// Options of `rolecall storage copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The sled data directory to copy (storage.data_dir of the stopped server).
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// The PostgreSQL database to fill [default: storage.postgres_url, which keeps a password
    /// out of `ps`].
    #[arg(long, value_name = "URL")]
    pub to: Option<String>,
    /// A TOML file overlaid on the built-in defaults, for storage.secret_key and the
    /// PostgreSQL timeouts; ROLECALL_STORAGE__* environment variables override both.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// Runs a storage subcommand; answers what to print.
pub fn run(args: StorageArgs) -> Result<String, String> {
    match args.command {
        StorageCommand::Copy(args) => copy_installation(&args),
    }
}

/// `rolecall storage copy`.
fn copy_installation(args: &CopyArgs) -> Result<String, String> {
    let config =
        Config::load(args.config.as_deref(), std::env::vars()).map_err(|e| e.to_string())?;
    let key = config.storage.sealing_key().map_err(|e| e.to_string())?;
    let mut storage = config.storage.clone();
    if let Some(url) = &args.to {
        storage.postgres_url = rolecall::secrets::Secret::new(url.clone());
    }
    let settings = rolecall::storage::postgres::Settings::of(&storage)?;
    check_data_dir(&args.from)?;
    let chain = |err: &dyn std::error::Error| rolecall::telemetry::cause_chain(err);
    actix_web::rt::System::new().block_on(async move {
        let source = Store::open_sled(
            &args.from,
            rolecall::storage::Tuning::of(&storage),
            key.clone(),
        )
        .map_err(|err| {
            format!(
                "{}: {} (is a server still running on it? stop it first)",
                args.from.display(),
                chain(&err)
            )
        })?;
        let target = PgStore::open(&settings, key)
            .await
            .map_err(|err| format!("{}: {}", PgStore::describe(&settings), chain(&err)))?;
        let total = source.counts().await.map_err(|err| chain(&err))?.total();
        let mut bar = Progress::new("records", total);
        bar.set(0);
        let copied = copy(&source, &target, |done| bar.set(done)).await;
        bar.finish();
        target.close();
        source.close().await.map_err(|err| chain(&err))?;
        let copied = copied.map_err(|err| chain(&err))?;
        Ok(report(&copied, &PgStore::describe(&settings)))
    })
}

/// Refuses a directory that holds no sled database, which opening would
/// create instead of copying.
fn check_data_dir(dir: &Path) -> Result<(), String> {
    if SledStore::exists_in(dir) {
        Ok(())
    } else {
        Err(format!(
            "{} holds no rolecall data (no sled database in it): give the storage.data_dir \
             of the server to copy",
            dir.display()
        ))
    }
}

/// What was copied, one kind a line.
fn report(copied: &Counts, target: &str) -> String {
    let mut out = format!(
        "copied {} records into {target}; counts match the source:\n",
        copied.total()
    );
    for (name, count) in copied.named() {
        out.push_str(&format!("  {count:>10}  {name}\n"));
    }
    out.trim_end().to_owned()
}
