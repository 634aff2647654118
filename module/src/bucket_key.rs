//! A bucket's key: read its stored state, and write a new one. All the module's calls into
//! the keyspace live here.
//!
//! The commands that may write open the key with the key API and read and write the state in
//! place (`StringDMA`), with no command run inside Redis: two `RedisModule_Call`s (a GET and
//! a SET) were two thirds of a granted call. What a client's `SET key <state> PXAT <ms>` does
//! besides storing, this does too: the expiry, `SET` replicated (replicas and the AOF get the
//! resulting state, never the command to recompute with their own clock), WATCH and
//! client-side caching invalidated, the `set` and `expire` keyspace events. A denial opens the
//! key and writes nothing, so it invalidates and replicates nothing either (the module opts
//! out of the implicit "modified" signal at load).
//!
//! The price: a state written in place is a plain (raw) 8-byte string, where SET of digits
//! was kept as an integer inside the key's object: 16 bytes more per bucket on Redis
//! (measured as docs/benchmarks.md, "Memory per bucket", says).
//!
//! A write of another length than the stored one (8 bytes to the 32 of a pause or cut and
//! back, an earlier release's digits to 8) gives the key a fresh value of exactly that length,
//! as a bucket's first write does: a string resized in place keeps room to spare (tests/tests/
//! memory.rs measures it). Only those writes pay for it; a write of the same length stays in
//! place.

use std::cell::Cell;
use std::os::raw::{c_int, c_longlong};
use std::{ptr, slice};

use redis_module::raw;
use throttle_bucket::{encode_state, is_state_len, parse_state, State, Write, WRONG_TYPE};

const MISSING_API: &str =
    "ERR THROTTLE: this server lacks the module key API (Redis 7.0 or later is needed)";
const NOT_STORED: &str =
    "ERR THROTTLE could not store the bucket (out of memory?): see the server log, then retry";

/// A bucket's key, open for reading and writing until dropped.
pub(crate) struct BucketKey {
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    /// The key did not exist when opened (a full bucket).
    empty: bool,
    /// The stored value's length in bytes, once [`BucketKey::state`] has read it (or a write
    /// has set it): what tells [`BucketKey::store`] whether the new state fits in place.
    stored_len: Cell<Option<usize>>,
}

