//! What `COMMAND DOCS`, `COMMAND INFO` and `COMMAND GETKEYS` say about each command: summary,
//! complexity, arity, arguments and key specs, given to the server with
//! `RedisModule_SetCommandInfo` (Redis 7.0+, every Valkey).
//!
//! The descriptions are plain Rust statics; `set` turns one into the C structs Redis reads
//! (arrays ended by a zeroed entry), which only need to live during the call: the server
//! copies every string and array.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

/// One command as the server describes it.
pub struct Doc {
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// Counting the command name; negative means "at least". The server checks it before the
    /// command runs, also when a call is queued in MULTI (so EXEC aborts instead of running
    /// a transaction with a broken call in it).
    pub arity: c_int,
    pub keys: Keys,
    pub args: &'static [Arg],
}

/// Where the keys are, and what the command does with them.
pub enum Keys {
    /// Exactly one key, argv[1].
    One(Access),
    /// argv[1] is numkeys and the keys follow it: `numkeys key [key ...]`.
    Counted(Access),
}

#[derive(Clone, Copy)]
pub enum Access {
    /// Reads the bucket, may write it, and the reply depends on it (like INCR).
    ReadWrite,
    /// Only reads the bucket (read-only replicas, EVAL_RO, `no-writes` functions, OOM).
    ReadOnly,
}

/// One argument, as `COMMAND DOCS` lists it.
pub struct Arg {
    pub name: &'static CStr,
    pub kind: Kind,
    /// The keyword before the value (`TOKENS n`), or the whole argument for a pure token.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
}

pub enum Kind {
    Key,
    Integer,
    Double,
    PureToken,
    /// A group that repeats or is optional as a whole.
    Block(&'static [Arg]),
}

impl Arg {
    pub const fn new(name: &'static CStr, kind: Kind) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
        }
    }

    /// `[TOKEN value]` or, for a pure token, `[TOKEN]`.
    pub const fn option(name: &'static CStr, token: &'static CStr, kind: Kind) -> Arg {
        Arg {
            token: Some(token),
            optional: true,
            ..Arg::new(name, kind)
        }
    }

    pub const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }
}

const KEY: Arg = Arg::new(c"key", Kind::Key);
const CAPACITY: Arg = Arg::new(c"capacity", Kind::Integer);
const RATE: Arg = Arg::new(c"rate", Kind::Double);
const MAXWAIT: Arg = Arg::option(c"maxwait", c"MAXWAIT", Kind::Integer);

pub static TAKE: Doc = Doc {
    summary: c"Takes tokens from a token bucket (capacity, refill rate in tokens per second). \
        Replies [granted, remaining, wait_ms, reset_ms] (and the ticket with TICKET). \
        With MAXWAIT, reserves tokens that will be there within that many ms.",
    complexity: c"O(1)",
    arity: -4,
    keys: Keys::One(Access::ReadWrite),
    args: &[
        KEY,
        CAPACITY,
        RATE,
        Arg::option(c"tokens", c"TOKENS", Kind::Integer),
        MAXWAIT,
        Arg::option(c"ticket", c"TICKET", Kind::PureToken),
    ],
};

pub static MTAKE: Doc = Doc {
    summary: c"Takes tokens from several buckets at once, from all or from none \
        (one capacity, rate and tokens triple per key, in key order). \
        Replies [granted, wait_ms, then remaining and reset_ms per bucket].",
    complexity: c"O(N) where N is the number of keys",
    arity: -6,
    keys: Keys::Counted(Access::ReadWrite),
    args: &[
        Arg::new(c"numkeys", Kind::Integer),
        KEY.multiple(),
        Arg::new(
            c"quota",
            Kind::Block(&[CAPACITY, RATE, Arg::new(c"tokens", Kind::Integer)]),
        )
        .multiple(),
        MAXWAIT,
    ],
};

pub static PAUSE: Doc = Doc {
    summary: c"Pauses a bucket: its next token is there ms from now, then it refills from one \
        token. Never shortens a longer pause or a debt. Replies the ms until the next token.",
    complexity: c"O(1)",
    arity: 5,
    keys: Keys::One(Access::ReadWrite),
    args: &[KEY, CAPACITY, RATE, Arg::new(c"ms", Kind::Integer)],
};

pub static GIVE: Doc = Doc {
    summary: c"Gives back the tokens of a take made with TICKET, less whatever was taken after \
        it, never beyond a full bucket. Replies the tokens given back.",
    complexity: c"O(1)",
    arity: 6,
    keys: Keys::One(Access::ReadWrite),
    args: &[
        KEY,
        CAPACITY,
        RATE,
        Arg::new(c"n", Kind::Integer),
        Arg::new(c"ticket", Kind::Integer),
    ],
};

pub static PEEK: Doc = Doc {
    summary: c"Reads a bucket without taking or writing anything. \
        Replies [1, remaining, 0, reset_ms], as THROTTLE.TAKE ... TOKENS 0.",
    complexity: c"O(1)",
    arity: 4,
    keys: Keys::One(Access::ReadOnly),
    args: &[KEY, CAPACITY, RATE],
};

