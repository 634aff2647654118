//! Hearing the fleet instead of asking: one subscription per process to the pause channels of
//! the buckets its limiters use, so that a reserved call asleep in this process learns of a
//! pause another process set, without a `THROTTLE.PEEK` before each send.
//!
//! [`Announcements`] holds the subscription (its task is in `link`); each limiter built with
//! it gets its [`Ears`]: what was heard on each of its buckets, and whether the subscription
//! can be trusted for a call (up since before the call's take, and answering). What an
//! announcement says, and whom it covers, is `heard`'s.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::sync::{mpsc, watch};
use tokio::time::{Duration, Instant};

mod heard;
mod link;
mod subscriber;

use throttle_bucket::Announced;

use crate::wire::abort_on_drop::AbortOnDrop;
use heard::Recent;

/// The subscription must have answered (a message or a `PING`) within this for a sleeping
/// call to trust it; it pings every [`PING_EVERY`].
const ALIVE_WITHIN: Duration = Duration::from_millis(1500);
/// How often the subscription pings the server, to find a connection that died quietly.
const PING_EVERY: Duration = Duration::from_millis(500);

/// One process's subscription to the pause announcements of its limiters' buckets, shared by
/// every limiter built with it: the one [`connect`](crate::connect)'s
/// [`Connection`](crate::Connection) carries, which every limiter built over that connection
/// uses, or one given to a builder ([`LimiterBuilder::listen`](crate::LimiterBuilder::listen),
/// [`MultiLimiterBuilder::listen`](crate::MultiLimiterBuilder::listen)).
///
/// The server announces every pause on the bucket's pause channel (`SPUBLISH`; see the command
/// reference's "Pause announcements"). A reserved call that sleeps until its tokens are usable
/// is woken by an announcement that covers its send, gives back what it can and takes again
/// (behind the pause), so that it never reaches a supplier that asked for quiet; a call that is
/// not covered is sent without asking the server first. Without `Announcements` (or while the
/// subscription is down: connecting, after a failover, a server or an ACL that refuses the
/// channel) the limiter asks instead, one `THROTTLE.PEEK` per bucket after each sleep, and
/// counts it in [`PushbackMetrics::pause_checks`](crate::PushbackMetrics::pause_checks). A call
/// trusts the subscription only if it was up and subscribed to its buckets before the call's
/// take was sent, stayed up, and answered within the last 1.5 s (it pings every 0.5 s), so a
/// pause published while it was down is covered by the check.
///
/// It opens its own connection (RESP3, which the servers need for shard channels on a
/// multiplexed connection) from the client given, and keeps it open, reconnecting after a
/// failure, until the last clone is dropped. It must be created inside a tokio runtime.
/// Redis Cluster: [`Announcements::cluster`] (feature `cluster`) subscribes on every master;
/// with [`Announcements::new`] a bucket whose channel is not on the node the client names is
/// not heard, and its limiter asks instead.
///
/// ```no_run
/// use redis_throttle::prelude::*;
/// use redis_throttle::{redis, Announcements, Limiter, Quota};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // `redis_throttle::connect` carries one, which its limiters use without being told; over a
/// // connection of one's own, a limiter listens with the one it is given.
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let announcements = Announcements::new(client.clone())?; // one per process
/// let conn = client.get_multiplexed_async_connection().await?;
/// let limiter = Limiter::builder("quota:pix", Quota::new(10, 10u64)?)
///     .listen(&announcements)
///     .build(conn)?;
/// limiter.acquire().await?; // one round trip, even when it sleeps first
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Announcements {
    hub: Arc<Hub>,
}

/// Who listens to each channel: a limiter's ears and the index of its bucket.
type Listeners = HashMap<Vec<u8>, Vec<(Weak<Ears>, usize)>>;

/// What the subscription's task and the limiters share.
pub(crate) struct Hub {
    channels: Mutex<Listeners>,
    /// Whether the subscription is up, and since which connection.
    link: watch::Sender<Link>,
    /// When the server last answered, in ms since `start`.
    alive_ms: AtomicU64,
    start: Instant,
    /// Channels for the task to subscribe to.
    wanted: mpsc::UnboundedSender<Vec<u8>>,
    /// Times the subscription came back after it was lost.
    reconnects: AtomicU64,
    /// Messages heard that no server could have sent, dropped.
    dropped: AtomicU64,
    /// The channels subscribed on connection `.0`, kept by the task.
    subscribed: Mutex<(u64, HashSet<Vec<u8>>)>,
    task: OnceLock<AbortOnDrop>,
}

