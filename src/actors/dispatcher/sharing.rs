//! The dispatcher on a queue several nodes share (CONTRACT §8): it
//! delivers only the organizations whose leases it holds, so one node at a
//! time starts an organization's attempts, in order and under its cap.
//!
//! - Jobs this node commits, and wake-ups from other nodes, make it read
//!   the organization's waiting jobs when it holds the lease, or claim the
//!   lease (whose holder, if another node, is told in the same statement).
//!   Such a claim also names the holder: for a while (a round at most,
//!   within the time its lease had left) the commits of new jobs of that
//!   organization tell it themselves, and no claim follows them. A holder
//!   that takes handed jobs gets the jobs themselves in that notification,
//!   their rows marked held under its epoch: it holds them with no read
//!   when it can, else its next read takes them (see
//!   [`crate::storage::postgres::Handed`]).
//! - Every third of a lease it renews its leases, gives up those of
//!   organizations with nothing left to deliver (after their outcomes are
//!   written), and looks for organizations nobody delivers: released, left
//!   by a killed node whose leases ran out, or naming this node although it
//!   does not hold them (a look's or release's answer lost, a lease it
//!   stopped trusting). A lease it could not renew
//!   in time is dropped with the jobs it held, before another node may
//!   take it.
//! - On shutdown, after the last attempts, it releases every lease and
//!   tells the other nodes which organizations still have jobs waiting.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use actix::prelude::*;

use super::Dispatcher;
use crate::actors::backlog::Read;
use crate::actors::shared::{round, ABANDONED_PER_LOOK, SETTLING_CHECK, SHORTEST_ROUND};
use crate::domain::delivery::{HolderTold, Job};
use crate::ids::{DeliveryId, OrgId};
use crate::storage::postgres::{Claimed, Handed, Lease, Wakeup};

/// The listening connection's news.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Wake(pub Wakeup);

/// Releases every lease (after the last attempts are recorded and
/// flushed); answers once released or refused.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct ReleaseLeases;

impl Dispatcher {
    /// Listens for wake-ups, renews every third of a lease, and looks for
    /// organizations nobody delivers.
    pub(super) fn start_sharing(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        let address = ctx.address();
        shared.listening = Some(
            shared
                .queue
                .listen(move |wakeup| address.do_send(Wake(wakeup))),
        );
        tracing::info!(
            node = %shared.queue.node(),
            lease_ms = shared.queue.lease().as_millis() as u64,
            "deliveries: one queue shared with every node on this database"
        );
        ctx.run_interval(round(shared.queue.lease()), |act, ctx| act.lease_round(ctx));
        self.look_for_abandoned(ctx);
    }

    /// New jobs were committed here. Those the commit marked held under
    /// this node's lease are held at once (no read); those whose holder
    /// the commit told are that node's; each organization's others are
    /// read, or its lease claimed, and wait in the outbox until then. A
    /// job marked under a lease given up meanwhile waits for the next
    /// holder, whose reads take it (its epoch is another).
    pub(super) fn committed(&mut self, jobs: Vec<Job>, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_ref() else {
            return;
        };
        let (admissions, taking) = (shared.admissions.clone(), !shared.stopped && !self.draining);
        let mut touched = BTreeSet::new();
        let mut waiting = BTreeSet::new();
        for mut job in jobs {
            let org = job.organization_id;
            touched.insert(org);
            let Some(held) = job.held_under.take() else {
                // Its holder was told in the commit, unless this node has
                // taken the lease since: then it reads the job itself.
                if job.holder_told.is_none() || self.lease_of(org).is_some() {
                    waiting.insert(org);
                }
                continue;
            };
            admissions.arrived(org);
            let holding = self
                .lease_of(org)
                .is_some_and(|lease| lease.epoch == held.epoch);
            if holding && taking {
                if self.backlog.hold(&job) {
                    self.schedule(job, ctx);
                }
            } else {
                waiting.insert(org);
            }
        }
        for org in waiting {
            self.jobs_waiting(org, ctx);
        }
        for org in touched {
            self.offer_room(org);
        }
        self.pump();
    }

