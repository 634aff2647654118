//! The command handlers, written once over the bucket crate's [`ThrottleCommand`]: parse, open
//! and read the key(s), the arithmetic, the write(s) (each replicated as the resulting state),
//! the pause announcement, the counters, the reply. What is each command's own is in
//! `counted` (its counters). Every handler runs behind the panic guard (`call::run`).
//!
//! A one-key command goes through [`one_key`]; THROTTLE.PEEK, read-only, reads its key with GET
//! there and writes nothing. THROTTLE.MTAKE, with numkeys and several keys, has [`mtake`]: every
//! bucket is opened and read before anything is written.

use std::os::raw::c_int;
use std::slice;

use redis_module::raw;
use throttle_bucket::{ArgError, Effects, MTakeArgs, State, ThrottleCommand, MAX_KEYS};

use crate::bucket_key::{peek_state, BucketKey};
use crate::call::{self, Reply};
use crate::counted::Counted;
use crate::{announce, clock};

/// The handler Redis calls for a one-key command `C`.
pub(crate) extern "C" fn one_key<C: Counted>(
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
        if C::READ_ONLY {
            // With GET, not the key API (see `peek_state`); a read-only command writes nothing.
            let now = clock::now_ns();
            let stored = peek_state(ctx, *key, now)?;
            let outcome = parsed
                .apply(slice::from_ref(&stored), now)
                .map_err(|e| e.to_string())?;
            finish::<C>(reply, &parsed, &outcome);
            return Ok(());
        }
        let mut bucket = BucketKey::open(ctx, *key)?;
        let now = clock::now_ns();
        let stored = bucket.state(now)?;
        // Borrowed where it lies, not moved out of the result (a copy on the hot path).
        let applied = parsed.apply(slice::from_ref(&stored), now);
        let outcome = applied.as_ref().map_err(ToString::to_string)?;
        // A call that changes nothing (a denial, a pause a longer one covers) writes and
        // replicates nothing.
        if let Some(write) = outcome.write(0) {
            bucket.write(write)?;
        }
        if let Some(heard) = outcome.announce() {
            announce::publish(ctx, *key, &heard);
        }
        finish::<C>(reply, &parsed, outcome);
        Ok(())
    })
}

/// Most words a valid THROTTLE.MTAKE has: numkeys, 16 keys, 16 triples, MAXWAIT ms, FLOOR and
/// 16 floors, TICKET, INFLIGHT n, LEASE ms (LINE place_ms WAITER id, which go without FLOOR,
/// make fewer).
const MTAKE_WORDS: usize = 1 + 4 * MAX_KEYS + 2 + 1 + MAX_KEYS + 1 + 4;

/// The handler for THROTTLE.MTAKE (`keys::mtake_entry` sends it every call that is not a
/// key-position request): the words from numkeys on, every bucket opened and read (its type
/// checked) before anything is written.
pub(crate) extern "C" fn mtake(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, MTakeArgs::COMMAND, |args, reply| {
        let parsed = call::with_words::<MTAKE_WORDS, _>(args, MTakeArgs::parse)
            .map_err(|e| e.to_string())?;
        let count = parsed.keys();
        // The keys follow numkeys; `parse` checked there are `count` of them.
        let keys = args.get(1..=count).unwrap_or(&[]);
        let now = clock::now_ns();
        let mut buckets: [Option<BucketKey>; MAX_KEYS] = Default::default();
        let mut stored: [Option<State>; MAX_KEYS] = Default::default();
        for ((bucket, state), &key) in buckets.iter_mut().zip(&mut stored).zip(keys) {
            let opened = bucket.insert(BucketKey::open(ctx, key)?);
            *state = opened.state(now)?;
        }
        let outcome = parsed
            .apply(stored.get(..count).unwrap_or(&[]), now)
            .map_err(|e| e.to_string())?;
        for (i, bucket) in buckets.iter_mut().enumerate().take(count) {
            if let (Some(write), Some(bucket)) = (outcome.write(i), bucket) {
                bucket.write(write)?;
            }
        }
        // A slot its line handed on, announced on the first key's channel (where the line is).
        if let (Some(heard), Some(&key)) = (outcome.announce(), keys.first()) {
            announce::publish(ctx, key, &heard);
        }
        finish::<MTakeArgs>(reply, &parsed, &outcome);
        Ok(())
    })
}

/// What every handler ends with: the call's counters, then its reply (its one integer, or the
/// array). Inlined, so that each handler keeps the reply closure a direct call, as when every
/// command had a handler of its own.
#[inline(always)]
fn finish<C: Counted>(reply: &mut dyn FnMut(Reply<'_>), call: &C, outcome: &C::Outcome) {
    call.count(outcome);
    let ints = call.reply(outcome);
    let ints = ints.as_ref();
    match (C::INTEGER_REPLY, ints) {
        (true, [value]) => reply(Reply::Integer(*value)),
        _ => reply(Reply::Integers(ints)),
    }
}
