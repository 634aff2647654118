//! `THROTTLE.PAUSE key capacity rate ms`: the supplier said 429 with Retry-After; the first
//! token is there `ms` from now at the earliest. Replies the ms until the next token.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{pause, ArgError, Command, PauseArgs};

use crate::bucket_key::BucketKey;
use crate::call::{self, Reply};
use crate::{announce, clock, stats};

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::Pause, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::Pause).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, PauseArgs::parse)
            .map_err(|e| e.to_string())?;
        let mut bucket = BucketKey::open(ctx, *key)?;
        let now = clock::now_ns();
        let outcome = pause(&parsed, bucket.state(now)?, now);
        // A pause that a longer one already covers writes and replicates nothing.
        if let Some(write) = outcome.write {
            bucket.write(write)?;
        }
        if let Some(pause_ns) = outcome.announce_ns {
            announce::pause(ctx, *key, pause_ns);
        }
        stats::paused();
        reply(Reply::Integer(outcome.reply()));
        Ok(())
    })
}
