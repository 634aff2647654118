//! What every command handler shares: the arguments as bytes, the reply, the counters, and
//! the panic guard around it all.

use std::ffi::CString;
use std::os::raw::c_int;
use std::slice;

use redis_module::raw;

use crate::guard;
use throttle_bucket::Command;

use crate::stats;

/// A command's answer.
pub(crate) enum Reply<'a> {
    Integer(i64),
    Integers(&'a [i64]),
}

/// Runs a handler body behind the panic guard: counts the call, sends its reply or its error
/// (counted too). `body` gets the arguments after the command name.
pub(crate) fn run(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    command: Command,
    body: impl FnOnce(&[*mut raw::RedisModuleString], &mut dyn FnMut(Reply<'_>)) -> Result<(), String>,
) -> c_int {
    guard::command(ctx, command.name(), || {
        stats::called(command);
        let args: &[*mut raw::RedisModuleString] = match usize::try_from(argc) {
            // SAFETY: Redis passes `argc` valid strings in `argv` for the call's duration.
            Ok(len) if len > 0 && !argv.is_null() => unsafe {
                slice::from_raw_parts(argv.add(1), len - 1)
            },
            _ => &[],
        };
        let mut send = |reply: Reply<'_>| match reply {
            Reply::Integer(value) => {
                raw::reply_with_long_long(ctx, value);
            }
            Reply::Integers(values) => {
                raw::reply_with_array(ctx, values.len() as _);
                for &value in values {
                    raw::reply_with_long_long(ctx, value);
                }
            }
        };
        if let Err(message) = body(args, &mut send) {
            stats::error();
            reply_error(ctx, &message);
        }
        raw::REDISMODULE_OK as c_int
    })
}

/// Most words a valid one-key command has after its key: THROTTLE.TAKE's `capacity rate TOKENS
/// n MAXWAIT ms TICKET FLOOR f`; every other one-key command has fewer.
pub(crate) const ONE_KEY_WORDS: usize = 9;

/// The arguments as byte slices, on the stack when there are at most `N` (this runs on
/// Redis's one thread for every call, so no allocation), handed to `parse`. A longer call is
/// wrong anyway; it goes through a Vec only to name its exact problem.
pub(crate) fn with_words<const N: usize, T>(
    args: &[*mut raw::RedisModuleString],
    parse: impl FnOnce(&[&[u8]]) -> T,
) -> T {
    let mut words: [&[u8]; N] = [&[]; N];
    match words.get_mut(..args.len()) {
        Some(slots) => {
            for (slot, &s) in slots.iter_mut().zip(args) {
                *slot = bytes(s);
            }
            parse(slots)
        }
        None => parse(&args.iter().map(|&s| bytes(s)).collect::<Vec<_>>()),
    }
}

/// A Redis string's bytes, borrowed for the call.
pub(crate) fn bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
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
        Err(_) => raw::reply_with_error(ctx, c"ERR THROTTLE: invalid arguments".as_ptr()),
    }
}
