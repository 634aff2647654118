//! The command line: what `throttle --help` shows.

use clap::{Parser, Subcommand, ValueEnum};

use crate::args::{Duration, QuotaArg};

/// The operator's tool for redis-throttle: the quotas' state in Redis and the fleet's counters,
/// the incident verbs, and what a managed Redis needs (the function library, the ACL lines).
#[derive(Debug, Parser)]
#[command(name = "throttle", version)]
pub(crate) struct Cli {
    /// The Redis server: redis://host:port, redis://user:password@host:port/db or
    /// unix:///path/to/socket (no TLS in this build).
    #[arg(
        long,
        short = 'u',
        env = "THROTTLE_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true
    )]
    pub(crate) url: String,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// A table of the quotas: capacity, rate, tokens now, pause left, cut factor, time to
    /// full, and where processes report their counters, the fleet's grants/s, waits and 429s.
    ///
    /// The quotas are the keys named in the processes' reports (`throttle:report:*`, written
    /// by `FleetReport`), which also carry each quota's capacity and rate. Keys matching PATTERN
    /// are added only with --quota (the server does not store a bucket's quota, and PEEK needs
    /// it): keys without a report are then peeked with that quota, and those that are not
    /// buckets are skipped. A full bucket has no key (it expires when full), so PATTERN finds
    /// only the buckets that are not full. Without PATTERN, only the reported keys are shown.
    ///
    /// The cut's recovery time is not shown: THROTTLE.PEEK does not reply it (`cut` does).
    Status {
        /// Also the buckets whose keys match this SCAN pattern (e.g. 'quota:*'); needs --quota
        /// for the keys that no process reports.
        pattern: Option<String>,
        /// CAPACITY/RATE (e.g. 10/5 or 100/0.5) of the buckets found by PATTERN alone.
        #[arg(long)]
        quota: Option<QuotaArg>,
        /// One JSON object per quota, in an array, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// The `status` table, cleared and drawn again every period (Ctrl-C stops it).
    Watch {
        /// As for `status`: also the buckets whose keys match this SCAN pattern.
        pattern: Option<String>,
        /// As for `status`: CAPACITY/RATE of the buckets found by PATTERN alone.
        #[arg(long)]
        quota: Option<QuotaArg>,
        /// How often: 1s, 500ms (at least 100ms).
        #[arg(long, default_value = "1s")]
        every: Duration,
        /// Stop after drawing N tables.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
    },
    /// A page on loopback: one row per quota, as `status` shows it, with small charts of the
    /// last minutes (tokens, wait p99, 429s, the pause and cut bands), updated every second.
    ///
    /// Serves `/` (the page: inline script and SVG, nothing fetched from elsewhere),
    /// `/status.json` (the rows of `status --json`) and `/history.json` (the samples and the
    /// charts). It samples every second and keeps the last 300 samples of at most 100 quotas,
    /// in memory only. Ctrl-C stops it.
    Dashboard {
        /// As for `status`: also the buckets whose keys match this SCAN pattern.
        pattern: Option<String>,
        /// As for `status`: CAPACITY/RATE of the buckets found by PATTERN alone.
        #[arg(long)]
        quota: Option<QuotaArg>,
        /// IP:PORT to serve on; a loopback address unless --public (port 0: any free port,
        /// printed).
        #[arg(long, default_value = "127.0.0.1:9911")]
        listen: std::net::SocketAddr,
        /// Serve on a non-loopback address: the page has no login, and shows every quota's key
        /// and state to whoever reaches it.
        #[arg(long)]
        public: bool,
    },
    /// The supplier said 429: stop the whole fleet on KEY for DURATION (THROTTLE.PAUSE).
    Pause {
        /// The bucket's key.
        key: String,
        /// How long: 2s, 500ms, 1.5s, 1m.
        duration: Duration,
        /// CAPACITY/RATE of the bucket; default: the quota a process reports for KEY.
        #[arg(long)]
        quota: Option<QuotaArg>,
        /// Pause even when it is at least as long as the longest wait (`max_wait`) of a process
        /// that reports KEY: that process's calls fail with DeadlineExceeded meanwhile.
        #[arg(long)]
        force: bool,
    },
    /// The supplier is congested: multiply KEY's rate by FACTOR, recovering linearly over FOR
    /// (THROTTLE.CUT); once per episode.
    Cut {
        /// The bucket's key.
        key: String,
        /// What the rate is multiplied by: 0.01 to 1 (e.g. 0.5).
        factor: String,
        /// How long the rate takes to climb back: 60s, 5m.
        #[arg(value_name = "FOR")]
        recovery: Duration,
        /// The pause that comes with the cut (THROTTLE.CUT needs one of at least 1 ms); like
        /// every pause, it leaves the fleet one token to resume from.
        #[arg(long, default_value = "1ms")]
        pause: Duration,
        /// CAPACITY/RATE of the bucket; default: the quota a process reports for KEY.
        #[arg(long)]
        quota: Option<QuotaArg>,
        /// Cut even when its pause is at least as long as the longest wait (`max_wait`) of a
        /// process that reports KEY: that process's calls fail with DeadlineExceeded meanwhile.
        #[arg(long)]
        force: bool,
    },
    /// The supplier said how much is left: lower KEY to hold at most REMAINING tokens, never
    /// raise it; with REMAINING 0, pause the fleet until RESET (THROTTLE.SYNC).
    Sync {
        /// The bucket's key.
        key: String,
        /// Tokens the supplier says are left.
        remaining: u64,
        /// When the supplier's quota resets: 30s, 0ms.
        reset: Duration,
        /// CAPACITY/RATE of the bucket; default: the quota a process reports for KEY.
        #[arg(long)]
        quota: Option<QuotaArg>,
    },
    /// End KEY's pause and cut now, keeping its tokens and the slots held (THROTTLE.RESUME);
    /// DEL would refill the bucket and drop its slot table.
    Resume {
        /// The bucket's key.
        key: String,
        /// CAPACITY/RATE of the bucket; default: the quota a process reports for KEY.
        #[arg(long)]
        quota: Option<QuotaArg>,
    },
    /// Keep QUOTA (CAPACITY/RATE) for KEY at the server: every process on it takes at that quota
    /// from its next call, whatever quota its code sends, until `quota KEY --clear`
    /// (THROTTLE.QUOTA). The bucket's state is kept; the key keeps no TTL meanwhile.
    Quota {
        /// The bucket's key.
        key: String,
        /// CAPACITY/RATE to keep, like 20/20 (burst 20, 20 per second); with --clear, the
        /// callers' own (default: the quota a process reports for KEY).
        quota: Option<QuotaArg>,
        /// Give KEY back to its callers' quotas.
        #[arg(long)]
        clear: bool,
    },
    /// On each node (the server given, or each primary of its cluster, from CLUSTER NODES):
    /// whether the THROTTLE module is loaded and which build (MODULE LIST's `ver`), and whether
    /// the `throttle` function library is loaded and which version. One line per node; exits 1
    /// when a node has neither, or could not be read.
    Check,
    /// FUNCTION LOAD REPLACE of this client's function library (for a server without the
    /// module), printing the library's version before and after.
    LoadLibrary,
    /// The ACL lines (see the trust model in the docs) for a user of the module, the function library or
    /// the script.
    Acl {
        /// Which backend the users call.
        backend: AclBackend,
        /// The users' key pattern, in place of the documented quota:*; their channel patterns
        /// are made from it (their keys' pause channels alone).
        #[arg(long, default_value = "quota:*")]
        keys: String,
    },
}

/// The backends whose ACL lines `acl` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AclBackend {
    /// The THROTTLE module's commands.
    Module,
    /// The function library (FCALL), with the administrator who loads it.
    Library,
    /// The script (EVALSHA).
    Script,
}

impl Command {
    /// The one key a verb acts on (`pause`, `cut`, `sync`, `resume`, `quota`), which on a cluster names
    /// the node to send it to.
    pub(crate) fn key(&self) -> Option<&str> {
        match self {
            Command::Pause { key, .. }
            | Command::Cut { key, .. }
            | Command::Sync { key, .. }
            | Command::Resume { key, .. }
            | Command::Quota { key, .. } => Some(key),
            _ => None,
        }
    }
}
