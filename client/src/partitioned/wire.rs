//! The fleet's signals on the wire: the keys, values and calls by which the processes sharing
//! a quota tell each other of a pause (`{name}:pause`) and of a request for partitions
//! (`{name}:want`). Both keys share the name's hash tag, so one `MGET` reads them in one slot.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionLike;

use super::lease::LeaseCall;
use crate::Error;

/// Sets the fleet's pause (unix ms) unless a later one is set, so a shorter pushback never
/// shortens a longer one, and then announces it (`<pause_ms>`, as a bucket's pause is
/// announced) to the processes that listen; a server without sharded channels only goes
/// unheard (`redis.pcall`), and they read the key at their next renewal round. KEYS: the pause
/// key; ARGV: until (unix ms), how long to keep the key (ms), the pause (ms), the channel.
const PAUSE_IF_LATER: &str = "local now = tonumber(redis.call('GET', KEYS[1]) or '0') \
    if tonumber(ARGV[1]) > now then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) \
    redis.pcall('SPUBLISH', ARGV[4], ARGV[3]) end \
    return redis.status_reply('OK')";

/// The key of the fleet's pause: in the same slot as the requests for partitions.
pub(crate) fn pause_key(name: &str) -> String {
    format!("{{{name}}}:pause")
}

/// The channel on which a fleet pause is announced: in the pause key's slot (a script may
/// only publish to its keys' shard), and apart from any bucket's pause channel.
pub(crate) fn pause_channel(name: &str) -> String {
    format!("throttle:pause:{{{name}}}:fleet")
}

/// The bucket whose slot table holds the fleet's calls in flight, with a cap: in the same slot
/// as the pause, its own channel (`throttle:pause:{name}:inflight`) where releases are
/// announced. Its tokens are never taken (its calls ask for none).
pub(crate) fn slots_key(name: &str) -> String {
    format!("{{{name}}}:inflight")
}

/// The key where a process that found every free partition taken asks for one.
pub(crate) fn want_key(name: &str) -> String {
    format!("{{{name}}}:want")
}

/// The pause's value: the wall-clock end (unix ms), since the fleet shares no monotonic clock.
pub(crate) fn pause_until_ms(now: SystemTime, retry_after: Duration) -> u64 {
    u64::try_from(
        now.duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_add(retry_after)
            .as_millis(),
    )
    .unwrap_or(u64::MAX)
}