    /// Offers commits the room `org` has for new jobs held at once, while
    /// its lease is held and trusted and nothing of it waits in the outbox
    /// (so they start in order); else withdraws the offer.
    pub(super) fn offer_room(&mut self, org: OrgId) {
        let Some(shared) = self.shared.as_ref() else {
            return;
        };
        let lease = shared.leases.of(org).filter(|_| {
            !self.draining
                && !shared.stopped
                && shared.leases.trusted(org, Instant::now())
                && self.backlog.quiet(org)
        });
        match lease {
            Some(lease) => shared
                .admissions
                .offer(org, lease.epoch, self.backlog.room(org)),
            None => shared.admissions.withdraw(org),
        }
    }

    /// Jobs of `org` wait in the outbox.
    fn jobs_waiting(&mut self, org: OrgId, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if self.draining || shared.stopped {
            return;
        }
        if shared.leases.want(org).is_some() {
            shared.admissions.withdraw(org);
            self.backlog.more_on_disk(org);
            self.read_backlog(org, ctx);
        } else {
            self.claim(ctx);
        }
    }

    /// Claims the leases wanted, unless a claim or a look for abandoned
    /// organizations is under way (it claims them when that ends; see
    /// [`Leases::take_claims`](crate::actors::leases::Leases::take_claims)).
    fn claim(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if shared.stopped || self.draining {
            return;
        }
        let Some(orgs) = shared.leases.take_claims() else {
            return;
        };
        shared.pending += 1;
        let (queue, sent) = (shared.queue.clone(), Instant::now());
        let claiming = async move { queue.claim(&orgs).await };
        ctx.spawn(claiming.into_actor(self).map(move |claimed, act, ctx| {
            let Some(shared) = act.shared.as_mut() else {
                return;
            };
            shared.pending -= 1;
            match claimed {
                Ok(Claimed { leases: got, elsewhere }) => {
                    shared.retry.succeeded();
                    // Commits tell these holders themselves for a while: at
                    // most a round, within the time the lease had left.
                    let trusted = round(shared.queue.lease());
                    for held in elsewhere {
                        let until = sent + held.left.min(trusted);
                        let told = HolderTold {
                            node: held.node,
                            handed: held.handed,
                        };
                        shared.admissions.held_elsewhere(held.org, told, until);
                    }
                    let replaced = shared.leases.claimed(&got, sent);
                    let look = shared.leases.take_waiting_look();
                    act.adopted(&got, replaced, ctx);
                    if look {
                        act.look_for_abandoned(ctx);
                    } else {
                        act.claim(ctx);
                    }
                }
                Err(err) => {
                    shared.leases.claim_failed();
                    let look = shared.leases.take_waiting_look();
                    let wait = shared.retry.failed();
                    tracing::warn!(error = %crate::telemetry::cause_chain(&err), "claiming delivery leases failed; trying again shortly");
                    if look {
                        act.look_for_abandoned(ctx);
                    }
                    ctx.run_later(wait, |act, ctx| act.claim(ctx));
                }
            }
        }));
    }

    /// Leases just claimed: their organizations' waiting jobs are read;
    /// what was held under an older epoch of this node's (`replaced`) is
    /// dropped first, since the new holding reads it again. An organization
    /// this node still has attempts or outcomes of from an earlier holding
    /// is read once they are settled: its read would take their rows too.
    fn adopted(&mut self, got: &[Lease], replaced: Vec<OrgId>, ctx: &mut Context<Self>) {
        for org in replaced {
            self.lose(org);
        }
        for lease in got {
            if let Some(shared) = &self.shared {
                shared.admissions.not_held_elsewhere(lease.org);
            }
            self.backlog.more_on_disk(lease.org);
            if self.settled(lease.org) {
                self.read_backlog(lease.org, ctx);
            } else {
                self.settle(lease.org, ctx);
            }
        }
    }

