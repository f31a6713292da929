//! Reaching PostgreSQL: the connection settings (`storage.postgres_url`,
//! with the libpq options operators write), TLS ([`super::tls`]), and the
//! pool. Connections live on one I/O thread of their own, so a busy HTTP
//! worker never delays another's queries, and the pool hands them to any
//! thread.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;

use super::backends::Backends;
use super::error::SettingsError;
use super::tls::Tls;
use crate::storage::StoreError;

/// How to reach the database.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `postgres://…` or `key=value …`, as libpq takes it.
    pub url: String,
    /// Connections per node for requests.
    pub pool: usize,
    /// Connections per node for background work (delivery results, log
    /// upkeep, leases, the dispatcher's reads, sweeps), which requests'
    /// connections are kept from.
    pub background_pool: usize,
    /// Longest wait to connect, and for a pooled connection.
    pub connect_timeout: Duration,
    /// Longest a statement, or a round of them, may take.
    pub statement_timeout: Duration,
    /// How long a busy node's commits and per-request checks wait to share
    /// one statement (`storage.group_commit_window_us`).
    pub batch_window: Duration,
}

impl Settings {
    /// The settings of `config`; an error when the URL is missing.
    pub fn of(config: &crate::config::StorageConfig) -> Result<Self, String> {
        let url = config.postgres_url.expose();
        if url.trim().is_empty() {
            return Err(
                "storage.backend is \"postgres\" and storage.postgres_url is empty: set it \
                 (ROLECALL_STORAGE__POSTGRES_URL), e.g. postgres://rolecall@db.internal/rolecall"
                    .into(),
            );
        }
        Ok(Settings {
            url: url.to_owned(),
            pool: config.postgres_pool.max(1),
            background_pool: config.postgres_background_pool.max(1),
            connect_timeout: Duration::from_millis(config.postgres_connect_timeout_ms.max(1)),
            statement_timeout: Duration::from_millis(config.postgres_statement_timeout_ms.max(1)),
            batch_window: Duration::from_micros(config.group_commit_window_us),
        })
    }
}

/// The URL split into what tokio-postgres parses and what we handle:
/// `sslrootcert` (a PEM file of CAs to trust), and the `verify-ca` and
/// `verify-full` modes, which are `require` here because certificates are
/// always verified.
fn split_url(url: &str) -> (String, Option<String>) {
    let mut root_cert = None;
    let keep = |pair: &str, root_cert: &mut Option<String>| -> Option<String> {
        match pair.split_once('=') {
            Some(("sslrootcert", path)) => {
                *root_cert = Some(path.to_owned());
                None
            }
            Some(("sslmode", "verify-ca" | "verify-full")) => Some("sslmode=require".to_owned()),
            _ => Some(pair.to_owned()),
        }
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_owned(), None);
        };
        let pairs: Vec<String> = query
            .split('&')
            .filter_map(|pair| keep(pair, &mut root_cert))
            .collect();
        let url = if pairs.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", pairs.join("&"))
        };
        (url, root_cert)
    } else {
        let pairs: Vec<String> = url
            .split_whitespace()
            .filter_map(|pair| keep(pair, &mut root_cert))
            .collect();
        (pairs.join(" "), root_cert)
    }
}

/// The client configuration: the URL's, with our timeouts and name.
pub fn client_config(
    settings: &Settings,
) -> Result<(tokio_postgres::Config, Option<String>), SettingsError> {
    let (url, root_cert) = split_url(&settings.url);
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|err: tokio_postgres::Error| SettingsError::Url(err.to_string()))?;
    if config.get_application_name().is_none() {
        config.application_name("rolecall");
    }
    // TLS on loopback protects nothing, and "prefer" (the default) would
    // then fail on the self-signed certificate most local servers have.
    if config.get_ssl_mode() == SslMode::Prefer && only_loopback(&config) {
        config.ssl_mode(SslMode::Disable);
    }
    config.connect_timeout(settings.connect_timeout);
    // A dead peer is noticed by keepalives in about 25 s (10 s idle, then
    // 3 probes 5 s apart), not after the kernel's two hours and 11 minutes.
    config.keepalives_idle(Duration::from_secs(10));
    config.keepalives_interval(Duration::from_secs(5));
    config.keepalives_retries(3);
    let ours = server_side_limits(settings.statement_timeout);
    let options = match config.get_options() {
        Some(theirs) => format!("{theirs} {ours}"),
        None => ours,
    };
    config.options(options);
    Ok((config, root_cert))
}

/// The server's side of each session's limits:
/// - a statement runs for `statement_timeout` at most;
/// - a session idle within a transaction for as long is ended, with its
///   row locks: only a client gone without a word (a network fault) leaves
///   one so, since every transaction of ours sends its last statement and
///   COMMIT together;
/// - a client that stopped answering is found by keepalives within about
///   25 s (10 s idle, then 3 probes 5 s apart), where the kernel's default
///   waits two hours with the session's connection slot taken.
fn server_side_limits(statement_timeout: Duration) -> String {
    let ms = statement_timeout.as_millis();
    format!(
        "-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms} \
         -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"
    )
}

