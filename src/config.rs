//! Layered configuration: the built-in `config/default.toml`, then an
//! optional `--config` file, then `ROLECALL_<SECTION>__<KEY>` variables.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::secrets::Secret;

/// The defaults, compiled in so the binary runs from any directory.
pub const DEFAULTS: &str = include_str!("../config/default.toml");

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file or value is not valid TOML or has the wrong shape.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// The whole configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// HTTP server.
    pub server: ServerConfig,
    /// Embedded storage.
    pub storage: StorageConfig,
    /// Admin API.
    pub admin: AdminConfig,
    /// Webhook delivery.
    pub webhooks: WebhookConfig,
    /// Actors.
    pub actors: ActorConfig,
    /// Logging.
    pub log: LogConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// Limits of the public API.
    pub api: ApiConfig,
}

/// `[api]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Requests per second each bearer token may sustain on this node; 0 turns limits off.
    pub rate_limit_per_second: u32,
    /// Requests a token may make at once after a quiet spell; 0 means one second's worth.
    pub rate_limit_burst: u32,
    /// How long the answer of a request sent with an `Idempotency-Key` is
    /// kept for its retries, in hours (fractions allowed).
    #[serde(deserialize_with = "positive_hours")]
    pub idempotency_ttl_hours: f64,
}

impl ApiConfig {
    /// [`Self::idempotency_ttl_hours`] as a duration.
    pub fn idempotency_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.idempotency_ttl_hours * 3600.0)
    }
}

/// A number of hours above 0 (and at most about a century).
fn positive_hours<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let hours = f64::deserialize(deserializer)?;
    if hours.is_finite() && hours > 0.0 && hours <= 1_000_000.0 {
        Ok(hours)
    } else {
        Err(serde::de::Error::custom(format!(
            "expected a number of hours above 0, got {hours}"
        )))
    }
}

/// `[metrics]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Bearer token required by `GET /metrics`; empty leaves it open.
    #[serde(deserialize_with = "secret")]
    pub token: Secret,
}

/// `[server]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to bind; port 0 picks a free port.
    pub listen: String,
    /// Worker threads; 0 means one per core.
    pub workers: usize,
    /// Grace period for in-flight requests on shutdown.
    pub shutdown_timeout_secs: u64,
    /// The PEM certificate chain to serve HTTPS with; empty: plain HTTP.
    pub tls_cert_file: PathBuf,
    /// The PEM private key of that certificate.
    pub tls_key_file: PathBuf,
    /// How long a request body may take to arrive, in ms; then 408 and the
    /// connection is closed.
    pub body_timeout_ms: u64,
    /// Memory all request bodies in memory may hold together, in MiB; a
    /// body that would need more is refused at once (503 SERVER_BUSY).
    pub body_memory_mb: u64,
}

impl ServerConfig {
    /// How long a request body may take to arrive.
    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }

    /// Memory all request bodies in memory may hold, in bytes.
    pub fn body_memory_bytes(&self) -> usize {
        usize::try_from(self.body_memory_mb.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
    }

    /// The (certificate, key) files when HTTPS is on; one without the
    /// other is a configuration error, not a silent plain HTTP.
    pub fn tls_files(&self) -> Result<Option<(&Path, &Path)>, HalfConfiguredTls> {
        let set = |path: &Path| !path.as_os_str().is_empty();
        match (set(&self.tls_cert_file), set(&self.tls_key_file)) {
            (true, true) => Ok(Some((&self.tls_cert_file, &self.tls_key_file))),
            (false, false) => Ok(None),
            _ => Err(HalfConfiguredTls),
        }
    }
}

/// Only one of the HTTPS certificate and key files is set.
#[derive(Debug, thiserror::Error)]
#[error("server.tls_cert_file and server.tls_key_file go together: set both or neither")]
pub struct HalfConfiguredTls;

/// Which storage engine serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// sled, embedded: one process, nothing else to run.
    Sled,
    /// PostgreSQL at `storage.postgres_url`.
    Postgres,
}

/// `[storage]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// The engine.
    pub backend: Backend,
    /// The PostgreSQL database, with `backend = "postgres"`.
    #[serde(deserialize_with = "secret")]
    pub postgres_url: Secret,
    /// Connections to it per node, for requests.
    pub postgres_pool: usize,
    /// Connections to it per node for background work (delivery results,
    /// log upkeep, leases, the dispatcher's reads, sweeps, metrics).
    pub postgres_background_pool: usize,
    /// Longest wait to connect to it, in milliseconds.
    pub postgres_connect_timeout_ms: u64,
    /// Longest a statement may run, in milliseconds.
    pub postgres_statement_timeout_ms: u64,
    /// Longest start-up waits for the store (PostgreSQL unreachable, a
    /// disk too full to open sled), in seconds; 0: no limit.
    pub startup_wait_secs: u64,
    /// Database and admin-token directory.
    pub data_dir: PathBuf,
    /// Page-cache size of the database, in MiB.
    pub cache_mb: u64,
    /// Longest wait, in microseconds, to gather concurrent writers into one
    /// transaction and one flush.
    pub group_commit_window_us: u64,
    /// Free space kept on the data directory's disk, in MiB (at most a
    /// tenth of the filesystem): writes answer 503 rather than fill it.
    pub min_free_mb: u64,
    /// The key that encrypts webhook secrets at rest: 32 bytes in standard
    /// base64; empty: secrets are stored in clear (or see `secret_key_file`).
    #[serde(deserialize_with = "secret")]
    pub secret_key: Secret,
    /// A file holding the key instead (for secret managers); empty: none.
    pub secret_key_file: PathBuf,
}

