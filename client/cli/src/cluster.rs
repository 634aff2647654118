//! The nodes a command reads: the server given, or on a Redis Cluster each of its primaries
//! (from the given node's `CLUSTER NODES`), each reached with the given URL's credentials and
//! database; and the one node a verb on one key must reach, the primary serving its slot.

use std::ops::RangeInclusive;

use redis::Value;
use redis_throttle::throttle_bucket::key_slot;

use crate::failure::Failure;
use crate::server::Server;
use crate::text::{cell, MAX_CELL};

/// What the given server says about its cluster.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Topology {
    /// Not a cluster (or it would not say: then `why`).
    One { why: Option<String> },
    /// A cluster: its primaries, as the given node sees them, and the lines of CLUSTER NODES
    /// that could not be read.
    Cluster {
        primaries: Vec<Primary>,
        unread: usize,
    },
}

/// A primary of a cluster: its address and the hash slots it serves.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Primary {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) slots: Vec<RangeInclusive<u16>>,
}

impl Primary {
    fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|range| range.contains(&slot))
    }
}

/// The server a command on `key` must reach: on a cluster the primary that serves the key's
/// hash slot (connected with `url`'s credentials), else the one given. A verb sent to another
/// node would be refused with MOVED; its reports, in the key's slot, live there too.
pub(crate) async fn node_for(url: &str, mut server: Server, key: &str) -> Result<Server, Failure> {
    let Topology::Cluster { primaries, .. } = topology(&mut server).await else {
        return Ok(server);
    };
    let slot = key_slot(key.as_bytes());
    let Some(primary) = primaries.iter().find(|p| p.serves(slot)) else {
        return Err(Failure(format!(
            "no primary of the cluster serves {key:?} (hash slot {slot}) in {}'s CLUSTER NODES: \
             check the cluster's state (CLUSTER INFO), then try again",
            server.url
        )));
    };
    let shown = shown(&primary.host, primary.port);
    match node_url(url, &primary.host, primary.port) {
        Some(node) => Server::connect(&node).await,
        None => Err(Failure(format!(
            "{key:?} is served by {shown}: only a redis:// URL can be aimed at another node of a cluster"
        ))),
    }
}

/// Asks the server given whether it is a cluster node, and if so for the cluster's primaries.
pub(crate) async fn topology(server: &mut Server) -> Topology {
    let reply: Result<Value, redis::RedisError> = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut server.con)
        .await;
    match reply {
        Ok(value) => match text(&value) {
            Some(nodes) => {
                let (primaries, unread) = primaries(&nodes, &host_of(&server.url));
                Topology::Cluster { primaries, unread }
            }
            None => Topology::One {
                why: Some("CLUSTER NODES answered something else than text".to_owned()),
            },
        },
        Err(err) if err.to_string().contains("cluster support disabled") => {
            Topology::One { why: None }
        }
        Err(err) => Topology::One {
            why: Some(format!("CLUSTER NODES failed: {err}")),
        },
    }
}

/// A reply's text (a bulk string, or in RESP3 a verbatim string).
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

/// The primaries in a `CLUSTER NODES` text: each line `id host:port@cport[,hostname] flags
/// master ping pong epoch state slot...`, those flagged `master` and neither `fail` nor
/// `noaddr` nor `handshake`, with the slots they serve (`0-5460`, `5461`; a slot being moved,
/// `[...]`, is not read). A node with no address yet (`:0`, or only a port) is the one asked:
/// `asked_host`. Lines that do not read as a node are counted, not trusted.
pub(crate) fn primaries(nodes: &str, asked_host: &str) -> (Vec<Primary>, usize) {
    let mut found = Vec::new();
    let mut unread = 0usize;
    for line in nodes.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split(' ');
        let (Some(_id), Some(address), Some(flags)) = (words.next(), words.next(), words.next())
        else {
            unread = unread.saturating_add(1);
            continue;
        };
        let flags: Vec<&str> = flags.split(',').collect();
        if !flags.contains(&"master")
            || flags
                .iter()
                .any(|f| matches!(*f, "fail" | "noaddr" | "handshake"))
        {
            continue;
        }
        // `host:port@cport` (and `,hostname` from Redis 7).
        let host_port = address.split(['@', ',']).next().unwrap_or("");
        let Some((host, port)) = host_port.rsplit_once(':') else {
            unread = unread.saturating_add(1);
            continue;
        };
        let Ok(port) = port.parse::<u16>() else {
            unread = unread.saturating_add(1);
            continue;
        };
        if port == 0 {
            unread = unread.saturating_add(1);
            continue;
        }
        let host = if host.is_empty() { asked_host } else { host };
        // An address is a host name or an IP: nothing else is connected to.
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'))
        {
            unread = unread.saturating_add(1);
            continue;
        }
        // After flags: master, ping, pong, epoch, link state, then the slots.
        let slots = words.skip(5).filter_map(slot_range).collect();
        found.push(Primary {
            host: host.to_owned(),
            port,
            slots,
        });
    }
    found.sort_by(|a, b| (&a.host, a.port).cmp(&(&b.host, b.port)));
    found.dedup_by(|a, b| (&a.host, a.port) == (&b.host, b.port));
    (found, unread)
}

