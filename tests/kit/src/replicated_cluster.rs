//! A Redis Cluster with replicas on loopback: masters and replicas with the module, made a
//! cluster by `redis-cli --cluster create --cluster-replicas n` (Debian's redis-tools), with
//! what the partitioned-quota tests do to it: kill a master and wait for its replica to take
//! over, bring the old master back as a replica, migrate a slot by hand. Every wait is
//! bounded.

use std::fs::File;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::info::info_field;
use crate::server::Server;
use crate::wait::poll;
use crate::Flavor;

/// Bound for `redis-cli --cluster create`, for the cluster to settle and for a failover.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);
/// `cluster-node-timeout`: how long a master may be unreachable before its replica takes
/// over.
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// A cluster node as `CLUSTER NODES` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    pub id: String,
    pub port: u16,
    pub master: bool,
    /// A replica's master (node id).
    pub master_id: Option<String>,
    pub failed: bool,
    pub slots: Vec<(u16, u16)>,
}

impl NodeView {
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(lo, hi)| (lo..=hi).contains(&slot))
    }
}

/// One master of a cluster without replicas ([`ReplicatedCluster::into_masters`]).
pub struct Master {
    pub server: Server,
    /// Its id and the slots it serves.
    pub node: NodeView,
}

/// The servers of a cluster, in the order they were started.
pub struct ReplicatedCluster {
    servers: Vec<Server>,
    /// Servers killed and not yet restarted.
    down: Vec<usize>,
}

impl ReplicatedCluster {
    /// `masters` masters with `replicas` replicas each (`redis-cli` wants at least 3
    /// masters), ready: every node agrees on the slot map and every replica is in sync.
    pub fn start(flavor: Flavor, masters: usize, replicas: usize) -> ReplicatedCluster {
        Self::start_with(flavor, masters, replicas, true)
    }

