//! A 3-master Redis Cluster on loopback for the tests that need one (cluster.rs, mtake.rs):
//! cluster-enabled servers with the module, made a cluster by `redis-cli --cluster create`
//! (Debian's redis-tools), once every node agrees on the slot map (bounded waits).

use std::fs::File;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis::Connection;
use throttle_testkit::{Flavor, Server};

use crate::query;

/// Bound for `redis-cli --cluster create` and for the cluster to settle.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);

/// One master: its server, node id and the slot ranges it serves.
pub struct Node {
    pub server: Server,
    pub id: String,
    pub slots: Vec<(u16, u16)>,
}

impl Node {
    /// Whether this node serves `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(lo, hi)| (lo..=hi).contains(&slot))
    }
}

/// The redis-cli that creates the cluster: `$THROTTLE_REDIS_CLI`, or `redis-cli` on the PATH.
pub fn redis_cli() -> String {
    std::env::var("THROTTLE_REDIS_CLI")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "redis-cli".to_owned())
}

/// Starts 3 cluster-enabled servers with the module, creates the cluster with
/// `redis-cli --cluster create`, and waits (bounded) until all three report
/// `cluster_state:ok` and agree on who serves the 16384 slots.
pub fn start_cluster(flavor: Flavor) -> Vec<Node> {
    let servers: Vec<Server> = (0..3).map(|_| start_node(flavor)).collect();

    let out_path = servers[0].dir().join("cluster-create.out");
    let out = File::create(&out_path).expect("create cluster-create.out");
    let mut command = Command::new(redis_cli());
    command.arg("--cluster").arg("create");
    for server in &servers {
        command.arg(format!("127.0.0.1:{}", server.port()));
    }
    command
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    let mut child = command.spawn().unwrap_or_else(|e| {
        panic!(
            "run {} (Debian's redis-tools; set THROTTLE_REDIS_CLI to use another): {e}",
            redis_cli()
        )
    });
    let deadline = Instant::now() + CLUSTER_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for redis-cli") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    match status {
        Some(s) if s.success() => {}
        Some(s) => panic!("redis-cli --cluster create failed ({s}):\n{output}"),
        None => panic!("redis-cli --cluster create took over {CLUSTER_TIMEOUT:?}:\n{output}"),
    }

    // Every node: state ok, 3 known nodes, every slot assigned, and the same slot map.
    let mut maps = Vec::new();
    let settled = Instant::now() + CLUSTER_TIMEOUT;
    loop {
        maps.clear();
        let mut ok = true;
        for server in &servers {
            let mut con = server.conn();
            let info: String = query(&mut con, redis::cmd("CLUSTER").arg("INFO"));
            ok &= info.contains("cluster_state:ok")
                && info.contains("cluster_known_nodes:3")
                && info.contains("cluster_slots_assigned:16384");
            maps.push(cluster_nodes(&mut con));
        }
        if ok && maps.iter().all(|m| *m == maps[0]) {
            break;
        }
        assert!(
            Instant::now() < settled,
            "the cluster did not settle within {CLUSTER_TIMEOUT:?}; CLUSTER NODES seen: \
             {maps:?}\nredis-cli said:\n{output}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let map = maps.swap_remove(0);
    servers
        .into_iter()
        .map(|server| {
            let (id, slots) = map
                .iter()
                .find(|(_, port, _)| *port == server.port())
                .map(|(id, _, slots)| (id.clone(), slots.clone()))
                .unwrap_or_else(|| panic!("port {} missing in {map:?}", server.port()));
            assert!(!slots.is_empty(), "node {id} serves no slot");
            Node { server, id, slots }
        })
        .collect()
}

/// A line of `CLUSTER NODES`: node id, port, slot ranges.
pub type NodeLine = (String, u16, Vec<(u16, u16)>);

/// One cluster-enabled server with the module.
///
/// Its cluster bus listens on its port + 10000, so the port must be at most 55535. The
/// kit's free ports come from bind(0) with SO_REUSEADDR, for which Linux searches the lower
/// half of the ephemeral range first (32768-46883 by default); should a higher one come,
/// the server refuses to start ("port number too high"), and this tries again (twice at
/// most). A bus port another process holds is the kit's "Address already in use" retry.
fn start_node(flavor: Flavor) -> Server {
    let builder = Server::builder(flavor)
        .arg("cluster-enabled", "yes")
        // Relative to the server's data dir, which is its own.
        .arg("cluster-config-file", "nodes.conf")
        .arg("cluster-node-timeout", "2000")
        .arg("cluster-announce-ip", "127.0.0.1");
    for attempt in 1.. {
        let start =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.clone().start()));
        match start {
            Ok(server) => return server,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .unwrap_or_default();
                if attempt < 3 && message.contains("port number too high") {
                    continue;
                }
                std::panic::resume_unwind(panic);
            }
        }
    }
    unreachable!("the loop returns or panics")
}

/// `CLUSTER NODES`, sorted by port.
pub fn cluster_nodes(con: &mut Connection) -> Vec<NodeLine> {
    let text: String = query(con, redis::cmd("CLUSTER").arg("NODES"));
    let mut nodes: Vec<_> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = fields[1]
                .split(['@', ','])
                .next()
                .and_then(|addr| addr.rsplit_once(':'))
                .and_then(|(_, port)| port.parse().ok())
                .unwrap_or_else(|| panic!("no port in {line:?}"));
            let slots = fields[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| match s.split_once('-') {
                    Some((lo, hi)) => (lo.parse().unwrap(), hi.parse().unwrap()),
                    None => (s.parse().unwrap(), s.parse().unwrap()),
                })
                .collect();
            (fields[0].to_owned(), port, slots)
        })
        .collect();
    nodes.sort_by_key(|(_, port, _)| *port);
    nodes
}

/// `CLUSTER KEYSLOT key`.
pub fn keyslot(con: &mut Connection, key: &str) -> u16 {
    query(con, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
}
