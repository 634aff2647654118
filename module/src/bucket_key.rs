//! A bucket's key: read its stored state, and write a new one. All the module's calls into
//! the keyspace live here.

use std::os::raw::{c_int, c_longlong};
use std::slice;

use redis_module::raw;
use throttle_bucket::{parse_state, Write};

const NO_CALL: &str = "ERR THROTTLE: this server lacks RedisModule_Call";
const WRONG_TYPE: &str =
    "WRONGTYPE the key holds a value that is not a string, so not a THROTTLE bucket: use another key";

/// Reads the bucket stored at `name`: `None` for a missing key (a full bucket).
///
/// Through `GET` rather than the key API: reading a string through the key API (StringDMA)
/// decodes an int-encoded value in place, so a denial would leave the key bigger than it was.
/// `GET` reads without touching it, fires no WATCH and propagates nothing.
pub fn read_state(
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
) -> Result<Option<i64>, String> {
    // SAFETY: `ctx` and `name` are the live handles of this command; the format "s" matches
    // the one RedisModuleString argument; the bytes borrowed from the reply are parsed before
    // the reply is freed.
    unsafe {
        let (Some(call), Some(reply_type), Some(string_ptr), Some(free)) = (
            raw::RedisModule_Call,
            raw::RedisModule_CallReplyType,
            raw::RedisModule_CallReplyStringPtr,
            raw::RedisModule_FreeCallReply,
        ) else {
            return Err(NO_CALL.to_owned());
        };
        let reply = call(ctx, c"GET".as_ptr(), c"s".as_ptr(), name);
        if reply.is_null() {
            return Err("ERR THROTTLE could not read the bucket: GET was refused".to_owned());
        }
        let kind = reply_type(reply);
        let state = if kind == raw::REDISMODULE_REPLY_NULL as c_int {
            Ok(None)
        } else if kind == raw::REDISMODULE_REPLY_STRING as c_int {
            let mut len = 0;
            let ptr = string_ptr(reply, &mut len);
            let bytes = if ptr.is_null() {
                &[][..]
            } else {
                slice::from_raw_parts(ptr.cast::<u8>(), len)
            };
            parse_state(bytes).map(Some).map_err(|e| e.to_string())
        } else {
            // GET's only error on an existing key is WRONGTYPE.
            Err(WRONG_TYPE.to_owned())
        };
        free(reply);
        state
    }
}

/// Stores a new state with `SET key <state> PXAT <expire>`, run inside Redis and replicated as
/// is: replicas and the AOF get the resulting state, never the command to recompute with their
/// own clock. Going through SET also gets the value int-encoded (as small as `SET key <int>`),
/// the keyspace notifications, and WATCH invalidation, exactly as for a client's SET.
pub fn store_state(
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    write: Write,
) -> Result<(), String> {
    // SAFETY: `ctx` and `name` are the live handles of this command; the format string's
    // conversions match the arguments (!: replicate, s: string, l: long long, c: C string).
    unsafe {
        let (Some(call), Some(reply_type), Some(free)) = (
            raw::RedisModule_Call,
            raw::RedisModule_CallReplyType,
            raw::RedisModule_FreeCallReply,
        ) else {
            return Err(NO_CALL.to_owned());
        };
        let reply = call(
            ctx,
            c"SET".as_ptr(),
            c"!slcl".as_ptr(),
            name,
            write.tat_ns as c_longlong,
            c"PXAT".as_ptr(),
            write.expire_at_ms as c_longlong,
        );
        if reply.is_null() {
            return Err("ERR THROTTLE could not store the bucket: SET was refused".to_owned());
        }
        let failed = reply_type(reply) == raw::REDISMODULE_REPLY_ERROR as c_int;
        free(reply);
        if failed {
            return Err(
                "ERR THROTTLE could not store the bucket: SET failed (see the server log)"
                    .to_owned(),
            );
        }
    }
    Ok(())
}
