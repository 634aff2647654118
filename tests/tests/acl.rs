//! Command flags, key positions and ACL rules for THROTTLE.TAKE on every server.

mod common;

use common::{check_flags_and_acl, per_server, Flavor, Server};

fn flags_keys_and_acl(flavor: Flavor) {
    let server = Server::start(flavor);
    check_flags_and_acl(&server);
}

per_server!(flags_keys_and_acl);
