//! The Redis the shared bucket lives in: a private server, started through the test kit on a
//! free loopback port (killed when this value is dropped), or a server the user already
//! runs. The private server loads the module, except for `--backend script`: then it is
//! started without it, as a managed Redis that refuses `MODULE LOAD` would be.

use std::path::Path;
use std::time::Duration;

use redis_throttle::redis;
use throttle_testkit::{info_field, Flavor, Server};

use crate::cli::BackendArg;

pub struct RedisTarget {
    url: String,
    description: String,
    /// Whether the server has the module (`THROTTLE.TAKE` answers).
    module_loaded: bool,
    /// The private server, killed on drop; `None` for the user's own.
    _server: Option<Server>,
}

impl RedisTarget {
    /// Connects to `url`, or starts a private server: Redis 7.0, else the first flavor
    /// whose binary is installed.
    pub fn open(url: Option<String>, backend: BackendArg) -> Result<RedisTarget, String> {
        match url {
            Some(url) => {
                let probed = probe(&url, backend)?;
                Ok(RedisTarget {
                    description: format!(
                        "{} at {url} (yours), {}",
                        probed.version,
                        module_words(probed.module_loaded)
                    ),
                    module_loaded: probed.module_loaded,
                    url,
                    _server: None,
                })
            }
            None => start_private(backend),
        }
    }

    pub fn module_loaded(&self) -> bool {
        self.module_loaded
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn description(&self) -> &str {
        &self.description
    }
}

fn module_words(loaded: bool) -> &'static str {
    if loaded {
        "module loaded"
    } else {
        "no module"
    }
}

fn start_private(backend: BackendArg) -> Result<RedisTarget, String> {
    // The script needs nothing on the server: show it where modules cannot be loaded.
    let with_module = backend != BackendArg::Script;
    let module = if with_module {
        Some(throttle_testkit::try_module_path().map_err(|why| {
            format!("the module is not built: {why} (client/demo/run.sh builds it)")
        })?)
    } else {
        None
    };
    // Redis 7.0 first (Debian's package); any other supported server that is installed
    // will do, e.g. when Debian's is not 7.0.
    let mut failures = Vec::new();
    for flavor in Flavor::ALL {
        if let Err(why) = flavor.binary() {
            if flavor == Flavor::Redis70 {
                failures.push(why);
            }
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
                let probed = probe(&url, backend)?;
                let loaded = match &module {
                    Some(path) => format!("module {}", path.display()),
                    None => "started without the module (no --loadmodule)".to_owned(),
                };
                return Ok(RedisTarget {
                    description: format!("private {} on {url}, {loaded}", probed.version),
                    module_loaded: probed.module_loaded,
                    url,
                    _server: Some(server),
                });
            }
            Err(why) => failures.push(format!("cannot start a private {flavor} server: {why}")),
        }
    }
    Err(format!(
        "no usable Redis server (client/demo/run.sh installs Debian's):\n  {}",
        failures.join("\n  ")
    ))
}

const SETPRIV: &str = "/usr/bin/setpriv";

struct Probed {
    version: String,
    module_loaded: bool,
}

/// The server's name and version, and whether THROTTLE.TAKE is there (it must be for
/// `--backend module`).
fn probe(url: &str, backend: BackendArg) -> Result<Probed, String> {
    let client = redis::Client::open(url).map_err(|e| format!("bad Redis URL {url}: {e}"))?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let timeout = Some(Duration::from_secs(5));
    let _ = con.set_read_timeout(timeout);
    let _ = con.set_write_timeout(timeout);
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut con)
        .map_err(|e| format!("INFO on {url}: {e}"))?;
    let field = |name: &str| info_field(&info, name);
    let version = match (field("valkey_version"), field("redis_version")) {
        (Some(v), _) => format!("Valkey {v}"),
        (None, Some(v)) => format!("Redis {v}"),
        (None, None) => "a server".to_owned(),
    };
    // TOKENS 0 only inspects: it writes nothing.
    let probe: redis::RedisResult<redis::Value> = redis::cmd("THROTTLE.TAKE")
        .arg("pix-demo:probe")
        .arg(1)
        .arg(1)
        .arg("TOKENS")
        .arg(0)
        .query(&mut con);
    let module_loaded = match probe {
        Ok(_) => true,
        Err(e) if e.to_string().to_lowercase().contains("unknown command") => false,
        Err(e) => return Err(format!("THROTTLE.TAKE on {url}: {e}")),
    };
    if !module_loaded && backend == BackendArg::Module {
        return Err(format!(
            "{version} at {url} does not have the redis-throttle module: start it with \
             --loadmodule target/release/libredis_throttle_module.so (or MODULE LOAD it), use \
             --backend script (or auto), or leave out --redis-url to use a private server"
        ));
    }
    Ok(Probed {
        version,
        module_loaded,
    })
}
