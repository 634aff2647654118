//! The task that keeps a process's leases: renews them before they are due, leases more when
//! calls wait, gives back what idles, and releases everything at the end. What to do is
//! `plan`'s decision; the commands are `lease`'s, the fleet's signals `wire`'s.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::core::{Core, LeaseEventKind};
use super::lease::{LeaseCall, Written};
use super::metrics::Counters;
use super::plan::{plan, Situation};
use super::share::Held;
use super::wire;
use crate::Error;

/// Longest the keeper sleeps with nothing due.
const MAX_SLEEP: Duration = Duration::from_millis(250);
/// Pause before trying a failed or unacknowledged renewal again.
const RENEW_RETRY_NS: i64 = 50_000_000;
/// Acquire rounds per wake-up, each trying as many free partitions as are still wanted.
const ACQUIRE_ROUNDS: usize = 3;

struct Keeper<C> {
    core: Arc<Core>,
    conn: C,
    /// When the write behind each held lease's last confirmation was sent (ns).
    confirmed_sent: HashMap<u32, i64>,
    /// Replicas each partition's master had when last asked.
    replicas: HashMap<u32, usize>,
    /// A renewal that failed or went unacknowledged is tried again from this instant.
    retry_at: HashMap<u32, i64>,
    /// When the fleet's signals were last read (ns; `None`: never).
    signals_read_ns: Option<i64>,
    /// No acquire before this instant (every free partition was taken at the last try).
    next_acquire_ns: i64,
    last_yield_ns: Option<i64>,
    /// Another process's request for partitions: how many it held, and when it was read.
    other_wants: Option<(String, usize)>,
}

pub(crate) async fn run<C>(core: Arc<Core>, conn: C, mut stop: watch::Receiver<bool>)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let mut keeper = Keeper {
        core,
        conn,
        confirmed_sent: HashMap::new(),
        replicas: HashMap::new(),
        retry_at: HashMap::new(),
        signals_read_ns: None,
        next_acquire_ns: 0,
        last_yield_ns: None,
        other_wants: None,
    };
    let mut announced = keeper.core.ears.as_ref().map(|ears| ears.changes());
    loop {
        if *stop.borrow() {
            break;
        }
        keeper.tick().await;
        let pause = keeper.next_wake();
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = keeper.core.demand.notified() => {}
            () = next_heard(&mut announced) => keeper.obey_heard().await,
            changed = stop.changed() => if changed.is_err() { break },
        }
    }
    keeper.release_all().await;
    keeper.core.stopped.store(true, Relaxed);
    keeper.core.changed.notify_waiters();
}

/// Resolves at the next announcement heard on the fleet's pause channel; never where the
/// limiter does not listen.
async fn next_heard(announced: &mut Option<watch::Receiver<u64>>) {
    if let Some(changes) = announced {
        if changes.changed().await.is_ok() {
            return;
        }
    }
    // No subscription (or its ears gone, which the core's keep from happening).
    std::future::pending().await
}