/// `a-b` or `a` of CLUSTER NODES as a range of slots (none for a slot in migration, `[..]`, or
/// anything else).
fn slot_range(word: &str) -> Option<RangeInclusive<u16>> {
    let (first, last) = word.split_once('-').unwrap_or((word, word));
    let (first, last) = (first.parse().ok()?, last.parse().ok()?);
    (first <= last).then_some(first..=last)
}

/// The host of a `redis://` URL (empty for another scheme).
fn host_of(url: &str) -> String {
    let Some(rest) = url.strip_prefix("redis://") else {
        return String::new();
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("").to_owned();
    }
    host_port
        .rsplit_once(':')
        .map_or(host_port, |(h, _)| h)
        .to_owned()
}

/// `url` (`redis://[user:password@]host[:port][/db][?...]`) aimed at `host:port`, keeping
/// its credentials, database and options; none for another scheme (unix sockets, TLS).
pub(crate) fn node_url(url: &str, host: &str, port: u16) -> Option<String> {
    let rest = url.strip_prefix("redis://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let userinfo = authority
        .rsplit_once('@')
        .map_or(String::new(), |(u, _)| format!("{u}@"));
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    Some(format!("redis://{userinfo}{host}:{port}{tail}"))
}

/// A node's address as shown: escaped and cut for the terminal.
pub(crate) fn shown(host: &str, port: u16) -> String {
    cell(&format!("{host}:{port}"), MAX_CELL)
}

/// A connection to each primary, or why there is none: `(address shown, connection)`.
pub(crate) async fn connect_all(
    url: &str,
    primaries: &[Primary],
) -> Vec<(String, Result<Server, Failure>)> {
    let mut all = Vec::with_capacity(primaries.len());
    for Primary { host, port, .. } in primaries {
        let shown = shown(host, *port);
        let connected = match node_url(url, host, *port) {
            Some(node) => Server::connect(&node).await,
            None => Err(Failure(format!(
                "{shown}: only a redis:// URL can be aimed at each node of a cluster"
            ))),
        };
        all.push((shown, connected));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_primaries_are_read_from_cluster_nodes() {
        let nodes = "\
07c3 127.0.0.1:30004@31004,host-4 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383
6ec2 127.0.0.1:30005@31005 master,fail - 0 1426238316232 5 connected
e7d1 :30001@31001 myself,master - 0 0 1 connected 0-5460
bad line
f00d 127.0.0.1:x@1 master - 0 0 1 connected
beef evil\x1b[2J:1@1 master - 0 0 1 connected
";
        let (found, unread) = primaries(nodes, "10.0.0.1");
        let primary = |host: &str, port, slots: Vec<RangeInclusive<u16>>| Primary {
            host: host.to_owned(),
            port,
            slots,
        };
        assert_eq!(
            found,
            [
                primary("10.0.0.1", 30001, vec![0..=5460]),
                primary("127.0.0.1", 30002, vec![5461..=10922]),
                primary("127.0.0.1", 30003, vec![10923..=16383]),
            ]
        );
        assert_eq!(unread, 3);
        assert!(found[1].serves(5461) && found[1].serves(10922) && !found[1].serves(10923));
    }

    #[test]
    fn slots_are_read_as_ranges_and_migrations_are_skipped() {
        let nodes = "a 10.0.0.9:7000@17000 master - 0 0 1 connected 0-10 12 [13->-b] 20-19 x\n";
        let (found, _) = primaries(nodes, "h");
        assert_eq!(found[0].slots, vec![0..=10, 12..=12]);
    }

    #[test]
    fn a_url_is_aimed_at_another_node_keeping_its_credentials_and_db() {
        assert_eq!(
            node_url("redis://u:p@h:1/2?protocol=resp3", "10.0.0.2", 7000).as_deref(),
            Some("redis://u:p@10.0.0.2:7000/2?protocol=resp3")
        );
        assert_eq!(
            node_url("redis://h", "::1", 7000).as_deref(),
            Some("redis://[::1]:7000")
        );
        assert_eq!(node_url("unix:///tmp/s", "h", 1), None);
        assert_eq!(host_of("redis://u:p@h1:6379/0"), "h1");
        assert_eq!(host_of("redis://[::1]:6379"), "::1");
        assert_eq!(host_of("redis://h2"), "h2");
    }
}
