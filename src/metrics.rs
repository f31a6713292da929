//! Prometheus metrics. Each application owns its registry (no global
//! recorder), so servers in one process, as in the tests, count apart.
//!
//! Counters and histograms are updated where things happen; gauges (queue
//! depth, outbox size, live actors, size on disk) are read at scrape time.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use actix_web::http::StatusCode;

use crate::domain::delivery::{LogRecord, Outcome};

/// Buckets for HTTP request latency, in seconds.
const HTTP_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];
/// Buckets for delivery-attempt latency, in seconds (the timeout is 8 s).
const ATTEMPT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 8.0, 10.0,
];

/// Point-in-time values read when scraped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Deliveries due and waiting for a free slot.
    pub ready: u64,
    /// Attempts in flight.
    pub in_flight: u64,
    /// Deliveries waiting for their retry time (or recovered ones not yet due).
    pub scheduled: u64,
    /// Unfinished deliveries stored in the outbox.
    pub outbox: u64,
    /// Running organization actors.
    pub org_actors: u64,
    /// The database's size on disk, in bytes.
    pub storage_bytes: u64,
}

/// Every metric rolecall exports.
pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    deliveries: IntCounterVec,
    attempt_duration: HistogramVec,
    queue_depth: IntGaugeVec,
    outbox_size: IntGauge,
    org_actors: IntGauge,
    storage_bytes: IntGauge,
    endpoints_disabled: IntCounterVec,
}

impl Metrics {
    /// A fresh registry with every metric registered at zero.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some("rolecall".into()), None)?;
        let http_requests = IntCounterVec::new(
            Opts::new("http_requests_total", "HTTP requests answered"),
            &["route", "method", "status"],
        )?;
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "http_request_duration_seconds",
                "Time from request to response headers",
            )
            .buckets(HTTP_BUCKETS.to_vec()),
            &["route", "method"],
        )?;
        let deliveries = IntCounterVec::new(
            Opts::new(
                "deliveries_total",
                "Delivery-log records written, by outcome and attempt (\"none\" for skipped events)",
            ),
            &["outcome", "attempt"],
        )?;
        let attempt_duration = HistogramVec::new(
            HistogramOpts::new(
                "delivery_attempt_duration_seconds",
                "Duration of delivery attempts",
            )
            .buckets(ATTEMPT_BUCKETS.to_vec()),
            &["outcome"],
        )?;
        let queue_depth = IntGaugeVec::new(
            Opts::new(
                "delivery_queue_depth",
                "Unfinished deliveries by state: ready, in_flight, scheduled",
            ),
            &["state"],
        )?;
        let outbox_size = IntGauge::new("outbox_size", "Unfinished deliveries in the outbox")?;
        let org_actors = IntGauge::new("org_actors", "Running organization actors")?;
        let storage_bytes = IntGauge::new("storage_size_bytes", "Database size on disk")?;
        let endpoints_disabled = IntCounterVec::new(
            Opts::new(
                "webhook_endpoints_disabled_total",
                "Webhook endpoints this node disabled, by reason (gone: a 410 answer; failing: a long run of failed attempts)",
            ),
            &["reason"],
        )?;
        registry.register(Box::new(http_requests.clone()))?;
        registry.register(Box::new(http_duration.clone()))?;
        registry.register(Box::new(deliveries.clone()))?;
        registry.register(Box::new(attempt_duration.clone()))?;
        registry.register(Box::new(queue_depth.clone()))?;
        registry.register(Box::new(outbox_size.clone()))?;
        registry.register(Box::new(org_actors.clone()))?;
        registry.register(Box::new(storage_bytes.clone()))?;
        registry.register(Box::new(endpoints_disabled.clone()))?;
        for reason in ["gone", "failing"] {
            endpoints_disabled.with_label_values(&[reason]);
        }
        for outcome in ["succeeded", "failed"] {
            for attempt in ["1", "2"] {
                deliveries.with_label_values(&[outcome, attempt]);
            }
            attempt_duration.with_label_values(&[outcome]);
        }
        deliveries.with_label_values(&["skipped", "none"]);
        Ok(Metrics {
            registry,
            http_requests,
            http_duration,
            deliveries,
            attempt_duration,
            queue_depth,
            outbox_size,
            org_actors,
            storage_bytes,
            endpoints_disabled,
        })
    }

    /// Counts an endpoint this node disabled, by reason.
    pub fn endpoint_disabled(&self, reason: crate::domain::webhook::DisabledReason) {
        self.endpoints_disabled
            .with_label_values(&[reason.as_str()])
            .inc();
    }

    /// Counts one answered request; `route` is the matched route template.
    pub fn http_request(&self, route: &str, method: &str, status: StatusCode, seconds: f64) {
        self.http_requests
            .with_label_values(&[route, method, status.as_str()])
            .inc();
        self.http_duration
            .with_label_values(&[route, method])
            .observe(seconds);
    }

    /// Counts delivery-log records once they are stored.
    pub fn delivery_logged<'a>(&self, records: impl IntoIterator<Item = &'a LogRecord>) {
        for record in records {
            let outcome = outcome_label(record.outcome);
            let attempt = match record.attempt {
                Some(1) => "1",
                Some(2) => "2",
                Some(_) => "other",
                None => "none",
            };
            self.deliveries.with_label_values(&[outcome, attempt]).inc();
            if let (Some(ms), Some(_)) = (record.latency_ms, record.attempt) {
                self.attempt_duration
                    .with_label_values(&[outcome])
                    .observe(ms as f64 / 1000.0);
            }
        }
    }

    /// The text exposition, with `gauges` as read now.
    pub fn render(&self, gauges: Gauges) -> String {
        for (state, value) in [
            ("ready", gauges.ready),
            ("in_flight", gauges.in_flight),
            ("scheduled", gauges.scheduled),
        ] {
            self.queue_depth
                .with_label_values(&[state])
                .set(clamp(value));
        }
        self.outbox_size.set(clamp(gauges.outbox));
        self.org_actors.set(clamp(gauges.org_actors));
        self.storage_bytes.set(clamp(gauges.storage_bytes));
        let mut out = Vec::new();
        if let Err(err) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %err, "encoding metrics failed");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// The `outcome` label of a log record.
pub fn outcome_label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
        Outcome::Skipped => "skipped",
    }
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exported_before_anything_happens() {
        let text = Metrics::new()
            .unwrap_or_else(|e| panic!("{e}"))
            .render(Gauges {
                outbox: 3,
                ..Gauges::default()
            });
        for family in [
            "rolecall_deliveries_total{attempt=\"1\",outcome=\"succeeded\"} 0",
            "rolecall_delivery_queue_depth{state=\"ready\"} 0",
            "rolecall_outbox_size 3",
            "rolecall_org_actors 0",
            "rolecall_storage_size_bytes 0",
            "# TYPE rolecall_delivery_attempt_duration_seconds histogram",
        ] {
            assert!(text.contains(family), "missing {family} in\n{text}");
        }
    }
}
