//! Calls that write nothing leave the key as it was, also in memory (its encoding).

use throttle_e2e::{query, Connection};
use throttle_testkit::{Flavor, Server};

/// A call that writes nothing (a denial, `TOKENS 0`, a string that is not a bucket, a denial
/// on a bucket of an earlier release) leaves the key exactly as it was, also in memory: its
/// value and its encoding.
///
/// Reading through the key API (`RedisModule_StringDMA`, even in READ mode) turns an
/// int-encoded string into a raw copy, from 48 to 80 bytes on Redis 7.0; this caught it, and
/// the module reads any value that is not an 8-byte state with GET.
pub fn refusals_keep_the_encoding(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let look = |con: &mut Connection, key: &str| -> (Vec<u8>, String) {
        (
            query(con, redis::cmd("GET").arg(key)),
            query(con, redis::cmd("OBJECT").arg("ENCODING").arg(key)),
        )
    };
    // A bucket in debt for 1000 s, written by THROTTLE.TAKE: 8 bytes, raw.
    throttle_e2e::take(&mut con, "enc:bucket", "2 0.001 TOKENS 2");
    // An integer string that is not a bucket state (negative): int-encoded.
    let _: () = query(&mut con, redis::cmd("SET").arg("enc:negative").arg(-5));
    // An earlier release's bucket, its digits full again in 1000 s: int-encoded.
    let digits = throttle_e2e::server_time_ns(&mut con) + 1_000_000_000_000;
    let _: () = query(&mut con, redis::cmd("SET").arg("enc:digits").arg(digits));
    let keys = ["enc:bucket", "enc:negative", "enc:digits"];
    let before: Vec<_> = keys.iter().map(|key| look(&mut con, key)).collect();
    assert_eq!(before[0].1, "raw", "enc:bucket");
    assert_eq!((before[1].1.as_str(), before[2].1.as_str()), ("int", "int"));

    let denied = throttle_e2e::take(&mut con, "enc:bucket", "2 0.001");
    assert_eq!(denied[0], 0, "{denied:?}");
    let peeked = throttle_e2e::take(&mut con, "enc:bucket", "2 0.001 TOKENS 0");
    assert_eq!(peeked[..2], [1, 0], "{peeked:?}");
    let refused = throttle_e2e::send(
        &mut con,
        &throttle_e2e::line("THROTTLE.TAKE enc:negative 8 9"),
    );
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("not a THROTTLE bucket")),
        "{refused:?}"
    );
    let old_denied = throttle_e2e::take(&mut con, "enc:digits", "1 0.001");
    assert_eq!(old_denied[0], 0, "{old_denied:?}");

    let after: Vec<_> = keys.iter().map(|key| look(&mut con, key)).collect();
    assert_eq!(
        after, before,
        "{flavor}: calls that write nothing changed a key (value, encoding) of {keys:?}"
    );
}
