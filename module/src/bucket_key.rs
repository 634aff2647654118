//! A bucket's key: read its stored state, and write a new one. All the raw key calls of the
//! module live here.

use std::os::raw::{c_int, c_longlong};
use std::slice;

use redis_module::raw;
use throttle_bucket::{parse_state, Write};

const WRONG_TYPE: &str =
    "WRONGTYPE the key holds a value that is not a string, so not a THROTTLE bucket: use another key";

/// Reads the bucket stored at `name`: `None` for a missing key (a full bucket).
///
/// Opened for reading only, so a denial or an inspection touches nothing: no WATCH fires and
/// nothing is propagated.
pub fn read_state(
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
) -> Result<Option<i64>, String> {
    let key = raw::open_key(ctx, name, raw::KeyMode::READ);
    let state = parse(key);
    raw::close_key(key);
    state
}

fn parse(key: *mut raw::RedisModuleKey) -> Result<Option<i64>, String> {
    if key.is_null() {
        return Ok(None);
    }
    // SAFETY: `key` is open; the key-type call has no other precondition.
    let key_type = unsafe { raw::RedisModule_KeyType.map_or(-1, |key_type| key_type(key)) };
    if key_type == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
        return Ok(None);
    }
    if key_type != raw::REDISMODULE_KEYTYPE_STRING as c_int {
        return Err(WRONG_TYPE.to_owned());
    }
    let mut len = 0;
    // Read mode still decodes an int-encoded value into a plain string in place (Redis does
    // that for every DMA read); the next write re-encodes it.
    let ptr = raw::string_dma(key, &mut len, raw::KeyMode::READ);
    if ptr.is_null() {
        return Err(WRONG_TYPE.to_owned());
    }
    // SAFETY: Redis keeps the value alive and unchanged while the key is open.
    let bytes = unsafe { slice::from_raw_parts(ptr.cast::<u8>(), len) };
    parse_state(bytes).map(Some).map_err(|e| e.to_string())
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
            return Err("ERR THROTTLE: this server lacks RedisModule_Call".to_owned());
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