/// Why `storage.secret_key` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyConfigError {
    /// Both the key and a key file are set.
    #[error("set storage.secret_key or storage.secret_key_file, not both")]
    Both,
    /// The key file could not be read.
    #[error("storage.secret_key_file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key is malformed.
    #[error("storage.secret_key: {0}")]
    Malformed(#[from] crate::secrets::SealError),
}

impl StorageConfig {
    /// The key sealing webhook secrets at rest, if one is configured.
    pub fn sealing_key(&self) -> Result<Option<crate::secrets::SealingKey>, KeyConfigError> {
        let inline = self.secret_key.expose();
        let file = &self.secret_key_file;
        let text = match (inline.is_empty(), file.as_os_str().is_empty()) {
            (true, true) => return Ok(None),
            (false, false) => return Err(KeyConfigError::Both),
            (false, true) => inline.to_owned(),
            (true, false) => {
                std::fs::read_to_string(file).map_err(|source| KeyConfigError::File {
                    path: file.clone(),
                    source,
                })?
            }
        };
        Ok(Some(crate::secrets::SealingKey::parse(&text)?))
    }
}

/// `[admin]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// The admin token; empty means "generate one on first start".
    #[serde(deserialize_with = "secret")]
    pub token: Secret,
}

/// `[webhooks]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Per-attempt timeout in milliseconds.
    pub attempt_timeout_ms: u64,
    /// Retry delay in milliseconds.
    pub retry_delay_ms: u64,
    /// An endpoint whose every attempt failed for this long (milliseconds)…
    pub disable_after_failing_ms: u64,
    /// …with at least this many attempts, is disabled.
    pub disable_after_failures: u32,
    /// Whether http:// endpoints are allowed.
    pub allow_http: bool,
    /// `http://[user:pass@]host:port` of the egress proxy; empty: none.
    #[serde(deserialize_with = "secret")]
    pub proxy_url: Secret,
    /// Hosts and domains attempts reach without the proxy.
    pub no_proxy: Vec<String>,
    /// Whether private-network endpoints are allowed.
    pub allow_private_networks: bool,
    /// Extra PEM roots; empty for none.
    pub ca_file: String,
    /// Attempts in flight per organization.
    pub max_in_flight_per_org: usize,
    /// Attempts in flight in all.
    pub max_in_flight_total: usize,
    /// Delivery threads; 0 means one per core.
    pub delivery_workers: usize,
    /// Delivery-log records kept per organization.
    pub log_retention: usize,
    /// Unfinished deliveries of one organization held in memory; the rest
    /// wait in the outbox.
    pub backlog_window: usize,
    /// Several nodes: how long a node holds an organization's deliveries
    /// without renewing, in milliseconds.
    pub lease_ms: u64,
}

impl WebhookConfig {
    /// The per-attempt timeout.
    pub fn attempt_timeout(&self) -> Duration {
        Duration::from_millis(self.attempt_timeout_ms)
    }

    /// The delay between a failed first attempt and the retry.
    pub fn retry_delay(&self) -> Duration {
        Duration::from_millis(self.retry_delay_ms)
    }

    /// How long a delivery lease lasts unless renewed (at least 30 ms).
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.max(30))
    }
}

/// `[actors]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorConfig {
    /// Idle time after which an organization actor stops, in milliseconds.
    pub org_idle_timeout_ms: u64,
    /// How often expired role assignments are looked for and recorded, in
    /// milliseconds (enforcement does not wait for it).
    pub role_expiry_sweep_ms: u64,
}

impl ActorConfig {
    /// The role-expiry sweep interval (at least 10 ms).
    pub fn role_expiry_sweep(&self) -> Duration {
        Duration::from_millis(self.role_expiry_sweep_ms.max(10))
    }

    /// The idle timeout as a duration (at least 10 ms).
    pub fn org_idle_timeout(&self) -> Duration {
        Duration::from_millis(self.org_idle_timeout_ms.max(10))
    }
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// `[log]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// Output format.
    pub format: LogFormat,
    /// Least severe level shown.
    pub level: String,
}

fn secret<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
    String::deserialize(deserializer).map(Secret::new)
}

/// `text` as TOML; an error names where and why on one line (toml's own
/// message then quotes the line over several more).
fn parse_toml(text: &str, origin: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|err| {
        let said = err.to_string();
        let place = said.lines().next().unwrap_or_default();
        let why = err.message().trim().replace('\n', ", ");
        ConfigError::Invalid(format!("{origin}: {place}: {why}"))
    })
}