    /// [`ReplicatedCluster::start`], without loading the module where nothing needs it (the
    /// partitioned leases are plain commands and scripts).
    pub fn start_with(
        flavor: Flavor,
        masters: usize,
        replicas: usize,
        module: bool,
    ) -> ReplicatedCluster {
        let servers: Vec<Server> = (0..masters * (1 + replicas))
            .map(|_| start_node(flavor, module))
            .collect();
        let out_path = servers[0].dir().join("cluster-create.out");
        let out = File::create(&out_path).expect("create cluster-create.out");
        let mut command = Command::new(redis_cli());
        command.arg("--cluster").arg("create");
        for server in &servers {
            command.arg(format!("127.0.0.1:{}", server.port()));
        }
        command
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("duplicate a file handle"))
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
        let cluster = ReplicatedCluster {
            servers,
            down: Vec::new(),
        };
        cluster.wait_settled(masters, replicas);
        cluster
    }

    /// Every server, by start order.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// The servers, by start order, for a caller that keeps them itself.
    pub fn into_servers(self) -> Vec<Server> {
        self.servers
    }

    /// The masters of a cluster started without replicas, by start order, each with the
    /// node the cluster knows it as: for the tests that send to the nodes themselves.
    #[track_caller]
    pub fn into_masters(self) -> Vec<Master> {
        let map = self.nodes();
        self.into_servers()
            .into_iter()
            .map(|server| {
                let node = map
                    .iter()
                    .find(|node| node.port == server.port())
                    .unwrap_or_else(|| panic!("port {} missing in {map:?}", server.port()))
                    .clone();
                assert!(node.master, "node {} is not a master: {map:?}", node.id);
                assert!(!node.slots.is_empty(), "node {} serves no slot", node.id);
                Master { server, node }
            })
            .collect()
    }

    /// `redis://127.0.0.1:PORT` of every server that is up.
    pub fn urls(&self) -> Vec<String> {
        self.up().map(|i| self.servers[i].url()).collect()
    }

    fn up(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.servers.len()).filter(|i| !self.down.contains(i))
    }

    /// `CLUSTER NODES` as a live server sees it, sorted by port.
    pub fn nodes(&self) -> Vec<NodeView> {
        let i = self.up().next().expect("a server that is up");
        cluster_nodes(&mut self.servers[i].conn())
    }

    /// The index (in [`ReplicatedCluster::servers`]) of the master serving `slot`.
    pub fn master_of(&self, slot: u16) -> usize {
        let nodes = self.nodes();
        let node = nodes
            .iter()
            .find(|n| n.master && !n.failed && n.owns(slot))
            .unwrap_or_else(|| panic!("no master serves slot {slot}: {nodes:?}"));
        self.index_of(node.port)
    }

    /// The index of a replica of the master at `master`.
    pub fn replica_of(&self, master: usize) -> usize {
        let nodes = self.nodes();
        let port = self.servers[master].port();
        let id = &nodes
            .iter()
            .find(|n| n.port == port)
            .expect("the master is known")
            .id;
        let replica = nodes
            .iter()
            .find(|n| !n.master && n.master_id.as_deref() == Some(id.as_str()) && !n.failed)
            .unwrap_or_else(|| panic!("master {port} has no replica: {nodes:?}"));
        self.index_of(replica.port)
    }

    fn index_of(&self, port: u16) -> usize {
        self.servers
            .iter()
            .position(|s| s.port() == port)
            .unwrap_or_else(|| panic!("no server on port {port}"))
    }

    fn node_id(&self, index: usize) -> String {
        let port = self.servers[index].port();
        self.nodes()
            .into_iter()
            .find(|n| n.port == port)
            .map(|n| n.id)
            .unwrap_or_else(|| panic!("port {port} is not in the cluster"))
    }

    /// SIGKILLs the master at `master` and waits until its replica `replica` has taken its
    /// slots (the others mark the master failed after [`NODE_TIMEOUT_MS`] and elect it).
    /// Returns how long the slots had no master.
    pub fn kill_master_and_fail_over(&mut self, master: usize, replica: usize) -> Duration {
        let port = self.servers[replica].port();
        let killed = Instant::now();
        self.servers[master].kill();
        self.down.push(master);
        let promoted = poll(CLUSTER_TIMEOUT, || {
            let info = self.info(replica, "replication");
            let master_now = info_field(&info, "role") == Some("master");
            let ok = self.up().all(|i| {
                let info = self.cluster_info(i);
                info.contains("cluster_state:ok")
            });
            (master_now && ok).then_some(())
        });
        assert!(
            promoted.is_some(),
            "replica {port} did not take over within {CLUSTER_TIMEOUT:?}: {:?}",
            self.nodes()
        );
        killed.elapsed()
    }

    /// Starts a killed server again with its old config (`nodes.conf`): it rejoins as a
    /// replica of whoever took its slots, and is waited for until in sync.
    pub fn restart(&mut self, index: usize) {
        self.servers[index].restart();
        self.down.retain(|&i| i != index);
        let synced = poll(CLUSTER_TIMEOUT, || {
            let info = self.info(index, "replication");
            (info_field(&info, "role") == Some("slave")
                && info_field(&info, "master_link_status") == Some("up"))
            .then_some(())
        });
        assert!(
            synced.is_some(),
            "server {} did not rejoin as a synced replica: {}",
            self.servers[index].url(),
            self.info(index, "replication")
        );
    }

    /// Moves `slot` (and its keys) from the master serving it to the master at `to`, the way
    /// `redis-cli --cluster reshard` does: IMPORTING, MIGRATING, MIGRATE in batches, then
    /// `SETSLOT NODE` on every master. Returns the number of keys moved.
    pub fn migrate_slot(&self, slot: u16, to: usize) -> usize {
        let from = self.master_of(slot);
        assert_ne!(from, to, "slot {slot} is already served by the target");
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let mut src = self.servers[from].conn();
        let mut dst = self.servers[to].conn();
        let ok = |con: &mut redis::Connection, cmd: &mut redis::Cmd| {
            let _: () = cmd
                .query(con)
                .unwrap_or_else(|e| panic!("migrating slot {slot}: {cmd:?}: {e}"));
        };
        ok(
            &mut dst,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("IMPORTING")
                .arg(&from_id),
        );
        ok(
            &mut src,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("MIGRATING")
                .arg(&to_id),
        );
        let mut moved = 0;
        for _ in 0..10_000 {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut src)
                .expect("GETKEYSINSLOT");
            if keys.is_empty() {
                break;
            }
            moved += keys.len();
            ok(
                &mut src,
                redis::cmd("MIGRATE")
                    .arg("127.0.0.1")
                    .arg(self.servers[to].port())
                    .arg("")
                    .arg(0)
                    .arg(5000)
                    .arg("KEYS")
                    .arg(&keys),
            );
        }
        let masters: Vec<usize> = self
            .nodes()
            .iter()
            .filter(|n| n.master && !n.failed)
            .map(|n| self.index_of(n.port))
            .collect();
        for index in std::iter::once(to)
            .chain(std::iter::once(from))
            .chain(masters.into_iter().filter(|&i| i != to && i != from))
        {
            ok(
                &mut self.servers[index].conn(),
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("NODE")
                    .arg(&to_id),
            );
        }
        let agreed = poll(CLUSTER_TIMEOUT, || {
            self.up()
                .all(|i| {
                    cluster_nodes(&mut self.servers[i].conn())
                        .iter()
                        .any(|n| n.id == to_id && n.owns(slot))
                })
                .then_some(())
        });
        assert!(
            agreed.is_some(),
            "the nodes did not agree on slot {slot}'s move"
        );
        moved
    }

    /// Waits until every node is up, agrees on the map, and each of `masters` masters has
    /// `replicas` replicas in sync.
    fn wait_settled(&self, masters: usize, replicas: usize) {
        let settled = poll(CLUSTER_TIMEOUT, || {
            let maps: Vec<Vec<NodeView>> = self
                .up()
                .map(|i| cluster_nodes(&mut self.servers[i].conn()))
                .collect();
            let states_ok = self.up().all(|i| {
                let info = self.cluster_info(i);
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_assigned:16384")
                    && info.contains(&format!("cluster_known_nodes:{}", masters * (1 + replicas)))
            });
            let same = maps.iter().all(|m| *m == maps[0]);
            let shape = maps[0].iter().filter(|n| n.master).count() == masters;
            let synced = self.up().all(|i| {
                let info = self.info(i, "replication");
                info_field(&info, "role") == Some("master")
                    || info_field(&info, "master_link_status") == Some("up")
            });
            (states_ok && same && shape && synced).then_some(())
        });
        assert!(
            settled.is_some(),
            "the cluster did not settle within {CLUSTER_TIMEOUT:?}: {:?}",
            self.nodes()
        );
    }

    fn info(&self, index: usize, section: &str) -> String {
        redis::cmd("INFO")
            .arg(section)
            .query(&mut self.servers[index].conn())
            .unwrap_or_default()
    }

    fn cluster_info(&self, index: usize) -> String {
        redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut self.servers[index].conn())
            .unwrap_or_default()
    }
}

