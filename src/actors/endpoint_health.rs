//! Endpoint health (CONTRACT §10): what delivery attempts say of an
//! endpoint. A 410 Gone disables it at once; a run of failures disables it
//! once it has lasted `webhooks.disable_after_failing_ms` with at least
//! `webhooks.disable_after_failures` attempts; a success ends the run.
//!
//! The run's start is stored with the endpoint (written when a run begins
//! and when a success ends it, not on every attempt), so that it survives
//! restarts and is the same on every node; the attempts of the run are
//! counted here, by the node making them (after a restart, or when another
//! node takes the organization's deliveries over, counting starts again).
//! Changes go through the organization's actor, like any other, so the
//! status is shared by every node and seen by each one's next attempt.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use crate::actors::messages::{Mutate, OrgCommand};
use crate::actors::registry::Registry;
use crate::commit::CommitPath;
use crate::domain::commands::webhooks::{Generation, Health};
use crate::domain::commands::Reply;
use crate::domain::delivery::AttemptOutcome;
use crate::domain::webhook::{Disabled, DisabledReason, EndpointStatus, WebhookEndpoint};
use crate::ids::OrgId;
use crate::metrics::Metrics;
use crate::time::Timestamp;

/// When a failing run disables its endpoint: it has lasted `lasting` and
/// counted at least `attempts` attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailingLimit {
    /// How long every attempt must have failed.
    pub lasting: Duration,
    /// How many attempts the run must hold.
    pub attempts: u32,
}

/// An attempt made at an endpoint, and how it ended.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Attempted {
    /// The organization.
    pub org: OrgId,
    /// The save of the endpoint attempted (a later save is not judged by
    /// this attempt).
    pub generation: Generation,
    /// The failing run's start the endpoint held when the attempt began.
    pub failing_since: Option<Timestamp>,
    /// What the attempt found.
    pub verdict: Verdict,
    /// When the attempt started.
    pub at: Timestamp,
}

/// What an attempt says of its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// 2xx.
    Succeeded,
    /// 410 Gone: the subscriber says the endpoint is no more.
    Gone,
    /// Any other failure.
    Failed,
}

impl Verdict {
    /// What `outcome` says of the endpoint it was made at; `None` when no
    /// request was made (nothing is learned).
    pub fn of(outcome: &AttemptOutcome) -> Option<Verdict> {
        match outcome {
            AttemptOutcome::EndpointRemoved { .. } | AttemptOutcome::EndpointDisabled { .. } => {
                None
            }
            // The operator's proxy failed, not the endpoint.
            AttemptOutcome::Unanswered { error, .. }
                if crate::webhooks::proxy::hop_failed(error) =>
            {
                None
            }
            _ if outcome.succeeded() => Some(Verdict::Succeeded),
            _ if outcome.status() == Some(410) => Some(Verdict::Gone),
            _ => Some(Verdict::Failed),
        }
    }
}

impl Attempted {
    /// The attempt at `endpoint` that ended with `outcome`, if it says
    /// anything of it.
    pub fn at(endpoint: &WebhookEndpoint, outcome: &AttemptOutcome) -> Option<Attempted> {
        Some(Attempted {
            org: endpoint.organization_id,
            generation: Generation::of(endpoint),
            failing_since: endpoint.failing_since,
            verdict: Verdict::of(outcome)?,
            at: outcome.started_at(),
        })
    }
}

/// A failing run as this node counts it.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// The endpoint's save it is of.
    generation: Generation,
    /// When it began.
    since: Timestamp,
    /// Failed attempts this node counted in it.
    failures: u32,
    /// Whether its start is stored with the endpoint.
    stored: Stored,
}

/// Where a run's start stands in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stored {
    /// Not written (or the write failed): the next failure asks again.
    No,
    /// Being written.
    Asked,
    /// Written: an attempt that finds none stored finds the run ended
    /// (another node's success).
    Yes,
}

/// The failing runs under way, by organization: the judging rules, with
/// no I/O.
#[derive(Debug)]
pub struct Runs {
    limit: FailingLimit,
    runs: HashMap<OrgId, Run>,
    /// Organizations whose run's end is being written: the successes that
    /// follow, until it lands, need not ask again.
    ending: std::collections::HashSet<OrgId>,
}

