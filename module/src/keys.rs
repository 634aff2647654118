//! THROTTLE.MTAKE's keys for Redis Cluster routing.
//!
//! Its key spec (`numkeys key [key ...]`, see `command_info`) serves COMMAND GETKEYS and ACL
//! key patterns, but the cluster's slot check (`getNodeByQuery`) finds keys with
//! `getKeysFromCommand`, which for a module command reads only the legacy (first, last, step)
//! range or asks the module (`getkeys-api`). No legacy range can say "numkeys keys from
//! argv[2]", so MTAKE is registered with `getkeys-api` and this entry point answers the
//! server's key-position requests; every other call goes to `handler::mtake`. Without it a
//! one-node cluster runs MTAKE on keys in different slots and a real one runs it on whichever
//! node it reached, instead of answering CROSSSLOT or MOVED.

use std::os::raw::c_int;
use std::slice;

use redis_module::raw;

use crate::{guard, handler};

/// The handler registered for THROTTLE.MTAKE.
pub(crate) extern "C" fn mtake_entry(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: the pointer is written once by RedisModule_Init before OnLoad; `ctx` is live.
    let asking =
        unsafe { raw::RedisModule_IsKeysPositionRequest.is_some_and(|asking| asking(ctx) != 0) };
    if !asking {
        return handler::mtake(ctx, argv, argc);
    }
    guard::command(ctx, "THROTTLE.MTAKE (key positions)", || {
        let args: &[*mut raw::RedisModuleString] = match usize::try_from(argc) {
            // SAFETY: Redis passes `argc` valid strings in `argv` for the call's duration.
            Ok(len) if !argv.is_null() => unsafe { slice::from_raw_parts(argv, len) },
            _ => &[],
        };
        for pos in key_positions(args) {
            declare(ctx, pos);
        }
        raw::REDISMODULE_OK as c_int
    })
}

/// argv[2 .. 2 + numkeys]. A numkeys that is not a non-negative integer, or counts more keys
/// than the call has arguments, declares no key (as the key spec finds none): the command
/// itself then refuses the call.
fn key_positions(args: &[*mut raw::RedisModuleString]) -> std::ops::Range<c_int> {
    let Some(&numkeys) = args.get(1) else {
        return 0..0;
    };
    let mut len = 0;
    let ptr = raw::string_ptr_len(numkeys, &mut len);
    let numkeys = if ptr.is_null() {
        None
    } else {
        // SAFETY: Redis keeps argv strings alive and unchanged for the call's duration.
        let bytes = unsafe { slice::from_raw_parts(ptr.cast::<u8>(), len) };
        std::str::from_utf8(bytes)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<usize>().ok())
    };
    let available = args.len().saturating_sub(2);
    let count = numkeys.filter(|&n| n <= available).unwrap_or(0);
    let end = c_int::try_from(count.saturating_add(2)).unwrap_or(2);
    2..end
}

fn declare(ctx: *mut raw::RedisModuleCtx, pos: c_int) {
    let flags = raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE;
    // SAFETY: as in `mtake_entry`; called only while the server asks for key positions.
    unsafe {
        match (
            raw::RedisModule_KeyAtPosWithFlags,
            raw::RedisModule_KeyAtPos,
        ) {
            (Some(with_flags), _) => with_flags(ctx, pos, flags as c_int),
            (None, Some(at)) => at(ctx, pos),
            (None, None) => {}
        }
    }
}