impl BucketKey {
    /// Opens the bucket `name` for a command that may write it, refusing a key of another
    /// type (WRONGTYPE, as GET would).
    pub(crate) fn open(
        ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
    ) -> Result<BucketKey, String> {
        // SAFETY: `ctx` and `name` are the live handles of this command; the function
        // pointers are written once by RedisModule_Init before OnLoad and only read after.
        let key = unsafe {
            let Some(open) = raw::RedisModule_OpenKey else {
                return Err(MISSING_API.to_owned());
            };
            open(
                ctx,
                name,
                (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int,
            )
        };
        if key.is_null() {
            // Only a key opened for reading alone can be NULL (when missing); kept for safety.
            return Err(
                "ERR THROTTLE could not open the bucket's key: see the server log".to_owned(),
            );
        }
        let mut bucket = BucketKey {
            ctx,
            name,
            key,
            empty: false,
            stored_len: Cell::new(None),
        };
        // SAFETY: `key` is open (closed by Drop).
        let kind = unsafe { raw::RedisModule_KeyType.map(|key_type| key_type(bucket.key)) };
        match kind {
            Some(k) if k == raw::REDISMODULE_KEYTYPE_EMPTY as c_int => {
                bucket.empty = true;
                Ok(bucket)
            }
            Some(k) if k == raw::REDISMODULE_KEYTYPE_STRING as c_int => Ok(bucket),
            Some(_) => Err(WRONG_TYPE.to_owned()),
            None => Err(MISSING_API.to_owned()),
        }
    }

    /// The stored state: `None` for a missing key (a full bucket).
    ///
    /// An 8- or 32-byte value, or one holding calls in flight, is read in place. One of another length (the digits of an
    /// earlier release, or a string that is no bucket) is read with GET, as PEEK does:
    /// StringDMA would turn an int-encoded string into a bigger raw copy even where nothing is
    /// written after (a denial, a refusal). A value of the state's length that is not raw
    /// (written by the script or by replication) becomes raw here, the same bytes, ready to be
    /// written in place.
    pub(crate) fn state(&self, now_ns: i64) -> Result<Option<State>, String> {
        // SAFETY: `key` is open and holds a string or nothing (checked in `open`); the bytes
        // are parsed before anything else touches the key.
        unsafe {
            if self.empty {
                return Ok(None);
            }
            let (Some(value_length), Some(dma)) =
                (raw::RedisModule_ValueLength, raw::RedisModule_StringDMA)
            else {
                return Err(MISSING_API.to_owned());
            };
            let length = value_length(self.key);
            self.stored_len.set(Some(length));
            if !is_state_len(length) {
                return peek_state(self.ctx, self.name, now_ns);
            }
            let mut len = 0;
            let bytes = dma(self.key, &mut len, raw::REDISMODULE_READ as c_int);
            if bytes.is_null() {
                return Err(WRONG_TYPE.to_owned());
            }
            parse_state(slice::from_raw_parts(bytes.cast::<u8>(), len), now_ns)
                .map(Some)
                .map_err(|e| e.to_string())
        }
    }

    /// Carries out a command's write: [`BucketKey::store`] or [`BucketKey::delete`].
    pub(crate) fn write(&mut self, write: &Write) -> Result<(), String> {
        match write {
            Write::Store {
                state,
                expire_at_ms,
            } => self.store(state, *expire_at_ms),
            Write::Delete => self.delete(),
        }
    }

    /// Stores `state`: its bytes in place, the expiry, and `SET key <state> PXAT <ms>` for
    /// replicas and the AOF; with no expiry (a kept quota), no TTL and `SET key <state>`.
    fn store(&mut self, state: &State, expire_at_ms: Option<i64>) -> Result<(), String> {
        let encoded = encode_state(state);
        let bytes = encoded.as_bytes();
        // SAFETY: `key` is open for writing and holds a string or nothing (checked in `open`);
        // `dma` points at exactly `bytes.len()` writable bytes after the truncate (checked); the
        // Replicate format's conversions match the arguments (s: string, b: buffer and length,
        // c: C string, l: long long).
        unsafe {
            let (
                Some(value_length),
                Some(delete),
                Some(truncate),
                Some(dma),
                Some(set_expire),
                Some(replicate),
                Some(signal),
                Some(notify),
            ) = (
                raw::RedisModule_ValueLength,
                raw::RedisModule_DeleteKey,
                raw::RedisModule_StringTruncate,
                raw::RedisModule_StringDMA,
                raw::RedisModule_SetAbsExpire,
                raw::RedisModule_Replicate,
                raw::RedisModule_SignalModifiedKey,
                raw::RedisModule_NotifyKeyspaceEvent,
            )
            else {
                return Err(MISSING_API.to_owned());
            };
            // A new length gets a fresh value: the old one deleted, and the truncate below
            // creates the string at exactly `bytes.len()`, as for a missing key (which it
            // cannot refuse: it refuses only a key not open for writing, or over 512 MB).
            // Resized in place, a string grown from 8 bytes to 32 keeps room to spare (32 to
            // 40 bytes more while paused) and one shrunk from an earlier release's digits its
            // larger allocation (8 to 16 more until the key expires). The deletion replicates,
            // signals and notifies nothing by itself; it drops the TTL, which the write sets
            // below as every write does, and the LFU counter (under an LFU policy), which is
            // carried over. Unlike a SET, re-creating the key fires the `new` keyspace event
            // (class `n`, which `A` leaves out) on every server we support. The length is the
            // one `state` read (every command reads before it writes), asked of the server
            // only if it did not: a write of the same length, the hot path, costs nothing more.
            let mut lfu = None;
            if !self.empty {
                let stored = match self.stored_len.get() {
                    Some(length) => length,
                    None => value_length(self.key),
                };
                if stored != bytes.len() {
                    lfu = self.lfu();
                    if delete(self.key) != raw::REDISMODULE_OK as c_int {
                        return Err(NOT_STORED.to_owned());
                    }
                    self.empty = true;
                }
            }
            self.stored_len.set(None);
            if truncate(self.key, bytes.len()) != raw::REDISMODULE_OK as c_int {
                return Err(NOT_STORED.to_owned());
            }
            if let Some(freq) = lfu {
                self.set_lfu(freq);
            }
            let mut len = 0;
            let target = dma(self.key, &mut len, raw::REDISMODULE_WRITE as c_int);
            if target.is_null() || len != bytes.len() {
                return Err(NOT_STORED.to_owned());
            }
            ptr::copy_nonoverlapping(bytes.as_ptr(), target.cast::<u8>(), len);
            self.empty = false;
            self.stored_len.set(Some(len));
            let expire = expire_at_ms.unwrap_or(raw::REDISMODULE_NO_EXPIRE.into());
            if set_expire(self.key, expire) != raw::REDISMODULE_OK as c_int {
                return Err(NOT_STORED.to_owned());
            }
            match expire_at_ms {
                Some(at_ms) => replicate(
                    self.ctx,
                    c"SET".as_ptr(),
                    c"sbcl".as_ptr(),
                    self.name,
                    bytes.as_ptr(),
                    bytes.len(),
                    c"PXAT".as_ptr(),
                    at_ms as c_longlong,
                ),
                // A plain SET drops a TTL the replica's key may have.
                None => replicate(
                    self.ctx,
                    c"SET".as_ptr(),
                    c"sb".as_ptr(),
                    self.name,
                    bytes.as_ptr(),
                    bytes.len(),
                ),
            };
            signal(self.ctx, self.name);
            notify(
                self.ctx,
                raw::REDISMODULE_NOTIFY_STRING,
                c"set".as_ptr(),
                self.name,
            );
            if expire_at_ms.is_some() {
                notify(
                    self.ctx,
                    raw::REDISMODULE_NOTIFY_GENERIC,
                    c"expire".as_ptr(),
                    self.name,
                );
            }
        }
        Ok(())
    }
}

impl BucketKey {
    /// The key's LFU counter (0 to 255), under an LFU maxmemory policy; `None` under any other
    /// policy (the server then keeps no counter) or without the API.
    fn lfu(&self) -> Option<c_longlong> {
        let mut freq: c_longlong = -1;
        // SAFETY: `key` is open and holds a value (the caller checked); `freq` outlives the
        // call.
        let read = unsafe {
            raw::RedisModule_GetLFU
                .is_some_and(|get| get(self.key, &mut freq) == raw::REDISMODULE_OK as c_int)
        };
        (read && (0..=255).contains(&freq)).then_some(freq)
    }

