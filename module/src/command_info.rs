//! What `COMMAND DOCS`, `COMMAND INFO` and `COMMAND GETKEYS` say about each command: summary,
//! complexity, arity, arguments and key specs, given to the server with
//! `RedisModule_SetCommandInfo` (Redis 7.0+, every Valkey).
//!
//! The descriptions are each command's [`Spec`] in the bucket crate; `set` turns one into the C
//! structs Redis reads (arrays ended by a zeroed entry, strings NUL-terminated), which only need
//! to live during the call: the server copies every string and array.

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;
use throttle_bucket::spec::{Access, Arg, Keys, Kind, Spec};

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
pub(crate) fn set(command: *mut raw::RedisModuleCommand, spec: &Spec) -> Result<(), &'static str> {
    // SAFETY: written once by RedisModule_Init before OnLoad, only read afterwards.
    let Some(set_command_info) = (unsafe { raw::RedisModule_SetCommandInfo }) else {
        return Err("this server has no RedisModule_SetCommandInfo (Redis before 7.0)");
    };
    if command.is_null() {
        return Err("the command was not found");
    }
    let text = |s: &str| CString::new(s).map_err(|_| "a spec string holds a NUL byte");
    let (summary, complexity) = (text(spec.summary)?, text(spec.complexity)?);
    let mut key_specs = [key_spec(spec.keys), zeroed_key_spec()];
    let mut args = Args::build(spec.args)?;
    let info = raw::RedisModuleCommandInfo {
        version: &VERSION,
        summary: summary.as_ptr(),
        complexity: complexity.as_ptr(),
        since: c"1.0.0".as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: spec.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: args.as_mut_ptr(),
    };
    // SAFETY: `command` is a live command of this module; every pointer in `info` points at
    // NUL-terminated strings or at arrays (ended by a zeroed entry) that outlive the call; the
    // server copies what it keeps.
    let status = unsafe { set_command_info(command, &info) };
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err("RedisModule_SetCommandInfo refused it (the server log says why)")
    }
}

fn key_spec(keys: Keys) -> raw::RedisModuleCommandKeySpec {
    let flags = match keys.access() {
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

/// A C argument array ended by an entry with a NULL name, and what it points at (the names and
/// tokens, the arrays of its blocks), kept alive, at stable addresses (each is its own heap
/// allocation), while it is used.
struct Args {
    entries: Vec<raw::RedisModuleCommandArg>,
    _strings: Vec<CString>,
    _blocks: Vec<Args>,
}

impl Args {
    fn build(args: &[Arg]) -> Result<Args, &'static str> {
        let text = |s: &str| CString::new(s).map_err(|_| "an argument name holds a NUL byte");
        let mut strings = Vec::new();
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
                    Some(Args::build(sub)?),
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
            // A CString's buffer does not move when the CString moves into `strings`.
            let name = text(arg.name)?;
            let name_ptr = name.as_ptr();
            strings.push(name);
            let token_ptr = match arg.token {
                Some(token) => {
                    let token = text(token)?;
                    let p = token.as_ptr();
                    strings.push(token);
                    p
                }
                None => ptr::null(),
            };
            entries.push(raw::RedisModuleCommandArg {
                name: name_ptr,
                type_: kind,
                // Each command has one key spec, index 0; -1 for arguments that are no key.
                key_spec_index: if matches!(arg.kind, Kind::Key) { 0 } else { -1 },
                token: token_ptr,
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
        Ok(Args {
            entries,
            _strings: strings,
            _blocks: blocks,
        })
    }

    fn as_mut_ptr(&mut self) -> *mut raw::RedisModuleCommandArg {
        self.entries.as_mut_ptr()
    }
}