/// Whether every host is this machine (a loopback address, `localhost`,
/// or a Unix socket).
fn only_loopback(config: &tokio_postgres::Config) -> bool {
    use tokio_postgres::config::Host;
    let hosts = config.get_hosts();
    !hosts.is_empty()
        && hosts.iter().all(|host| match host {
            Host::Unix(_) => true,
            Host::Tcp(name) => {
                name == "localhost"
                    || name
                        .trim_matches(|c| c == '[' || c == ']')
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        })
}

/// The thread that runs every connection's I/O (and the group commit);
/// stops when the last handle is dropped.
pub struct IoThread {
    handle: tokio::runtime::Handle,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl IoThread {
    /// Runs `task` on the I/O thread.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(task)
    }
}

/// Starts the I/O thread.
pub fn io_thread() -> Result<IoThread, StoreError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("rolecall-postgres".into())
        .spawn(move || {
            runtime.block_on(async {
                let _ = stopped.await;
            })
        })?;
    Ok(IoThread {
        handle,
        _stop: stop,
    })
}

/// What connections are made with: the client configuration and TLS.
#[derive(Clone)]
pub struct Connector {
    pub(super) config: tokio_postgres::Config,
    pub(super) tls: Tls,
}

impl Connector {
    /// The connector `settings` describe.
    pub fn new(settings: &Settings) -> Result<Self, StoreError> {
        let (config, root_cert) = client_config(settings)?;
        let tls = Tls::new(root_cert.as_deref())?;
        Ok(Connector { config, tls })
    }
}

/// Connects on the I/O thread.
struct OnIoThread {
    tls: Tls,
    io: Arc<IoThread>,
}

impl deadpool_postgres::Connect for OnIoThread {
    fn connect(
        &self,
        pg_config: &tokio_postgres::Config,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<
                        (tokio_postgres::Client, tokio::task::JoinHandle<()>),
                        tokio_postgres::Error,
                    >,
                > + Send
                + '_,
        >,
    > {
        let (config, tls, io) = (pg_config.clone(), self.tls.clone(), self.io.clone());
        Box::pin(async move {
            // Connecting runs on the I/O thread too: its socket belongs there.
            let connecting = io.handle.spawn(async move { config.connect(tls).await });
            let (client, connection) = match connecting.await {
                Ok(result) => result?,
                Err(_) => return Err(closed()),
            };
            let task = io.handle.spawn(async move {
                if let Err(err) = connection.await {
                    tracing::debug!(error = %err, "a PostgreSQL connection ended");
                }
            });
            Ok((client, task))
        })
    }
}

/// The error of a connection attempt whose task did not finish: only when
/// the I/O thread is going away with the store. tokio-postgres builds its
/// errors itself; a timeout is the nearest of the ones it lets us make.
fn closed() -> tokio_postgres::Error {
    tokio_postgres::Error::__private_api_timeout()
}

/// Session settings of the background connections. Their statements find
/// queue rows by key (outbox, leases, log counts), in tables whose size
/// swings between empty and thousands of pages within one autovacuum
/// round: a plan PostgreSQL keeps from an empty moment reads the whole
/// table, dead rows included, on every call afterwards (seen with two
/// nodes: a thousand pages a read of jobs). Without sequential scans, a
/// key is always found by its index or tuple id; a statement that has no
/// other way still scans. The idempotency keys' statements, on request
/// connections, run with the same settings for their own transaction
/// ([`super::transact::Database::query_planned_with`]).
pub const BACKGROUND_SESSION: &[(&str, &str)] = &[("enable_seqscan", "off")];

/// Which work a pool serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// Requests: commits, checks and reads.
    Requests,
    /// Background work, with [`BACKGROUND_SESSION`].
    Background,
}

/// `config` with `session` added to the settings it starts sessions with.
fn with_session(
    mut config: tokio_postgres::Config,
    session: &[(&str, &str)],
) -> tokio_postgres::Config {
    let mut options = config.get_options().unwrap_or_default().to_owned();
    for (name, value) in session {
        if !options.is_empty() {
            options.push(' ');
        }
        options.push_str(&format!("-c {name}={value}"));
    }
    config.options(options);
    config
}

/// A pool of `size` connections for `share`, made by `connector`, whose
/// I/O runs on `io`. Each new one tells `backends` its server process; one
/// that sat unused is asked for an answer before it is handed out
/// ([`super::idle_probe`]).
pub fn pool(
    settings: &Settings,
    size: usize,
    share: Share,
    connector: &Connector,
    io: Arc<IoThread>,
    backends: &Arc<Backends>,
) -> Result<Pool, StoreError> {
    let connect = OnIoThread {
        tls: connector.tls.clone(),
        io,
    };
    let config = match share {
        Share::Requests => connector.config.clone(),
        Share::Background => with_session(connector.config.clone(), BACKGROUND_SESSION),
    };
    let manager = Manager::from_connect(
        config,
        connect,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(settings.connect_timeout))
        .create_timeout(Some(settings.connect_timeout))
        .recycle_timeout(Some(settings.connect_timeout))
        .post_create(backends.hook(super::idle_probe::answer_within(settings.statement_timeout)))
        .pre_recycle(super::idle_probe::hook(settings.statement_timeout))
        .build()
        .map_err(|err| StoreError::Config(err.to_string()))
}

