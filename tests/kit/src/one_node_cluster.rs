//! A cluster of one node that owns every slot: the cheapest server in cluster mode, for the
//! tests that need the server's own cluster checks (CROSSSLOT, key slots) or a cluster
//! client, and not several nodes.

use std::time::Duration;

use crate::info::info_field;
use crate::server::{Server, ServerBuilder};
use crate::wait::poll;

/// Bound for the node to call its cluster state ok once it owns every slot.
const STATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts `builder`'s server in cluster mode (announcing 127.0.0.1), gives it all 16384
/// slots and waits (bounded) until `CLUSTER INFO` says `cluster_state:ok`. The builder
/// says the rest: flavor, module or not, extra config.
#[track_caller]
pub fn one_node_cluster(builder: ServerBuilder) -> Server {
    let server = builder
        .arg("cluster-enabled", "yes")
        .arg("cluster-announce-ip", "127.0.0.1")
        .start();
    let mut con = server.conn();
    let added: redis::Value = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut con)
        .unwrap_or_else(|e| panic!("CLUSTER ADDSLOTSRANGE 0 16383: {e}"));
    assert_eq!(added, redis::Value::Okay, "CLUSTER ADDSLOTSRANGE 0 16383");
    let ok = poll(STATE_TIMEOUT, || {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut con)
            .unwrap_or_else(|e| panic!("CLUSTER INFO: {e}"));
        (info_field(&info, "cluster_state") == Some("ok")).then_some(())
    });
    assert!(
        ok.is_some(),
        "the one-node cluster did not reach cluster_state:ok in {STATE_TIMEOUT:?}"
    );
    server
}
