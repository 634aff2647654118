//! A partitioned quota: one fleet-wide rate and burst, split into equal partitions whose keys
//! spread over a Redis Cluster's slots. Pure: validation, the share of each partition, key
//! names. Nothing here talks to Redis.

use std::time::Duration;

use throttle_bucket::{key_slot, Quota as BucketQuota, TakeArgs, ThrottleCommand};

use crate::{Error, Quota, Rate};

/// Most partitions a quota may have: keys are placed one per equal slice of the 16384 slots,
/// and a slice needs room for a search (a partition's key is the first `{name:index:t}` whose
/// slot falls in its slice).
pub const MAX_PARTITIONS: u32 = 1024;
/// Shortest lease: renewals run every third of it, over a network.
pub const MIN_LEASE: Duration = Duration::from_millis(100);
/// Longest lease (what `PX` takes, with room).
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);
const SLOTS: u32 = 16384;
/// Tries per partition to find a tag whose slot falls in its slice of the slot space.
const TAG_SEARCH: u32 = 64 * MAX_PARTITIONS;

/// One quota for a whole fleet, split into `partitions` equal shares that workers lease.
///
/// Partition `i` holds `burst / partitions` tokens (rounded down) refilling at
/// `rate / partitions` (rounded down), so the partitions together never exceed the quota.
/// Its lease key is `{name:i:t}` (the hash tag is the whole key), where `t` is the
/// smallest number that puts the key in the `i`-th of `partitions` equal slices of the 16384
/// cluster slots: the partitions spread evenly over the masters of any cluster whose masters
/// serve contiguous ranges, as `redis-cli --cluster create` assigns them. Every process
/// computes the same keys.
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::partitioned::PartitionedQuota;
/// use redis_throttle::Error;
/// use redis_throttle::{Quota, Rate};
///
/// // 500 calls/s with bursts of 100, as 20 partitions of 25/s and 5 tokens each.
/// let quota = PartitionedQuota::builder("quota:ingest", Quota::new(100, Rate::per_second(500))?)
///     .partitions(20)
///     .lease(Duration::from_secs(2))
///     .reserved(1)
///     .build()?;
/// assert_eq!(quota.share_capacity(), 5);
/// assert_eq!(quota.share_interval(), Duration::from_millis(40));
///
/// // A burst below one token per partition cannot be split.
/// let err = PartitionedQuota::builder("q", Quota::new(10, 500u64)?).partitions(20).build();
/// assert!(matches!(err, Err(Error::Config { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionedQuota {
    name: String,
    total: Quota,
    partitions: u32,
    lease: Duration,
    reserved: u32,
    share: BucketQuota,
    keys: Vec<String>,
}

/// Configures a [`PartitionedQuota`]; from [`PartitionedQuota::builder`].
#[derive(Clone, Debug)]
pub struct PartitionedQuotaBuilder {
    name: String,
    total: Quota,
    partitions: u32,
    lease: Duration,
    reserved: u32,
}

impl PartitionedQuotaBuilder {
    /// Number of partitions (default 20): more partitions let more processes share the quota
    /// in finer steps; each must hold at least one token of burst.
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.partitions = partitions;
        self
    }

    /// How long a lease lasts unless renewed (default 2 s). Longer leases cost fewer round
    /// trips; shorter ones free the partitions of a dead process sooner.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Partitions every process leases at start and keeps while it runs, busy or idle (the
    /// pattern's small exclusive capacity; default 0).
    pub fn reserved(mut self, reserved: u32) -> Self {
        self.reserved = reserved;
        self
    }

    /// Checks the quota and computes the partitions' share and keys.
    pub fn build(self) -> Result<PartitionedQuota, Error> {
        let Self {
            name,
            total,
            partitions,
            lease,
            reserved,
        } = self;
        let fail = |problem: String| {
            Err(Error::Config {
                problem: format!("partitioned quota: {problem}"),
            })
        };
        if name.is_empty() || name.contains(['{', '}']) {
            return fail(format!(
                "the name {name:?} must be non-empty and free of braces: it becomes the hash tag \
                 of the partition keys"
            ));
        }
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return fail(format!(
                "{partitions} partitions: use 1 to {MAX_PARTITIONS}"
            ));
        }
        let capacity = total.capacity() / u64::from(partitions);
        if capacity == 0 {
            return fail(format!(
                "a burst of {} cannot be split into {partitions} partitions of at least one \
                 token: raise the burst to {partitions} or use at most {} partitions",
                total.capacity(),
                total.capacity()
            ));
        }
        if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
            return fail(format!(
                "a lease of {lease:?} is out of range: use {MIN_LEASE:?} to {MAX_LEASE:?}"
            ));
        }
        if reserved > partitions {
            return fail(format!(
                "{reserved} reserved partitions per process, but the quota has only {partitions}"
            ));
        }
        // The share's interval: the total's (already rounded up) times the partitions, sent
        // as a rate rounded down, which the parser turns back into an interval rounded up.
        let interval = total
            .token_interval()
            .checked_mul(partitions)
            .unwrap_or(Duration::MAX);
        let rate = Rate::per(1, interval);
        let cap_text = capacity.to_string();
        let share = match TakeArgs::parse(&[cap_text.as_bytes(), rate.as_str().as_bytes()]) {
            Ok(args) => args.quota,
            Err(_) => {
                return fail(format!(
                    "a rate of {}/s split {partitions} ways is {rate}/s per partition, below \
                     the smallest rate (0.000001/s) or too slow to refill {capacity} tokens \
                     within 10 years: use fewer partitions",
                    total.rate()
                ))
            }
        };
        let keys = (0..partitions)
            .map(|i| partition_key(&name, i, partitions))
            .collect();
        Ok(PartitionedQuota {
            name,
            total,
            partitions,
            lease,
            reserved,
            share,
            keys,
        })
    }
}