/// `url` (a `postgres://` URL) with its database replaced by `name`, its
/// options kept: a database of the same server, for tools that make one.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(base, query)| (base, Some(query)));
    let authority_end = base
        .find("://")
        .map(|scheme| scheme + 3)
        .and_then(|start| base[start..].find('/').map(|slash| start + slash))
        .unwrap_or(base.len());
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// Whether TLS is required by the settings (for the start-up log).
pub fn describe(settings: &Settings) -> String {
    match client_config(settings) {
        Ok((config, _)) => {
            let hosts = config
                .get_hosts()
                .iter()
                .map(|host| match host {
                    tokio_postgres::config::Host::Tcp(name) => name.clone(),
                    tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
                })
                .collect::<Vec<_>>()
                .join(",");
            let tls = match config.get_ssl_mode() {
                SslMode::Disable => "off",
                SslMode::Prefer => "when offered",
                _ => "required",
            };
            format!("{hosts}/{} (TLS {tls})", config.get_dbname().unwrap_or(""))
        }
        Err(err) => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_of_the_same_server_keeps_the_options() {
        assert_eq!(
            with_database("postgres://u:p@127.0.0.1:5432/postgres", "rc_x"),
            "postgres://u:p@127.0.0.1:5432/rc_x"
        );
        assert_eq!(
            with_database("postgres://u@h/postgres?sslmode=disable", "rc_x"),
            "postgres://u@h/rc_x?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://u@h", "rc_x"),
            "postgres://u@h/rc_x"
        );
    }

    #[test]
    fn libpq_options_are_taken_apart() {
        let (url, root) = split_url(
            "postgres://u@db.internal/rc?sslmode=verify-full&sslrootcert=/etc/ca.pem&application_name=x",
        );
        assert_eq!(
            url,
            "postgres://u@db.internal/rc?sslmode=require&application_name=x"
        );
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        let (url, root) = split_url("host=db sslrootcert=/ca.pem dbname=rc");
        assert_eq!(url, "host=db dbname=rc");
        assert_eq!(root.as_deref(), Some("/ca.pem"));
        assert_eq!(split_url("postgres://db/rc").0, "postgres://db/rc");
        assert_eq!(
            split_url("postgres://db/rc?sslrootcert=/a").0,
            "postgres://db/rc"
        );
    }

    #[test]
    fn the_statement_timeout_goes_with_every_connection() {
        let settings = Settings {
            url: "postgres://u@127.0.0.1/rc?options=-c%20work_mem%3D8MB".into(),
            pool: 4,
            background_pool: 2,
            connect_timeout: Duration::from_secs(3),
            statement_timeout: Duration::from_millis(2500),
            batch_window: Duration::ZERO,
        };
        let Ok((config, _)) = client_config(&settings) else {
            panic!("the URL parses")
        };
        let limits = "-c statement_timeout=2500 -c idle_in_transaction_session_timeout=2500 \
             -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3";
        assert_eq!(
            config.get_options(),
            Some(format!("-c work_mem=8MB {limits}").as_str())
        );
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(config.get_keepalives_idle(), Duration::from_secs(10));
        assert_eq!(
            config.get_keepalives_interval(),
            Some(Duration::from_secs(5))
        );
        assert_eq!(config.get_keepalives_retries(), Some(3));
        assert_eq!(config.get_application_name(), Some("rolecall"));
        assert_eq!(config.get_ssl_mode(), SslMode::Disable, "loopback: no TLS");
        let background = with_session(config, BACKGROUND_SESSION);
        assert_eq!(
            background.get_options(),
            Some(format!("-c work_mem=8MB {limits} -c enable_seqscan=off").as_str()),
            "background sessions keep the operator's options and plan without whole-table reads"
        );
    }

    #[test]
    fn tls_is_kept_off_loopback_and_when_required() {
        let mode = |url: &str| {
            let settings = Settings {
                url: url.into(),
                pool: 1,
                background_pool: 1,
                connect_timeout: Duration::from_secs(1),
                statement_timeout: Duration::from_secs(1),
                batch_window: Duration::ZERO,
            };
            client_config(&settings).map(|(config, _)| config.get_ssl_mode())
        };
        assert!(matches!(
            mode("postgres://u@db.internal/rc"),
            Ok(SslMode::Prefer)
        ));
        assert!(matches!(
            mode("postgres://u@10.0.0.5/rc"),
            Ok(SslMode::Prefer)
        ));
        assert!(matches!(
            mode("postgres://u@localhost/rc?sslmode=require"),
            Ok(SslMode::Require)
        ));
        assert!(matches!(
            mode("postgres://u@[::1]/rc"),
            Ok(SslMode::Disable)
        ));
        assert!(matches!(
            mode("postgres://u@127.0.0.1,db.internal/rc"),
            Ok(SslMode::Prefer)
        ));
    }
}
