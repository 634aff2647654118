//! Pause announcements on every server: a THROTTLE.PAUSE, CUT or SYNC that pauses a bucket, or
//! makes its pause longer, publishes the pause's length (whole ms) on the bucket's shard
//! channel (`throttle:pause:{key}`, or `throttle:pause:` and the key when it has a hash tag);
//! a call that changes no pause publishes nothing. In Redis Cluster the channel is in the
//! bucket's own slot: the node that holds the bucket, and its replica, deliver it.

use redis::Value;
use throttle_e2e::{
    cut, int, keyslot, line, pause, per_server, query, sync, take_any, Flavor, Server, Subscriber,
};
use throttle_testkit::ReplicatedCluster;

per_server!(
    a_longer_pause_is_announced_and_a_no_op_is_not,
    the_channel_is_in_the_buckets_slot_in_a_cluster,
);

/// One subscriber per channel; each call below either announces (the message is the next
/// one) or not (the next message is the following call's): a first pause, then a shorter
/// one, a take and a cut of the same episode with a shorter pause announce nothing; a
/// longer pause, a cut after the pause and a sync to 0 with a reset announce their pause.
/// A key with a hash tag announces on `throttle:pause:` and the key.
fn a_longer_pause_is_announced_and_a_no_op_is_not(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let channel = "throttle:pause:{a}";
    let mut heard = Subscriber::new(server.conn(), channel);
    let message = |ms: &str| [channel.to_string(), ms.to_string()];

    assert_eq!(pause(&mut con, "a", "10 10 1500"), 1500);
    assert_eq!(heard.message(), message("1500"), "the first pause");
    assert!(pause(&mut con, "a", "10 10 1000") > 1000);
    let _ = take_any(&mut con, "a", "10 10");
    assert_eq!(cut(&mut con, "a", "10 10 1000 0.5 30000")[0], 0);
    assert_eq!(pause(&mut con, "a", "10 10 60000"), 60_000);
    assert_eq!(
        heard.message(),
        message("60000"),
        "a shorter pause, a take or a cut of the same episode announced"
    );
    assert_eq!(cut(&mut con, "b", "10 10 2000 0.5 30000")[0], 1);
    assert_eq!(sync(&mut con, "a", "10 10 0 120000")[0], 1);
    assert_eq!(
        heard.message(),
        message("120000"),
        "a sync to 0 with a reset"
    );

    let tagged = "throttle:pause:{pix}:second";
    let mut heard = Subscriber::new(server.conn(), tagged);
    assert_eq!(cut(&mut con, "{pix}:second", "10 10 2000 0.5 30000")[0], 1);
    assert_eq!(
        heard.message(),
        [tagged.to_string(), "2000".to_string()],
        "a cut of a key with a hash tag"
    );
    // A plain SPUBLISH on the channel is what the subscriber hears next: nothing else came.
    let _: i64 = query(&mut con, redis::cmd("SPUBLISH").arg(tagged).arg("probe"));
    assert_eq!(heard.message()[1], "probe");
}

/// Three masters with a replica each: the pause channel of a key hashes to the key's slot
/// (CLUSTER KEYSLOT), the master that holds the bucket accepts the subscription and delivers
/// the pause, and so does its replica.
fn the_channel_is_in_the_buckets_slot_in_a_cluster(flavor: Flavor) {
    let cluster = ReplicatedCluster::start(flavor, 3, 1);
    let servers = cluster.servers();
    let mut any = servers[0].conn();
    for key in ["quota:pix", "{pix}:second", "a"] {
        let channel = if key.contains('{') {
            format!("throttle:pause:{key}")
        } else {
            format!("throttle:pause:{{{key}}}")
        };
        let slot = keyslot(&mut any, key);
        assert_eq!(keyslot(&mut any, &channel), slot, "{channel} vs {key}");
        let master = cluster.master_of(slot);
        let replica = cluster.replica_of(master);
        let mut on_master = Subscriber::new(servers[master].conn(), &channel);
        let mut on_replica = Subscriber::new(servers[replica].conn(), &channel);
        let mut con = servers[master].conn();
        let paused = int(&query::<Value>(
            &mut con,
            &line(&format!("THROTTLE.PAUSE {key} 10 10 5000")),
        ));
        assert_eq!(paused, 5000);
        let expected = [channel.clone(), "5000".to_string()];
        assert_eq!(on_master.message(), expected, "{key} on its master");
        assert_eq!(
            on_replica.message(),
            expected,
            "{key} on its master's replica"
        );
    }
}
