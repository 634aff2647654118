//! The limiter over redis-rs's cluster connection, on a one-node cluster that owns every
//! slot (cheap to start). The multi-node cluster test is the end-to-end suite's.

mod common;

use std::time::Duration;

use redis::cluster::ClusterClient;
use redis_throttle::{Limiter, Quota, Strategy};
use throttle_testkit::{Flavor, Server};

/// A one-node cluster: cluster mode on, all 16384 slots assigned to itself.
fn one_node_cluster() -> Server {
    let server = Server::builder(Flavor::Redis82)
        .arg("cluster-enabled", "yes")
        .arg("cluster-announce-ip", "127.0.0.1")
        .start();
    let mut con = server.conn();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut con)
        .expect("CLUSTER ADDSLOTSRANGE");
    // Bounded wait for the node to call its cluster state ok.
    for _ in 0..100 {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
        if info.contains("cluster_state:ok") {
            return server;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the one-node cluster did not reach cluster_state:ok in 5 s");
}

#[tokio::test]
async fn the_limiter_works_over_a_cluster_connection() {
    let server = one_node_cluster();
    let client = ClusterClient::builder(vec![server.url()])
        .connection_timeout(common::TIMEOUT)
        .response_timeout(common::TIMEOUT)
        .build()
        .unwrap();
    let conn = client
        .get_async_connection()
        .await
        .expect("cluster connection");

    for (key, strategy) in [
        ("{user:1}:quota", Strategy::Reserve),
        ("plain-key", Strategy::poll()),
    ] {
        let limiter = Limiter::builder(key, Quota::new(2, 20u64).unwrap())
            .strategy(strategy)
            .build(conn.clone())
            .unwrap();
        for _ in 0..4 {
            limiter
                .acquire()
                .await
                .unwrap_or_else(|e| panic!("{key}: {e}"));
        }
        let metrics = limiter.metrics();
        assert_eq!(metrics.granted, 4, "{key}");
        let state = limiter.peek().await.unwrap();
        assert!(state.remaining <= 2, "{key}: {state:?}");
    }
}
