//! The `throttle` Redis module: glue between Redis and the `throttle-bucket` arithmetic.
//!
//! One handler serves every command (`handler`, over the bucket crate's `ThrottleCommand`:
//! parse, read the key, call the arithmetic, write, replicate, reply), with what each counts in
//! `counted`; the raw Redis calls they share are in `bucket_key`, `clock` and `guard`.
//! This file registers them (flags, keys, ACL categories, `COMMAND DOCS` from
//! `command_info`), the `INFO throttle` section (`stats`), the eviction warning (`eviction`)
//! and the refusal to unload. Every entry point runs behind `guard`, because a Rust panic
//! that reaches Redis aborts it.

// Nothing a client sends or a key holds may panic the server (the guard is the last resort).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]
// What is not registered with Redis is the crate's own: say so, so that dead code shows.
#![warn(unreachable_pub, missing_debug_implementations)]
// The Redis module API is C: one of the two crates with unsafe code (the workspace denies it),
// each block with its `// SAFETY:` comment.
#![allow(unsafe_code)]

mod announce;
mod bucket_key;
mod call;
mod clock;
mod command_info;
mod counted;
mod eviction;
mod guard;
mod handler;
mod keys;
mod stats;

use std::ffi::{CStr, CString};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use redis_module::alloc::RedisAlloc;
use redis_module::{raw, redis_module, Context, RedisString, Status};
use throttle_bucket::spec::{Keys, Spec};
use throttle_bucket::{
    Command, CutArgs, DebitArgs, GiveArgs, PauseArgs, PeekArgs, QuotaArgs, ReleaseArgs, RenewArgs,
    ResumeArgs, SlotsArgs, SyncArgs, TakeArgs,
};

redis_module! {
    name: "throttle",
    // What `MODULE LIST` shows as `ver` (and `INFO throttle` as `version`): this crate's.
    version: VERSION_NUMBER,
    allocator: (RedisAlloc, RedisAlloc),
    data_types: [],
    init: init,
    deinit: deinit,
}

/// This crate's version, as its manifest says it (`0.1.0`): `INFO throttle`'s `version_text`.
pub(crate) const VERSION_TEXT: &str = env!("CARGO_PKG_VERSION");

/// This crate's version as the module API's one number, `MAJOR * 10000 + MINOR * 100 + PATCH`
/// (0.1.0 is 100, 1.2.3 is 10203): `MODULE LIST`'s `ver`, `INFO throttle`'s `version`.
pub(crate) const VERSION_NUMBER: i32 = {
    let major = decimal(env!("CARGO_PKG_VERSION_MAJOR"));
    let minor = decimal(env!("CARGO_PKG_VERSION_MINOR"));
    let patch = decimal(env!("CARGO_PKG_VERSION_PATCH"));
    // Two digits each for the minor and the patch, and an i32 for the whole.
    assert!(minor < 100 && patch < 100 && major < 200_000);
    major * 10_000 + minor * 100 + patch
};

/// A version part (`"12"`) as a number, at compile time; a part that is not all digits
/// fails the build.
const fn decimal(text: &str) -> i32 {
    let mut rest = text.as_bytes();
    assert!(!rest.is_empty());
    let mut value: i32 = 0;
    while let [digit, tail @ ..] = rest {
        assert!(digit.is_ascii_digit() && value < 100_000_000);
        value = value * 10 + (*digit - b'0') as i32;
        rest = tail;
    }
    value
}

/// Each command's handler; its name, flags, keys, ACL categories and docs are its
/// [`Spec`](throttle_bucket::Spec), from the bucket crate.
static HANDLERS: [(Command, raw::RedisModuleCmdFunc); Command::ALL.len()] = [
    (Command::Take, Some(handler::one_key::<TakeArgs>)),
    // The entry point also answers the cluster's key-position requests (`getkeys-api`).
    (Command::MTake, Some(keys::mtake_entry)),
    (Command::Pause, Some(handler::one_key::<PauseArgs>)),
    (Command::Give, Some(handler::one_key::<GiveArgs>)),
    (Command::Peek, Some(handler::one_key::<PeekArgs>)),
    (Command::Cut, Some(handler::one_key::<CutArgs>)),
    (Command::Sync, Some(handler::one_key::<SyncArgs>)),
    (Command::Debit, Some(handler::one_key::<DebitArgs>)),
    (Command::Renew, Some(handler::one_key::<RenewArgs>)),
    (Command::Release, Some(handler::one_key::<ReleaseArgs>)),
    (Command::Slots, Some(handler::one_key::<SlotsArgs>)),
    (Command::Resume, Some(handler::one_key::<ResumeArgs>)),
    (Command::Quota, Some(handler::one_key::<QuotaArgs>)),
];

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    guard::on_load(ctx, || register(ctx))
}