    /// Whether nothing of `org` is in flight here, or recorded and not yet
    /// durable: its rows in the outbox are then exactly what is left to do.
    fn settled(&self, org: OrgId) -> bool {
        self.queue.in_flight_of(org) == 0
            && self
                .shared
                .as_ref()
                .is_none_or(|shared| shared.unwritten.none_of(org))
    }

    /// Reads `org` under its new lease once it is settled, looking again
    /// every [`SETTLING_CHECK`].
    fn settle(&mut self, org: OrgId, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if !shared.settling.insert(org) {
            return;
        }
        tracing::debug!(organization_id = %org, "claimed anew with attempts of the earlier holding unsettled; read once they are");
        ctx.run_later(SETTLING_CHECK, move |act, ctx| act.settle_check(org, ctx));
    }

    /// Reads `org` if it is settled now, forgets it if its lease went
    /// meanwhile, else looks again later.
    fn settle_check(&mut self, org: OrgId, ctx: &mut Context<Self>) {
        let settled = self.settled(org);
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if shared.leases.of(org).is_none() {
            shared.settling.remove(&org);
        } else if settled {
            shared.settling.remove(&org);
            self.read_backlog(org, ctx);
        } else {
            ctx.run_later(SETTLING_CHECK, move |act, ctx| act.settle_check(org, ctx));
        }
    }

    /// Reads (claims) the next of `org`'s waiting jobs under its lease,
    /// when the window has room: in the next claim of jobs, which reads
    /// for every organization that asked while the last one ran.
    pub(super) fn claim_backlog(&mut self, org: OrgId, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        let Some(lease) = shared.leases.of(org) else {
            return;
        };
        if shared.settling.contains(&org) {
            return;
        }
        let Some(read) = self.backlog.next_read(org) else {
            return;
        };
        shared.reads.push((read, lease));
        self.claim_jobs(ctx);
    }

    /// Claims the jobs the reads asked for, unless a claim is under way.
    fn claim_jobs(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if shared.reading || shared.reads.is_empty() {
            return;
        }
        shared.reading = true;
        let reads = std::mem::take(&mut shared.reads);
        // Jobs handed to this node and not taken: this read takes them,
        // but none it holds (the handed ones it took among them) or
        // finished and has not yet recorded.
        let mut handed = false;
        for (read, _) in &reads {
            handed |= shared.handed_on_disk.remove(&read.org);
        }
        let taken: Option<Vec<DeliveryId>> = handed.then(|| {
            reads
                .iter()
                .flat_map(|(read, _)| {
                    self.backlog
                        .held_ids(read.org)
                        .chain(shared.unwritten.ids_of(read.org))
                })
                .collect()
        });
        let asked: Vec<(Lease, usize)> = reads
            .iter()
            .map(|(read, lease)| (*lease, read.limit))
            .collect();
        let queue = shared.queue.clone();
        let claiming = async move { queue.claim_jobs(&asked, taken.as_deref()).await };
        ctx.spawn(claiming.into_actor(self).map(move |claimed, act, ctx| {
            if let Some(shared) = act.shared.as_mut() {
                shared.reading = false;
            }
            act.claimed_jobs(reads, claimed, handed, ctx);
            act.claim_jobs(ctx);
        }));
    }

