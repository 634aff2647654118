//! The Lua script (`redis_throttle::script::SOURCE`, `client/lua/throttle.lua`) must do exactly
//! what the module's commands do: the same replies, the same stored state, the same expiry, the
//! same error messages, for THROTTLE.TAKE, MTAKE, PAUSE, CUT, SYNC, DEBIT, GIVE, PEEK, RENEW,
//! RELEASE, SLOTS and RESUME alike, and a key written
//! by one must be usable by the other.
//!
//! The clock is taken out of the comparison by running both inside one MULTI: on servers with
//! the cached command time (Redis 7.2+, Valkey) the module and the script's `TIME` read the same
//! instant for the whole transaction, so every field must match exactly. Redis 7.0 has no cached
//! time: its module clock and `TIME` move on between the calls of one EXEC (and the module's is
//! anchored to the wall clock only to the millisecond), so there only the checks that depend on
//! no clock run: the errors, and replication with quotas slow enough that a millisecond changes
//! nothing.

mod announcements;
mod cases;
mod errors;
mod interop;
mod random;
mod replication;
mod script;
mod table;

use announcements::{
    a_refused_announcement_writes_nothing, announces_a_freed_slot_the_same,
    announces_a_hand_off_at_a_take_the_same, announces_a_hand_off_the_same,
    announces_a_multi_take_passing_its_slot_on_the_same, announces_the_same,
};
use cases::{same_replies_on_a_clock_past_2200, same_replies_state_and_expiry};
use errors::same_errors;
use interop::interop_on_a_moving_clock;
use random::random_cross_check;
use replication::replicates_effects_not_the_script;

/// One `#[test]` per listed server for each case, named `case::Server` (`same_errors::Redis70`).
macro_rules! per_server {
    ($($case:ident: [$($flavor:ident),*]),* $(,)?) => {
        $( mod $case { $( #[test] #[allow(non_snake_case)] fn $flavor() {
            super::$case(::throttle_testkit::Flavor::$flavor)
        } )* } )*
    };
}

// Redis 7.0 has no cached clock: only the checks that depend on no clock run there.
per_server! {
    same_replies_state_and_expiry: [Redis82, Valkey81, Valkey91],
    same_replies_on_a_clock_past_2200: [Redis82, Valkey81, Valkey91],
    random_cross_check: [Redis82, Valkey81, Valkey91],
    interop_on_a_moving_clock: [Redis70, Redis82, Valkey81, Valkey91],
    announces_the_same: [Redis70, Redis82, Valkey81, Valkey91],
    announces_a_freed_slot_the_same: [Redis70, Redis82, Valkey81, Valkey91],
    announces_a_hand_off_the_same: [Redis70, Redis82, Valkey81, Valkey91],
    announces_a_hand_off_at_a_take_the_same: [Redis70, Redis82, Valkey81, Valkey91],
    announces_a_multi_take_passing_its_slot_on_the_same: [Redis70, Redis82, Valkey81, Valkey91],
    a_refused_announcement_writes_nothing: [Redis70, Redis82, Valkey81, Valkey91],
    same_errors: [Redis70, Redis82, Valkey81, Valkey91],
    replicates_effects_not_the_script: [Redis70, Redis82, Valkey81, Valkey91],
}
