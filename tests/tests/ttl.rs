//! The stored state and the key's TTL on every server: the state is the instant the bucket is
//! full again, the key expires then, and a full bucket is a missing key.

mod common;

use common::{check_ttl, per_server, query, take, Flavor, Server};

fn ttl_is_the_reset(flavor: Flavor) {
    let server = Server::start(flavor);
    check_ttl(&server);
}

/// Every write stores the state as an integer that Redis keeps int-encoded, as small as
/// `SET key <int>` (module/bucket/src/state.rs says so).
///
/// Not asserted: a denial or `TOKENS 0` reads the value with `RedisModule_StringDMA`, which
/// on every server (even in READ mode) replaces an int-encoded value with a raw copy in the
/// keyspace, so until the next grant the bucket is a raw string (MEMORY USAGE 48 -> 80 bytes
/// on Redis 7.0). The module documents this in bucket_key.rs; value, expiry, WATCH and the
/// replication stream are untouched, which the other tests check.
fn state_is_int_encoded_after_every_write(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let encoding = |con: &mut redis::Connection| -> String {
        query(con, redis::cmd("OBJECT").arg("ENCODING").arg("enc"))
    };
    assert_eq!(
        take(&mut con, "enc", "2 0.001 TOKENS 2"),
        [1, 0, 0, 2_000_000]
    );
    assert_eq!(encoding(&mut con), "int", "after a take");
    assert_eq!(take(&mut con, "enc", "2 0.001")[0], 0);
    assert_eq!(take(&mut con, "enc", "2 0.001 TOKENS 0")[0], 1);
    assert_eq!(take(&mut con, "enc", "2 0.001 MAXWAIT 100000000")[0], 1);
    assert_eq!(
        encoding(&mut con),
        "int",
        "after a reservation that followed a denial"
    );
}

per_server!(ttl_is_the_reset, state_is_int_encoded_after_every_write);
