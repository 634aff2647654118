//! `THROTTLE.MTAKE numkeys key [key ...] capacity rate tokens [...] [MAXWAIT ms] [FLOOR f ...]
//! [TICKET]`: take from every bucket or from none. Replies `[granted, wait_ms, remaining_1,
//! reset_ms_1, ...]`, then with TICKET `ticket_1, ...`.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{mtake, Command, MTakeArgs, MAX_KEYS};

use crate::bucket_key::BucketKey;
use crate::call::{self, Reply};
use crate::{clock, stats};

/// Most words a valid call has: numkeys, 16 keys, 16 triples, MAXWAIT ms, FLOOR and 16 floors,
/// TICKET.
const MAX_WORDS: usize = 1 + 4 * MAX_KEYS + 2 + 1 + MAX_KEYS + 1;

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::MTake, |args, reply| {
        let parsed =
            call::with_words::<MAX_WORDS, _>(args, MTakeArgs::parse).map_err(|e| e.to_string())?;
        let count = parsed.limits().len();
        // The keys follow numkeys; `parse` checked there are `count` of them.
        let keys = args.get(1..=count).unwrap_or(&[]);

        // Every bucket is opened and read (its type checked) before anything is written.
        let now = clock::now_ns();
        let mut buckets: [Option<BucketKey>; MAX_KEYS] = Default::default();
        let mut stored = [None; MAX_KEYS];
        for ((bucket, state), &key) in buckets.iter_mut().zip(&mut stored).zip(keys) {
            let opened = bucket.insert(BucketKey::open(ctx, key)?);
            *state = opened.state(now)?;
        }
        let outcome = mtake(&parsed, stored.get(..count).unwrap_or(&[]), now);
        for (after, bucket) in outcome.buckets().iter().zip(&mut buckets) {
            if let (Some(write), Some(bucket)) = (after.write, bucket) {
                bucket.write(write)?;
            }
        }
        if parsed.limits().iter().any(|l| l.tokens > 0) {
            if outcome.granted {
                stats::granted(outcome.wait_ns > 0);
            } else {
                stats::denied(outcome.held_by_floor);
            }
        }
        reply(Reply::Integers(outcome.reply().as_slice()));
        Ok(())
    })
}
