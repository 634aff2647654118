//! `THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f]`: parse, read
//! the bucket, take, write, reply `[granted, remaining, wait_ms, reset_ms(, ticket)]`.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{take, ArgError, Command, TakeArgs};

use crate::bucket_key::BucketKey;
use crate::call::{self, Reply};
use crate::{clock, stats};

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::Take, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::Take).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, TakeArgs::parse)
            .map_err(|e| e.to_string())?;
        let mut bucket = BucketKey::open(ctx, *key)?;
        let now = clock::now_ns();
        let outcome = take(&parsed, bucket.state(now)?, now);
        if let Some(write) = outcome.write {
            bucket.write(write)?;
        }
        if parsed.tokens > 0 {
            if outcome.granted {
                stats::granted(outcome.wait_ns > 0);
            } else {
                stats::denied(outcome.held_by_floor);
            }
        }
        reply(Reply::Integers(outcome.to_reply(&parsed).ints().as_slice()));
        Ok(())
    })
}
