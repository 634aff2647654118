//! The Redis the shared bucket lives in: a server the user already runs (`--redis-url`), or
//! a private one (`demo_support::redis_server`), killed when this value is dropped. The
//! private server loads the module, except for `--backend script`: then it is started
//! without it, as a managed Redis that refuses `MODULE LOAD` would be.

use demo_support::redis_server::{self, PrivateRedis};
use redis_throttle::redis;

use crate::cli::BackendArg;

/// The script that builds the module and installs the server, for the errors.
const RUN_SH: &str = "client/demo/run.sh";

pub struct RedisTarget {
    pub url: String,
    /// What it is and where, for the report.
    pub description: String,
    /// Whether the server has the module (`THROTTLE.TAKE` answers).
    pub module_loaded: bool,
    /// The private server, killed on drop; `None` for the user's own.
    _server: Option<PrivateRedis>,
}

impl RedisTarget {
    /// Connects to `url`, or starts a private server: Redis 7.0, else the first flavor
    /// whose binary is installed.
    pub fn open(url: Option<String>, backend: BackendArg) -> Result<RedisTarget, String> {
        match url {
            Some(url) => {
                let (version, module_loaded) = probe(&url, backend)?;
                let module = if module_loaded {
                    "module loaded"
                } else {
                    "no module"
                };
                Ok(RedisTarget {
                    description: format!("{version} at {url} (yours), {module}"),
                    module_loaded,
                    url,
                    _server: None,
                })
            }
            None => {
                // The script needs nothing on the server: show it where modules cannot be
                // loaded.
                let private = PrivateRedis::start(None, backend != BackendArg::Script, RUN_SH)?;
                let url = private.url().to_owned();
                let (_, module_loaded) = probe(&url, backend)?;
                Ok(RedisTarget {
                    description: private.description().to_owned(),
                    module_loaded,
                    url,
                    _server: Some(private),
                })
            }
        }
    }
}

/// The server's name and version, and whether THROTTLE.TAKE is there (it must be for
/// `--backend module`).
fn probe(url: &str, backend: BackendArg) -> Result<(String, bool), String> {
    let mut con = redis_server::connect(url)?;
    let version = redis_server::version(&mut con, url)?;
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
    Ok((version, module_loaded))
}
