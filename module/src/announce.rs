//! Tells the fleet what a call did to a bucket, on the bucket's pause channel (a shard channel
//! in its own hash slot, see `throttle_bucket::pause_channel`): a pause (its length in whole
//! ms, the bucket's state as a ticket and its rate factor), which a client that hears it holds
//! its reserved calls back for (one that is not listening checks THROTTLE.PEEK's pause before a
//! reserved send instead); or a slot freed in a full table, which wakes a caller waiting for
//! one (one that is not listening looks again on its own).

use std::os::raw::c_char;

use redis_module::raw;
use throttle_bucket::{pause_channel, Message};

use crate::call::bytes;

/// Announces `heard` on the channel of the bucket `key`. Best effort: a server without the
/// publish API announces nothing (its clients check and look on their own).
pub(crate) fn publish(
    ctx: *mut raw::RedisModuleCtx,
    key: *mut raw::RedisModuleString,
    heard: &Message,
) {
    let channel = pause_channel(bytes(key));
    let message = heard.text();
    // SAFETY: the pointers are written once by RedisModule_Init before OnLoad; the strings
    // are created from buffers that live through the calls, and freed once published (the
    // server copies what it sends).
    unsafe {
        let (Some(create), Some(free)) =
            (raw::RedisModule_CreateString, raw::RedisModule_FreeString)
        else {
            return;
        };
        let Some(publish) =
            raw::RedisModule_PublishMessageShard.or(raw::RedisModule_PublishMessage)
        else {
            return;
        };
        let channel = create(ctx, channel.as_ptr().cast::<c_char>(), channel.len());
        let message = create(ctx, message.as_ptr().cast::<c_char>(), message.len());
        if !channel.is_null() && !message.is_null() {
            publish(ctx, channel, message);
        }
        if !channel.is_null() {
            free(ctx, channel);
        }
        if !message.is_null() {
            free(ctx, message);
        }
    }
}
