//! Tells the fleet a bucket was paused: a message on the bucket's pause channel (a shard
//! channel in its own hash slot, see `throttle_bucket::pause_channel`): the pause's length in
//! whole ms, the bucket's state as a ticket and its rate factor. A client that hears it holds back the reserved calls the pause covers; one that is
//! not listening checks the bucket before a reserved send instead (THROTTLE.PEEK's pause).

use std::os::raw::c_char;

use redis_module::raw;
use throttle_bucket::{pause_channel, Announcement};

use crate::call::bytes;

/// Announces that the bucket `key` is paused, as `heard` says. Best effort: a server without
/// the publish API announces nothing (its clients check before reserved sends).
pub(crate) fn pause(
    ctx: *mut raw::RedisModuleCtx,
    key: *mut raw::RedisModuleString,
    heard: &Announcement,
) {
    let channel = pause_channel(bytes(key));
    let message = heard.message();
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
