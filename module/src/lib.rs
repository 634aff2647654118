//! The `THROTTLE.TAKE` Redis module: glue between Redis and the `throttle-bucket` arithmetic.
//!
//! Each command lives in a file of its own (parse, read the key, call the arithmetic, write,
//! replicate, reply); the raw Redis calls they share are in `bucket_key`, `clock` and `guard`.
//! Every entry point runs behind `guard`, because a Rust panic that reaches Redis aborts it.

mod bucket_key;
mod clock;
mod guard;
mod take;

use redis_module::alloc::RedisAlloc;
use redis_module::{raw, redis_module, Context, RedisString, Status};

redis_module! {
    name: "throttle",
    version: 1,
    allocator: (RedisAlloc, RedisAlloc),
    data_types: [],
    init: init,
}

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    guard::on_load(ctx, || register(ctx))
}

fn register(ctx: &Context) -> Status {
    let raw_ctx = ctx.get_raw();
    // SAFETY: the API pointers are written once by
    // RedisModule_Init before OnLoad runs and only read afterwards; the names and flags are
    // NUL-terminated literals and the handler has the C signature Redis expects.
    let created = unsafe {
        let Some(create_command) = raw::RedisModule_CreateCommand else {
            return Status::Err;
        };
        create_command(
            raw_ctx,
            c"throttle.take".as_ptr(),
            Some(take::command),
            c"write deny-oom fast".as_ptr(),
            1,
            1,
            1,
        )
    };
    if created != raw::REDISMODULE_OK as i32 {
        ctx.log_warning("throttle: could not register THROTTLE.TAKE");
        return Status::Err;
    }
    set_acl_categories(ctx, c"throttle.take", c"write fast");
    Status::Ok
}

/// Module commands get no ACL category from their flags; the API to give them one exists from
/// Redis 7.2 (and in Valkey). On older servers `-@write` does not cover THROTTLE.TAKE.
fn set_acl_categories(ctx: &Context, name: &std::ffi::CStr, categories: &std::ffi::CStr) {
    // SAFETY: as in `register`; `get_command` is only asked for a command registered above.
    unsafe {
        let (Some(get_command), Some(set_categories)) = (
            raw::RedisModule_GetCommand,
            raw::RedisModule_SetCommandACLCategories,
        ) else {
            ctx.log_notice("throttle: this server cannot give module commands ACL categories");
            return;
        };
        let command = get_command(ctx.get_raw(), name.as_ptr());
        if command.is_null()
            || set_categories(command, categories.as_ptr()) != raw::REDISMODULE_OK as i32
        {
            ctx.log_warning("throttle: could not set the ACL categories of THROTTLE.TAKE");
        }
    }
}
