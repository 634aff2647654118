//! Panic guards. A panic that unwinds into Redis aborts the whole server, so every function
//! Redis calls catches it here and turns it into an error reply (or a failed load).

use std::any::Any;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, Context, Status};

/// Runs a command body. A panic becomes an error reply; the server carries on.
pub fn command(ctx: *mut raw::RedisModuleCtx, name: &str, body: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(status) => status,
        Err(payload) => {
            let context = Context::new(ctx);
            context.log_warning(&format!(
                "throttle: {name} panicked: {}",
                message(&*payload)
            ));
            raw::reply_with_error(
                ctx,
                c"ERR THROTTLE internal error (a bug: please report it with the server log); the server is unaffected"
                    .as_ptr(),
            );
            raw::REDISMODULE_OK as c_int
        }
    }
}

/// Runs the module's initialisation. A panic fails the load instead of the server.
pub fn on_load(ctx: &Context, body: impl FnOnce() -> Status) -> Status {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        ctx.log_warning(&format!(
            "throttle: loading panicked: {}",
            message(&*payload)
        ));
        Status::Err
    })
}

fn message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
