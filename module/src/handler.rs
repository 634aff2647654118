//! The command handlers, written once over the bucket crate's [`ThrottleCommand`]: parse, open
//! and read the key(s), the arithmetic, the write(s) (each replicated as the resulting state),
//! the pause announcement, the counters, the reply. What is each command's own is in
//! `counted` (its counters). Every handler runs behind the panic guard (`call::run`).
//!
//! A one-key command goes through [`one_key`]; THROTTLE.PEEK, read-only, reads its key with GET
//! there and writes nothing. THROTTLE.MTAKE, with numkeys and several keys, has [`mtake`]: every
//! bucket is opened and read before anything is written.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::commands::MTake;
use throttle_bucket::{ArgError, ThrottleCommand, MAX_KEYS};

use crate::bucket_key::{peek_state, BucketKey};
use crate::call::{self, Reply};
use crate::counted::Counted;
use crate::{announce, clock};

/// The handler Redis calls for a one-key command `C`.
pub extern "C" fn one_key<C: Counted>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, C::COMMAND, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(C::COMMAND).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, C::parse)
            .map_err(|e| e.to_string())?;
        let now = clock::now_ns();
        let outcome = if C::READ_ONLY {
            // With GET, not the key API (see `peek_state`); a read-only command writes nothing.
            let stored = peek_state(ctx, *key, now)?;
            C::apply(&parsed, &[stored], now).map_err(|e| e.to_string())?
        } else {
            let mut bucket = BucketKey::open(ctx, *key)?;
            let stored = bucket.state(now)?;
            let outcome = C::apply(&parsed, &[stored], now).map_err(|e| e.to_string())?;
            // A call that changes nothing (a denial, a pause a longer one covers) writes and
            // replicates nothing.
            for write in C::writes(&outcome).flatten() {
                bucket.write(write)?;
            }
            if let Some(pause_ns) = C::announce(&outcome) {
                announce::pause(ctx, *key, pause_ns);
            }
            outcome
        };
        C::count(&parsed, &outcome);
        send::<C>(reply, &C::reply(&parsed, &outcome));
        Ok(())
    })
}

/// Most words a valid THROTTLE.MTAKE has: numkeys, 16 keys, 16 triples, MAXWAIT ms, FLOOR and
/// 16 floors, TICKET.
const MTAKE_WORDS: usize = 1 + 4 * MAX_KEYS + 2 + 1 + MAX_KEYS + 1;

/// The handler for THROTTLE.MTAKE (`keys::mtake_entry` sends it every call that is not a
/// key-position request): the words from numkeys on, every bucket opened and read (its type
/// checked) before anything is written.
pub extern "C" fn mtake(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, MTake::COMMAND, |args, reply| {
        let parsed =
            call::with_words::<MTAKE_WORDS, _>(args, MTake::parse).map_err(|e| e.to_string())?;
        let count = MTake::keys(&parsed);
        // The keys follow numkeys; `parse` checked there are `count` of them.
        let keys = args.get(1..=count).unwrap_or(&[]);
        let now = clock::now_ns();
        let mut buckets: [Option<BucketKey>; MAX_KEYS] = Default::default();
        let mut stored = [None; MAX_KEYS];
        for ((bucket, state), &key) in buckets.iter_mut().zip(&mut stored).zip(keys) {
            let opened = bucket.insert(BucketKey::open(ctx, key)?);
            *state = opened.state(now)?;
        }
        let outcome = MTake::apply(&parsed, stored.get(..count).unwrap_or(&[]), now)
            .map_err(|e| e.to_string())?;
        for (write, bucket) in MTake::writes(&outcome).zip(&mut buckets) {
            if let (Some(write), Some(bucket)) = (write, bucket) {
                bucket.write(write)?;
            }
        }
        MTake::count(&parsed, &outcome);
        send::<MTake>(reply, &MTake::reply(&parsed, &outcome));
        Ok(())
    })
}

/// Sends `C`'s reply: its one integer, or the array.
fn send<C: ThrottleCommand>(reply: &mut dyn FnMut(Reply), ints: &C::Ints) {
    let ints = ints.as_ref();
    match (C::INTEGER_REPLY, ints) {
        (true, [value]) => reply(Reply::Integer(*value)),
        _ => reply(Reply::Integers(ints)),
    }
}