/// Overlays `top` onto `base`, section by section.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (key, value) in top {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base_section)), toml::Value::Table(section)) => {
                merge(base_section, section)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Applies one `ROLECALL_SECTION__KEY=value`, typed like the default value.
fn apply_env(table: &mut toml::Table, name: &str, raw: &str) -> Result<(), ConfigError> {
    let Some(rest) = name.strip_prefix("ROLECALL_") else {
        return Ok(());
    };
    let Some((section, key)) = rest.split_once("__") else {
        return Ok(());
    };
    let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
    let unknown = || ConfigError::Invalid(format!("{name}: no configuration key {section}.{key}"));
    let slot = table
        .get_mut(&section)
        .and_then(|s| s.as_table_mut())
        .and_then(|s| s.get_mut(&key))
        .ok_or_else(unknown)?;
    let wrong = |kind: &str| ConfigError::Invalid(format!("{name}: expected {kind}, got {raw:?}"));
    *slot = match slot {
        toml::Value::Integer(_) => {
            toml::Value::Integer(raw.trim().parse().map_err(|_| wrong("an integer"))?)
        }
        toml::Value::Float(_) => {
            toml::Value::Float(raw.trim().parse().map_err(|_| wrong("a number"))?)
        }
        toml::Value::Boolean(_) => {
            toml::Value::Boolean(raw.trim().parse().map_err(|_| wrong("true or false"))?)
        }
        // A list: comma-separated.
        toml::Value::Array(_) => toml::Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| toml::Value::String(item.to_owned()))
                .collect(),
        ),
        _ => toml::Value::String(raw.to_owned()),
    };
    Ok(())
}

impl Config {
    /// Loads defaults, then `file`, then the `ROLECALL_*` variables of `env`.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut table = parse_toml(DEFAULTS, "built-in defaults")?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            merge(&mut table, parse_toml(&text, &path.display().to_string())?);
        }
        for (name, value) in env {
            apply_env(&mut table, &name, &value)?;
        }
        Config::deserialize(toml::Value::Table(table))
            .map_err(|err| ConfigError::Invalid(err.to_string()))
    }

    /// Defaults only, with `overrides` applied as if they were environment variables.
    pub fn with_overrides(overrides: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::load(
            None,
            overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_contract() {
        let Ok(config) = Config::with_overrides(&[]) else {
            panic!("defaults must load")
        };
        assert_eq!(config.server.listen, "127.0.0.1:8080");
        assert_eq!(config.storage.data_dir, PathBuf::from("./data"));
        assert_eq!(config.admin.token.expose(), "");
        assert_eq!(config.webhooks.attempt_timeout_ms, 8000);
        assert_eq!(config.webhooks.retry_delay_ms, 2000);
        assert!(!config.webhooks.allow_http && !config.webhooks.allow_private_networks);
        assert_eq!(config.webhooks.max_in_flight_per_org, 16);
        assert_eq!(config.webhooks.log_retention, 10000);
        assert_eq!(config.webhooks.lease_ms, 30000);
        assert_eq!(
            (config.log.format, config.log.level.as_str()),
            (LogFormat::Pretty, "info")
        );
    }

    #[test]
    fn env_overrides_are_typed_and_checked() {
        let config = Config::with_overrides(&[
            ("ROLECALL_SERVER__LISTEN", "0.0.0.0:9"),
            ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
            ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "200"),
            ("ROLECALL_LOG__FORMAT", "json"),
            ("ROLECALL_REQUIRE_BROWSER", "1"),
            ("PATH", "/bin"),
        ]);
        let Ok(config) = config else {
            panic!("overrides must apply")
        };
        assert_eq!(config.server.listen, "0.0.0.0:9");
        assert!(config.webhooks.allow_http);
        assert_eq!(config.webhooks.retry_delay_ms, 200);
        assert_eq!(config.log.format, LogFormat::Json);
        assert!(Config::with_overrides(&[("ROLECALL_SERVER__LISTN", "x")]).is_err());
        assert!(Config::with_overrides(&[("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "soon")]).is_err());
        assert!(Config::with_overrides(&[("ROLECALL_LOG__FORMAT", "xml")]).is_err());
    }

    #[test]
    fn a_file_overlays_the_defaults() {
        let dir = tempfile::tempdir().ok();
        let Some(path) = dir.as_ref().map(|d| d.path().join("c.toml")) else {
            panic!("tempdir")
        };
        assert!(std::fs::write(&path, "[server]\nlisten = \"127.0.0.1:0\"\n").is_ok());
        let Ok(config) = Config::load(Some(&path), Vec::new()) else {
            panic!("file must load")
        };
        assert_eq!(config.server.listen, "127.0.0.1:0");
        assert_eq!(config.webhooks.retry_delay_ms, 2000);
        assert!(std::fs::write(&path, "[server]\nbogus = 1\n").is_ok());
        assert!(Config::load(Some(&path), Vec::new()).is_err());
    }
}