/// The version of the three structs, by their sizes in this build: what the C macro
/// `REDISMODULE_COMMAND_INFO_VERSION` points at. The server walks the arrays with these sizes,
/// so a server that knows fewer fields than these bindings still reads the ones it knows.
static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// Gives `command` its docs. Err says why not (the caller logs it and carries on).
pub fn set(command: *mut raw::RedisModuleCommand, doc: &Doc) -> Result<(), &'static str> {
    // SAFETY: written once by RedisModule_Init before OnLoad, only read afterwards.
    let Some(set_command_info) = (unsafe { raw::RedisModule_SetCommandInfo }) else {
        return Err("this server has no RedisModule_SetCommandInfo (Redis before 7.0)");
    };
    if command.is_null() {
        return Err("the command was not found");
    }
    let mut key_specs = [key_spec(&doc.keys), zeroed_key_spec()];
    let mut args = Args::build(doc.args);
    let info = raw::RedisModuleCommandInfo {
        version: &VERSION,
        summary: doc.summary.as_ptr(),
        complexity: doc.complexity.as_ptr(),
        since: c"1.0.0".as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: doc.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: args.as_mut_ptr(),
    };
    // SAFETY: `command` is a live command of this module; every pointer in `info` points at
    // 'static NUL-terminated strings or at arrays (ended by a zeroed entry) that outlive the
    // call; the server copies what it keeps.
    let status = unsafe { set_command_info(command, &info) };
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err("RedisModule_SetCommandInfo refused it (the server log says why)")
    }
}

fn key_spec(keys: &Keys) -> raw::RedisModuleCommandKeySpec {
    let access = match keys {
        Keys::One(access) | Keys::Counted(access) => *access,
    };
    let flags = match access {
        Access::ReadWrite => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_UPDATE
        }
        Access::ReadOnly => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
    };
    let fk = match keys {
        // From argv[1], one key.
        Keys::One(_) => raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        },
        // From argv[1]: the count, then that many keys right after it.
        Keys::Counted(_) => raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            keynum: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
                keynumidx: 0,
                firstkey: 1,
                keystep: 1,
            },
        },
    };
    raw::RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags: u64::from(flags),
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 1 },
        },
        find_keys_type: match keys {
            Keys::One(_) => raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
            Keys::Counted(_) => raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM,
        },
        fk,
    }
}

/// The end of the key spec array: begin_search_type 0 (INVALID).
fn zeroed_key_spec() -> raw::RedisModuleCommandKeySpec {
    raw::RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags: 0,
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INVALID,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 0 },
        },
        find_keys_type: raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_OMITTED,
        fk: raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 0,
                limit: 0,
            },
        },
    }
}

/// A C argument array ended by an entry with a NULL name, and the arrays of its blocks,
/// kept alive (and at stable addresses: each is its own heap allocation) while it is used.
struct Args {
    entries: Vec<raw::RedisModuleCommandArg>,
    _blocks: Vec<Args>,
}

impl Args {
    fn build(args: &[Arg]) -> Args {
        let mut blocks = Vec::new();
        let mut entries = Vec::with_capacity(args.len() + 1);
        for arg in args {
            let (kind, subargs) = match &arg.kind {
                Kind::Key => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                    None,
                ),
                Kind::Integer => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                    None,
                ),
                Kind::Double => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
                    None,
                ),
                Kind::PureToken => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                    None,
                ),
                Kind::Block(sub) => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                    Some(Args::build(sub)),
                ),
            };
            let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
            if arg.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if arg.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            let subargs_ptr = match subargs {
                Some(mut sub) => {
                    // The Vec's buffer does not move when `sub` moves into `blocks`.
                    let p = sub.as_mut_ptr();
                    blocks.push(sub);
                    p
                }
                None => ptr::null_mut(),
            };
            entries.push(raw::RedisModuleCommandArg {
                name: arg.name.as_ptr(),
                type_: kind,
                // Each command has one key spec, index 0; -1 for arguments that are no key.
                key_spec_index: if matches!(arg.kind, Kind::Key) { 0 } else { -1 },
                token: arg.token.map_or(ptr::null(), CStr::as_ptr),
                summary: ptr::null(),
                since: ptr::null(),
                flags: flags as c_int,
                deprecated_since: ptr::null(),
                subargs: subargs_ptr,
                display_text: ptr::null(),
            });
        }
        entries.push(raw::RedisModuleCommandArg {
            name: ptr::null(),
            type_: 0,
            key_spec_index: 0,
            token: ptr::null(),
            summary: ptr::null(),
            since: ptr::null(),
            flags: 0,
            deprecated_since: ptr::null(),
            subargs: ptr::null_mut(),
            display_text: ptr::null(),
        });
        Args {
            entries,
            _blocks: blocks,
        }
    }

    fn as_mut_ptr(&mut self) -> *mut raw::RedisModuleCommandArg {
        self.entries.as_mut_ptr()
    }
}
