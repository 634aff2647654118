//! The private Redis a demo runs against: started through the test kit on a free loopback
//! port, killed when this value is dropped (and, should the demo be killed outright, by the
//! kernel: the parent-death signal).

use std::path::Path;
use std::time::Duration;

use throttle_testkit::{info_field, Server};

/// The servers a demo can start (the kit's), named here so that the demos reach the kit only
/// through this module.
pub use throttle_testkit::Flavor;

pub struct PrivateRedis {
    url: String,
    description: String,
    _server: Server,
}

const SETPRIV: &str = "/usr/bin/setpriv";
/// Bound on connecting to the server and on each reply.
const TIMEOUT: Duration = Duration::from_secs(5);

impl PrivateRedis {
    /// Starts `flavor`, or else Redis 7.0 (Debian's package), else the first other supported
    /// server that is installed; with the module loaded, or without it (`with_module`: as a
    /// managed Redis that refuses `MODULE LOAD` would be). `run_sh` is the demo's script,
    /// which builds the module and installs the server: the errors name it.
    pub fn start(
        flavor: Option<Flavor>,
        with_module: bool,
        run_sh: &str,
    ) -> Result<PrivateRedis, String> {
        let module =
            if with_module {
                Some(throttle_testkit::try_module_path().map_err(|why| {
                    format!("the module is not built: {why} ({run_sh} builds it)")
                })?)
            } else {
                None
            };
        let candidates: Vec<Flavor> = match flavor {
            Some(flavor) => vec![flavor],
            None => Flavor::ALL.to_vec(),
        };
        let mut failures = Vec::new();
        for flavor in candidates {
            if let Err(why) = flavor.binary() {
                failures.push(why);
                continue;
            }
            let mut builder = Server::builder(flavor).module(with_module);
            // Should the demo itself be killed outright (SIGKILL), the kernel stops the server
            // too: setpriv sets the parent-death signal, and exec keeps it.
            if Path::new(SETPRIV).is_file() {
                builder = builder.wrapper(SETPRIV, &["--pdeathsig", "KILL"]);
            }
            match builder.try_start() {
                Ok(server) => {
                    let url = server.url();
                    let version = server_version(&url)?;
                    let loaded = match &module {
                        Some(path) => format!("module {}", path.display()),
                        None => "started without the module (no --loadmodule)".to_owned(),
                    };
                    return Ok(PrivateRedis {
                        description: format!("private {version} on {url}, {loaded}"),
                        url,
                        _server: server,
                    });
                }
                Err(why) => failures.push(format!("cannot start a private {flavor} server: {why}")),
            }
        }
        Err(format!(
            "no usable Redis server ({run_sh} installs Debian's):\n  {}",
            failures.join("\n  ")
        ))
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// What it is and where: "private Redis 7.0.15 on redis://127.0.0.1:40000, module ...".
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// A connection to `url`, every wait on it bounded.
pub fn connect(url: &str) -> Result<redis::Connection, String> {
    let client = redis::Client::open(url).map_err(|e| format!("bad Redis URL {url}: {e}"))?;
    let con = client
        .get_connection_with_timeout(TIMEOUT)
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let _ = con.set_read_timeout(Some(TIMEOUT));
    let _ = con.set_write_timeout(Some(TIMEOUT));
    Ok(con)
}

/// The server's name and version ("Redis 7.0.15", "Valkey 9.1.0"), from `INFO server`.
pub fn version(con: &mut redis::Connection, url: &str) -> Result<String, String> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(con)
        .map_err(|e| format!("INFO on {url}: {e}"))?;
    let field = |name: &str| info_field(&info, name);
    Ok(match (field("valkey_version"), field("redis_version")) {
        (Some(v), _) => format!("Valkey {v}"),
        (None, Some(v)) => format!("Redis {v}"),
        (None, None) => "a server".to_owned(),
    })
}

/// [`version`] on a connection of its own.
pub fn server_version(url: &str) -> Result<String, String> {
    version(&mut connect(url)?, url)
}