impl Runs {
    /// No run yet; `limit` says when one disables its endpoint.
    pub fn new(limit: FailingLimit) -> Self {
        Runs {
            limit,
            runs: HashMap::new(),
            ending: std::collections::HashSet::new(),
        }
    }

    /// What `attempt` changes of its endpoint, if anything, as of `now`.
    pub fn judge(&mut self, attempt: &Attempted, now: Timestamp) -> Option<Health> {
        let disable = |reason| Health::Disable(Disabled { at: now, reason });
        match attempt.verdict {
            Verdict::Gone => {
                self.runs.remove(&attempt.org);
                Some(disable(DisabledReason::Gone))
            }
            Verdict::Succeeded => {
                self.runs.remove(&attempt.org);
                (attempt.failing_since.is_some() && self.ending.insert(attempt.org))
                    .then_some(Health::FailingSince(None))
            }
            Verdict::Failed => {
                let run = self
                    .runs
                    .entry(attempt.org)
                    .and_modify(|run| run.follow(attempt))
                    .or_insert_with(|| Run::of(attempt));
                run.failures += 1;
                let lasted = attempt.at.millis().saturating_sub(run.since.millis());
                let long_enough =
                    u128::try_from(lasted).unwrap_or(0) >= self.limit.lasting.as_millis();
                if long_enough && run.failures >= self.limit.attempts {
                    // The run is forgotten once the disable is recorded.
                    return Some(disable(DisabledReason::Failing));
                }
                if run.stored != Stored::No {
                    return None;
                }
                run.stored = Stored::Asked;
                Some(Health::FailingSince(Some(run.since)))
            }
        }
    }

    /// What became of recording `health` of `org`'s endpoint (`recorded`:
    /// whether it was written, or found already so).
    pub fn recorded(&mut self, org: OrgId, health: Health, recorded: bool) {
        match (health, recorded) {
            (Health::Disable(_), true) => {
                self.runs.remove(&org);
            }
            (Health::FailingSince(Some(_)), written) => {
                if let Some(run) = self.runs.get_mut(&org) {
                    run.stored = if written { Stored::Yes } else { Stored::No };
                }
            }
            (Health::FailingSince(None), _) => {
                self.ending.remove(&org);
            }
            _ => {}
        }
    }
}

/// Watches attempts and records what they say of their endpoints.
pub struct EndpointHealth {
    commit: Arc<CommitPath>,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    runs: Runs,
}

impl EndpointHealth {
    /// Records through `registry`'s organization actors.
    pub fn new(
        commit: Arc<CommitPath>,
        registry: Arc<Registry>,
        metrics: Arc<Metrics>,
        limit: FailingLimit,
    ) -> Self {
        EndpointHealth {
            commit,
            registry,
            metrics,
            runs: Runs::new(limit),
        }
    }
}

impl Run {
    /// The run `attempt` (a failure) is part of: the one its endpoint
    /// holds, or one it begins.
    fn of(attempt: &Attempted) -> Run {
        Run {
            generation: attempt.generation,
            since: attempt.failing_since.unwrap_or(attempt.at),
            failures: 0,
            stored: if attempt.failing_since.is_some() {
                Stored::Yes
            } else {
                Stored::No
            },
        }
    }

    /// This run as `attempt` (a failure) finds the endpoint: saved again
    /// (a new run), its run ended elsewhere (another node's success
    /// cleared it: a new run), or begun elsewhere earlier (that start).
    fn follow(&mut self, attempt: &Attempted) {
        let ended_elsewhere = attempt.failing_since.is_none() && self.stored == Stored::Yes;
        if self.generation != attempt.generation || ended_elsewhere {
            *self = Run::of(attempt);
        } else if let Some(since) = attempt.failing_since.filter(|s| *s != self.since) {
            self.since = since;
            self.stored = Stored::Yes;
        }
    }
}

impl Actor for EndpointHealth {
    type Context = Context<Self>;
}

impl Handler<Attempted> for EndpointHealth {
    type Result = ();

    fn handle(&mut self, attempt: Attempted, ctx: &mut Self::Context) {
        let Some(health) = self.runs.judge(&attempt, Timestamp::now()) else {
            return;
        };
        let (commit, registry, metrics) = (
            self.commit.clone(),
            self.registry.clone(),
            self.metrics.clone(),
        );
        let (org, generation) = (attempt.org, attempt.generation);
        ctx.spawn(
            async move { record(&commit, &registry, &metrics, org, generation, health).await }
                .into_actor(self)
                .map(move |recorded, actor, _| actor.runs.recorded(org, health, recorded)),
        );
    }
}

