//! `THROTTLE.DEBIT key capacity rate n`: a call cost more than it took; `n` tokens are taken
//! now, into debt whatever the bucket holds. Replies `[remaining, reset_ms]`.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{debit, ArgError, Command, DebitArgs};

use crate::bucket_key::BucketKey;
use crate::call::{self, Reply};
use crate::{clock, stats};

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::Debit, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::Debit).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, DebitArgs::parse)
            .map_err(|e| e.to_string())?;
        let mut bucket = BucketKey::open(ctx, *key)?;
        let now = clock::now_ns();
        let outcome = debit(&parsed, bucket.state(now)?, now).map_err(|e| e.to_string())?;
        if let Some(write) = outcome.write {
            bucket.write(write)?;
        }
        stats::debited(parsed.tokens);
        reply(Reply::Integers(outcome.reply().ints().as_slice()));
        Ok(())
    })
}
