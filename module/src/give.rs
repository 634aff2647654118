//! `THROTTLE.GIVE key capacity rate n ticket`: give back the tokens of a take (by the ticket
//! `THROTTLE.TAKE ... TICKET` replied) that the caller did not use. Replies the tokens given
//! back.

use std::os::raw::c_int;

use redis_module::raw;
use throttle_bucket::{give, ArgError, Command, GiveArgs};

use crate::bucket_key::BucketKey;
use crate::call::{self, Reply};
use crate::{clock, stats};

/// The command handler Redis calls.
pub extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    call::run(ctx, argv, argc, Command::Give, |args, reply| {
        let [key, rest @ ..] = args else {
            return Err(ArgError::Arity(Command::Give).to_string());
        };
        let parsed = call::with_words::<{ call::ONE_KEY_WORDS }, _>(rest, GiveArgs::parse)
            .map_err(|e| e.to_string())?;
        let mut bucket = BucketKey::open(ctx, *key)?;
        let now = clock::now_ns();
        let outcome = give(&parsed, bucket.state(now)?, now);
        if let Some(write) = outcome.write {
            bucket.write(write)?;
        }
        stats::given_back(outcome.given);
        reply(Reply::Integer(
            i64::try_from(outcome.given).unwrap_or(i64::MAX),
        ));
        Ok(())
    })
}