/// The subscription's state: up or not, and its connection's number (each connection counts
/// one more), so that a call can tell whether the subscription it trusted is the one still up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) up: bool,
    pub(crate) epoch: u64,
}

/// One limiter's side of the subscription: what was heard on each of its buckets.
pub(crate) struct Ears {
    hub: Arc<Hub>,
    channels: Vec<Vec<u8>>,
    /// Per bucket, in the limiter's order.
    recent: Mutex<Vec<Recent>>,
    /// Bumped at each announcement, so a sleeping call wakes to look.
    changed: watch::Sender<u64>,
    /// Bumped at each slot freed on its first bucket (where a cap's slots are), so a call
    /// waiting for one takes again.
    freed: watch::Sender<u64>,
    /// The last slots heard handed to a waiter in line on its first bucket (ticket, wait):
    /// a few, so that a waiter that hears its own before its take's reply still finds it.
    handed: watch::Sender<VecDeque<(u64, Duration)>>,
    /// The connection on which all of its channels were subscribed (0: none yet).
    subscribed_epoch: AtomicU64,
}

/// Whether a limiter listens, as its builder was told.
#[derive(Clone, Debug, Default)]
pub(crate) enum Listening {
    /// With the subscription its connection carries (one from [`crate::connect`]), if any.
    #[default]
    Carried,
    /// With these announcements.
    On(Announcements),
    /// Not at all: it asks after each reserved sleep.
    Off,
}

impl Listening {
    /// The announcements a limiter over `conn` listens with.
    pub(crate) fn resolve<C: 'static>(&self, conn: &C) -> Option<Announcements> {
        match self {
            Listening::On(announcements) => Some(announcements.clone()),
            Listening::Off => None,
            Listening::Carried => (conn as &dyn std::any::Any)
                .downcast_ref::<crate::Connection>()
                .map(|conn| conn.announcements().clone()),
        }
    }
}

/// What a call may count on, taken before its take is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trust {
    epoch: u64,
}

impl Announcements {
    /// Starts the subscription from `client`'s address and credentials (its own connection);
    /// it connects in the background, and limiters ask instead until it is up. Fails only
    /// outside a tokio runtime.
    pub fn new(client: redis::Client) -> Result<Announcements, crate::Error> {
        Announcements::start(subscriber::Source::One(client))
    }

