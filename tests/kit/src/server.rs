//! Starting, stopping and restarting one server.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::flavor::Flavor;
use crate::info::info_field;
use crate::module::try_module_path;
use crate::port::free_port;
use crate::process::Process;
use crate::wait::poll;

/// Deadline for a server to answer PING with its data loaded.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline for a graceful stop before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline for a replica to catch up (a full sync included).
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);
/// Read/write timeout of [`Server::conn`]: a hung server fails the test instead of hanging it.
const CONN_TIMEOUT: Duration = Duration::from_secs(5);
/// The server's log file, and where its stdout/stderr go.
const OUTPUT_FILES: [&str; 2] = ["server.log", "server.out"];
/// Tries with a fresh port when another process took ours before the server bound it.
const BIND_TRIES: usize = 5;

/// Configures a server before it starts; from [`Server::builder`].
#[derive(Debug, Clone)]
pub struct ServerBuilder {
    flavor: Flavor,
    module: bool,
    unix_socket: bool,
    primary_port: Option<u16>,
    args: Vec<(String, String)>,
    wrapper: Option<(String, Vec<String>)>,
    env: Vec<(String, String)>,
}

impl ServerBuilder {
    /// Load the module (`--loadmodule`, see [`module_path`](crate::module_path)). Default: true.
    pub fn module(mut self, yes: bool) -> Self {
        self.module = yes;
        self
    }

    /// Extra config, passed as `--key value`; replaces the kit's default for that key
    /// (`save ""`, `appendonly no`, `repl-diskless-sync-delay 0`, ...). A value of several
    /// words becomes several arguments, as in `arg("save", "60 1")`.
    pub fn arg(mut self, key: &str, value: &str) -> Self {
        self.args.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Listen on a unix socket in the data dir instead of TCP (`port` is then 0).
    pub fn unix_socket(mut self, yes: bool) -> Self {
        self.unix_socket = yes;
        self
    }

    /// Start as a replica of `primary` (which must listen on TCP).
    pub fn replica_of(mut self, primary: &Server) -> Self {
        assert!(
            primary.socket.is_none(),
            "a replica needs a TCP primary; {} listens on a unix socket",
            primary.url()
        );
        self.primary_port = Some(primary.port);
        self
    }

    /// Run the server under `program args... <server> <config...>`, e.g.
    /// `wrapper("setpriv", &["--pdeathsig", "KILL"])`. For a fake clock preload
    /// [`libfaketime`](crate::libfaketime) with [`env`](Self::env) instead of wrapping in the
    /// `faketime` program, whose semaphores leak when it is killed.
    pub fn wrapper(mut self, program: &str, args: &[&str]) -> Self {
        let args = args.iter().map(|a| (*a).to_owned()).collect();
        self.wrapper = Some((program.to_owned(), args));
        self
    }

    /// An environment variable for the server (and its wrapper).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Starts the server and waits until it answers. Panics with [`StartError`]'s message
    /// (the server's log included) if it cannot be found or does not come up in time.
    #[track_caller]
    pub fn start(self) -> Server {
        match self.try_start() {
            Ok(server) => server,
            Err(error) => panic!("{error}"),
        }
    }

    /// Starts the server and waits until it answers; if it cannot, says why and what to do.
    /// Nothing is left running on an error.
    pub fn try_start(self) -> Result<Server, StartError> {
        let binary = self.flavor.binary().map_err(StartError::NoBinary)?;
        let module = if self.module {
            Some(try_module_path().map_err(StartError::NoModule)?)
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("throttle-{}-", self.flavor.name()))
            .tempdir()
            .map_err(|e| StartError::NoDataDir(e.to_string()))?;
        let socket = self.unix_socket.then(|| dir.path().join("server.sock"));
        let mut server = Server {
            flavor: self.flavor,
            binary,
            module,
            settings: self,
            dir,
            port: 0,
            socket,
            process: None,
            log_shown: false,
        };
        let tries = if server.socket.is_some() {
            1
        } else {
            BIND_TRIES
        };
        for attempt in 1..=tries {
            if server.socket.is_none() {
                server.port = free_port();
            }
            match server.launch() {
                Ok(()) => return Ok(server),
                Err(failure) if failure.port_taken && attempt < tries => continue,
                // Dropping the server on return kills whatever is left of it.
                Err(failure) => return Err(server.launch_error(failure)),
            }
        }
        unreachable!("the last attempt returns")
    }
}

/// Why a server did not start. The message says what went wrong and what to do about it.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The server binary is not installed, or an override does not point at one.
    NoBinary(String),
    /// The module is not built, or is older than its sources.
    NoModule(String),
    /// No temporary data directory could be made.
    NoDataDir(String),
    /// The server was launched but did not come up: it exited, hung, or is not the server
    /// it should be.
    Launch {
        flavor: Flavor,
        url: String,
        reason: String,
        /// The server's log and whatever it printed, read before it was removed.
        log: String,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NoBinary(how) | StartError::NoModule(how) => f.write_str(how),
            StartError::NoDataDir(why) => write!(
                f,
                "cannot create a temporary data dir ({why}): check that $TMPDIR (or /tmp) \
                 exists and is writable"
            ),
            StartError::Launch {
                flavor,
                url,
                reason,
                log,
            } => write!(
                f,
                "{flavor} server {url} did not start: {reason}; its log below says why\n\
                 --- server log ---\n{log}"
            ),
        }
    }
}