    /// The claim of jobs for `reads` (of handed jobs too, with `handed`)
    /// answered `claimed`.
    fn claimed_jobs(
        &mut self,
        reads: Vec<(Read, Lease)>,
        claimed: Result<Vec<Job>, crate::storage::StoreError>,
        handed: bool,
        ctx: &mut Context<Self>,
    ) {
        let jobs = match claimed {
            Ok(jobs) => jobs,
            Err(err) => {
                for (read, lease) in reads {
                    if handed {
                        self.handed_on_disk(read.org);
                    }
                    if self.holds(lease.org, Some(lease)) {
                        self.read_failed(read, &err, ctx);
                    }
                }
                return;
            }
        };
        let mut by_org: HashMap<OrgId, Vec<Job>> = HashMap::new();
        for job in jobs {
            by_org.entry(job.organization_id).or_default().push(job);
        }
        for (read, lease) in reads {
            let jobs = by_org.remove(&read.org).unwrap_or_default();
            // A full read may have left handed jobs: the next one takes them.
            if handed && jobs.len() >= read.limit {
                self.handed_on_disk(read.org);
            }
            // A lease lost meanwhile (or claimed anew): the read is not this holding's.
            if self.holds(lease.org, Some(lease)) {
                if handed {
                    if let Some(shared) = self.shared.as_mut() {
                        let ids = jobs.iter().map(|job| job.delivery_id);
                        shared.read_first.taken(ids, Instant::now());
                    }
                }
                self.read_done(read, jobs, ctx);
            }
        }
    }

    /// Jobs handed to this node wait in the outbox for `org`'s next read.
    fn handed_on_disk(&mut self, org: OrgId) {
        if let Some(shared) = self.shared.as_mut() {
            shared.handed_on_disk.insert(org);
        }
    }

    /// Another node handed this node new jobs in its commit's
    /// notification, their rows marked held under `epoch`. They are held at
    /// once when that is this node's lease, trusted, and the organization
    /// is quiet here with room for them (as jobs its own commits hold);
    /// else its next read takes them (claiming the lease first if need be).
    fn handed(&mut self, handed: Handed, ctx: &mut Context<Self>) {
        let Handed {
            org,
            epoch,
            mut jobs,
        } = handed;
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        let now = Instant::now();
        let told = jobs.len();
        jobs.retain(|job| !shared.read_first.read_already(job.delivery_id, now));
        if told > 0 && jobs.is_empty() {
            return;
        }
        let taking = !shared.stopped && !self.draining && !shared.settling.contains(&org);
        let holding = shared
            .leases
            .of(org)
            .is_some_and(|lease| lease.epoch == epoch)
            && shared.leases.trusted(org, Instant::now());
        if taking
            && holding
            && !jobs.is_empty()
            && self.backlog.quiet(org)
            && self.backlog.room(org) >= jobs.len()
        {
            for job in jobs {
                if self.backlog.hold(&job) {
                    self.schedule(job, ctx);
                }
            }
            self.offer_room(org);
            self.pump();
            return;
        }
        self.handed_on_disk(org);
        self.jobs_waiting(org, ctx);
    }

    /// A round: leases not renewed in time are dropped, the others renewed;
    /// organizations with nothing left are released, abandoned ones looked
    /// for, and claims that failed tried again.
    fn lease_round(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if shared.stopped {
            return;
        }
        let now = Instant::now();
        shared.admissions.forget_lapsed_holders(now);
        for org in shared.leases.expired(now) {
            self.lose(org);
        }
        self.renew(ctx);
        if !self.draining {
            self.release_idle(ctx);
            self.look_for_abandoned(ctx);
            self.claim(ctx);
        }
    }

    /// `org`'s lease is no longer this node's: its held jobs are dropped
    /// (they wait in the outbox for the next holder); attempts in flight
    /// finish and are recorded.
    pub(super) fn lose(&mut self, org: OrgId) {
        if let Some(shared) = &self.shared {
            shared.admissions.withdraw(org);
        }
        let dropped = self.queue.drop_org(org).len();
        self.backlog.forget(org);
        let in_flight = self.queue.in_flight_of(org);
        tracing::warn!(
            organization_id = %org, dropped, in_flight,
            "this node's delivery lease ran out; another node takes the organization's deliveries over"
        );
    }

