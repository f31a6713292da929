//! Building and running the application: open storage, load state, wire
//! the commit path and the actors, bind, serve. Tests use the same path
//! with port 0 and a temp data dir.

use std::net::TcpListener;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::{Actor, Addr, Arbiter, AsyncContext, Context, Recipient};
use actix_web::dev::{Server, ServerHandle, ServiceResponse};
use actix_web::http::header::CONTENT_TYPE;
use actix_web::middleware::{from_fn, ErrorHandlerResponse, ErrorHandlers};
use actix_web::{web, App, HttpServer};
use utoipa_actix_web::AppExt;

use crate::accounts::Accounts;
use crate::actors::delivery::DeliveryActor;
use crate::actors::dispatcher::Dispatcher;
use crate::actors::dispatcher::ReleaseLeases;
use crate::actors::endpoint_health::{Attempted, EndpointHealth, FailingLimit};
use crate::actors::fair_queue::Limits;
use crate::actors::handoff::Handoff;
use crate::actors::log::LogActor;
use crate::actors::messages::{Deliver, Drain};
use crate::actors::registry::Registry;
use crate::actors::role_expiry::RoleExpiry;
use crate::actors::unwritten::Unwritten;
use crate::admissions::Admissions;
use crate::commit::{Commit, CommitPath};
use crate::config::Config;
use crate::dashboard;
use crate::domain::change::Write;
use crate::http::body::BodyLimits;
use crate::http::idempotency::idempotency;
use crate::http::observe::observe;
use crate::http::problem::{problem_response, PROBLEM_JSON};
use crate::http::rate_limit::RateLimiter;
use crate::http::routes::{self, fallback, openapi};
use crate::http::tls::{ServerCertificate, TlsFileError};
use crate::http::AppContext;
use crate::metrics::Metrics;
use crate::secrets::{new_token, SealingKey, Secret};
use crate::state::accounts::AccountTable;
use crate::state::directory::Directory;
use crate::storage::{Store, StoreError};
use crate::webhooks::client::{tls_config, ClientSettings};
use crate::webhooks::preflight::PendingTests;
use crate::webhooks::proxy::ProxySettings;
use crate::webhooks::url::UrlPolicy;

