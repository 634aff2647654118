//! `THROTTLE.PEEK key capacity rate`: the bucket as it stands, `[1, remaining, 0, reset_ms,
//! paused_ms, factor_bp]` (what `THROTTLE.TAKE ... TOKENS 0` replies, then its pause and rate), as
//! a read-only command: it runs on a read-only replica, in EVAL_RO and `no-writes` functions,
//! during CLIENT PAUSE WRITE and under OOM.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{peek, ArgError, Command, PeekArgs};

use crate::bucket_key::peek_state;
use crate::call::{self, Reply};
use crate::clock;

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::Peek, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::Peek).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, PeekArgs::parse)
            .map_err(|e| e.to_string())?;
        let now = clock::now_ns();
        let outcome = peek(&parsed.quota, peek_state(ctx, *key, now)?, now);
        reply(Reply::Integers(outcome.reply().ints().as_slice()));
        Ok(())
    })
}