    /// Starts the subscription on a Redis Cluster, from its seed nodes (the addresses a
    /// `ClusterClient` is built from; their credentials are used): each channel is subscribed
    /// on the master of its slot, so that every bucket is heard wherever it lives. After a
    /// failover or a slot moved (the server ends the subscription, or a node's connection
    /// drops), the subscription starts again, and its limiters ask meanwhile.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster<T: redis::IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
    ) -> Result<Announcements, crate::Error> {
        let nodes = nodes
            .into_iter()
            .map(T::into_connection_info)
            .collect::<redis::RedisResult<Vec<_>>>()
            .map_err(|err| crate::Error::Config {
                problem: format!("Announcements::cluster: a seed node's address: {err}"),
            })?;
        if nodes.is_empty() {
            return Err(crate::Error::Config {
                problem: "Announcements::cluster needs at least one seed node".to_owned(),
            });
        }
        Announcements::start(subscriber::Source::Cluster(nodes))
    }

    fn start(source: subscriber::Source) -> Result<Announcements, crate::Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| crate::Error::Config {
            problem: "Announcements::new must be called inside a tokio runtime: it runs \
                          the subscription as a task"
                .to_owned(),
        })?;
        let (wanted, wanted_rx) = mpsc::unbounded_channel();
        let hub = Arc::new(Hub::new(wanted));
        let task = runtime.spawn(link::run(source, Arc::downgrade(&hub), wanted_rx));
        let _ = hub.task.set(AbortOnDrop::new(&task));
        Ok(Announcements { hub })
    }

    /// Whether the subscription is up now.
    pub fn is_listening(&self) -> bool {
        self.hub.link.borrow().up
    }

    /// Times the subscription came back after it was lost.
    pub fn reconnects(&self) -> u64 {
        self.hub.reconnects.load(Relaxed)
    }

    /// Messages heard on the channels that no server could have sent (not an announcement, or
    /// one whose pause, state or factor is out of range), dropped unread. Anyone with publish
    /// rights on a channel can send one; the fleet's ACL lines (see the trust model) keep
    /// another fleet from it. A message in range that is not true is caught by the server's
    /// confirmation instead, in [`PushbackMetrics::unconfirmed`](crate::PushbackMetrics::unconfirmed).
    pub fn dropped(&self) -> u64 {
        self.hub.dropped.load(Relaxed)
    }

    /// Waits until the subscription is up and has subscribed to every channel asked for so
    /// far, or `timeout` passes; returns whether it is. For tests and start-up checks: a limiter
    /// never needs it (it asks until then).
    pub async fn ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.hub.all_subscribed() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            tokio::time::sleep((deadline - now).min(Duration::from_millis(10))).await;
        }
    }

    /// Ears for a limiter's buckets (their keys, in its order); subscribes to their channels.
    pub(crate) fn ears(&self, keys: &[&str]) -> Arc<Ears> {
        self.ears_on(
            keys.iter()
                .map(|key| throttle_bucket::pause_channel(key.as_bytes()))
                .collect(),
        )
    }

    /// Ears for pause channels named by the caller (a partitioned quota's fleet channel), in
    /// its order; subscribes to them.
    pub(crate) fn ears_on(&self, channels: Vec<Vec<u8>>) -> Arc<Ears> {
        let ears = Arc::new(Ears {
            hub: Arc::clone(&self.hub),
            recent: Mutex::new(vec![Recent::default(); channels.len()]),
            changed: watch::Sender::new(0),
            freed: watch::Sender::new(0),
            handed: watch::Sender::new(VecDeque::new()),
            subscribed_epoch: AtomicU64::new(0),
            channels: channels.clone(),
        });
        let mut map = self.hub.lock_channels();
        for (index, channel) in channels.into_iter().enumerate() {
            let listeners = map.entry(channel.clone()).or_default();
            listeners.retain(|(ears, _)| ears.strong_count() > 0);
            let fresh = listeners.is_empty();
            listeners.push((Arc::downgrade(&ears), index));
            if fresh {
                // The task subscribes to it (a closed task: nothing is heard, calls ask).
                let _ = self.hub.wanted.send(channel);
            }
        }
        drop(map);
        let (epoch, subscribed) = self.hub.lock_subscribed().clone();
        self.hub.confirm(epoch, &subscribed);
        ears
    }
}

