//! THROTTLE.TAKE's reply shape and values, in RESP2 and RESP3, on every server: a fresh key,
//! the seed scenario in one MULTI/EXEC, denials and inspections that write nothing, options
//! and the limits accepted at their edges.

mod common;

use common::{check_replies, per_server, Flavor, Server};

fn replies_resp2_and_resp3(flavor: Flavor) {
    let server = Server::start(flavor);
    check_replies(&server, "resp2", false);
    check_replies(&server, "resp3", true);
}

per_server!(replies_resp2_and_resp3);