fn register(ctx: &Context) -> Status {
    let raw_ctx = ctx.get_raw();
    for (command, handler) in &HANDLERS {
        let spec = command.spec();
        let Ok(name) = CString::new(command.name()) else {
            return Status::Err;
        };
        if create(raw_ctx, &name, *handler, spec).is_err() {
            guard::warning(
                raw_ctx,
                &format!("could not register {}", command.name().to_uppercase()),
            );
            return Status::Err;
        }
        // SAFETY: the pointer is written once by RedisModule_Init before OnLoad; the name is a
        // command this module has just registered.
        let handle = unsafe {
            raw::RedisModule_GetCommand
                .map_or(std::ptr::null_mut(), |get| get(raw_ctx, name.as_ptr()))
        };
        set_acl_categories(raw_ctx, handle, spec);
        if let Err(why) = command_info::set(handle, spec) {
            // The command works without its docs: only COMMAND DOCS, the arity check at
            // MULTI time and the key specs' flags are missing (MTAKE's keys still reach the
            // cluster and ACLs through `keys`).
            guard::warning(
                raw_ctx,
                &format!(
                    "no COMMAND DOCS or key specs for {}: {why}",
                    command.name().to_uppercase()
                ),
            );
        }
    }
    // SAFETY: as above; the callback has the C signature Redis expects and lives forever.
    unsafe {
        if let Some(register_info) = raw::RedisModule_RegisterInfoFunc {
            // Replaces the crate's default callback (which has nothing to show).
            register_info(raw_ctx, Some(stats::info));
        }
    }
    // SAFETY: as above. Without this, closing a key opened for writing would signal it
    // modified (WATCH, client-side caching) even after a denial that wrote nothing;
    // bucket_key.rs signals each write itself.
    unsafe {
        if let Some(set_options) = raw::RedisModule_SetModuleOptions {
            set_options(
                raw_ctx,
                raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int,
            );
        }
    }
    eviction::init(raw_ctx);
    // SAFETY: as above.
    unsafe {
        if let Some(subscribe) = raw::RedisModule_SubscribeToServerEvent {
            let event = raw::RedisModuleEvent {
                id: raw::REDISMODULE_EVENT_SHUTDOWN,
                dataver: 1,
            };
            subscribe(raw_ctx, event, Some(shutting_down));
        }
    }
    Status::Ok
}

fn create(
    ctx: *mut raw::RedisModuleCtx,
    name: &CStr,
    handler: raw::RedisModuleCmdFunc,
    spec: &Spec,
) -> Result<(), ()> {
    let flags = CString::new(spec.flags).map_err(drop)?;
    // The legacy (first key, last key, step); the key specs replace it where the server has
    // them. No legacy range can say "numkeys keys from argv[2]": (0, 0, 0) there, and the
    // module answers the key-position requests (`getkeys-api`).
    let (first, last, step) = match spec.keys {
        Keys::One(_) => (1, 1, 1),
        Keys::Counted(_) => (0, 0, 0),
    };
    // SAFETY: as in `register`; the name and flags are NUL-terminated and copied by the
    // server, and the handler has the C signature Redis expects.
    let created = unsafe {
        let Some(create_command) = raw::RedisModule_CreateCommand else {
            return Err(());
        };
        create_command(
            ctx,
            name.as_ptr(),
            handler,
            flags.as_ptr(),
            first,
            last,
            step,
        )
    };
    if created == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(())
    }
}

/// Module commands get no ACL category from their flags; the API to give them one exists from
/// Redis 7.2 (and in Valkey). On older servers `-@write` does not cover the module's commands.
fn set_acl_categories(
    ctx: *mut raw::RedisModuleCtx,
    handle: *mut raw::RedisModuleCommand,
    spec: &Spec,
) {
    let Ok(categories) = CString::new(spec.acl_categories) else {
        return;
    };
    // SAFETY: as in `register`; `handle` is checked for null; the server parses the string
    // during the call.
    let done = unsafe {
        let Some(set_categories) = raw::RedisModule_SetCommandACLCategories else {
            if spec.command == Command::Take {
                guard::notice(
                    ctx,
                    "this server cannot give module commands ACL categories",
                );
            }
            return;
        };
        !handle.is_null()
            && set_categories(handle, categories.as_ptr()) == raw::REDISMODULE_OK as c_int
    };
    if !done {
        guard::warning(
            ctx,
            &format!(
                "could not set the ACL categories of {}",
                spec.command.name().to_uppercase()
            ),
        );
    }
}

/// Set by the server's shutdown event: Valkey 9 unloads every module on its way out. That
/// unload is refused too (a shutdown can still be aborted, by a failed save, and the server
/// then carries on), but only with a short note, since the server exits as usual.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

extern "C" fn shutting_down(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    SHUTTING_DOWN.store(true, Relaxed);
}

/// MODULE UNLOAD is refused: the unload callback fails, and the server keeps the module.
///
/// Unloading while a client has one of our commands queued in MULTI (or held by CLIENT PAUSE
/// WRITE) makes the server run a freed command at EXEC and crash (redis/redis#4826, open in
/// every server we support). The module stays loaded until the server restarts.
fn deinit(ctx: &Context) -> Status {
    guard::callback("MODULE UNLOAD", Status::Err, || {
        if SHUTTING_DOWN.load(Relaxed) {
            guard::notice(
                ctx.get_raw(),
                "the module is never unloaded, also not at shutdown; the server exits as usual",
            );
            return Status::Err;
        }
        guard::warning(
            ctx.get_raw(),
            "MODULE UNLOAD refused: the throttle module cannot be unloaded, it stays \
             loaded until the server restarts. Unloading a module while a client has one of \
             its commands queued in MULTI or held by CLIENT PAUSE WRITE makes the server \
             crash at EXEC (redis/redis#4826)",
        );
        Status::Err
    })
}
