//! Pause announcements on Redis Cluster: 3 masters, and a bucket on a master other than the one
//! the subscription was given. `Announcements::cluster` subscribes to the bucket's shard
//! channel on the master of its slot, so a pause set there (from another connection) reaches a
//! reserved call asleep in this process, with no `THROTTLE.PEEK`; the one-node
//! `Announcements::new` on the first master cannot subscribe to it there, and its limiter asks
//! instead (one look), and is held back all the same.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Announcements, Limiter, Quota, Rate};
use throttle_e2e::*;
use throttle_testkit::ReplicatedCluster;

throttle_e2e::per_server!(a_pause_on_another_shard_is_heard);

/// One token, one every 300 ms: a second call reserves and sleeps 300 ms.
const INTERVAL: Duration = Duration::from_millis(300);
const PAUSE: Duration = Duration::from_millis(1000);

fn quota() -> Quota {
    Quota::new(1, Rate::per(1, INTERVAL)).unwrap()
}

fn a_pause_on_another_shard_is_heard(flavor: Flavor) {
    let nodes = ReplicatedCluster::start(flavor, 3, 0).into_masters();
    let mut first = nodes[0].server.conn();
    // A hash tag whose slot the first master does not serve.
    let tag = (0..1000)
        .map(|i| format!("cl:listen:{i}"))
        .find(|tag| !nodes[0].node.owns(keyslot(&mut first, tag)))
        .expect("a slot on another master");
    let runtime = runtime();
    runtime.block_on(async {
        let conn = cluster(nodes.iter().map(|n| n.server.url())).await;
        // Seeded with the first master alone: the subscription finds the bucket's master.
        let cluster = Announcements::cluster([nodes[0].server.url()]).unwrap();
        let one_node =
            Announcements::new(redis::Client::open(nodes[0].server.url()).unwrap()).unwrap();
        for (name, announcements, checks) in [("cluster", &cluster, 0), ("one node", &one_node, 1)]
        {
            let key = format!("{{{tag}}}:{}", name.replace(' ', "-"));
            let caller = Limiter::builder(&key, quota())
                .listen(announcements)
                .build(conn.clone())
                .unwrap();
            let other = Limiter::builder(&key, quota()).build(conn.clone()).unwrap();
            let ready = announcements.ready(Duration::from_secs(10)).await;
            assert_eq!(
                ready,
                checks == 0,
                "{flavor} {name}: subscribed to the bucket's channel where it lives, and only there"
            );
            caller.acquire().await.unwrap();
            let PausedCall { grant, sent, start } =
                pause_a_reserved_call(&caller, &other, PAUSE).await;
            let metrics = caller.metrics();
            let at = format!("{flavor} {name}");
            assert_eq!(metrics.pushback.held_by_pause, 1, "{at}: held back");
            assert_eq!(
                metrics.pushback.heard_pauses,
                1 - checks,
                "{at}: heard where subscribed"
            );
            assert_eq!(
                metrics.pushback.pause_checks, checks,
                "{at}: a look only where not subscribed"
            );
            assert_granted_after_the_pause(start, sent, PAUSE, &at);
            assert_eq!(
                metrics.pushback.pause_confirms,
                1 - checks,
                "{at}: what was heard confirmed with the server"
            );
            assert_eq!(
                grant.round_trips, 3,
                "{at}: the take, the confirmation or the look, and the take after"
            );
        }
    });
}