    /// Renews every lease held, unless a renewal is under way.
    fn renew(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        let Some(asked) = shared.leases.take_renewal() else {
            return;
        };
        let (queue, sent) = (shared.queue.clone(), Instant::now());
        let renewing = async move {
            let kept = queue.renew(&asked).await;
            (asked, kept)
        };
        ctx.spawn(
            renewing
                .into_actor(self)
                .map(move |(asked, kept), act, ctx| {
                    let Some(shared) = act.shared.as_mut() else {
                        return;
                    };
                    match kept {
                        Ok(kept) => {
                            shared.retry.succeeded();
                            for org in shared.leases.renewed(&asked, &kept, sent) {
                                act.lose(org);
                            }
                        }
                        Err(err) => {
                            shared.leases.renewal_failed();
                            let wait = shared.retry.failed();
                            tracing::warn!(error = %crate::telemetry::cause_chain(&err), "renewing delivery leases failed; trying again shortly");
                            ctx.run_later(wait, |act, ctx| act.renew(ctx));
                        }
                    }
                }),
        );
    }

    /// Releases the leases of organizations with nothing held, waiting, in
    /// flight or recorded and not yet durable (so that the next holder does
    /// not deliver again what this node finished).
    fn release_idle(&mut self, ctx: &mut Context<Self>) {
        let idle: Vec<OrgId> = match self.shared.as_ref() {
            Some(shared) => shared
                .leases
                .all()
                .into_iter()
                .map(|lease| lease.org)
                .filter(|org| {
                    self.backlog.idle(*org)
                        && self.settled(*org)
                        && shared.admissions.withdraw_if_idle(*org)
                })
                .collect(),
            None => return,
        };
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if idle.is_empty() {
            return;
        }
        let leases = shared.leases.release(idle);
        let queue = shared.queue.clone();
        let releasing = async move {
            let released = queue.release(&leases).await;
            (leases, released)
        };
        ctx.spawn(
            releasing
                .into_actor(self)
                .map(|(leases, released), act, ctx| {
                    let Some(shared) = act.shared.as_mut() else {
                        return;
                    };
                    if let Err(err) = released {
                        tracing::warn!(error = %crate::telemetry::cause_chain(&err), "releasing idle delivery leases failed; they run out instead");
                    }
                    shared.leases.released(&leases);
                    act.claim(ctx);
                }),
        );
    }

    /// Claims organizations with jobs waiting that no node delivers; once
    /// the claim under way ends, if there is one (see [`Self::claim`]).
    fn look_for_abandoned(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.shared.as_mut() else {
            return;
        };
        if shared.stopped || self.draining || !shared.leases.start_look() {
            return;
        }
        shared.pending += 1;
        let (queue, sent, known) = (shared.queue.clone(), Instant::now(), shared.leases.known());
        let looking = async move { queue.claim_abandoned(ABANDONED_PER_LOOK, &known).await };
        ctx.spawn(looking.into_actor(self).map(move |found, act, ctx| {
            let Some(shared) = act.shared.as_mut() else {
                return;
            };
            shared.leases.look_ended();
            shared.pending -= 1;
            match found {
                Ok(got) => {
                    shared.retry.succeeded();
                    if !got.is_empty() {
                        tracing::info!(
                            organizations = got.len(),
                            "took over deliveries no node was making"
                        );
                    }
                    let replaced = shared.leases.adopt(&got, sent);
                    let again = shared.leases.take_waiting_look();
                    act.adopted(&got, replaced, ctx);
                    if again || got.len() == ABANDONED_PER_LOOK {
                        act.look_for_abandoned(ctx);
                    } else {
                        act.claim(ctx);
                    }
                }
                Err(err) => {
                    // The look tried again covers any asked for meanwhile.
                    shared.leases.take_waiting_look();
                    let wait = shared.retry.failed();
                    tracing::warn!(
                        error = %crate::telemetry::cause_chain(&err),
                        "looking for deliveries no node makes failed; trying again shortly"
                    );
                    act.claim(ctx);
                    ctx.run_later(wait, |act, ctx| act.look_for_abandoned(ctx));
                }
            }
        }));
    }
}

