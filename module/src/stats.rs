//! Counters since the module was loaded, shown by `INFO throttle`.
//!
//! Redis runs commands on one thread, but relaxed atomics cost nothing here and keep this
//! free of `static mut`.

use std::ffi::{CStr, CString};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::raw;

use throttle_bucket::Command;

use crate::{eviction, guard};

pub(crate) static CALLS: [AtomicU64; Command::ALL.len()] =
    [const { AtomicU64::new(0) }; Command::ALL.len()];
pub(crate) static GRANTED: AtomicU64 = AtomicU64::new(0);
pub(crate) static RESERVED: AtomicU64 = AtomicU64::new(0);
pub(crate) static DENIED: AtomicU64 = AtomicU64::new(0);
pub(crate) static HELD_BY_FLOOR: AtomicU64 = AtomicU64::new(0);
pub(crate) static HELD_BY_SLOTS: AtomicU64 = AtomicU64::new(0);
pub(crate) static SLOTS_RENEWED: AtomicU64 = AtomicU64::new(0);
pub(crate) static SLOTS_RELEASED: AtomicU64 = AtomicU64::new(0);
pub(crate) static LINE_JOINED: AtomicU64 = AtomicU64::new(0);
pub(crate) static LINE_HANDED: AtomicU64 = AtomicU64::new(0);
pub(crate) static LINE_LEFT: AtomicU64 = AtomicU64::new(0);
pub(crate) static CUTS: AtomicU64 = AtomicU64::new(0);
pub(crate) static SYNCS_LOWERED: AtomicU64 = AtomicU64::new(0);
pub(crate) static TOKENS_DEBITED: AtomicU64 = AtomicU64::new(0);
pub(crate) static GIVEN_BACK: AtomicU64 = AtomicU64::new(0);
pub(crate) static PAUSES: AtomicU64 = AtomicU64::new(0);
pub(crate) static RESUMES: AtomicU64 = AtomicU64::new(0);
pub(crate) static ERRORS: AtomicU64 = AtomicU64::new(0);

/// One call of `command`, whatever its outcome.
pub(crate) fn called(command: Command) {
    if let Some(calls) = CALLS.get(command.index()) {
        calls.fetch_add(1, Relaxed);
    }
}

/// Tokens were taken; `reserved` when the caller must wait before using them.
pub(crate) fn granted(reserved: bool) {
    GRANTED.fetch_add(1, Relaxed);
    if reserved {
        RESERVED.fetch_add(1, Relaxed);
    }
}

/// A take that took nothing; `floor` when only its floor held it back.
pub(crate) fn denied(floor: bool) {
    DENIED.fetch_add(1, Relaxed);
    if floor {
        HELD_BY_FLOOR.fetch_add(1, Relaxed);
    }
}

/// A take with INFLIGHT that only its cap on calls in flight held back (counted as denied
/// too).
pub(crate) fn held_by_slots() {
    HELD_BY_SLOTS.fetch_add(1, Relaxed);
}

/// A THROTTLE.RENEW call; `held` when its slot was held, and is renewed.
pub(crate) fn renewed(held: bool) {
    if held {
        SLOTS_RENEWED.fetch_add(1, Relaxed);
    }
}

/// A THROTTLE.RELEASE call; `held` when it freed a slot.
pub(crate) fn released(held: bool) {
    if held {
        SLOTS_RELEASED.fetch_add(1, Relaxed);
    }
}

/// What a call did to a line for a slot: `joined` (a take joined it), `handed` waiters given
/// a slot, `left` waiters gone at the end of their place lease.
pub(crate) fn line(joined: bool, handed: u64, left: u64) {
    if joined {
        LINE_JOINED.fetch_add(1, Relaxed);
    }
    if handed > 0 {
        LINE_HANDED.fetch_add(handed, Relaxed);
    }
    if left > 0 {
        LINE_LEFT.fetch_add(left, Relaxed);
    }
}

/// A THROTTLE.CUT call; `cut` when it cut the rate (not the same episode as a pause on).
pub(crate) fn cut(cut: bool) {
    PAUSES.fetch_add(1, Relaxed);
    if cut {
        CUTS.fetch_add(1, Relaxed);
    }
}

/// A THROTTLE.SYNC call; `lowered` when it lowered or paused the bucket.
pub(crate) fn synced(lowered: bool) {
    if lowered {
        SYNCS_LOWERED.fetch_add(1, Relaxed);
    }
}

/// Tokens taken by THROTTLE.DEBIT.
pub(crate) fn debited(tokens: u64) {
    TOKENS_DEBITED.fetch_add(tokens, Relaxed);
}