    /// Gives the key's fresh value the LFU counter its old one had. Best effort: a server
    /// without the API, or one that refuses, leaves the fresh value's initial counter.
    fn set_lfu(&self, freq: c_longlong) {
        // SAFETY: `key` is open and holds the value just created; `freq` is 0 to 255 (checked
        // in `lfu`), the range the server asserts.
        unsafe {
            if let Some(set) = raw::RedisModule_SetLFU {
                set(self.key, freq);
            }
        }
    }

    /// Deletes the bucket: a call left it full, and a missing key is a full bucket. `DEL key`
    /// goes to replicas and the AOF, with the `del` keyspace event, as a client's DEL would.
    fn delete(&mut self) -> Result<(), String> {
        if self.empty {
            return Ok(());
        }
        // SAFETY: `key` is open for writing; the Replicate format "s" matches the one
        // RedisModuleString argument.
        unsafe {
            let (Some(delete), Some(replicate), Some(signal), Some(notify)) = (
                raw::RedisModule_DeleteKey,
                raw::RedisModule_Replicate,
                raw::RedisModule_SignalModifiedKey,
                raw::RedisModule_NotifyKeyspaceEvent,
            ) else {
                return Err(MISSING_API.to_owned());
            };
            if delete(self.key) != raw::REDISMODULE_OK as c_int {
                return Err(NOT_STORED.to_owned());
            }
            self.empty = true;
            self.stored_len.set(None);
            replicate(self.ctx, c"DEL".as_ptr(), c"s".as_ptr(), self.name);
            signal(self.ctx, self.name);
            notify(
                self.ctx,
                raw::REDISMODULE_NOTIFY_GENERIC,
                c"del".as_ptr(),
                self.name,
            );
        }
        Ok(())
    }
}

impl Drop for BucketKey {
    fn drop(&mut self) {
        // SAFETY: `key` was opened in `open` and is closed exactly once, here.
        unsafe {
            if let Some(close) = raw::RedisModule_CloseKey {
                close(self.key);
            }
        }
    }
}

/// Reads the bucket at `name` without touching it, for THROTTLE.PEEK: through `GET`, since
/// the key API can turn a value into a raw copy, changing a key (on a replica, too) in a
/// read-only command. `None` for a missing key (a full bucket).
pub(crate) fn peek_state(
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    now_ns: i64,
) -> Result<Option<State>, String> {
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
            return Err(MISSING_API.to_owned());
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
            parse_state(bytes, now_ns)
                .map(Some)
                .map_err(|e| e.to_string())
        } else {
            // GET's only error on an existing key is WRONGTYPE.
            Err(WRONG_TYPE.to_owned())
        };
        free(reply);
        state
    }
}
