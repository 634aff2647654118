//! Whether the server's maxmemory policy can evict buckets, for the warning logged at load,
//! at CONFIG SET and when a replica is promoted, and for `INFO throttle`.
//!
//! Every bucket that is not full has a TTL, so every policy but `noeviction` can pick it:
//! `volatile-*` and `allkeys-*` alike. A bucket evicted while in debt is a missing key, and a
//! missing key is a full bucket: the fleet gets a full burst it is not owed. The guarantee
//! needs `maxmemory-policy noeviction` (then writes fail with OOM instead), or a Redis of its
//! own for the buckets.

use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

use crate::guard;

/// A context of our own for reading the server's flags where Redis gives us none (the INFO
/// callback). Made once at load and kept: the module is never unloaded.
static FLAGS_CTX: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(ptr::null_mut());
/// What the last check saw, so a CONFIG SET logs only when it changes the answer.
static CAN_EVICT: AtomicBool = AtomicBool::new(false);

pub(crate) const WARNING: &str =
    "the maxmemory policy can evict buckets: every bucket that is not \
    full has a TTL, so volatile-* policies pick them as well as allkeys-* ones, and a bucket \
    evicted while in debt reads as full, so the fleet can exceed its quota. Set \
    maxmemory-policy noeviction (or give the buckets a Redis of their own)";

/// At load: keep a context for INFO, warn if buckets can be evicted now, and watch CONFIG SET.
pub(crate) fn init(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: the API pointers are written once by RedisModule_Init before OnLoad; `ctx` is
    // the live OnLoad context.
    unsafe {
        let detached = match (
            raw::RedisModule_GetDetachedThreadSafeContext,
            raw::RedisModule_GetThreadSafeContext,
        ) {
            (Some(detached), _) => detached(ctx),
            (None, Some(thread_safe)) => thread_safe(ptr::null_mut()),
            (None, None) => ptr::null_mut(),
        };
        FLAGS_CTX.store(detached, Relaxed);
    }
    let now = can_evict(ctx);
    CAN_EVICT.store(now == Some(true), Relaxed);
    if now == Some(true) {
        warn(ctx);
    }
    // SAFETY: as above; the callback has the C signature Redis expects and lives forever.
    let subscribed = unsafe {
        raw::RedisModule_SubscribeToServerEvent.is_some_and(|subscribe| {
            let event = raw::RedisModuleEvent {
                id: raw::REDISMODULE_EVENT_CONFIG,
                dataver: 1,
            };
            subscribe(ctx, event, Some(config_changed)) == raw::REDISMODULE_OK as c_int
        })
    };
    if !subscribed {
        guard::notice(
            ctx,
            "this server cannot tell modules about CONFIG SET; a maxmemory policy \
             set at runtime shows in INFO throttle but is not logged",
        );
    }
    // A replica ignores maxmemory (`replica-ignore-maxmemory yes`, the default), so its policy
    // starts to evict only once it is promoted: check again then.
    // SAFETY: as above.
    unsafe {
        if let Some(subscribe) = raw::RedisModule_SubscribeToServerEvent {
            let event = raw::RedisModuleEvent {
                id: raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
                dataver: 1,
            };
            subscribe(ctx, event, Some(role_changed));
        }
    }
}

/// Whether buckets can be evicted right now: `maxmemory` is set and the policy is not
/// `noeviction`. `None` where the server cannot tell.
pub(crate) fn buckets_can_be_evicted() -> Option<bool> {
    can_evict(FLAGS_CTX.load(Relaxed))
}

fn can_evict(ctx: *mut raw::RedisModuleCtx) -> Option<bool> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: `ctx` is a live context (OnLoad's, an event's, or our detached one); the call
    // only reads the server's state.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map(|flags| flags(ctx))? };
    Some(flags & raw::REDISMODULE_CTX_FLAGS_EVICT as c_int != 0)
}

extern "C" fn config_changed(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    guard::callback("the CONFIG SET event", (), || recheck(ctx));
}

/// Logs when whether buckets can be evicted has changed since the last check.
fn recheck(ctx: *mut raw::RedisModuleCtx) {
    let now = can_evict(ctx) == Some(true);
    if CAN_EVICT.swap(now, Relaxed) == now {
        return;
    }
    if now {
        warn(ctx);
    } else {
        guard::notice(ctx, "the maxmemory policy no longer evicts buckets");
    }
}

extern "C" fn role_changed(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    guard::callback("the replication role event", (), || recheck(ctx));
}

fn warn(ctx: *mut raw::RedisModuleCtx) {
    let policy = policy(ctx).unwrap_or_else(|| "(unknown)".to_owned());
    guard::warning(
        ctx,
        &format!("WARNING maxmemory-policy is {policy} with maxmemory set: {WARNING}"),
    );
}

/// `maxmemory_policy` from INFO memory, for the log line.
fn policy(ctx: *mut raw::RedisModuleCtx) -> Option<String> {
    // SAFETY: as in `init`; the field's C string is copied before the info data is freed.
    unsafe {
        let (Some(get), Some(field), Some(free)) = (
            raw::RedisModule_GetServerInfo,
            raw::RedisModule_ServerInfoGetFieldC,
            raw::RedisModule_FreeServerInfo,
        ) else {
            return None;
        };
        let info = get(ctx, c"memory".as_ptr());
        if info.is_null() {
            return None;
        }
        let value = field(info, c"maxmemory_policy".as_ptr());
        let policy =
            (!value.is_null()).then(|| CStr::from_ptr(value).to_string_lossy().into_owned());
        free(ctx, info);
        policy
    }
}
