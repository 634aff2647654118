//! The lease commands, one key each, so they route in Redis Cluster: acquire
//! (`SET key owner NX PX lease`), renew and release (tiny scripts that act only while the key
//! still holds our owner token). An acquire or renew is one pipeline on the key's master:
//! the write, `ROLE` (how many replicas that master has) and `WAIT n timeout`, so the
//! replicas' acknowledgement covers the write on the same connection.

use redis::aio::ConnectionLike;
use redis::Value;

use crate::Error;

/// `PEXPIRE` only while the key holds our token: a lease that lapsed and went to another
/// process is not taken back.
const RENEW: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                     return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
/// `DEL` only while the key holds our token.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                       return redis.call('DEL', KEYS[1]) end return 0";

/// How many replicas must acknowledge a lease write before the lease is spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaAcks {
    /// One where the key's master has replicas (per `ROLE`), none where it has none.
    #[default]
    Auto,
    /// Exactly this many, always (0: never wait; use on a single node or without replicas).
    Exactly(u32),
}

impl ReplicaAcks {
    /// Acks to wait for on a master last seen with `replicas` (`None`: not seen yet).
    pub(crate) fn wanted(self, replicas: Option<usize>) -> u32 {
        match self {
            ReplicaAcks::Auto => u32::from(replicas.is_none_or(|n| n > 0)),
            ReplicaAcks::Exactly(n) => n,
        }
    }

    /// Whether `acks` acknowledgements confirm a write on a master with `replicas`.
    pub(crate) fn confirmed(self, acks: u64, replicas: usize) -> bool {
        match self {
            ReplicaAcks::Auto => replicas == 0 || acks >= 1,
            ReplicaAcks::Exactly(n) => acks >= u64::from(n),
        }
    }
}

/// What a lease write came back with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    /// The write took effect: the key is ours (acquired, or renewed while it still was).
    pub ours: bool,
    /// Replicas of the key's master, per `ROLE` (`None`: not asked).
    pub replicas: Option<usize>,
    /// Replicas that acknowledged the write (`WAIT`'s reply; 0 when not asked).
    pub acks: u64,
}

/// The lease of one key, for one owner.
#[derive(Clone, Debug)]
pub(crate) struct LeaseCall<'a> {
    pub key: &'a str,
    pub owner: &'a str,
    pub lease_ms: u64,
    /// `WAIT` for this many replicas (0: no `WAIT`), for at most this many ms.
    pub acks: u32,
    pub wait_ms: u64,
}

impl LeaseCall<'_> {
    /// `SET key owner NX PX lease`, `ROLE`, `WAIT`.
    pub(super) async fn acquire<C: ConnectionLike>(&self, conn: &mut C) -> Result<Written, Error> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.key)
            .arg(self.owner)
            .arg("NX")
            .arg("PX")
            .arg(self.lease_ms);
        let reply = self.confirm(pipe, conn).await?;
        Ok(Written {
            ours: matches!(reply.first, Value::Okay)
                || matches!(&reply.first, Value::SimpleString(s) if s == "OK"),
            ..reply.written
        })
    }

    /// The renew script, `ROLE`, `WAIT`.
    pub(super) async fn renew<C: ConnectionLike>(&self, conn: &mut C) -> Result<Written, Error> {
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(RENEW)
            .arg(1)
            .arg(self.key)
            .arg(self.owner)
            .arg(self.lease_ms);
        let reply = self.confirm(pipe, conn).await?;
        Ok(Written {
            ours: matches!(reply.first, Value::Int(1)),
            ..reply.written
        })
    }

    /// The release script; true if the key was ours.
    pub(super) async fn release<C: ConnectionLike>(&self, conn: &mut C) -> Result<bool, Error> {
        let value: Value = redis::cmd("EVAL")
            .arg(RELEASE)
            .arg(1)
            .arg(self.key)
            .arg(self.owner)
            .query_async(conn)
            .await
            .map_err(Error::from_redis)?;
        Ok(matches!(value, Value::Int(1)))
    }

    /// Sends `pipe` (one keyed write) with `ROLE` and, when acks are wanted, `WAIT`. The
    /// keyless commands go where the write goes: a cluster pipeline is routed by its keyed
    /// command, and one pipeline is one write on one connection.
    async fn confirm<C: ConnectionLike>(
        &self,
        mut pipe: redis::Pipeline,
        conn: &mut C,
    ) -> Result<Confirmed, Error> {
        pipe.cmd("ROLE");
        if self.acks > 0 {
            pipe.cmd("WAIT").arg(self.acks).arg(self.wait_ms.max(1));
        }
        let values: Vec<Value> = pipe.query_async(conn).await.map_err(Error::from_redis)?;
        let mut values = values.into_iter();
        let first = values.next().unwrap_or(Value::Nil);
        let replicas = values.next().as_ref().and_then(role_replicas);
        let acks = match values.next() {
            Some(Value::Int(n)) => u64::try_from(n).unwrap_or(0),
            _ => 0,
        };
        Ok(Confirmed {
            first,
            written: Written {
                ours: false,
                replicas,
                acks,
            },
        })
    }
}

struct Confirmed {
    first: Value,
    written: Written,
}

/// Replicas listed by `ROLE` on a master: `["master", offset, [[ip, port, offset], ...]]`.
/// `None` for anything else (a replica: our write would have been refused anyway).
pub(crate) fn role_replicas(value: &Value) -> Option<usize> {
    let Value::Array(items) = value else {
        return None;
    };
    let is_master = match items.first() {
        Some(Value::BulkString(bytes)) => bytes.as_slice() == b"master",
        Some(Value::SimpleString(text)) => text == "master",
        _ => false,
    };
    match (is_master, items.get(2)) {
        (true, Some(Value::Array(replicas))) => Some(replicas.len()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_counts_a_masters_replicas() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let replica = Value::Array(vec![bulk("127.0.0.1"), bulk("7001"), bulk("42")]);
        let master = Value::Array(vec![
            bulk("master"),
            Value::Int(42),
            Value::Array(vec![replica.clone(), replica]),
        ]);
        assert_eq!(role_replicas(&master), Some(2));
        let alone = Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])]);
        assert_eq!(role_replicas(&alone), Some(0));
        let slave = Value::Array(vec![bulk("slave"), bulk("127.0.0.1"), Value::Int(7000)]);
        assert_eq!(role_replicas(&slave), None);
        assert_eq!(role_replicas(&Value::Nil), None);
    }

    #[test]
    fn acks_wanted_and_confirmed() {
        assert_eq!(ReplicaAcks::Auto.wanted(None), 1);
        assert_eq!(ReplicaAcks::Auto.wanted(Some(0)), 0);
        assert_eq!(ReplicaAcks::Auto.wanted(Some(2)), 1);
        assert_eq!(ReplicaAcks::Exactly(2).wanted(Some(0)), 2);
        assert!(ReplicaAcks::Auto.confirmed(0, 0));
        assert!(!ReplicaAcks::Auto.confirmed(0, 1));
        assert!(ReplicaAcks::Auto.confirmed(1, 2));
        assert!(ReplicaAcks::Exactly(0).confirmed(0, 3));
        assert!(!ReplicaAcks::Exactly(2).confirmed(1, 2));
    }
}
