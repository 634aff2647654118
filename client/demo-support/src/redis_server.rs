//! The private Redis a demo runs against: a server binary (`redis-server` from the PATH, as
//! Debian's package installs it, or the one `--server` names) on a free loopback port, with
//! the module loaded or without it, killed when this value is dropped (and, should the demo
//! be killed outright, by the kernel: the parent-death signal). Nothing of the test kit: the
//! demos' tests check the module's freshness and hand its path over (`THROTTLE_MODULE`).

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis_throttle::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_throttle::redis::{self, Client};

/// This run's id, in every key it uses: this process's id and the wall clock's ms, so that
/// a key an earlier run left (or another run on a shared server) cannot interfere.
pub fn run_id() -> String {
    let ms = (SystemTime::now().duration_since(UNIX_EPOCH)).map_or(0, |d| d.as_millis());
    format!("{}-{ms}", std::process::id())
}

pub struct PrivateRedis {
    url: String,
    description: String,
    process: Child,
}

const SETPRIV: &str = "/usr/bin/setpriv";
/// Bound on connecting to the server and on each reply.
const TIMEOUT: Duration = Duration::from_secs(5);
const MODULE_FILE: &str = "libredis_throttle_module.so";

impl PrivateRedis {
    /// Starts `binary` (default `redis-server`), with the module loaded, or without it
    /// (`with_module`: as a managed Redis that refuses `MODULE LOAD` would be). `run_sh` is
    /// the demo's script, which builds the module and installs the server: the errors name it.
    pub fn start(
        binary: Option<&Path>,
        with_module: bool,
        run_sh: &str,
    ) -> Result<PrivateRedis, String> {
        let binary = binary.unwrap_or(Path::new("redis-server"));
        let module = with_module.then(|| module_path(run_sh)).transpose()?;
        // A port another process takes between our look and the server's bind: try again.
        let mut last = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("no free loopback port: {e}"))?
                .port();
            // Should the demo be killed outright (SIGKILL), the kernel stops the server too:
            // setpriv sets the parent-death signal, and exec keeps it.
            let mut command = if Path::new(SETPRIV).is_file() {
                let mut c = Command::new(SETPRIV);
                c.args(["--pdeathsig", "KILL"]).arg(binary);
                c
            } else {
                Command::new(binary)
            };
            let port_arg = port.to_string();
            command
                .args(["--port", &port_arg, "--bind", "127.0.0.1", "--save", ""])
                .args(["--appendonly", "no", "--loglevel", "warning"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if let Some(module) = &module {
                command.arg("--loadmodule").arg(module);
            }
            let process = command.spawn().map_err(|e| {
                format!(
                    "cannot start {}: {e} ({run_sh} installs Debian's redis-server)",
                    binary.display()
                )
            })?;
            let url = format!("redis://127.0.0.1:{port}");
            let mut server = PrivateRedis {
                description: String::new(),
                url,
                process,
            };
            match server.wait_up() {
                Ok(version) => {
                    let loaded = match &module {
                        Some(path) => format!("module {}", path.display()),
                        None => "started without the module (no --loadmodule)".to_owned(),
                    };
                    server.description = format!("private {version} on {}, {loaded}", server.url);
                    return Ok(server);
                }
                Err(why) => last = why,
            }
        }
        Err(format!(
            "cannot start a private server with {}: {last}",
            binary.display()
        ))
    }

    /// The server's version once it answers; what it printed if it exited.
    fn wait_up(&mut self) -> Result<String, String> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(version) = server_version(&self.url) {
                return Ok(version);
            }
            if let Ok(Some(status)) = self.process.try_wait() {
                let mut printed = String::new();
                if let Some(mut out) = self.process.stdout.take() {
                    let _ = out.read_to_string(&mut printed);
                }
                if let Some(mut err) = self.process.stderr.take() {
                    let _ = err.read_to_string(&mut printed);
                }
                return Err(format!("it exited ({status}): {}", printed.trim()));
            }
            if Instant::now() > deadline {
                return Err(format!("no answer on {} within {TIMEOUT:?}", self.url));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// What it is and where: "private Redis 7.0.15 on redis://127.0.0.1:40000, module ...".
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The module: `$THROTTLE_MODULE` (run.sh and the tests set it), else the one built beside
/// this executable (`target/<profile>/`).
fn module_path(run_sh: &str) -> Result<PathBuf, String> {
    let path = match std::env::var_os("THROTTLE_MODULE").filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .map_err(|e| format!("where am I: {e}"))?
            .with_file_name(MODULE_FILE),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "the module is not built: no {} ({run_sh} builds it, or `cargo build -p \
             redis-throttle-module`)",
            path.display()
        ))
    }
}

/// A connection manager on `url`, for a demo's limiters and queues: every wait on it bounded,
/// two retries.
pub async fn connect_async(url: &str) -> Result<ConnectionManager, String> {
    let client = Client::open(url).map_err(|e| format!("bad Redis URL {url}: {e}"))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT))
        .set_number_of_retries(2);
    tokio::time::timeout(
        TIMEOUT * 2,
        ConnectionManager::new_with_config(client, config),
    )
    .await
    .map_err(|_| format!("no connection to {url} within {:?}", TIMEOUT * 2))?
    .map_err(|e| format!("cannot connect to {url}: {e}"))
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
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
    };
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