/// Records `health` of `org`'s endpoint save `generation`; whether it was
/// recorded (or found so already, or the endpoint saved again since).
async fn record(
    commit: &CommitPath,
    registry: &Registry,
    metrics: &Metrics,
    org: OrgId,
    generation: Generation,
    health: Health,
) -> bool {
    if let Err(err) = commit.fresh_snapshot(org, None).await {
        tracing::warn!(error = %crate::telemetry::cause_chain(&err), %org, "endpoint health: the organization could not be read; the next attempt tries again");
        return false;
    }
    let msg = Mutate::system(OrgCommand::EndpointHealth(generation, health));
    match (registry.mutate(org, msg).await, health) {
        (Ok(Reply::Webhook(view)), Health::Disable(disabled))
            if view.status == EndpointStatus::Disabled =>
        {
            metrics.endpoint_disabled(disabled.reason);
            tracing::warn!(
                organization_id = %org, reason = disabled.reason.as_str(),
                "webhook endpoint disabled: nothing is sent to it until a passing test and a save"
            );
            true
        }
        (Ok(_), _) => true,
        (Err(err), _) => {
            tracing::warn!(error = %err, %org, "endpoint health was not recorded; the next attempt tries again");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORG: OrgId = OrgId(uuid::Uuid::nil());
    const SAVED: Generation = Generation {
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
    };

    fn runs(lasting_ms: u64, attempts: u32) -> Runs {
        Runs::new(FailingLimit {
            lasting: Duration::from_millis(lasting_ms),
            attempts,
        })
    }

    fn attempt(verdict: Verdict, at: i64, failing_since: Option<i64>) -> Attempted {
        Attempted {
            org: ORG,
            generation: SAVED,
            failing_since: failing_since.map(Timestamp),
            verdict,
            at: Timestamp(at),
        }
    }

    fn disabled(reason: DisabledReason, at: i64) -> Option<Health> {
        Some(Health::Disable(Disabled {
            at: Timestamp(at),
            reason,
        }))
    }

    #[test]
    fn a_410_disables_at_once() {
        let mut runs = runs(1_000, 3);
        let gone = attempt(Verdict::Gone, 10, None);
        assert_eq!(
            runs.judge(&gone, Timestamp(11)),
            disabled(DisabledReason::Gone, 11)
        );
    }

    #[test]
    fn a_run_disables_only_once_it_lasted_long_enough_with_enough_attempts() {
        let mut runs = runs(1_000, 3);
        // The run's start is stored once, at its first failure.
        let first = attempt(Verdict::Failed, 0, None);
        assert_eq!(
            runs.judge(&first, Timestamp(0)),
            Some(Health::FailingSince(Some(Timestamp(0))))
        );
        // Long enough, but two attempts only.
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 1_500, Some(0)), Timestamp(1_500)),
            None
        );
        // A third: both hold.
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 1_600, Some(0)), Timestamp(1_600)),
            disabled(DisabledReason::Failing, 1_600)
        );
    }

    #[test]
    fn many_attempts_in_a_short_run_do_not_disable() {
        let mut runs = runs(1_000, 3);
        runs.judge(&attempt(Verdict::Failed, 0, None), Timestamp(0));
        for at in 1..20 {
            assert_eq!(
                runs.judge(
                    &attempt(Verdict::Failed, at * 10, Some(0)),
                    Timestamp(at * 10)
                ),
                None
            );
        }
    }

    #[test]
    fn a_success_ends_the_run_and_the_next_failure_begins_another() {
        let mut runs = runs(1_000, 2);
        runs.judge(&attempt(Verdict::Failed, 0, None), Timestamp(0));
        runs.judge(&attempt(Verdict::Failed, 500, Some(0)), Timestamp(500));
        assert_eq!(
            runs.judge(&attempt(Verdict::Succeeded, 900, Some(0)), Timestamp(900)),
            Some(Health::FailingSince(None))
        );
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 1_200, None), Timestamp(1_200)),
            Some(Health::FailingSince(Some(Timestamp(1_200))))
        );
        // 1,200 ms after the first failure, but 0 after the new run's start.
        assert_eq!(
            runs.judge(
                &attempt(Verdict::Failed, 1_300, Some(1_200)),
                Timestamp(1_300)
            ),
            None
        );
        assert_eq!(
            runs.judge(
                &attempt(Verdict::Failed, 2_300, Some(1_200)),
                Timestamp(2_300)
            ),
            disabled(DisabledReason::Failing, 2_300)
        );
    }

    #[test]
    fn a_run_stored_before_a_restart_goes_on_from_its_start() {
        let mut runs = runs(1_000, 2);
        // This node saw none of it: the start comes from the endpoint.
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 5_000, Some(0)), Timestamp(5_000)),
            None
        );
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 5_100, Some(0)), Timestamp(5_100)),
            disabled(DisabledReason::Failing, 5_100)
        );
    }

    #[test]
    fn a_save_begins_a_new_run() {
        let mut runs = runs(1_000, 2);
        runs.judge(&attempt(Verdict::Failed, 0, None), Timestamp(0));
        runs.recorded(ORG, Health::FailingSince(Some(Timestamp(0))), true);
        runs.judge(&attempt(Verdict::Failed, 500, Some(0)), Timestamp(500));
        // Saved again (a new URL): its first failure, long after the old
        // run began, begins a run of its own.
        let saved = Attempted {
            generation: Generation {
                created_at: Timestamp(1),
                updated_at: Timestamp(5_000),
            },
            ..attempt(Verdict::Failed, 5_000, None)
        };
        assert_eq!(
            runs.judge(&saved, Timestamp(5_000)),
            Some(Health::FailingSince(Some(Timestamp(5_000))))
        );
    }

    #[test]
    fn a_run_ended_on_another_node_ends_here_too() {
        let mut runs = runs(1_000, 2);
        runs.judge(&attempt(Verdict::Failed, 0, None), Timestamp(0));
        runs.recorded(ORG, Health::FailingSince(Some(Timestamp(0))), true);
        // Another node's success cleared the stored start.
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 2_000, None), Timestamp(2_000)),
            Some(Health::FailingSince(Some(Timestamp(2_000))))
        );
        assert_eq!(
            runs.judge(
                &attempt(Verdict::Failed, 2_100, Some(2_000)),
                Timestamp(2_100)
            ),
            None
        );
    }

    #[test]
    fn a_start_not_written_is_asked_again_and_a_disable_not_written_too() {
        let mut runs = runs(1_000, 2);
        let first = runs.judge(&attempt(Verdict::Failed, 0, None), Timestamp(0));
        assert_eq!(first, Some(Health::FailingSince(Some(Timestamp(0)))));
        runs.recorded(ORG, Health::FailingSince(Some(Timestamp(0))), false);
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 100, None), Timestamp(100)),
            Some(Health::FailingSince(Some(Timestamp(0)))),
            "the same start, asked again"
        );
        let disable = runs.judge(&attempt(Verdict::Failed, 1_500, None), Timestamp(1_500));
        assert_eq!(disable, disabled(DisabledReason::Failing, 1_500));
        if let Some(health) = disable {
            runs.recorded(ORG, health, false);
        }
        assert_eq!(
            runs.judge(&attempt(Verdict::Failed, 1_600, None), Timestamp(1_600)),
            disabled(DisabledReason::Failing, 1_600),
            "asked again"
        );
    }

    #[test]
    fn the_successes_after_a_run_ask_once_to_end_it() {
        let mut runs = runs(1_000, 2);
        let ended = Some(Health::FailingSince(None));
        assert_eq!(
            runs.judge(&attempt(Verdict::Succeeded, 10, Some(0)), Timestamp(10)),
            ended
        );
        assert_eq!(
            runs.judge(&attempt(Verdict::Succeeded, 11, Some(0)), Timestamp(11)),
            None
        );
        runs.recorded(ORG, Health::FailingSince(None), false);
        assert_eq!(
            runs.judge(&attempt(Verdict::Succeeded, 12, Some(0)), Timestamp(12)),
            ended,
            "asked again once the first answer came"
        );
        assert_eq!(
            runs.judge(&attempt(Verdict::Succeeded, 13, None), Timestamp(13)),
            None
        );
    }

    #[test]
    fn no_request_made_says_nothing_of_the_endpoint() {
        assert_eq!(
            Verdict::of(&AttemptOutcome::EndpointDisabled { at: Timestamp(1) }),
            None
        );
        assert_eq!(
            Verdict::of(&AttemptOutcome::EndpointRemoved { at: Timestamp(1) }),
            None
        );
    }
}
