//! A primary and its replica, for the tests that check what a command propagates.

use redis::Connection;
use throttle_testkit::{Flavor, Server};

use crate::command::query;
use crate::keyspace::{digest, info};
use crate::stats::{calls, repl_offset};

/// A primary (no replication PINGs, so its offset moves only with writes) and a replica with
/// the module, in sync.
pub struct Pair {
    pub primary: Server,
    pub replica: Server,
}

impl Pair {
    pub fn start(flavor: Flavor) -> Pair {
        let primary = Server::builder(flavor)
            .arg("repl-ping-replica-period", "3600")
            .start();
        let replica = Server::builder(flavor).replica_of(&primary).start();
        replica.wait_replica_synced(&primary);
        Pair { primary, replica }
    }

    /// Waits until the replica has everything, then checks it holds exactly the primary's
    /// data (DEBUG DIGEST covers values and expiry times) and has applied only what the
    /// module wrote as SET: none of the module's commands ever ran on it.
    #[track_caller]
    pub fn assert_replica_same(&self, what: &str) {
        let mut con = self.primary.conn();
        let acked: i64 = query(&mut con, redis::cmd("WAIT").arg(1).arg(5000));
        assert_eq!(acked, 1, "{what}: WAIT 1 5000");
        self.replica.wait_replica_synced(&self.primary);
        assert_replica_holds(&mut self.replica.conn(), &digest(&mut con), what);
    }

    /// Runs `act` on the primary and checks it propagated nothing: the primary's replication
    /// offset and the replica's count of applied SETs do not move.
    #[track_caller]
    pub fn assert_replicates_nothing(&self, what: &str, act: impl FnOnce(&mut Connection)) {
        let mut con = self.primary.conn();
        let mut rcon = self.replica.conn();
        self.replica.wait_replica_synced(&self.primary);
        let offset = repl_offset(&mut con);
        let sets = calls(&mut rcon, "set");
        act(&mut con);
        assert_eq!(
            repl_offset(&mut con),
            offset,
            "{what} moved the replication offset: it propagated something"
        );
        // A PING from the primary would move the offset: it is there to check against.
        let _: () = query(&mut con, redis::cmd("SET").arg("sync:probe").arg(1));
        self.replica.wait_replica_synced(&self.primary);
        assert_eq!(
            calls(&mut rcon, "set"),
            sets + 1,
            "{what}: the replica applied a SET other than the probe"
        );
    }
}

/// Checks a replica holds exactly the dataset whose DEBUG DIGEST is `primary_digest` (values
/// and expiry times) and has applied only what the module wrote, as SET: none of the module's
/// commands ever ran on it.
#[track_caller]
pub fn assert_replica_holds(rcon: &mut Connection, primary_digest: &str, what: &str) {
    assert_eq!(
        digest(rcon),
        primary_digest,
        "{what}: the replica's DEBUG DIGEST differs from the primary's"
    );
    let stats = info(rcon, "commandstats");
    assert!(
        stats.contains("cmdstat_set:"),
        "{what}: the replica applied no SET:\n{stats}"
    );
    assert!(
        !stats.to_lowercase().contains("throttle"),
        "{what}: a THROTTLE command ran on the replica itself:\n{stats}"
    );
}
