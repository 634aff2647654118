//! `THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms]`: parse, read the bucket, take,
//! write, reply `[granted, remaining, wait_ms, reset_ms]`.

use std::ffi::CString;
use std::os::raw::c_int;
use std::slice;

use redis_module::raw;
use throttle_bucket::{take, ArgError, TakeArgs};

use crate::bucket_key::{read_state, store_state};
use crate::{clock, guard};

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    guard::command(ctx, "THROTTLE.TAKE", || {
        let argv: &[*mut raw::RedisModuleString] = match usize::try_from(argc) {
            // SAFETY: Redis passes `argc` valid strings in `argv` for the call's duration.
            Ok(len) if !argv.is_null() => unsafe { slice::from_raw_parts(argv, len) },
            _ => &[],
        };
        match run(ctx, argv) {
            Ok(reply) => {
                raw::reply_with_array(ctx, reply.len() as _);
                for value in reply {
                    raw::reply_with_long_long(ctx, value);
                }
            }
            Err(message) => reply_error(ctx, &message),
        }
        raw::REDISMODULE_OK as c_int
    })
}

fn run(
    ctx: *mut raw::RedisModuleCtx,
    argv: &[*mut raw::RedisModuleString],
) -> Result<[i64; 4], String> {
    // argv[0] is the command name, argv[1] the key.
    let [_, name, rest @ ..] = argv else {
        return Err(ArgError::Arity.to_string());
    };
    let args = parse_args(rest).map_err(|e| e.to_string())?;

    let stored = read_state(ctx, *name)?;
    let outcome = take(&args, stored, clock::now_ns());
    if let Some(write) = outcome.write {
        store_state(ctx, *name, write)?;
    }
    Ok(outcome.reply())
}

/// Most words a valid call has after the key: `capacity rate TOKENS n MAXWAIT ms`.
const MAX_WORDS: usize = 6;

/// Parses on the stack: this runs on Redis's one thread for every call, so no allocation.
/// A longer call is wrong anyway; it goes through a Vec only to name its exact problem.
fn parse_args(rest: &[*mut raw::RedisModuleString]) -> Result<TakeArgs, ArgError> {
    let mut words: [&[u8]; MAX_WORDS] = [&[]; MAX_WORDS];
    match words.get_mut(..rest.len()) {
        Some(slots) => {
            for (slot, &s) in slots.iter_mut().zip(rest) {
                *slot = bytes(s);
            }
            TakeArgs::parse(slots)
        }
        None => TakeArgs::parse(&rest.iter().map(|&s| bytes(s)).collect::<Vec<_>>()),
    }
}

fn bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0;
    let ptr = raw::string_ptr_len(s, &mut len);
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: Redis keeps argv strings alive and unchanged for the call's duration.
    unsafe { slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

fn reply_error(ctx: *mut raw::RedisModuleCtx, message: &str) {
    // Our messages never hold NUL; fall back to a fixed one if that ever changes.
    match CString::new(message) {
        Ok(text) => raw::reply_with_error(ctx, text.as_ptr()),
        Err(_) => raw::reply_with_error(ctx, c"ERR THROTTLE.TAKE: invalid arguments".as_ptr()),
    }
}