/// Why the application could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The webhook TLS configuration could not be built.
    #[error("{0}")]
    Tls(String),
    /// The HTTPS certificate or key cannot be served.
    #[error("{0}")]
    ServerTls(#[from] TlsFileError),
    /// rustls refuses the HTTPS configuration.
    #[error("HTTPS: {0}")]
    ServerTlsConfig(#[source] rustls::Error),
    /// `webhooks.proxy_url` cannot be used.
    #[error("{0}")]
    Proxy(#[source] crate::webhooks::proxy::ProxyUrlError),
    /// The metrics registry could not be built.
    #[error("metrics: {0}")]
    Metrics(#[source] prometheus::Error),
    /// The key for webhook secrets at rest is unusable.
    #[error("{0}")]
    SecretKey(#[source] crate::config::KeyConfigError),
    /// Storage could not be opened or loaded.
    #[error("storage: {}", crate::telemetry::cause_chain(.0))]
    Storage(#[from] StoreError),
    /// The store could not be opened within `storage.startup_wait_secs`.
    #[error("storage: not available after waiting {waited_secs} s (storage.startup_wait_secs): {}", crate::telemetry::cause_chain(.source))]
    StoreNotAvailable {
        /// How long start-up waited.
        waited_secs: u64,
        /// The last reason.
        #[source]
        source: StoreError,
    },
    /// The listen address could not be bound (in use, not this host's, a
    /// privileged port).
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// `server.listen`.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written, or the server could not be set up.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl StartupError {
    /// The process's exit code for it: 78 (`EX_CONFIG`) when the
    /// configuration itself is wrong, 1 when what it names is not as
    /// needed (a port in use, a file, a directory, a database).
    pub fn exit_code(&self) -> u8 {
        match self {
            StartupError::SecretKey(_)
            | StartupError::Proxy(_)
            | StartupError::Storage(StoreError::Config(_) | StoreError::SecretKey(_)) => {
                EXIT_CONFIG
            }
            _ => 1,
        }
    }
}

/// sysexits' `EX_CONFIG`: the configuration is wrong.
pub const EXIT_CONFIG: u8 = 78;

/// Binds `server.listen`, before anything else starts.
fn bind(address: &str) -> Result<TcpListener, StartupError> {
    TcpListener::bind(address).map_err(|source| StartupError::Bind {
        address: address.to_owned(),
        source,
    })
}

/// A bound, ready-to-run server.
pub struct Application {
    port: u16,
    server: Server,
    store: Store,
    registry: Arc<Registry>,
    dispatcher: Addr<Dispatcher>,
    log: Addr<LogActor>,
    /// The certificate HTTPS serves, which SIGHUP reloads; `None` on plain HTTP.
    certificate: Option<Arc<ServerCertificate>>,
    /// The delivery threads, stopped after the dispatcher drained.
    workers: Vec<Arbiter>,
    /// Records expired role assignments; held so that it runs as long as the server.
    _role_expiry: Addr<RoleExpiry>,
}

impl Application {
    /// Opens storage, loads state, wires the commit path and the delivery
    /// actors, bootstraps the admin token and binds.
    pub async fn build(config: Config) -> Result<Self, StartupError> {
        // Checked first: a bad certificate stops start-up before the store opens.
        let certificate = match config.server.tls_files().map_err(TlsFileError::from)? {
            Some((cert, key)) => Some(ServerCertificate::load(cert, key)?),
            None => None,
        };
        let tls = certificate
            .as_ref()
            .map(|certificate| certificate.server_config())
            .transpose()
            .map_err(StartupError::ServerTlsConfig)?;
        let key = config
            .storage
            .sealing_key()
            .map_err(StartupError::SecretKey)?;
        let sealed = key.is_some();
        let store = open_when_available(&config, key).await?;
        match &store {
            Store::Sled(_) => {
                tracing::info!(data_dir = %config.storage.data_dir.display(), "storage: sled, embedded")
            }
            Store::Postgres(_) => {
                let settings = crate::storage::postgres::Settings::of(&config.storage)
                    .map_err(StoreError::Config)?;
                tracing::info!(
                    database = %crate::storage::PgStore::describe(&settings),
                    "storage: PostgreSQL, schema version {}",
                    crate::storage::postgres::migrate::VERSION
                );
            }
        }
        if sealed {
            tracing::info!(
                "webhook secrets at rest: encrypted with storage.secret_key (XChaCha20-Poly1305)"
            );
        } else {
            tracing::info!(
                "webhook secrets at rest: in clear (set storage.secret_key to encrypt them)"
            );
        }
        let loaded = store.load().await?;
        let metrics = Arc::new(Metrics::new().map_err(StartupError::Metrics)?);
        let directory = Arc::new(Directory::new(loaded.orgs));
        let accounts = Arc::new(AccountTable::new(loaded.users, loaded.tokens));
        let client = client_settings(&config)?;

        // The dispatcher and the log actor get their addresses before they
        // run: the commit path hands deliveries to them, the log actor
        // writes through the commit path, and the delivery actors report
        // to the dispatcher.
        let dispatching = Context::<Dispatcher>::new();
        let dispatcher = dispatching.address();
        let logging = Context::<LogActor>::new();
        let hooks = &config.webhooks;
        let queue = store.shared_queue(hooks.lease());
        let admissions = queue
            .as_ref()
            .map(|queue| Arc::new(Admissions::new(queue.lost_reads())));
        let handoff = Handoff {
            enqueue: dispatcher.clone().recipient(),
            drop_org: dispatcher.clone().recipient(),
            touched: logging.address().recipient(),
            metrics: metrics.clone(),
            admissions: admissions
                .clone()
                .map(|admissions| (admissions, dispatcher.clone().recipient())),
        };
        let commit = Arc::new(CommitPath::new(
            store.clone(),
            directory.clone(),
            accounts.clone(),
            Arc::new(handoff),
        ));
        let admin_token_sha256 = admin_token_hash(&config, &store, &commit).await?;
        let listener = bind(&config.server.listen)?;
        let address = listener.local_addr()?;

        // Nothing fails from here until the server runs: actors and timers
        // start only now, so a failed start leaves none behind.
        // On a shared queue, outcomes are counted until durable (see
        // `unwritten`), and logs pruned by the counts the store keeps.
        let unwritten = queue.is_some().then(Arc::<Unwritten>::default);
        let mut log_actor = LogActor::new(commit.clone(), metrics.clone(), hooks.log_retention);
        if let Some(unwritten) = &unwritten {
            log_actor = log_actor.on_shared_queue(unwritten.clone());
        }
        let log = logging.run(log_actor);
        let judging = Context::<EndpointHealth>::new();
        let health = judging.address().recipient();
        let (deliverers, workers) =
            start_delivery_actors(&config, &client, &commit, &dispatcher, &health);
        let limits = Limits {
            per_org: hooks.max_in_flight_per_org,
            total: hooks.max_in_flight_total,
        };
        let mut dispatcher = Dispatcher::new(
            limits,
            hooks.retry_delay(),
            hooks.backlog_window,
            store.clone(),
            deliverers,
            log.clone().recipient(),
        );
        if let (Some(queue), Some(admissions), Some(unwritten)) = (queue, admissions, unwritten) {
            if hooks.lease() < hooks.attempt_timeout() * 3 {
                tracing::warn!(
                    lease_ms = hooks.lease_ms, attempt_timeout_ms = hooks.attempt_timeout_ms,
                    "webhooks.lease_ms is under three attempt timeouts: a node whose renewals are late may still have attempts in flight when another takes its organizations over"
                );
            }
            dispatcher = dispatcher.sharing(queue, unwritten, admissions);
        }
        let dispatcher = dispatching.run(dispatcher);

        let registry = Registry::new(
            directory.clone(),
            commit.clone(),
            accounts.clone(),
            config.actors.org_idle_timeout(),
        );
        judging.run(EndpointHealth::new(
            commit.clone(),
            registry.clone(),
            metrics.clone(),
            FailingLimit {
                lasting: Duration::from_millis(hooks.disable_after_failing_ms),
                attempts: hooks.disable_after_failures,
            },
        ));
        let role_expiry = RoleExpiry::new(
            commit.clone(),
            registry.clone(),
            config.actors.role_expiry_sweep(),
        )
        .start();
        let rate_limiter = RateLimiter::new(
            config.api.rate_limit_per_second,
            config.api.rate_limit_burst,
        );
        match &rate_limiter {
            Some(_) => tracing::info!(
                per_second = config.api.rate_limit_per_second,
                burst = config.api.rate_limit_burst,
                "rate limits on, per token on this node"
            ),
            None => tracing::info!("rate limits off (api.rate_limit_per_second = 0)"),
        }
        let document = openapi::document();
        let context = web::Data::new(AppContext {
            store: store.clone(),
            account_changes: Accounts::new(accounts.clone(), commit.clone()),
            commit,
            directory,
            accounts,
            registry: registry.clone(),
            tests: PendingTests::new(store.clone()),
            client,
            log: log.clone().recipient(),
            queue_depth: dispatcher.clone().recipient(),
            metrics,
            log_retention: config.webhooks.log_retention,
            admin_token_sha256,
            metrics_token_sha256: Some(config.metrics.token.digest())
                .filter(|_| !config.metrics.token.expose().is_empty()),
            rate_limiter,
            bodies: BodyLimits::new(
                config.server.body_timeout(),
                config.server.body_memory_bytes(),
            ),
            idempotency_ttl: config.api.idempotency_ttl(),
            keyed_routes: crate::http::idempotency::KeyedRoutes::of(&document),
        });
        crate::http::idempotency::start_purging(store.clone());
        let event_types = web::Data::new(crate::http::schema::events::catalog(
            document.components.as_ref().unwrap_or(&Default::default()),
        ));
        let document = web::Data::new(document);

        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(context.clone())
                .app_data(document.clone())
                .app_data(event_types.clone())
                .wrap(ErrorHandlers::new().default_handler(ensure_problem_body))
                .wrap(from_fn(idempotency))
                .wrap(from_fn(observe))
                .into_utoipa_app()
                .configure(routes::configure)
                .into_app()
                .configure(dashboard::configure)
                .default_service(web::to(fallback::no_route))
        })
        .shutdown_timeout(config.server.shutdown_timeout_secs);
        if config.server.workers > 0 {
            server = server.workers(config.server.workers);
        }
        let server = server.disable_signals();
        let server = match tls {
            Some(tls) => server.listen_rustls_0_23(listener, tls)?,
            None => server.listen(listener)?,
        };
        // The contract's first line after binding; actix logs its own only from `run`.
        match &certificate {
            Some(certificate) => tracing::info!(
                scheme = "https",
                certificate_sha256 = %certificate.fingerprint(),
                "listening on {address}"
            ),
            None => tracing::info!(scheme = "http", "listening on {address}"),
        }
        let server = server.run();
        Ok(Application {
            port: address.port(),
            server,
            store,
            registry,
            dispatcher,
            log,
            certificate,
            workers,
            _role_expiry: role_expiry,
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A handle to stop the server.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// The organization actors' registry (for tests and tools that inspect it).
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Serves until stopped (by [`ServerHandle::stop`]), then lets in-flight
    /// attempts finish or time out, writes their log records and flushes.
    /// Unfinished deliveries stay in the outbox for the next start, or,
    /// on a queue other nodes share, are released to them.
    pub async fn run_until_stopped(self) -> Result<(), StartupError> {
        self.server.await?;
        let _ = self.dispatcher.send(Drain).await;
        let _ = crate::actors::log::flush_all(&self.log.clone().recipient()).await;
        // Recorded first, so that the next holder does not repeat what finished here.
        let _ = self.dispatcher.send(ReleaseLeases).await;
        for worker in &self.workers {
            worker.stop();
        }
        self.store.durable().await?;
        Ok(())
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully; SIGHUP
    /// reloads the HTTPS certificate.
    pub async fn run_until_signalled(self) -> Result<(), StartupError> {
        let handle = self.handle();
        reload_on_hangup(self.certificate.clone());
        actix_web::rt::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutting down: no new connections, finishing in-flight requests");
            handle.stop(true).await;
        });
        self.run_until_stopped().await?;
        tracing::info!("stopped");
        Ok(())
    }
}

/// What start-up waited for.
enum Waited {
    Room,
    Database,
}

/// How often start-up says it is still waiting for the store.
const WAITING_FOR_STORE_EVERY: Duration = Duration::from_secs(30);

/// Opens the store. While the disk is too full even to open it (sled
/// writes as it opens), or PostgreSQL cannot be reached, start-up waits and
/// says so, then carries on by itself: the same promise as a running
/// server's, which recovers without a restart. It gives up after
/// `storage.startup_wait_secs`, so that a supervisor sees the failure.
/// SIGTERM ends the wait.
async fn open_when_available(
    config: &Config,
    key: Option<SealingKey>,
) -> Result<Store, StartupError> {
    let storage = &config.storage;
    let mut said: Option<Instant> = None;
    let mut waited_for = None;
    let started = Instant::now();
    let longest = Duration::from_secs(storage.startup_wait_secs);
    loop {
        match Store::open(storage, key.clone()).await {
            Ok(store) => {
                match waited_for {
                    Some(Waited::Room) => tracing::info!("the disk has room again: starting"),
                    Some(Waited::Database) => {
                        tracing::info!("the database answers again: starting")
                    }
                    None => {}
                }
                return Ok(store);
            }
            Err(err)
                if err.is_transient() && !longest.is_zero() && started.elapsed() >= longest =>
            {
                return Err(StartupError::StoreNotAvailable {
                    waited_secs: storage.startup_wait_secs,
                    source: err,
                });
            }
            Err(err) if err.is_transient() => {
                waited_for = Some(if err.is_out_of_space() {
                    Waited::Room
                } else {
                    Waited::Database
                });
                if said.is_none_or(|at| at.elapsed() >= WAITING_FOR_STORE_EVERY) {
                    let error = crate::telemetry::cause_chain(&err);
                    if err.is_out_of_space() {
                        tracing::error!(
                            data_dir = %storage.data_dir.display(),
                            error,
                            "the disk holding the data directory is full: waiting for free space to open the database"
                        );
                    } else {
                        tracing::error!(error, "the store cannot be reached: waiting for it");
                    }
                    said = Some(Instant::now());
                }
                actix_web::rt::time::sleep(Duration::from_secs(1)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// The outbound client's settings: timeout, URL policy, TLS roots.
fn client_settings(config: &Config) -> Result<ClientSettings, StartupError> {
    let hooks = &config.webhooks;
    Ok(ClientSettings {
        timeout: hooks.attempt_timeout(),
        policy: UrlPolicy {
            allow_http: hooks.allow_http,
            allow_private_networks: hooks.allow_private_networks,
        },
        tls: tls_config(&hooks.ca_file, "webhooks.ca_file").map_err(StartupError::Tls)?,
        proxy: ProxySettings::parse(hooks.proxy_url.expose(), &hooks.no_proxy)
            .map_err(StartupError::Proxy)?,
    })
}

/// Starts one delivery actor per delivery thread, each reading endpoints
/// from `directory` and reporting to `finished`.
fn start_delivery_actors(
    config: &Config,
    client: &ClientSettings,
    commit: &Arc<CommitPath>,
    dispatcher: &Addr<Dispatcher>,
    health: &Recipient<Attempted>,
) -> (Vec<Recipient<Deliver>>, Vec<Arbiter>) {
    let threads = match config.webhooks.delivery_workers {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2),
        n => n,
    };
    let mut arbiters = Vec::new();
    let mut deliverers = Vec::new();
    for _ in 0..threads {
        let arbiter = Arbiter::new();
        let (settings, commit) = (client.clone(), commit.clone());
        let (finished, not_made, health) = (
            dispatcher.clone().recipient(),
            dispatcher.clone().recipient(),
            health.clone(),
        );
        let actor = DeliveryActor::start_in_arbiter(&arbiter.handle(), move |_| {
            DeliveryActor::new(settings, commit, finished, not_made, health)
        });
        deliverers.push(actor.recipient());
        arbiters.push(arbiter);
    }
    (deliverers, arbiters)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            tracing::error!("cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await
        }
    }
}

/// Reloads the certificate on every SIGHUP (`systemctl reload`). Installed
/// on plain HTTP too, where it only logs, because SIGHUP's default action
/// would end the process.
fn reload_on_hangup(certificate: Option<Arc<ServerCertificate>>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot install the SIGHUP handler; certificates reload only on restart");
        return;
    };
    actix_web::rt::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(certificate) = &certificate else {
                tracing::info!("SIGHUP: nothing to reload (HTTPS is off)");
                continue;
            };
            match certificate.reload() {
                Ok(fingerprint) => tracing::info!(
                    certificate_sha256 = %fingerprint,
                    "SIGHUP: reloaded the HTTPS certificate; new connections use it"
                ),
                Err(err) => tracing::error!(
                    certificate_sha256 = %certificate.fingerprint(),
                    "SIGHUP: kept the certificate in use: {err}"
                ),
            }
        }
    });
}

/// The admin token's SHA-256: from the configuration, else the stored one,
/// else a new token written once to `<data_dir>/admin-token` (mode 0600).
async fn admin_token_hash(
    config: &Config,
    store: &Store,
    commit: &CommitPath,
) -> Result<[u8; 32], StartupError> {
    if !config.admin.token.expose().is_empty() {
        return Ok(config.admin.token.digest());
    }
    if let Some(hash) = store.admin_token_hash().await? {
        return Ok(hash);
    }
    let token = new_token();
    // With PostgreSQL the data directory holds only this file.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&config.storage.data_dir)?;
    let path = config.storage.data_dir.join("admin-token");
    write_private_file(&path, &token)?;
    let stored = Commit::writes(vec![Write::AdminToken(token.digest())]);
    commit.commit(stored).await?;
    match store.admin_token_hash().await? {
        Some(hash) if hash == token.digest() => {
            tracing::info!(path = %path.display(), "generated the admin token; it was written to this file only");
            Ok(hash)
        }
        // Another node of the cluster recorded its token first: that one
        // is the cluster's, in that node's admin-token file.
        Some(hash) => {
            std::fs::remove_file(&path)?;
            tracing::info!(
                "another node generated the cluster's admin token first; it is in that node's \
                 admin-token file"
            );
            Ok(hash)
        }
        None => Err(StartupError::Io(std::io::Error::other(
            "the generated admin token was committed but is not stored",
        ))),
    }
}

fn write_private_file(path: &Path, secret: &Secret) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(secret.expose().as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// Makes sure every error response is problem+json, including the ones
/// actix-web produces itself.
fn ensure_problem_body<B>(res: ServiceResponse<B>) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let is_problem = res
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == PROBLEM_JSON.as_bytes());
    if is_problem {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    let code = match status.as_u16() {
        400 => "VALIDATION_FAILED",
        401 => "UNAUTHENTICATED",
        404 => "NOT_FOUND",
        405 => "METHOD_NOT_ALLOWED",
        413 => "PAYLOAD_TOO_LARGE",
        415 => "UNSUPPORTED_MEDIA_TYPE",
        500 => "INTERNAL",
        _ => "HTTP_ERROR",
    };
    let detail = status.canonical_reason().unwrap_or("error");
    let (req, _) = res.into_parts();
    let response = problem_response(status, code, detail, Default::default());
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, response).map_into_right_body(),
    ))
}