/// How long the pause key lives: the pause and a lease more, so every holder reads it at a
/// renewal round before it goes.
pub(crate) fn pause_keep_ms(retry_after: Duration, lease: Duration) -> u64 {
    u64::try_from((retry_after + lease).as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// How far a pause value (unix ms) lies ahead of `now`, in ns; `None` when it is unreadable or
/// already over.
pub(crate) fn pause_ahead_ns(value: &str, now: SystemTime) -> Option<i64> {
    let until_ms = value.parse::<i128>().ok()?;
    let now_ns = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    // The key is anyone's with write access to it: a pause past the longest a caller can
    // set is read as that (never centuries).
    let longest = i128::from(throttle_bucket::MAX_WAIT_MS) * 1_000_000;
    let ahead = (until_ms.saturating_mul(1_000_000) - now_ns).min(longest);
    (ahead > 0).then(|| i64::try_from(ahead).unwrap_or(i64::MAX))
}

/// The want's value: who asks (so it ignores its own request) and how many it holds.
pub(crate) fn encode_want(owner: &str, held: usize) -> String {
    format!("{owner} {held}")
}

/// A want's owner and how many it holds; `None` when it is unreadable.
pub(crate) fn parse_want(value: &str) -> Option<(&str, usize)> {
    let (owner, count) = value.split_once(' ')?;
    Some((owner, count.parse().ok()?))
}

/// Sets the fleet's pause until `until_ms` unless a later one is set, and announces it as
/// lasting `pause_ms`.
pub(crate) async fn write_pause<C: ConnectionLike>(
    conn: &mut C,
    name: &str,
    until_ms: u64,
    keep_ms: u64,
    pause_ms: u64,
) -> Result<(), Error> {
    redis::cmd("EVAL")
        .arg(PAUSE_IF_LATER)
        .arg(1)
        .arg(pause_key(name))
        .arg(until_ms)
        .arg(keep_ms)
        .arg(pause_ms)
        .arg(pause_channel(name))
        .query_async::<()>(conn)
        .await
        .map_err(Error::from_redis)
}

/// Reads the want and the pause values, in one `MGET`.
pub(crate) async fn read_signals<C: ConnectionLike>(
    conn: &mut C,
    name: &str,
) -> Result<(Option<String>, Option<String>), Error> {
    redis::cmd("MGET")
        .arg(want_key(name))
        .arg(pause_key(name))
        .query_async::<(Option<String>, Option<String>)>(conn)
        .await
        .map_err(Error::from_redis)
}

/// Leaves a request for a partition, for a lease's time: a process that stops asking is
/// forgotten.
pub(crate) async fn write_want<C: ConnectionLike>(
    conn: &mut C,
    name: &str,
    value: &str,
    lease_ms: u64,
) -> Result<(), Error> {
    redis::cmd("SET")
        .arg(want_key(name))
        .arg(value)
        .arg("PX")
        .arg(lease_ms)
        .query_async::<()>(conn)
        .await
        .map_err(Error::from_redis)
}

/// Deletes the request `value` once answered, unless another has replaced it meanwhile (the
/// lease release script: delete only while the key holds that value).
pub(crate) async fn clear_want<C: ConnectionLike>(
    conn: &mut C,
    name: &str,
    value: &str,
) -> Result<bool, Error> {
    let key = want_key(name);
    let call = LeaseCall {
        key: &key,
        owner: value,
        lease_ms: 0,
        acks: 0,
        wait_ms: 0,
    };
    call.release(conn).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_unix_ms(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn both_keys_and_the_channel_share_the_names_hash_tag() {
        assert_eq!(pause_key("quota:db"), "{quota:db}:pause");
        assert_eq!(want_key("quota:db"), "{quota:db}:want");
        assert_eq!(pause_channel("quota:db"), "throttle:pause:{quota:db}:fleet");
        assert_ne!(
            pause_channel("quota:db").into_bytes(),
            throttle_bucket::pause_channel(b"quota:db"),
            "a bucket of the same name has a channel of its own"
        );
    }

    #[test]
    fn a_pause_is_written_as_its_unix_ms_end_and_kept_a_lease_longer() {
        let now = at_unix_ms(1_700_000_000_000);
        assert_eq!(
            pause_until_ms(now, Duration::from_millis(1_500)),
            1_700_000_001_500
        );
        assert_eq!(
            pause_keep_ms(Duration::from_millis(1_500), Duration::from_secs(2)),
            3_500
        );
        assert_eq!(pause_keep_ms(Duration::ZERO, Duration::ZERO), 1);
    }

    #[test]
    fn a_pause_value_reads_back_as_how_far_ahead_it_ends() {
        let now = at_unix_ms(1_700_000_000_000);
        let written = pause_until_ms(now, Duration::from_millis(250)).to_string();
        assert_eq!(pause_ahead_ns(&written, now), Some(250_000_000));
        assert_eq!(pause_ahead_ns("1700000000000", now), None, "over");
        assert_eq!(pause_ahead_ns("1699999999999", now), None, "past");
        assert_eq!(pause_ahead_ns("soon", now), None, "unreadable");
        let far = i128::MAX.to_string();
        let longest = i64::try_from(throttle_bucket::MAX_WAIT_MS).unwrap() * 1_000_000;
        assert_eq!(
            pause_ahead_ns(&far, now),
            Some(longest),
            "no longer than the longest pause a caller can set"
        );
    }

    #[test]
    fn a_want_reads_back_as_its_owner_and_count() {
        let value = encode_want("00ab-42", 3);
        assert_eq!(value, "00ab-42 3");
        assert_eq!(parse_want(&value), Some(("00ab-42", 3)));
        assert_eq!(parse_want("00ab-42"), None);
        assert_eq!(parse_want("00ab-42 many"), None);
    }
}
