//! The subscription's task: one RESP3 connection that subscribes to every pause channel the
//! process's limiters asked for, hands each message to the hub, pings to find a connection that
//! died quietly, and reconnects after a loss (each connection a new epoch, so that a call that
//! trusted the old one asks instead).

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};

use super::subscriber::{Source, Subscribe, Subscriber};
use super::{Hub, Link, PING_EVERY};

/// How long connecting, and each command, may take before the connection counts as lost.
const ANSWER_WITHIN: Duration = Duration::from_millis(1000);
/// The wait before a new connection after a loss: doubled each failure in a row, up to
/// [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Runs the subscription for `hub` until the hub is gone (every `Announcements` and limiter
/// that shared it dropped).
pub(super) async fn run(
    source: Source,
    hub: Weak<Hub>,
    mut wanted: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let source = match source.resp3() {
        Ok(source) => source,
        Err(err) => {
            tracing::warn!(%err, "pause announcements: cannot use the client's address; calls ask instead");
            return;
        }
    };
    let mut backoff = BACKOFF_MIN;
    let mut lost_before = false;
    loop {
        let started = Instant::now();
        let why = match hub.upgrade() {
            Some(hub) => session(&source, &hub, &mut wanted, lost_before).await,
            None => return,
        };
        let Some(hub) = hub.upgrade() else { return };
        hub.down();
        let Some(why) = why else { return };
        tracing::warn!(
            %why,
            "pause announcements: subscription lost; reserved calls ask the server (THROTTLE.PEEK) \
             until it is back"
        );
        drop(hub);
        lost_before = true;
        // A connection that lasted a while was not the failure in a row.
        if started.elapsed() > BACKOFF_MAX * 2 {
            backoff = BACKOFF_MIN;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One connection, from connect to loss: `Some(why)` when it was lost, `None` when the hub is
/// gone (no one listens any more).
async fn session(
    source: &Source,
    hub: &Arc<Hub>,
    wanted: &mut mpsc::UnboundedReceiver<Vec<u8>>,
    lost_before: bool,
) -> Option<String> {
    let (pushes_tx, mut pushes) = mpsc::unbounded_channel::<PushInfo>();
    let mut con = match source.connect(pushes_tx, ANSWER_WITHIN).await {
        Ok(con) => con,
        Err(err) => return Some(format!("cannot connect: {err}")),
    };
    let mut subscribed = HashSet::new();
    let mut kind = Subscribe::Shard;
    // Everything asked for so far (what the queue holds is in it too), then what is asked for
    // while connected (the queue may still repeat a channel: each is subscribed once).
    while wanted.try_recv().is_ok() {}
    for channel in hub.channel_names() {
        if let Err(why) = subscribe(&mut con, &mut kind, &channel, &mut subscribed).await {
            return Some(why);
        }
    }
    let epoch = hub.up(&subscribed);
    if lost_before {
        hub.reconnected();
        tracing::info!(
            epoch,
            "pause announcements: subscription back; reserved calls listen again"
        );
    }
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            push = pushes.recv() => match push {
                Some(push) => {
                    if let Some(why) = heard(hub, push) {
                        return Some(why);
                    }
                }
                None => return Some("the connection closed".to_owned()),
            },
            channel = wanted.recv() => match channel {
                Some(channel) => {
                    if subscribed.contains(&channel) {
                        continue;
                    }
                    if let Err(why) = subscribe(&mut con, &mut kind, &channel, &mut subscribed).await {
                        return Some(why);
                    }
                    hub.subscribed(epoch, &subscribed);
                }
                None => return None,
            },
            _ = ping.tick() => match con.ping().await {
                Ok(()) => hub.alive(),
                Err(err) => return Some(format!("PING: {err}")),
            }
        }
    }
}

/// Subscribes to one channel. A channel the server refuses (an ACL without it, a node that
/// does not hold its slot) is left out, and its limiters ask; a failure to answer is the
/// connection's.
async fn subscribe(
    con: &mut Subscriber,
    kind: &mut Subscribe,
    channel: &[u8],
    subscribed: &mut HashSet<Vec<u8>>,
) -> Result<(), String> {
    loop {
        let name = kind.command();
        match con.subscribe(*kind, channel).await {
            Ok(()) => {
                subscribed.insert(channel.to_vec());
                return Ok(());
            }
            Err(err) if *kind == Subscribe::Shard && unknown_command(&err) => {
                tracing::info!(
                    "pause announcements: no SSUBSCRIBE on this server; SUBSCRIBE instead"
                );
                *kind = Subscribe::Plain;
            }
            Err(err) if err.is_io_error() || err.is_timeout() || err.is_connection_dropped() => {
                return Err(format!("{name}: {err}"));
            }
            Err(err) => {
                tracing::warn!(
                    channel = %String::from_utf8_lossy(channel),
                    %err,
                    "pause announcements: the server refused the channel; its limiters ask the \
                     server (THROTTLE.PEEK) instead (grant the channel, see the trust model)"
                );
                return Ok(());
            }
        }
    }
}

fn unknown_command(err: &redis::RedisError) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    text.contains("unknown command") || text.contains("unknown subcommand")
}

/// A push from the server: a message goes to the hub; a disconnection ends the session
/// (`Some(why)`).
fn heard(hub: &Hub, push: PushInfo) -> Option<String> {
    match push.kind {
        PushKind::SMessage | PushKind::Message => {
            hub.alive();
            if let [Value::BulkString(channel), Value::BulkString(message)] = push.data.as_slice() {
                hub.heard(channel, message);
            }
            None
        }
        PushKind::Disconnection => Some("the server closed the connection".to_owned()),
        PushKind::SUnsubscribe | PushKind::Unsubscribe => {
            // The server dropped a subscription (a cluster slot moved away, a SUNSUBSCRIBE
            // from elsewhere): start again, so that every channel is subscribed where it is.
            Some("the server ended a subscription".to_owned())
        }
        _ => {
            hub.alive();
            None
        }
    }
}

impl Link {
    fn next(self) -> Link {
        Link {
            up: true,
            epoch: self.epoch.wrapping_add(1).max(1),
        }
    }
}

impl Hub {
    /// A new connection is up with `subscribed`: a new epoch, and the limiters whose channels
    /// are all in it can count on it.
    pub(super) fn up(&self, subscribed: &HashSet<Vec<u8>>) -> u64 {
        self.alive();
        let mut epoch = 0;
        self.link.send_modify(|link| {
            *link = link.next();
            epoch = link.epoch;
        });
        self.subscribed(epoch, subscribed);
        epoch
    }

    pub(super) fn down(&self) {
        self.link.send_modify(|link| link.up = false);
    }

    fn reconnected(&self) {
        self.reconnects
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// What is subscribed on connection `epoch` now.
    fn subscribed(&self, epoch: u64, subscribed: &HashSet<Vec<u8>>) {
        *self.lock_subscribed() = (epoch, subscribed.clone());
        self.confirm(epoch, subscribed);
    }
}
