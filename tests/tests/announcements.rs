//! Pause announcements on every server: a THROTTLE.PAUSE, CUT or SYNC that pauses a bucket, or
//! makes its pause longer, publishes the pause (whole ms), the bucket's state after the call as
//! a ticket and its rate factor on the bucket's shard
//! channel (`throttle:pause:{key}`, or `throttle:pause:` and the key when it has a hash tag);
//! a call that changes no pause publishes nothing. In Redis Cluster the channel is in the
//! bucket's own slot: the node that holds the bucket, and its replica, deliver it.

use redis::Value;
use throttle_e2e::{
    cut, int, keyslot, line, pause, per_server, query, server_time_ns, sync, take_any, Announced,
    Flavor, Server, Subscriber,
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
/// Each announcement carries the bucket's state after the call as a ticket (the pause's end
/// plus the fill less one token: between the server's clock before and after the call) and the
/// rate factor. A key with a hash tag announces on `throttle:pause:` and the key.
fn a_longer_pause_is_announced_and_a_no_op_is_not(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let channel = "throttle:pause:{a}";
    let mut heard = Subscriber::new(server.conn(), channel);
    // Quota 10 10: the bucket fills in 1000 ms, a token costs 100 ms.
    let check = |heard: Announced, pause_ms: u64, factor_bp: u64, (before, after): (i64, i64)| {
        assert_eq!(heard.channel, channel);
        assert_eq!((heard.pause_ms, heard.factor_bp), (pause_ms, factor_bp));
        let earliest = Announced::expected_ticket(whole_ms(before), pause_ms, 1000, 100);
        let latest = Announced::expected_ticket(after, pause_ms, 1000, 100);
        assert!(
            (earliest..=latest).contains(&heard.ticket_us),
            "{heard:?}: the ticket is not the state after a {pause_ms} ms pause made between \
             {before} and {after} µs"
        );
    };
    let mut timed = |call: &mut dyn FnMut(&mut redis::Connection)| {
        let before = server_time_ns(&mut con) / 1000;
        call(&mut con);
        (before, server_time_ns(&mut con) / 1000)
    };

    let first = timed(&mut |con| assert_eq!(pause(con, "a", "10 10 1500"), 1500));
    check(heard.announcement(), 1500, 10_000, first);
    timed(&mut |con| {
        assert!(pause(con, "a", "10 10 1000") > 1000);
        let _ = take_any(con, "a", "10 10");
        assert_eq!(cut(con, "a", "10 10 1000 0.5 30000")[0], 0);
    });
    let longer = timed(&mut |con| assert_eq!(pause(con, "a", "10 10 60000"), 60_000));
    // A shorter pause, a take or a cut of the same episode announced nothing: the next
    // message is the longer pause's.
    check(heard.announcement(), 60_000, 10_000, longer);
    let synced = timed(&mut |con| {
        assert_eq!(cut(con, "b", "10 10 2000 0.5 30000")[0], 1);
        assert_eq!(sync(con, "a", "10 10 0 120000")[0], 1);
    });
    check(heard.announcement(), 120_000, 10_000, synced);

    let tagged = "throttle:pause:{pix}:second";
    let mut heard = Subscriber::new(server.conn(), tagged);
    let before = server_time_ns(&mut con) / 1000;
    assert_eq!(cut(&mut con, "{pix}:second", "10 10 2000 0.5 30000")[0], 1);
    let cut_heard = heard.announcement();
    assert_eq!(
        (
            cut_heard.channel.as_str(),
            cut_heard.pause_ms,
            cut_heard.factor_bp
        ),
        (tagged, 2000, 5000),
        "a cut of a key with a hash tag: its pause and its factor"
    );
    // A token costs more at the cut rate, so the state is short of the full rate's, and still
    // past the pause's end (a token at the cut rate costs less than the fill).
    let after = server_time_ns(&mut con) / 1000;
    assert!(
        (whole_ms(before) + 2_000_000..Announced::expected_ticket(after, 2000, 1000, 100))
            .contains(&cut_heard.ticket_us),
        "{cut_heard:?}"
    );
    // A plain SPUBLISH on the channel is what the subscriber hears next: nothing else came.
    let _: i64 = query(&mut con, redis::cmd("SPUBLISH").arg(tagged).arg("probe"));
    assert_eq!(heard.message()[1], "probe");
}

/// A server time in µs down to its ms: the module's clock on Redis 7.0 has whole ms.
fn whole_ms(us: i64) -> i64 {
    us - us.rem_euclid(1000)
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
        let heard = on_master.announcement();
        assert_eq!(
            (heard.channel.as_str(), heard.pause_ms, heard.factor_bp),
            (channel.as_str(), 5000, 10_000),
            "{key} on its master"
        );
        assert_eq!(
            on_replica.announcement(),
            heard,
            "{key} on its master's replica"
        );
    }
}
