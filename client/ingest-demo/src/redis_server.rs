//! The private Redis the backlog and the shared bucket live in: started through the test kit
//! on a free loopback port, killed when this value is dropped (and, should the demo be
//! killed outright, by the kernel: the parent-death signal).

use std::path::Path;
use std::time::Duration;

use redis_throttle::redis;
use throttle_testkit::{info_field, Flavor, Server};

pub struct PrivateRedis {
    pub url: String,
    pub description: String,
    _server: Server,
}

const SETPRIV: &str = "/usr/bin/setpriv";

/// Starts `flavor`, or Redis 7.0, else the first supported server installed.
pub fn start(flavor: Option<Flavor>) -> Result<PrivateRedis, String> {
    let module = throttle_testkit::try_module_path().map_err(|why| {
        format!("the module is not built: {why} (client/ingest-demo/run.sh builds it)")
    })?;
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
        let mut builder = Server::builder(flavor);
        if Path::new(SETPRIV).is_file() {
            builder = builder.wrapper(SETPRIV, &["--pdeathsig", "KILL"]);
        }
        match builder.try_start() {
            Ok(server) => {
                let url = server.url();
                let version = version(&url)?;
                return Ok(PrivateRedis {
                    description: format!("private {version} on {url}, module {}", module.display()),
                    url,
                    _server: server,
                });
            }
            Err(why) => failures.push(format!("cannot start a private {flavor} server: {why}")),
        }
    }
    Err(format!(
        "no usable Redis server (client/ingest-demo/run.sh installs Debian's):\n  {}",
        failures.join("\n  ")
    ))
}

fn version(url: &str) -> Result<String, String> {
    let client = redis::Client::open(url).map_err(|e| format!("bad Redis URL {url}: {e}"))?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut con)
        .map_err(|e| format!("INFO on {url}: {e}"))?;
    Ok(
        match (
            info_field(&info, "valkey_version"),
            info_field(&info, "redis_version"),
        ) {
            (Some(v), _) => format!("Valkey {v}"),
            (None, Some(v)) => format!("Redis {v}"),
            (None, None) => "a server".to_owned(),
        },
    )
}