impl PartitionedQuota {
    /// A builder for `total` (the fleet's burst and rate) under `name` (the key prefix).
    pub fn builder(name: impl Into<String>, total: Quota) -> PartitionedQuotaBuilder {
        PartitionedQuotaBuilder {
            name: name.into(),
            total,
            partitions: 20,
            lease: Duration::from_secs(2),
            reserved: 0,
        }
    }

    /// The key prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole fleet's quota.
    pub fn total(&self) -> &Quota {
        &self.total
    }

    /// Number of partitions.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// How long a lease lasts unless renewed.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Partitions each process keeps while it runs.
    pub fn reserved(&self) -> u32 {
        self.reserved
    }

    /// Burst of one partition, in tokens.
    pub fn share_capacity(&self) -> u64 {
        self.share.capacity
    }

    /// Refill time of one token in one partition.
    pub fn share_interval(&self) -> Duration {
        Duration::from_nanos(u64::try_from(self.share.interval.ns()).unwrap_or(u64::MAX))
    }

    /// The lease key of partition `index` (`None` past the last).
    pub fn key(&self, index: u32) -> Option<&str> {
        self.keys.get(index as usize).map(String::as_str)
    }

    /// Every lease key, by partition.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    pub(crate) fn share(&self) -> BucketQuota {
        self.share
    }
}

/// The key of partition `index` of `partitions` under `name`: `{name:index:t}` with the
/// smallest `t` whose slot falls in the partition's slice of the slot space (or `t = 0` if
/// the search finds none, which a slice of 16 slots or more never meets in practice).
pub(crate) fn partition_key(name: &str, index: u32, partitions: u32) -> String {
    let partitions = partitions.clamp(1, MAX_PARTITIONS);
    let lo = index * SLOTS / partitions;
    let hi = (index + 1) * SLOTS / partitions;
    (0..TAG_SEARCH)
        .map(|t| format!("{{{name}:{index}:{t}}}"))
        .find(|key| (lo..hi).contains(&u32::from(key_slot(key.as_bytes()))))
        .unwrap_or_else(|| format!("{{{name}:{index}:0}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(burst: u64, rate: u64) -> Quota {
        Quota::new(burst, rate).unwrap()
    }

    #[test]
    fn shares_never_add_up_above_the_quota() {
        let q = PartitionedQuota::builder("q", total(100, 500))
            .partitions(20)
            .build()
            .unwrap();
        assert_eq!(q.share_capacity(), 5);
        assert_eq!(q.share_interval(), Duration::from_millis(40));
        // 9/s over 7 partitions: 111 111 112 ns x 7, rounded up again.
        let q = PartitionedQuota::builder("q", total(7, 9))
            .partitions(7)
            .build()
            .unwrap();
        assert_eq!(q.share_capacity(), 1);
        assert!(q.share_interval() >= Duration::from_nanos(111_111_112 * 7));
        assert!(q.share_interval() <= Duration::from_nanos(111_111_112 * 7 + 10));
        // A burst of 21 over 20 partitions: 1 each, the odd token dropped.
        let q = PartitionedQuota::builder("q", total(21, 20))
            .partitions(20)
            .build()
            .unwrap();
        assert_eq!(q.share_capacity(), 1);
        assert_eq!(q.share_interval(), Duration::from_secs(1));
    }

    #[test]
    fn keys_spread_evenly_over_the_slots() {
        for partitions in [1, 3, 20, 64, 1024] {
            let q = PartitionedQuota::builder("quota:x", total(4096, 4096))
                .partitions(partitions)
                .build()
                .unwrap();
            for (i, key) in q.keys().iter().enumerate() {
                let i = i as u32;
                let slot = u32::from(key_slot(key.as_bytes()));
                assert!(
                    (i * SLOTS / partitions..(i + 1) * SLOTS / partitions).contains(&slot),
                    "{key} in slot {slot}"
                );
                assert!(key.starts_with("{quota:x:") && key.ends_with('}'), "{key}");
            }
        }
        // 20 partitions over 3 masters with the ranges `--cluster create` assigns: 7, 7, 6.
        let q = PartitionedQuota::builder("q", total(20, 20))
            .partitions(20)
            .build()
            .unwrap();
        let mut per_master = [0; 3];
        for key in q.keys() {
            let slot = key_slot(key.as_bytes());
            per_master[usize::from(slot >= 5461) + usize::from(slot >= 10923)] += 1;
        }
        assert_eq!(per_master, [7, 7, 6]);
    }

    #[test]
    fn bad_configurations_say_what_to_do() {
        let build = |b: PartitionedQuotaBuilder| b.build().unwrap_err().to_string();
        let base = || PartitionedQuota::builder("q", total(20, 20));
        assert!(build(base().partitions(0)).contains("use 1 to 1024"));
        assert!(build(base().partitions(21)).contains("raise the burst to 21"));
        assert!(build(base().lease(Duration::from_millis(10))).contains("out of range"));
        assert!(build(base().reserved(30)).contains("only 20"));
        assert!(build(PartitionedQuota::builder("{q}", total(20, 20))).contains("braces"));
        let slow = PartitionedQuota::builder("q", Quota::new(1000, "0.00001").unwrap())
            .partitions(100)
            .build()
            .unwrap_err()
            .to_string();
        assert!(slow.contains("use fewer partitions"), "{slow}");
    }
}
