//! The bad-input battery on every server: every malformed call gets an ERR or WRONGTYPE reply
//! that names the problem, and leaves the server answering and every key as it was.

mod common;

use common::{check_bad_input_battery, per_server, Flavor, Server};

fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    check_bad_input_battery(&server);
}

per_server!(bad_input_battery);
