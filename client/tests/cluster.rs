//! The limiter over redis-rs's cluster connection, on a one-node cluster that owns every
//! slot (cheap to start). The multi-node cluster test is the end-to-end suite's.

use redis_throttle::prelude::*;
use redis_throttle::{Limiter, Quota, Strategy};
use throttle_e2e::cluster;
use throttle_testkit::{one_node_cluster, Flavor, Server};

#[tokio::test]
async fn the_limiter_works_over_a_cluster_connection() {
    let server = one_node_cluster(Server::builder(Flavor::Redis82));
    let conn = cluster([server.url()]).await;

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