impl<C> Keeper<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A fleet pause was heard: a hint (anyone with publish rights on the channel can send
    /// one), so the keeper reads the pause the fleet's key holds, one `MGET` per announcement,
    /// and the caller asleep for its next token looks again behind what that says.
    async fn obey_heard(&mut self) {
        if self.read_signals().await {
            Counters::add(&self.core.counters.pauses_heard, 1);
            self.core.changed.notify_waiters();
        }
    }

    fn call<'a>(&'a self, key: &'a str, acks: u32) -> LeaseCall<'a> {
        LeaseCall {
            key,
            owner: &self.core.owner,
            lease_ms: u64::try_from(self.core.quota.lease().as_millis()).unwrap_or(u64::MAX),
            acks,
            wait_ms: u64::try_from(self.core.wait_timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Longest a lease request may take: a master that is down must not hold up the
    /// renewals on the others past their due time.
    fn call_timeout(&self) -> Duration {
        let renew_after =
            Duration::from_nanos(u64::try_from(self.core.timing.renew_after_ns).unwrap_or(0));
        (renew_after / 2).max(self.core.wait_timeout * 2)
    }

    fn key(&self, index: u32) -> String {
        self.core.quota.key(index).unwrap_or_default().to_owned()
    }

    async fn tick(&mut self) {
        let core = Arc::clone(&self.core);
        let now = core.now_ns();

        // Leases past their usable time: already unspendable; free them for others.
        let lapsed = core.state().shares.drop_lapsed(now);
        for &(index, valid_until) in &lapsed {
            Counters::add(&core.counters.leases_lapsed, 1);
            core.observe(index, LeaseEventKind::Lapsed, valid_until);
            self.confirmed_sent.remove(&index);
            self.retry_at.remove(&index);
        }
        self.release(lapsed.into_iter().map(|(index, _)| index).collect(), false)
            .await;

        self.renew_due(now).await;
        self.follow_plan().await;
    }

    /// Renews every lease due, all at once.
    async fn renew_due(&mut self, now: i64) {
        let due: Vec<u32> = {
            let state = self.core.state();
            state
                .shares
                .held()
                .iter()
                .map(|h| h.index)
                .filter(|i| {
                    self.confirmed_sent
                        .get(i)
                        .is_none_or(|&sent| self.core.timing.renew_due(sent, now))
                        && self.retry_at.get(i).is_none_or(|&at| now >= at)
                })
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let call_timeout = self.call_timeout();
        let mut calls = JoinSet::new();
        for index in due {
            let (key, mut conn) = (self.key(index), self.conn.clone());
            let acks = self.core.acks.wanted(self.replicas.get(&index).copied());
            let call = OwnedCall::from(&self.call(&key, acks));
            let core = Arc::clone(&self.core);
            calls.spawn(async move {
                let sent = core.now_ns();
                let result = timed(call_timeout, call.as_call().renew(&mut conn)).await;
                (index, sent, result)
            });
        }
        while let Some(joined) = calls.join_next().await {
            let Ok((index, sent, result)) = joined else {
                continue;
            };
            Counters::add(&self.core.counters.round_trips, 1);
            self.renewed(index, sent, result);
        }
        self.read_signals().await;
    }

    fn renewed(&mut self, index: u32, sent: i64, result: Result<Written, Error>) {
        let core = Arc::clone(&self.core);
        match result {
            Ok(written) if written.ours => {
                if let Some(n) = written.replicas {
                    self.replicas.insert(index, n);
                }
                if !core
                    .acks
                    .confirmed(written.acks, written.replicas.unwrap_or(usize::MAX))
                {
                    Counters::add(&core.counters.unconfirmed, 1);
                    self.retry_at.insert(index, core.now_ns() + RENEW_RETRY_NS);
                    return;
                }
                self.retry_at.remove(&index);
                let valid_until = core.timing.valid_until(sent);
                let usable_from = {
                    let mut state = core.state();
                    state.shares.extend(index, valid_until);
                    state
                        .shares
                        .held()
                        .iter()
                        .find(|h| h.index == index)
                        .map(|h| h.held_since_ns)
                };
                let Some(usable_from) = usable_from else {
                    return; // released meanwhile
                };
                Counters::add(&core.counters.leases_renewed, 1);
                self.confirmed(index, sent, (usable_from, valid_until), core.now_ns());
            }
            Ok(_) => {
                // Gone or another owner's: stop spending it now.
                if core.state().shares.remove(index).is_some() {
                    let stopped = core.now_ns();
                    Counters::add(&core.counters.leases_lost, 1);
                    core.observe(index, LeaseEventKind::Lost, stopped);
                    tracing::warn!(limiter = %core.name, partition = index, "lease lost");
                }
                self.confirmed_sent.remove(&index);
                self.retry_at.remove(&index);
            }
            Err(err) => {
                Counters::add(&core.counters.errors, 1);
                self.retry_at.insert(index, core.now_ns() + RENEW_RETRY_NS);
                tracing::debug!(limiter = %core.name, partition = index, error = %err, "renewal failed");
            }
        }
    }

    /// Reads the fleet's signals: another process's request for partitions (heeded while
    /// holding more than one) and the supplier's pause, one `MGET` (one slot). Returns whether
    /// the pause it read made this process's last longer.
    async fn read_signals(&mut self) -> bool {
        let core = Arc::clone(&self.core);
        self.signals_read_ns = Some(core.now_ns());
        let mut conn = self.conn.clone();
        let get = wire::read_signals(&mut conn, core.quota.name());
        let value = timed(self.call_timeout(), get).await;
        Counters::add(&core.counters.round_trips, 1);
        let Ok((want, pause)) = value else {
            self.other_wants = None;
            return false;
        };
        let held = core.state().shares.len();
        self.other_wants = want
            .filter(|_| held > core.rules.reserved.max(1))
            .and_then(|text| {
                let (owner, count) = wire::parse_want(&text)?;
                (owner != core.owner).then(|| (text.clone(), count))
            });
        let ahead =
            pause.and_then(|text| wire::pause_ahead_ns(&text, std::time::SystemTime::now()));
        if let Some(ahead_ns) = ahead {
            let until = core.now_ns().saturating_add(ahead_ns);
            let mut state = core.state();
            if until > state.shares.paused_until_ns() {
                state.shares.pause(&core.share, until);
                tracing::debug!(limiter = %core.name, ahead_ns, "the fleet is paused");
                return true;
            }
        }
        false
    }

    async fn follow_plan(&mut self) {
        let core = Arc::clone(&self.core);
        let now = core.now_ns();
        let situation = {
            let state = core.state();
            Situation {
                held: state.shares.len(),
                waiters: core.waiters(),
                longest_wait_ns: core.longest_wait_ns(now),
                idle_ns: state
                    .shares
                    .held()
                    .iter()
                    .filter(|h| !h.reserved)
                    .map(|h| (h.index, now - h.last_used_ns))
                    .collect(),
                other_wants: self.other_wants.as_ref().map(|(_, n)| *n),
                since_yield_ns: self.last_yield_ns.map(|at| now - at),
            }
        };
        let decided = plan(&core.rules, &situation);
        if !decided.release.is_empty() {
            self.release(decided.release, true).await;
        }
        if let Some(index) = decided.yield_one {
            if let Some((value, _)) = self.other_wants.take() {
                self.release(vec![index], true).await;
                Counters::add(&core.counters.leases_yielded, 1);
                self.last_yield_ns = Some(now);
                // Answered: the next holder need not yield too.
                let mut conn = self.conn.clone();
                let clear = wire::clear_want(&mut conn, core.quota.name(), &value);
                let _ = timed(self.call_timeout(), clear).await;
                Counters::add(&core.counters.round_trips, 1);
            }
        }
        if decided.acquire > 0 && now >= self.next_acquire_ns {
            self.acquire(decided.acquire).await;
        }
    }

    /// Tries free partitions, in random order, until `wanted` are won or none is left to try.
    async fn acquire(&mut self, wanted: usize) {
        let core = Arc::clone(&self.core);
        // A process that holds nothing renews nothing: it learns of a pause here, before its
        // new partitions are spent.
        let stale = self
            .signals_read_ns
            .is_none_or(|at| core.now_ns() - at >= core.timing.renew_after_ns / 2);
        if stale {
            self.read_signals().await;
        }
        let mut candidates: Vec<u32> = {
            let state = core.state();
            (0..core.quota.partitions())
                .filter(|&i| !state.shares.holds(i))
                .collect()
        };
        fastrand::shuffle(&mut candidates);
        let mut won = 0;
        let mut tried = 0;
        for _ in 0..ACQUIRE_ROUNDS {
            let batch: Vec<u32> = candidates
                .drain(..(wanted - won).min(candidates.len()))
                .collect();
            if batch.is_empty() {
                break;
            }
            tried += batch.len();
            let call_timeout = self.call_timeout();
            let mut calls = JoinSet::new();
            for index in batch {
                let (key, mut conn) = (self.key(index), self.conn.clone());
                let acks = core.acks.wanted(self.replicas.get(&index).copied());
                let call = OwnedCall::from(&self.call(&key, acks));
                let core = Arc::clone(&core);
                calls.spawn(async move {
                    let sent = core.now_ns();
                    let result = timed(call_timeout, call.as_call().acquire(&mut conn)).await;
                    (index, sent, core.now_ns(), result)
                });
            }
            while let Some(joined) = calls.join_next().await {
                let Ok((index, sent, replied, result)) = joined else {
                    continue;
                };
                Counters::add(&core.counters.round_trips, 1);
                if self.acquired(index, sent, replied, result).await {
                    won += 1;
                }
            }
            if won >= wanted {
                break;
            }
        }
        if won == 0 && tried > 0 {
            // Everything tried was taken: try again later, and ask the holders for one.
            let lease_ns = core.timing.lease_ns;
            let backoff = (lease_ns as f64 * (0.125 + 0.25 * fastrand::f64())) as i64;
            self.next_acquire_ns = core.now_ns() + backoff;
            if core.waiters() > 0 {
                self.ask_for_one().await;
            }
        }
    }

    /// Handles an acquire's reply; true if the partition is now ours to spend.
    async fn acquired(
        &mut self,
        index: u32,
        sent: i64,
        replied: i64,
        result: Result<Written, Error>,
    ) -> bool {
        let core = Arc::clone(&self.core);
        let written = match result {
            Ok(written) => written,
            Err(err) => {
                Counters::add(&core.counters.errors, 1);
                tracing::debug!(limiter = %core.name, partition = index, error = %err, "acquire failed");
                return false;
            }
        };
        if let Some(n) = written.replicas {
            self.replicas.insert(index, n);
        }
        if !written.ours {
            Counters::add(&core.counters.acquire_refused, 1);
            return false;
        }
        if !core
            .acks
            .confirmed(written.acks, written.replicas.unwrap_or(usize::MAX))
        {
            // Ours on the master, maybe not on its replicas: not spent, given back.
            Counters::add(&core.counters.unconfirmed, 1);
            let key = self.key(index);
            let mut conn = self.conn.clone();
            let _ = timed(self.call_timeout(), self.call(&key, 0).release(&mut conn)).await;
            Counters::add(&core.counters.round_trips, 1);
            return false;
        }
        let valid_until = core.timing.valid_until(sent);
        if replied >= valid_until {
            return false; // the reply came too late to spend any of it
        }
        {
            let mut state = core.state();
            let reserved =
                state.shares.held().iter().filter(|h| h.reserved).count() < core.rules.reserved;
            // Empty from the reply on: the server granted it (after any previous holder's
            // lease expired) before the reply came back.
            let held = Held::new(&core.share, index, replied, valid_until, reserved);
            state.shares.add(&core.share, held);
        }
        Counters::add(&core.counters.leases_acquired, 1);
        self.confirmed(index, sent, (replied, valid_until), replied);
        true
    }

    /// The lease on `index` that a write sent at `sent` confirmed, spent from the first of
    /// `spent` to the second: remembered for its renewal, told to the observer as of `at`, and
    /// to the calls waiting for tokens.
    fn confirmed(&mut self, index: u32, sent: i64, spent: (i64, i64), at: i64) {
        self.confirmed_sent.insert(index, sent);
        let core = &self.core;
        let (usable_from, valid_until) = spent;
        core.observe(
            index,
            LeaseEventKind::Confirmed {
                usable_from: core.instant(usable_from),
                valid_until: core.instant(valid_until),
            },
            at,
        );
        core.changed.notify_waiters();
    }

    /// Tells the holders that this process, holding this many, needs a partition.
    async fn ask_for_one(&mut self) {
        let held = self.core.state().shares.len();
        let mut conn = self.conn.clone();
        let lease_ms = u64::try_from(self.core.quota.lease().as_millis()).unwrap_or(u64::MAX);
        let value = wire::encode_want(&self.core.owner, held);
        let set = wire::write_want(&mut conn, self.core.quota.name(), &value, lease_ms);
        let _ = timed(self.call_timeout(), set).await;
        Counters::add(&self.core.counters.round_trips, 1);
    }

    /// Stops spending `indices` (if `held`, they are still held) and gives their leases back.
    async fn release(&mut self, indices: Vec<u32>, held: bool) {
        if indices.is_empty() {
            return;
        }
        let core = Arc::clone(&self.core);
        let stopped = core.now_ns();
        if held {
            let mut state = core.state();
            for &index in &indices {
                state.shares.remove(index);
            }
        }
        let mut calls = JoinSet::new();
        for index in indices {
            self.confirmed_sent.remove(&index);
            self.retry_at.remove(&index);
            let (key, mut conn) = (self.key(index), self.conn.clone());
            let call = OwnedCall::from(&self.call(&key, 0));
            let call_timeout = self.call_timeout();
            calls.spawn(async move {
                let result = timed(call_timeout, call.as_call().release(&mut conn)).await;
                (index, result)
            });
        }
        while let Some(joined) = calls.join_next().await {
            Counters::add(&core.counters.round_trips, 1);
            if let Ok((index, result)) = joined {
                if held {
                    Counters::add(&core.counters.leases_released, 1);
                    core.observe(index, LeaseEventKind::Released, stopped);
                }
                if let Err(err) = result {
                    tracing::debug!(limiter = %core.name, partition = index, error = %err, "release failed; the lease expires by itself");
                }
            }
        }
    }

    async fn release_all(&mut self) {
        let held = self.core.held();
        self.release(held, true).await;
    }

    /// The next thing due: a renewal, a lease running out, another look at the demand.
    fn next_wake(&self) -> Duration {
        let core = &self.core;
        let now = core.now_ns();
        let mut at = now + i64::try_from(MAX_SLEEP.as_nanos()).unwrap_or(i64::MAX);
        {
            let state = core.state();
            for h in state.shares.held() {
                at = at.min(h.valid_until_ns);
                if let Some(&sent) = self.confirmed_sent.get(&h.index) {
                    let due = sent + core.timing.renew_after_ns;
                    let retry = self.retry_at.get(&h.index).copied().unwrap_or(0);
                    at = at.min(due.max(retry));
                }
            }
            let spare = state.shares.len() > core.rules.reserved;
            if spare {
                at = at.min(now + core.rules.idle_after_ns / 4);
            }
            if state.shares.len() < core.rules.reserved {
                at = at.min(self.next_acquire_ns.max(now + 1_000_000));
            }
        }
        if core.waiters() > 0 {
            at = at.min(self.next_acquire_ns.max(now + core.rules.grow_after_ns));
        }
        Duration::from_nanos(u64::try_from(at - now).unwrap_or(0).max(1_000_000))
    }
}

/// `call`, failing as a connection error after `limit`.
async fn timed<T>(
    limit: Duration,
    call: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(Error::Connection(redis::RedisError::from(
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("a lease request took over {limit:?}"),
            ),
        ))),
    }
}

/// A [`LeaseCall`] that a spawned task can own.
struct OwnedCall {
    key: String,
    owner: String,
    lease_ms: u64,
    acks: u32,
    wait_ms: u64,
}

impl OwnedCall {
    fn from(call: &LeaseCall<'_>) -> OwnedCall {
        OwnedCall {
            key: call.key.to_owned(),
            owner: call.owner.to_owned(),
            lease_ms: call.lease_ms,
            acks: call.acks,
            wait_ms: call.wait_ms,
        }
    }

    fn as_call(&self) -> LeaseCall<'_> {
        LeaseCall {
            key: &self.key,
            owner: &self.owner,
            lease_ms: self.lease_ms,
            acks: self.acks,
            wait_ms: self.wait_ms,
        }
    }
}
