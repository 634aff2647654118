//! A 3-master Redis Cluster on loopback for the tests that need one (cluster.rs, mtake.rs):
//! the kit's [`ReplicatedCluster`] without replicas, as the masters it is made of.

use redis::Connection;
use throttle_testkit::{Flavor, ReplicatedCluster, Server};

use crate::query;

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

/// Starts 3 cluster-enabled servers with the module, made a cluster by `redis-cli --cluster
/// create` once every node agrees on who serves the 16384 slots (bounded waits, in the kit).
pub fn start_cluster(flavor: Flavor) -> Vec<Node> {
    let cluster = ReplicatedCluster::start(flavor, 3, 0);
    let map = cluster.nodes();
    cluster
        .into_servers()
        .into_iter()
        .map(|server| {
            let node = map
                .iter()
                .find(|node| node.port == server.port())
                .unwrap_or_else(|| panic!("port {} missing in {map:?}", server.port()));
            assert!(!node.slots.is_empty(), "node {} serves no slot", node.id);
            Node {
                id: node.id.clone(),
                slots: node.slots.clone(),
                server,
            }
        })
        .collect()
}

/// `CLUSTER KEYSLOT key`.
pub fn keyslot(con: &mut Connection, key: &str) -> u16 {
    query(con, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
}