impl std::error::Error for StartError {}

/// Why a launch failed.
struct Failure {
    message: String,
    /// The server exited because its port was taken: worth another try with a new port.
    port_taken: bool,
}

/// A running (or stopped) server with its own port and data dir. Dropping it kills the
/// server; if the test is panicking, its log goes to stderr first.
pub struct Server {
    flavor: Flavor,
    binary: PathBuf,
    module: Option<PathBuf>,
    settings: ServerBuilder,
    dir: TempDir,
    port: u16,
    socket: Option<PathBuf>,
    process: Option<Process>,
    /// A start or restart panicked with the log already in its message.
    log_shown: bool,
}

impl Server {
    /// The usual server: module loaded, TCP on a free loopback port, its own temp dir.
    /// Panics if it does not start; [`Server::try_start`] says why instead.
    #[track_caller]
    pub fn start(flavor: Flavor) -> Server {
        Server::builder(flavor).start()
    }

    /// [`Server::start`], with what went wrong as an error.
    pub fn try_start(flavor: Flavor) -> Result<Server, StartError> {
        Server::builder(flavor).try_start()
    }

    pub fn builder(flavor: Flavor) -> ServerBuilder {
        ServerBuilder {
            flavor,
            module: true,
            unix_socket: false,
            primary_port: None,
            args: Vec::new(),
            wrapper: None,
            env: Vec::new(),
        }
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The TCP port; 0 for a unix-socket server.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT` or `redis+unix:///path/to/server.sock`.
    pub fn url(&self) -> String {
        match &self.socket {
            Some(path) => format!("redis+unix://{}", path.display()),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    /// The data dir: `dir` in the server's config, where the RDB and AOF files live.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A new synchronous connection, with read and write timeouts of a few seconds.
    pub fn conn(&self) -> redis::Connection {
        self.try_conn(CONN_TIMEOUT).unwrap_or_else(|e| {
            panic!(
                "connect to {} ({}): {e}\n{}",
                self.url(),
                self.flavor,
                self.log()
            )
        })
    }

    /// The server's log so far, then anything it printed to stdout/stderr (config errors
    /// are printed there, before the log file is opened).
    pub fn log(&self) -> String {
        let read = |name: &str| {
            std::fs::read(self.dir().join(name))
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default()
        };
        let mut log = read("server.log");
        let output = read("server.out");
        if !output.trim().is_empty() {
            log.push_str("--- stdout/stderr ---\n");
            log.push_str(&output);
        }
        log
    }

    /// Kills the server with SIGKILL (wrapper and all) and waits until it is gone.
    pub fn kill(&mut self) {
        self.process = None; // Process::drop kills and reaps
    }

    /// Stops the server: `SHUTDOWN NOSAVE NOW` (or SIGTERM if that cannot be sent), a
    /// bounded wait, then SIGKILL. NOSAVE: a test that wants an RDB file says `SAVE` itself.
    pub fn stop(&mut self) {
        let Some(mut process) = self.process.take() else {
            return;
        };
        if process.exited().is_none() {
            let refused = match self.try_conn(Duration::from_secs(1)) {
                Ok(mut con) => {
                    let reply: redis::RedisResult<()> = redis::cmd("SHUTDOWN")
                        .arg("NOSAVE")
                        .arg("NOW")
                        .query(&mut con);
                    // A server that shuts down closes the connection instead of replying.
                    reply.is_err_and(|e| !e.is_io_error() && !e.is_connection_dropped())
                }
                Err(_) => true,
            };
            if refused {
                process.signal(libc::SIGTERM);
            }
            process.wait_exit(STOP_TIMEOUT);
        }
        drop(process); // SIGKILL for whatever is left
    }

    /// Starts the server again with the same port, dir and config, and waits until it has
    /// loaded its data. A server still running is stopped first.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(failure) = self.launch() {
            self.fail(&failure);
        }
    }

    /// Waits until this replica's link to `primary` is up and it has applied everything
    /// the primary had written when the call began.
    pub fn wait_replica_synced(&self, primary: &Server) {
        let target = info_field(&primary.info("replication"), "master_repl_offset")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{} reports no master_repl_offset", primary.url()));
        let primary_port = primary.port.to_string();
        let synced = poll(SYNC_TIMEOUT, || {
            let info = self.info("replication");
            let up = info_field(&info, "master_link_status") == Some("up")
                && info_field(&info, "master_port") == Some(primary_port.as_str());
            let offset = info_field(&info, "slave_repl_offset").and_then(|v| v.parse::<u64>().ok());
            (up && offset.is_some_and(|o| o >= target)).then_some(())
        });
        if synced.is_none() {
            panic!(
                "replica {} did not reach offset {target} of primary {} within {SYNC_TIMEOUT:?}\n\
                 --- replica INFO replication ---\n{}\n--- primary log ---\n{}\n--- replica log ---\n{}",
                self.url(),
                primary.url(),
                self.info("replication"),
                primary.log(),
                self.log()
            );
        }
    }

    /// `INFO section`, as text.
    fn info(&self, section: &str) -> String {
        let mut con = self.conn();
        redis::cmd("INFO")
            .arg(section)
            .query(&mut con)
            .unwrap_or_else(|e| panic!("INFO {section} on {}: {e}", self.url()))
    }

    fn try_conn(&self, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        let con = redis::Client::open(self.url())?.get_connection_with_timeout(timeout)?;
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        Ok(con)
    }

    /// Spawns the server on `self.port` (or the socket) and waits until it is ready.
    fn launch(&mut self) -> Result<(), Failure> {
        let failure = |message: String| Failure {
            message,
            port_taken: false,
        };
        // stdout/stderr are appended, so a restart keeps what the earlier runs printed.
        let output = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir().join("server.out"))
            .map_err(|e| failure(format!("open server.out: {e}")))?;
        let log_start = self.output_len();
        let mut process = Process::spawn(self.command(output))
            .map_err(|e| failure(format!("spawn {}: {e}", self.binary.display())))?;

        let ready = poll(READY_TIMEOUT, || {
            if process.exited().is_some() {
                return Some(false);
            }
            self.is_ready().then_some(true)
        });
        match ready {
            Some(true) => {}
            Some(false) => {
                let status = process.exited().expect("it exited");
                let new_output = self.output_since(log_start);
                return Err(Failure {
                    message: format!("the server exited while starting ({status})"),
                    port_taken: self.socket.is_none()
                        && new_output.contains("Address already in use"),
                });
            }
            None => {
                return Err(failure(format!(
                    "the server did not get ready within {READY_TIMEOUT:?} (hung, or the \
                     machine is too busy)"
                )))
            }
        }

        // Another test's server may have bound our port first and answered that PING.
        let our_dir = self
            .dir()
            .canonicalize()
            .unwrap_or_else(|_| self.dir().to_path_buf());
        let mut con = self.conn();
        let dir: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("dir")
            .query(&mut con)
            .unwrap_or_default();
        if dir.get(1).map(PathBuf::from) != Some(our_dir) {
            return Err(Failure {
                message: format!(
                    "{} is answered by another server (dir {:?})",
                    self.url(),
                    dir.get(1)
                ),
                port_taken: true,
            });
        }

        let info = self.info("server");
        let (field, prefix) = self.flavor.version_field();
        let version = info_field(&info, field).unwrap_or("(none)");
        if !version.starts_with(prefix) {
            return Err(failure(format!(
                "{} reports {field}:{version}, but {} needs {prefix}x (check {})",
                self.binary.display(),
                self.flavor,
                self.flavor.env_var()
            )));
        }
        if let Some(pid) = info_field(&info, "process_id").and_then(|p| p.parse().ok()) {
            process.set_server_pid(pid);
        }
        self.process = Some(process);
        Ok(())
    }