impl fmt::Debug for Announcements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Announcements")
            .field("listening", &self.is_listening())
            .field("reconnects", &self.reconnects())
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// A hub with nothing subscribed, whose task takes channels from `wanted`.
    fn new(wanted: mpsc::UnboundedSender<Vec<u8>>) -> Hub {
        Hub {
            channels: Mutex::new(HashMap::new()),
            link: watch::Sender::new(Link::default()),
            alive_ms: AtomicU64::new(0),
            start: Instant::now(),
            wanted,
            reconnects: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            subscribed: Mutex::new((0, HashSet::new())),
            task: OnceLock::new(),
        }
    }

    fn lock_channels(&self) -> std::sync::MutexGuard<'_, Listeners> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The channels asked for so far.
    fn channel_names(&self) -> Vec<Vec<u8>> {
        self.lock_channels().keys().cloned().collect()
    }

    fn lock_subscribed(&self) -> std::sync::MutexGuard<'_, (u64, HashSet<Vec<u8>>)> {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn all_subscribed(&self) -> bool {
        let link = *self.link.borrow();
        link.up
            && self
                .lock_channels()
                .values()
                .flatten()
                .filter_map(|(ears, _)| ears.upgrade())
                .all(|ears| ears.subscribed_epoch.load(Relaxed) == link.epoch)
    }

    /// Marks the ears whose every channel is in `subscribed` as subscribed on connection
    /// `epoch`.
    fn confirm(&self, epoch: u64, subscribed: &HashSet<Vec<u8>>) {
        if epoch == 0 {
            return;
        }
        for (ears, _) in self.lock_channels().values().flatten() {
            let Some(ears) = ears.upgrade() else { continue };
            if ears.channels.iter().all(|c| subscribed.contains(c)) {
                ears.subscribed_epoch.store(epoch, Relaxed);
            }
        }
    }

    /// An announcement on `channel`: every limiter listening to it hears it.
    fn heard(&self, channel: &[u8], message: &[u8]) {
        let listeners: Vec<(Arc<Ears>, usize)> = self
            .lock_channels()
            .get(channel)
            .into_iter()
            .flatten()
            .filter_map(|(ears, index)| Some((ears.upgrade()?, *index)))
            .collect();
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let heard = match Announced::parse(message, now_us) {
            Some(Announced::Handed { id, wait_ms }) => {
                let handed = (id, Duration::from_millis(wait_ms));
                for (ears, _) in listeners.iter().filter(|(_, index)| *index == 0) {
                    ears.handed.send_modify(|recent| {
                        if recent.len() >= HANDED_KEPT {
                            recent.pop_front();
                        }
                        recent.push_back(handed);
                    });
                }
                return;
            }
            Some(Announced::SlotFreed) => {
                for (ears, _) in listeners.iter().filter(|(_, index)| *index == 0) {
                    ears.freed.send_modify(|n| *n = n.wrapping_add(1));
                }
                return;
            }
            Some(Announced::Pause {
                pause_ms,
                state_us,
                factor_bp,
            }) => heard::Heard::new(Instant::now(), pause_ms, state_us, factor_bp),
            None => {
                self.dropped.fetch_add(1, Relaxed);
                tracing::debug!(
                    channel = %String::from_utf8_lossy(channel).escape_debug(),
                    message = %String::from_utf8_lossy(message).escape_debug(),
                    "not an announcement a server could have sent; dropped"
                );
                return;
            }
        };
        for (ears, index) in listeners {
            if let Some(recent) = ears.lock_recent().get_mut(index) {
                recent.push(heard);
            }
            ears.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn alive(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.alive_ms.store(ms, Relaxed);
    }

    fn alive_within(&self, within: Duration) -> bool {
        let last = Duration::from_millis(self.alive_ms.load(Relaxed));
        self.start.elapsed().saturating_sub(last) <= within
    }
}

/// How many hand-offs the ears keep: a waiter hears its own within a few of the fleet's.
const HANDED_KEPT: usize = 64;

impl Ears {
    fn lock_recent(&self) -> std::sync::MutexGuard<'_, Vec<Recent>> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Before a take is sent: whether a call may count on hearing what comes after it.
    pub(crate) fn trust(&self) -> Option<Trust> {
        let link = *self.hub.link.borrow();
        let subscribed = self.subscribed_epoch.load(Relaxed) == link.epoch;
        (link.up && subscribed && self.hub.alive_within(ALIVE_WITHIN))
            .then_some(Trust { epoch: link.epoch })
    }

    /// After a sleep: whether the subscription the call trusted is still the one up, and
    /// answering, so that nothing it could have heard was lost.
    pub(crate) fn kept(&self, trust: Trust) -> bool {
        let link = *self.hub.link.borrow();
        link.up && link.epoch == trust.epoch && self.hub.alive_within(ALIVE_WITHIN)
    }

    /// How many slots freed were heard so far: a call notes it before its take, and waits for
    /// it to move ([`Ears::freed_since`]).
    pub(crate) fn freed_seen(&self) -> u64 {
        *self.freed.borrow()
    }

    /// Resolves once the slot of waiter `ticket` is heard handed to it, with the wait until its
    /// tokens are there (at once if it already was).
    pub(crate) async fn handed(&self, ticket: u64) -> Duration {
        let mut handed = self.handed.subscribe();
        let found = |recent: &VecDeque<(u64, Duration)>| {
            recent
                .iter()
                .find(|(id, _)| *id == ticket)
                .map(|(_, wait)| *wait)
        };
        let heard = handed
            .wait_for(|recent| found(recent).is_some())
            .await
            .ok()
            .and_then(|recent| found(&recent));
        match heard {
            Some(wait) => wait,
            // The ears own the sender: it cannot close while `self` lives.
            None => std::future::pending().await,
        }
    }

    /// Resolves once a slot freed was heard after `seen` (at once if one already was).
    pub(crate) async fn freed_since(&self, seen: u64) {
        let mut freed = self.freed.subscribe();
        if freed.wait_for(|n| *n != seen).await.is_err() {
            // The ears own the sender: it cannot close while `self` lives.
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once the subscription `trust` counted on is down or replaced: what was
    /// announced meanwhile may be lost, so a call waiting to hear stops trusting it.
    pub(crate) async fn lost(&self, trust: Trust) {
        let mut link = self.hub.link.subscribe();
        let gone = |l: &Link| !l.up || l.epoch != trust.epoch;
        if link.wait_for(gone).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Tells of each announcement heard from now on: `changed()` resolves at the next.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Resolves when something heard covers the reservation with `tickets` (one per bucket,
    /// in order) sent at `send`, with what covers it on each bucket; at once if something
    /// already does, unless `after` says which announcement the caller has already had
    /// confirmed or refuted (the count its last [`Cover`] carried): then only once another is
    /// heard. Never otherwise.
    pub(crate) async fn covered(
        &self,
        tickets: &[u64],
        send: Instant,
        after: Option<u64>,
    ) -> Cover {
        let mut changed = self.changed.subscribe();
        if let Some(after) = after {
            if changed.wait_for(|n| *n != after).await.is_err() {
                // The ears own the sender: it cannot close while `self` lives.
                std::future::pending::<()>().await;
            }
        }
        loop {
            let count = *changed.borrow_and_update();
            let buckets: Vec<BucketCover> = self
                .lock_recent()
                .iter()
                .zip(tickets)
                .enumerate()
                .filter_map(|(bucket, (recent, ticket))| {
                    let (end, cut) = recent.covers(*ticket, send)?;
                    Some(BucketCover {
                        bucket,
                        end,
                        cut,
                        moved: recent.moved_past(*ticket),
                    })
                })
                .collect();
            if !buckets.is_empty() {
                return Cover { count, buckets };
            }
            if changed.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// What was heard to cover a reserved call: a hint, which the server confirms or refutes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cover {
    /// The announcements heard so far, when it was read: one confirmation per count.
    pub(crate) count: u64,
    /// The buckets something heard covers, in order.
    pub(crate) buckets: Vec<BucketCover>,
}

/// What was heard to cover a reserved call on one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BucketCover {
    /// The bucket's number, in the limiter's order.
    pub(crate) bucket: usize,
    /// When the pause heard ends, at the latest.
    pub(crate) end: Instant,
    /// Whether what was heard cut the rate (which covers every reservation made before it).
    pub(crate) cut: bool,
    /// Whether it says the bucket's state moved past the call's take (nothing to give back).
    pub(crate) moved: bool,
}

impl fmt::Debug for Ears {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ears")
            .field("buckets", &self.channels.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Announcements with no task: the test plays the subscription's part.
    fn detached() -> Announcements {
        let (wanted, _) = mpsc::unbounded_channel();
        Announcements {
            hub: Arc::new(Hub::new(wanted)),
        }
    }

    fn channel(key: &str) -> Vec<u8> {
        throttle_bucket::pause_channel(key.as_bytes())
    }

    #[tokio::test(start_paused = true)]
    async fn an_announcement_wakes_a_covered_sleeper_at_once() {
        let announcements = detached();
        let ears = announcements.ears(&["a", "b"]);
        assert_eq!(ears.trust(), None, "not up yet: the call asks");
        let hub = Arc::clone(&announcements.hub);
        hub.up(&[channel("a"), channel("b")].into_iter().collect());
        let trust = ears.trust().expect("up and subscribed to both");
        let start = Instant::now();
        // A reservation of tickets 4000 (a) and 7000 (b), usable at 500 ms.
        let sleeper = {
            let ears = Arc::clone(&ears);
            tokio::spawn(async move {
                let end = ears.covered(&[4000, 7000], start + 500 * MS, None).await;
                (Instant::now(), end)
            })
        };
        tokio::time::sleep(100 * MS).await;
        // A pause on b made before the reservation (its state 6000 < the ticket 7000).
        hub.heard(&channel("b"), b"1000 6000 10000");
        tokio::time::sleep(100 * MS).await;
        assert!(
            !sleeper.is_finished(),
            "a pause made before the reservation covers nothing"
        );
        // A pause on a, 1000 ms from 200 ms, made after the reservation was: covered.
        hub.heard(&channel("a"), b"1000 5000 10000");
        let (woke, cover) = sleeper.await.unwrap();
        assert_eq!(woke - start, 200 * MS, "woken the instant it was heard");
        assert_eq!(
            cover,
            Cover {
                count: 2,
                buckets: vec![BucketCover {
                    bucket: 0,
                    end: start + 1200 * MS,
                    cut: false,
                    moved: true,
                }],
            },
            "a alone, to its end; its state moved past the take: nothing to give back there"
        );
        // Refuted by the server (the watch's part), the same announcement does not wake the
        // call again; the next one does.
        let again = {
            let ears = Arc::clone(&ears);
            tokio::spawn(
                async move { ears.covered(&[4000, 7000], start + 500 * MS, Some(2)).await },
            )
        };
        tokio::time::sleep(100 * MS).await;
        assert!(!again.is_finished(), "the refuted one is not heard twice");
        hub.heard(&channel("a"), b"1000 5000 10000");
        assert_eq!(again.await.unwrap().count, 3);
        assert!(ears.kept(trust), "nothing was lost: no check needed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_subscription_means_asking_until_it_is_back() {
        let announcements = detached();
        let ears = announcements.ears(&["a"]);
        let hub = Arc::clone(&announcements.hub);
        let subscribed: HashSet<Vec<u8>> = [channel("a")].into_iter().collect();
        hub.up(&subscribed);
        let trust = ears.trust().expect("up");
        // Lost while a call sleeps: an announcement may have gone with it.
        hub.down();
        assert!(!ears.kept(trust), "down: the call asks");
        assert_eq!(ears.trust(), None, "a new call asks too");
        hub.up(&subscribed);
        assert!(
            !ears.kept(trust),
            "back, but a new connection: what was sent between is lost"
        );
        let again = ears.trust().expect("a new call listens again");
        assert!(ears.kept(again));
        // Up, but silent past the bound (no message, no answer to a ping): asked.
        tokio::time::sleep(ALIVE_WITHIN + MS).await;
        assert!(!ears.kept(again), "silent too long");
        assert_eq!(ears.trust(), None);
        hub.alive();
        assert!(ears.kept(again), "answering again, on the same connection");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_freed_on_the_first_bucket_wakes_a_waiter_and_a_lost_link_too() {
        let announcements = detached();
        let ears = announcements.ears(&["a", "b"]);
        let hub = Arc::clone(&announcements.hub);
        hub.up(&[channel("a"), channel("b")].into_iter().collect());
        let trust = ears.trust().expect("up");
        let seen = ears.freed_seen();
        let start = Instant::now();
        let waiter = {
            let ears = Arc::clone(&ears);
            tokio::spawn(async move {
                ears.freed_since(seen).await;
                Instant::now()
            })
        };
        tokio::time::sleep(100 * MS).await;
        // On the second bucket (a MultiLimiter's slots are in its first): not its slots.
        hub.heard(&channel("b"), b"freed");
        tokio::time::sleep(100 * MS).await;
        assert!(!waiter.is_finished(), "a slot freed on another bucket");
        assert_eq!(*ears.changes().borrow(), 0, "not read as a pause");
        hub.heard(&channel("a"), b"freed");
        assert_eq!(waiter.await.unwrap() - start, 200 * MS, "woken when heard");
        assert_eq!(ears.freed_seen(), seen + 1);
        // Heard before the wait began (between the take and its reply): at once.
        ears.freed_since(seen).await;

        let watcher = {
            let ears = Arc::clone(&ears);
            tokio::spawn(async move {
                ears.lost(trust).await;
                Instant::now()
            })
        };
        tokio::time::sleep(100 * MS).await;
        assert!(!watcher.is_finished(), "still up");
        hub.down();
        assert_eq!(watcher.await.unwrap() - start, 300 * MS, "woken when lost");
    }

    #[tokio::test(start_paused = true)]
    async fn a_channel_the_server_refused_is_asked_about() {
        let announcements = detached();
        let ears = announcements.ears(&["a", "b"]);
        let hub = Arc::clone(&announcements.hub);
        // Only a was subscribed (an ACL without b's channel, say).
        hub.up(&[channel("a")].into_iter().collect());
        assert_eq!(ears.trust(), None, "one bucket not heard: the call asks");
        let only_a = announcements.ears(&["a"]);
        assert!(only_a.trust().is_some(), "a limiter of a alone listens");
        assert!(!announcements.hub.all_subscribed());
    }
}