/// The redis-cli that creates the cluster: `$THROTTLE_REDIS_CLI`, or `redis-cli` on the PATH.
fn redis_cli() -> String {
    std::env::var("THROTTLE_REDIS_CLI")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "redis-cli".to_owned())
}

/// One cluster-enabled server with the module. Its bus port is its port + 10000, so a port
/// above 55535 makes it refuse to start: then it tries again (twice at most).
fn start_node(flavor: Flavor, module: bool) -> Server {
    let builder = Server::builder(flavor)
        .module(module)
        .arg("cluster-enabled", "yes")
        .arg("cluster-config-file", "nodes.conf")
        .arg("cluster-node-timeout", &NODE_TIMEOUT_MS.to_string())
        .arg("cluster-announce-ip", "127.0.0.1")
        // A replica may always be elected, however long its link was down.
        .arg("cluster-replica-validity-factor", "0")
        .arg("cluster-allow-replica-migration", "no");
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

/// `CLUSTER NODES`, sorted by port (`port 0` for a node whose address is not known yet).
pub fn cluster_nodes(con: &mut redis::Connection) -> Vec<NodeView> {
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(con)
        .unwrap_or_default();
    let mut nodes: Vec<NodeView> = text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = fields
                .get(1)?
                .split(['@', ','])
                .next()
                .and_then(|addr| addr.rsplit_once(':'))
                .and_then(|(_, port)| port.parse().ok())
                .unwrap_or(0);
            let flags = fields.get(2)?;
            let slots = fields
                .get(8..)
                .unwrap_or_default()
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
                    None => Some((s.parse().ok()?, s.parse().ok()?)),
                })
                .collect();
            Some(NodeView {
                id: fields[0].to_owned(),
                port,
                master: flags.contains("master"),
                master_id: fields
                    .get(3)
                    .filter(|m| **m != "-")
                    .map(|m| (*m).to_owned()),
                failed: flags.contains("fail") && !flags.contains("fail?"),
                slots,
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.port);
    nodes
}