/// Tokens returned by THROTTLE.GIVE.
pub(crate) fn given_back(tokens: u64) {
    GIVEN_BACK.fetch_add(tokens, Relaxed);
}

/// A THROTTLE.PAUSE call (also one that changed nothing, since a longer pause was on). A
/// THROTTLE.CUT counts as one too.
pub(crate) fn paused() {
    PAUSES.fetch_add(1, Relaxed);
}

/// A THROTTLE.RESUME call; `ended` when it ended a pause or a cut (`calls_resume` counts
/// every call, also those that found nothing to end).
pub(crate) fn resumed(ended: bool) {
    if ended {
        RESUMES.fetch_add(1, Relaxed);
    }
}

/// A call answered with an error.
pub(crate) fn error() {
    ERRORS.fetch_add(1, Relaxed);
}

/// The `INFO` callback: one section, `# throttle`, shown by `INFO throttle`, `INFO modules`
/// and `INFO everything`. Redis prefixes each field with `throttle_`.
pub(crate) extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    guard::callback("INFO", (), || write_info(ctx));
}

fn write_info(ctx: *mut raw::RedisModuleInfoCtx) {
    // SAFETY: the pointers are written once by RedisModule_Init before OnLoad; `ctx` is the
    // live INFO context; names and values are NUL-terminated and only read during the call.
    unsafe {
        let (Some(add_section), Some(add_number), Some(add_text)) = (
            raw::RedisModule_InfoAddSection,
            raw::RedisModule_InfoAddFieldULongLong,
            raw::RedisModule_InfoAddFieldCString,
        ) else {
            return;
        };
        // A null name: the section is named after the module. Err: not requested.
        if add_section(ctx, std::ptr::null()) != raw::REDISMODULE_OK as c_int {
            return;
        }
        // Which build is loaded: `MODULE LIST`'s number, and the crate's version as text.
        add_number(
            ctx,
            c"version".as_ptr(),
            u64::try_from(crate::VERSION_NUMBER).unwrap_or(0),
        );
        if let Ok(text) = CString::new(crate::VERSION_TEXT) {
            add_text(ctx, c"version_text".as_ptr(), text.as_ptr());
        }
        // `calls_take`, `calls_mtake`, ...: one per command, named after it.
        for (command, calls) in Command::ALL.iter().zip(&CALLS) {
            let Ok(name) = CString::new(format!("calls_{}", command.short_name())) else {
                continue;
            };
            add_number(ctx, name.as_ptr(), calls.load(Relaxed));
        }
        let numbers: [(&CStr, u64); 17] = [
            (c"granted", GRANTED.load(Relaxed)),
            (c"reserved", RESERVED.load(Relaxed)),
            (c"denied", DENIED.load(Relaxed)),
            (c"held_by_floor", HELD_BY_FLOOR.load(Relaxed)),
            (c"held_by_slots", HELD_BY_SLOTS.load(Relaxed)),
            (c"slots_renewed", SLOTS_RENEWED.load(Relaxed)),
            (c"slots_released", SLOTS_RELEASED.load(Relaxed)),
            (c"line_joined", LINE_JOINED.load(Relaxed)),
            (c"line_handed", LINE_HANDED.load(Relaxed)),
            (c"line_left", LINE_LEFT.load(Relaxed)),
            (c"tokens_given_back", GIVEN_BACK.load(Relaxed)),
            (c"pauses", PAUSES.load(Relaxed)),
            (c"cuts", CUTS.load(Relaxed)),
            (c"resumes", RESUMES.load(Relaxed)),
            (c"syncs_lowered", SYNCS_LOWERED.load(Relaxed)),
            (c"tokens_debited", TOKENS_DEBITED.load(Relaxed)),
            (c"errors", ERRORS.load(Relaxed)),
        ];
        for (name, value) in numbers {
            add_number(ctx, name.as_ptr(), value);
        }
        match eviction::buckets_can_be_evicted() {
            Some(true) => {
                add_text(ctx, c"eviction".as_ptr(), c"possible".as_ptr());
                add_text(ctx, c"eviction_warning".as_ptr(), EVICTION_WARNING.as_ptr());
            }
            Some(false) => {
                add_text(ctx, c"eviction".as_ptr(), c"no".as_ptr());
            }
            None => {
                add_text(ctx, c"eviction".as_ptr(), c"unknown".as_ptr());
            }
        }
    }
}

/// One line, no colon or comma, so INFO parsers keep it whole.
const EVICTION_WARNING: &CStr = c"buckets can be evicted (maxmemory is set and the policy \
    is not noeviction). A bucket evicted while in debt reads as full so the fleet can exceed \
    its quota. Set maxmemory-policy noeviction or give the buckets a Redis of their own";
