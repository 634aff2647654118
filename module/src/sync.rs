//! `THROTTLE.SYNC key capacity rate remaining reset_ms`: the supplier's own count; the bucket is
//! lowered to it (never raised) and paused until the reset when nothing remains. Replies
//! `[lowered, remaining, reset_ms]`.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{sync, ArgError, Command, SyncArgs};

use crate::bucket_key::BucketKey;
use crate::call::{self, Reply};
use crate::{announce, clock, stats};

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::Sync, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::Sync).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, SyncArgs::parse)
            .map_err(|e| e.to_string())?;
        let mut bucket = BucketKey::open(ctx, *key)?;
        let now = clock::now_ns();
        let outcome = sync(&parsed, bucket.state(now)?, now);
        // A bucket that already holds no more writes and replicates nothing.
        if let Some(write) = outcome.write {
            bucket.write(write)?;
        }
        if let Some(pause_ns) = outcome.announce_ns {
            announce::pause(ctx, *key, pause_ns);
        }
        stats::synced(outcome.write.is_some());
        reply(Reply::Integers(outcome.reply().ints().as_slice()));
        Ok(())
    })
}