impl Handler<Wake> for Dispatcher {
    type Result = ();

    fn handle(&mut self, Wake(wakeup): Wake, ctx: &mut Self::Context) {
        match wakeup {
            // Listening again, after a failure perhaps: what waits is
            // claimed now, not at the next round, and what other nodes
            // told of the organizations held here meanwhile (lost with the
            // connection) is read.
            Wakeup::Listening => {
                let held = self.shared.as_ref().map_or_else(Vec::new, |shared| {
                    shared.leases.all().iter().map(|lease| lease.org).collect()
                });
                for org in held {
                    // Jobs handed meanwhile, their notifications lost too.
                    self.handed_on_disk(org);
                    self.jobs_waiting(org, ctx);
                }
                self.look_for_abandoned(ctx);
                self.claim(ctx);
            }
            // Jobs of `org` are this node's to deliver: it holds the lease,
            // or its holder let it go. Either way commits stop telling the
            // holder they knew.
            Wakeup::Jobs(org) => {
                if let Some(shared) = &self.shared {
                    shared.admissions.not_held_elsewhere(org);
                }
                self.jobs_waiting(org, ctx)
            }
            // New jobs held here under `epoch`, handed by the node that
            // committed them; it stops telling this node's holder of them.
            Wakeup::Handed(handed) => {
                if let Some(shared) = &self.shared {
                    shared.admissions.not_held_elsewhere(handed.org);
                }
                self.handed(handed, ctx)
            }
            // The organizations this node's commits told that node of are
            // free now: claimed, so that what those commits left is read.
            Wakeup::Stopped(node) => {
                let orgs = self
                    .shared
                    .as_ref()
                    .map_or_else(Vec::new, |shared| shared.admissions.stopped(node));
                for org in orgs {
                    self.jobs_waiting(org, ctx);
                }
            }
        }
    }
}

impl Handler<ReleaseLeases> for Dispatcher {
    type Result = ResponseFuture<()>;

    /// Claims still under way finish first, so that none lands after the
    /// release; then every lease of this node's goes.
    fn handle(&mut self, _: ReleaseLeases, ctx: &mut Self::Context) -> Self::Result {
        let (done, released) = tokio::sync::oneshot::channel();
        if let Some(shared) = self.shared.as_mut() {
            shared.stopped = true;
            shared.admissions.withdraw_all();
            shared.listening = None;
            let held = shared.leases.all();
            shared.leases.release(held.iter().map(|lease| lease.org));
        }
        self.release_when_quiet(done, ctx);
        Box::pin(async move {
            let _ = released.await;
        })
    }
}

impl Dispatcher {
    /// Releases every lease of this node's once no claim is under way.
    fn release_when_quiet(
        &mut self,
        done: tokio::sync::oneshot::Sender<()>,
        ctx: &mut Context<Self>,
    ) {
        let Some(shared) = self.shared.as_ref() else {
            let _ = done.send(());
            return;
        };
        if shared.pending > 0 {
            ctx.run_later(SHORTEST_ROUND, move |act, ctx| {
                act.release_when_quiet(done, ctx)
            });
            return;
        }
        let queue = shared.queue.clone();
        let releasing = async move { queue.release_all().await };
        ctx.spawn(releasing.into_actor(self).map(move |released, _, _| {
            match released {
                Ok(count) => tracing::info!(
                    organizations = count,
                    "released this node's delivery leases"
                ),
                Err(err) => tracing::warn!(
                    error = %crate::telemetry::cause_chain(&err),
                    "releasing this node's delivery leases failed; other nodes take them over when they run out"
                ),
            }
            let _ = done.send(());
        }));
    }
}
