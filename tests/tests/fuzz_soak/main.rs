//! Random-input soak: a bounded run of random THROTTLE.TAKE argument vectors from a seeded
//! PRNG, on every server. Binary bytes, huge and tiny numbers, decimals with many digits,
//! signs, exponents, nan/inf, options in the wrong order, repeated, unknown or without their
//! value, extra arguments, 0 to 12 arguments; and the keys it names are turned into lists,
//! hashes, sets, sorted sets, streams and junk strings now and then, and back.
//!
//! ```sh
//! cargo test -p throttle-e2e --test fuzz_soak -- --nocapture                # 20 000 calls (at most 10 s) per server
//! THROTTLE_LONG=1 cargo test -p throttle-e2e --test fuzz_soak -- --nocapture  # 100 000 calls (at most 5 min)
//! THROTTLE_FUZZ_SEED=1234 cargo test -p throttle-e2e --test fuzz_soak      # replay a seed
//! THROTTLE_FUZZ_COMMANDS=20000 ...                                          # another count
//! ```
//!
//! Every reply is checked, not just its shape. The expected outcome of each call comes from
//! what the fuzzer knows: the argument check of `throttle-bucket` (the module's own parser, so
//! this checks that the glue hands it the bytes unchanged and passes its message through),
//! and the type of value the fuzzer last put under the key. So:
//! - arguments the parser refuses get exactly its `ERR ...` message (or, on a key holding
//!   another type or a junk string, the key's error: the order of the two checks is not part
//!   of the contract);
//! - a key holding another type gets `WRONGTYPE ...`, a junk string `ERR ... not a THROTTLE
//!   bucket ...`;
//! - everything else gets four integers `[granted, remaining, wait, reset]` that obey the
//!   contract for those arguments: granted is 0 or 1, nothing negative, remaining at most the
//!   capacity (at most capacity - n after taking n), a grant waits no longer than `MAXWAIT`
//!   (so not at all without it), a denial waits longer than `MAXWAIT` and leaves fewer than n
//!   tokens, a wait leaves the bucket in debt, `TOKENS 0` is always granted at once, and the
//!   bucket is never full before the tokens are there (reset >= wait).
//!
//! Around that: PING every 100 calls; every 1 000 calls and at the end the server is the same
//! process (`INFO server` `process_id`), its log has no panic, "internal error" or crash
//! report, and the canary keys (a string, a hash, an integer string and a bucket, none ever
//! named by the fuzzer) have the same DUMP and expiry. A key of another type or a junk
//! string is checked unchanged (DUMP) before the fuzzer replaces it.

mod args;
mod canaries;
mod contract;
mod encoding;
mod pool;
mod report;
mod soak;

use encoding::refusals_keep_the_encoding;
use soak::random_input_soak;
use throttle_e2e::per_server;

per_server!(random_input_soak, refusals_keep_the_encoding);
