//! Panic guards. A panic that unwinds into Redis aborts the whole server, so every function
//! Redis calls catches it here and turns it into an error reply (or a failed load).
//!
//! Also the module's logger: the crate's `Context::log_*` pass the message to `RedisModule_Log`
//! as its printf format (a `%` in it reads random arguments) and panic on a NUL byte.

use std::any::Any;
use std::ffi::{CStr, CString};
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use redis_module::{raw, Context, Status};

/// Runs a command body. A panic becomes an error reply; the server carries on.
pub(crate) fn command(
    ctx: *mut raw::RedisModuleCtx,
    name: &str,
    body: impl FnOnce() -> c_int,
) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(status) => status,
        Err(payload) => {
            warning(ctx, &format!("{name} panicked: {}", message(&*payload)));
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
pub(crate) fn on_load(ctx: &Context, body: impl FnOnce() -> Status) -> Status {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        warning(
            ctx.get_raw(),
            &format!("loading panicked: {}", message(&*payload)),
        );
        Status::Err
    })
}

/// Runs a callback that has no client to answer (INFO, a server event, unload). A panic is
/// logged and `fallback` returned.
pub(crate) fn callback<T>(name: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        warning(
            ptr::null_mut(),
            &format!("{name} panicked: {}", message(&*payload)),
        );
        fallback
    })
}

/// Logs at `warning` level. `ctx` may be null (then the line has no module name).
pub(crate) fn warning(ctx: *mut raw::RedisModuleCtx, text: &str) {
    log(ctx, c"warning", text);
}

/// Logs at `notice` level. `ctx` may be null.
pub(crate) fn notice(ctx: *mut raw::RedisModuleCtx, text: &str) {
    log(ctx, c"notice", text);
}

fn log(ctx: *mut raw::RedisModuleCtx, level: &CStr, text: &str) {
    // With a ctx Redis starts the line with `<throttle>`; without, say whose line it is.
    let text = if ctx.is_null() {
        format!("<throttle> {text}")
    } else {
        text.to_owned()
    };
    // A NUL would end the C string early; none of our messages has one, but a panic's might.
    let line = CString::new(text.replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: the pointer is written once by RedisModule_Init before OnLoad; RedisModule_Log
    // accepts a null ctx; the format "%s" takes exactly the one C string passed.
    unsafe {
        if let Some(log) = raw::RedisModule_Log {
            log(ctx, level.as_ptr(), c"%s".as_ptr(), line.as_ptr());
        }
    }
}

fn message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