    /// PING answers PONG and no dataset is being loaded (PING is refused with LOADING
    /// during a load, but a replica's async load still answers it).
    fn is_ready(&self) -> bool {
        let Ok(mut con) = self.try_conn(Duration::from_millis(500)) else {
            return false;
        };
        let pong: Option<String> = redis::cmd("PING").query(&mut con).ok();
        let persistence: Option<String> =
            redis::cmd("INFO").arg("persistence").query(&mut con).ok();
        pong.as_deref() == Some("PONG")
            && persistence.is_some_and(|info| {
                info_field(&info, "loading") == Some("0")
                    && info_field(&info, "async_loading").is_none_or(|v| v == "0")
            })
    }

    fn command(&self, output: File) -> Command {
        let settings = &self.settings;
        let mut command = match &settings.wrapper {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&self.binary);
                c
            }
            None => Command::new(&self.binary),
        };
        for (key, words) in self.config() {
            command.arg(format!("--{key}")).args(words);
        }
        command
            .envs(settings.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("duplicate the server.out handle"))
            .stderr(output);
        command
    }

    /// The config as `--key word...`: the kit's defaults, minus any key the test set, then
    /// the test's own, split into words (`save 60 1` takes two; `save ""` one empty word).
    fn config(&self) -> Vec<(String, Vec<String>)> {
        let dir = self.dir().display().to_string();
        let mut config: Vec<(&str, Vec<String>)> = match &self.socket {
            Some(path) => vec![
                ("port", vec!["0".into()]),
                ("unixsocket", vec![path.display().to_string()]),
                ("unixsocketperm", vec!["700".into()]),
            ],
            None => vec![
                ("port", vec![self.port.to_string()]),
                ("bind", vec!["127.0.0.1".into()]),
            ],
        };
        config.extend([
            ("logfile", vec![format!("{dir}/server.log")]),
            ("dir", vec![dir]),
            ("daemonize", vec!["no".into()]),
            ("protected-mode", vec!["no".into()]),
            ("enable-debug-command", vec!["yes".into()]),
            ("enable-module-command", vec!["yes".into()]),
            ("save", vec![String::new()]),
            ("appendonly", vec!["no".into()]),
            // Redis 7+ waits 5 s for more replicas before a diskless full sync.
            ("repl-diskless-sync-delay", vec!["0".into()]),
        ]);
        if let Some(port) = self.settings.primary_port {
            config.push(("replicaof", vec!["127.0.0.1".into(), port.to_string()]));
        }
        if let Some(module) = &self.module {
            config.push(("loadmodule", vec![module.display().to_string()]));
        }
        let user = &self.settings.args;
        config.retain(|(key, _)| !user.iter().any(|(k, _)| k == key));
        let mut config: Vec<(String, Vec<String>)> =
            config.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        for (key, value) in user {
            let words: Vec<String> = value.split_whitespace().map(str::to_owned).collect();
            let words = if words.is_empty() {
                vec![String::new()]
            } else {
                words
            };
            config.push((key.clone(), words));
        }
        config
    }

    /// Sizes of server.log and server.out, to read only what a launch adds.
    fn output_len(&self) -> [u64; 2] {
        OUTPUT_FILES.map(|name| self.dir().join(name).metadata().map_or(0, |m| m.len()))
    }

    fn output_since(&self, start: [u64; 2]) -> String {
        let mut text = String::new();
        for (name, offset) in OUTPUT_FILES.iter().zip(start) {
            let bytes = std::fs::read(self.dir().join(name)).unwrap_or_default();
            let new = bytes.get(offset as usize..).unwrap_or_default();
            text.push_str(&String::from_utf8_lossy(new));
        }
        text
    }

    fn fail(&mut self, failure: &Failure) -> ! {
        self.log_shown = true;
        panic!(
            "{} server {} (dir {}): {}\n--- server log ---\n{}",
            self.flavor,
            self.url(),
            self.dir().display(),
            failure.message,
            self.log()
        )
    }

    fn launch_error(&self, failure: Failure) -> StartError {
        StartError::Launch {
            flavor: self.flavor,
            url: self.url(),
            reason: failure.message,
            log: self.log(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.log_shown {
            eprintln!(
                "--- {} server {} log ({}) ---\n{}--- end of {} server log ---",
                self.flavor,
                self.url(),
                self.dir().display(),
                self.log(),
                self.flavor
            );
        }
        self.kill();
    }
}
