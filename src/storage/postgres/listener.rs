//! The connection a node listens on for wake-ups from the other nodes
//! (`NOTIFY`, see `channels`), kept alive by asking it for an answer every
//! [`PROBE_EVERY`]: a connection that went silent, with no error and no
//! close (a network fault neither end saw), is replaced within that and
//! the probe's limit (1 s, as a pooled connection's probe). TCP keepalives
//! would find it only after minutes, and every job handed to this node
//! meanwhile would wait for a look.

use std::time::Duration;

use tokio_postgres::AsyncMessage;
use uuid::Uuid;

use super::channels::stopped_node;
use super::connect::{Connector, IoThread};
use super::error::{from_pg, timed_out};
use super::handed::{self, Handed};
use crate::ids::OrgId;
use crate::storage::StoreError;

/// What the listening connection tells the dispatcher.
#[derive(Debug, PartialEq, Eq)]
pub enum Wakeup {
    /// Listening (again): notifications sent meanwhile are lost, so look
    /// for waiting jobs now.
    Listening,
    /// `org` has jobs waiting that this node may deliver.
    Jobs(OrgId),
    /// New jobs handed to this node, their rows marked held under the
    /// epoch named (see [`super::handed`]).
    Handed(Handed),
    /// This node stopped and released its leases.
    Stopped(Uuid),
}

/// How often the listening connection is asked for an answer. One
/// `SELECT 1` a second per node costs the database nothing to see.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The first wait before listening again, doubled after each failure.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest: a database that is back is listened to again within it
/// (CONTRACT §9: deliveries resume within 2 s).
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// The listening connection's task, stopped when dropped.
pub struct Listening(tokio::task::JoinHandle<()>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long the listening connection's rounds may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Its connect and `LISTEN`: the statement timeout with its margin.
    pub round: Duration,
    /// The answer to a probe ([`super::idle_probe::answer_within`]).
    pub probe: Duration,
}

/// Listens on `channels` on a connection of its own, on the I/O thread,
/// handing each notification to `wake` and connecting again after a
/// failure or a probe left unanswered past its limit.
pub fn listen(
    io: &IoThread,
    connector: std::sync::Arc<Connector>,
    channels: Vec<String>,
    limits: Limits,
    wake: impl Fn(Wakeup) + Send + Sync + 'static,
) -> Listening {
    let task = io.spawn(async move {
        let mut pause = FIRST_PAUSE;
        loop {
            match listen_once(&connector, &channels, limits, &wake).await {
                Ended::Closed(err) => {
                    // It was listening: the next failure starts over.
                    pause = FIRST_PAUSE;
                    let error = err.map(|err| crate::telemetry::cause_chain(&err).to_string());
                    tracing::warn!(
                        error,
                        "the PostgreSQL connection listening for deliveries closed; connecting again"
                    )
                }
                Ended::Silent => {
                    pause = FIRST_PAUSE;
                    tracing::warn!(
                        limit_ms = limits.probe.as_millis() as u64,
                        "the PostgreSQL connection listening for deliveries went silent; connecting again"
                    )
                }
                Ended::Failed(err) => tracing::warn!(
                    error = %crate::telemetry::cause_chain(&err),
                    "listening for deliveries on PostgreSQL failed; trying again"
                ),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    });
    Listening(task)
}

/// How one listening connection ended.
enum Ended {
    /// It listened, then the server or the network closed it, or a probe
    /// failed.
    Closed(Option<StoreError>),
    /// It listened, then left a probe unanswered past its limit.
    Silent,
    /// It never listened.
    Failed(StoreError),
}

/// Connects, listens on `channels` and hands each notification to `wake`
/// until the connection ends or goes silent.
async fn listen_once(
    connector: &Connector,
    channels: &[String],
    limits: Limits,
    wake: &impl Fn(Wakeup),
) -> Ended {
    let connecting = connector.config.connect(connector.tls.clone());
    let connect_limit = connector
        .config
        .get_connect_timeout()
        .map_or(limits.round, |t| *t);
    let (client, mut connection) = match within(connect_limit, "a connection to listen on", async {
        connecting.await.map_err(from_pg)
    })
    .await
    {
        Ok(connected) => connected,
        Err(err) => return Ended::Failed(err),
    };
    let (notified, mut notifications) = tokio::sync::mpsc::unbounded_channel();
    // Driving the connection yields what the server sends unasked. Stopped
    // when this returns: a silent connection would never end by itself.
    let driving = Driving(tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    if notified.send(notification).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::debug!(error = %err, "the listening connection ended");
                    break;
                }
            }
        }
    }));
    let listen: String = channels
        .iter()
        .map(|channel| format!("LISTEN \"{channel}\";"))
        .collect();
    if let Err(err) = within(limits.round, "LISTEN", async {
        client.batch_execute(&listen).await.map_err(from_pg)
    })
    .await
    {
        return Ended::Failed(err);
    }
    wake(Wakeup::Listening);
    // Ends with the first probe that fails or is not answered in time.
    let mut probing = std::pin::pin!(async {
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            match tokio::time::timeout(limits.probe, client.batch_execute("SELECT 1")).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Ended::Closed(Some(from_pg(err))),
                Err(_) => return Ended::Silent,
            }
        }
    });
    let ended = loop {
        tokio::select! {
            notification = notifications.recv() => match notification {
                Some(notification) => woken(notification.payload(), wake),
                None => break Ended::Closed(None),
            },
            ended = &mut probing => break ended,
        }
    };
    drop(driving);
    ended
}

/// The connection's driver task, stopped when dropped.
struct Driving(tokio::task::JoinHandle<()>);

impl Drop for Driving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `round`'s answer, or a timeout error once `limit` passed.
async fn within<T>(
    limit: Duration,
    what: &str,
    round: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(limit, round)
        .await
        .unwrap_or_else(|_| Err(timed_out(what)))
}

/// Hands the wake-up a notification's `payload` means to `wake`.
fn woken(payload: &str, wake: &impl Fn(Wakeup)) {
    if let Some(handed) = handed::decode(payload) {
        return wake(Wakeup::Handed(handed));
    }
    match (payload.parse::<Uuid>(), stopped_node(payload)) {
        (Ok(org), _) => wake(Wakeup::Jobs(OrgId(org))),
        (_, Some(node)) => wake(Wakeup::Stopped(node)),
        _ => tracing::debug!(payload, "a notification that names no organization"),
    }
}
