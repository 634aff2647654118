//! `THROTTLE.CUT key capacity rate ms factor recovery_ms`: the supplier is congested; the
//! bucket pauses and its rate is cut, once per episode. Replies `[cut, next_ms, factor_bp,
//! recovered_ms]`.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{cut, ArgError, Command, CutArgs};

use crate::bucket_key::BucketKey;
use crate::call::{self, Reply};
use crate::{announce, clock, stats};

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::Cut, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::Cut).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, CutArgs::parse)
            .map_err(|e| e.to_string())?;
        let mut bucket = BucketKey::open(ctx, *key)?;
        let now = clock::now_ns();
        let outcome = cut(&parsed, bucket.state(now)?, now);
        if let Some(write) = outcome.write {
            bucket.write(write)?;
        }
        if let Some(pause_ns) = outcome.announce_ns {
            announce::pause(ctx, *key, pause_ns);
        }
        stats::cut(outcome.cut);
        reply(Reply::Integers(outcome.reply().ints().as_slice()));
        Ok(())
    })
}
