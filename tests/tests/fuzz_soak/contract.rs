//! What a reply to valid arguments must obey: the contract, checked on every reply the soak
//! gets, and the checker itself checked on made-up replies.

use redis::Value;
use throttle_bucket::{TakeArgs, ThrottleCommand};

/// What happened, for the summary.
pub fn classify(args: &TakeArgs, reply: &[i64; 4]) -> &'static str {
    match (reply[0], args.tokens, reply[2]) {
        (1, 0, _) => "granted: TOKENS 0 (inspect)",
        (1, _, 0) => "granted at once",
        (1, _, _) => "granted: reservation with a wait",
        _ => "denied",
    }
}

/// Checks an integer reply against the contract for these arguments.
pub fn check_reply(args: &TakeArgs, reply: &[i64; 4]) -> Result<(), String> {
    let [granted, remaining, wait, reset] = *reply;
    let capacity = args.quota.capacity as i64;
    let tokens = args.tokens as i64;
    let max_wait = args.max_wait_ms as i64;
    let rules = [
        (granted == 0 || granted == 1, "granted is 0 or 1"),
        (
            remaining >= 0 && wait >= 0 && reset >= 0,
            "nothing negative",
        ),
        (remaining <= capacity, "remaining <= capacity"),
        (
            reset >= wait,
            "reset >= wait (full no earlier than the tokens are there)",
        ),
        (
            tokens != 0 || (granted == 1 && wait == 0),
            "TOKENS 0 is granted at once",
        ),
        (
            granted == 0 || wait <= max_wait,
            "a grant waits at most MAXWAIT (0 without it)",
        ),
        (
            granted == 0 || tokens == 0 || remaining <= capacity - tokens,
            "a grant of n leaves at most capacity - n",
        ),
        (
            granted == 0 || tokens == 0 || reset >= 1,
            "a bucket just taken from is not full",
        ),
        (
            granted == 0 || wait == 0 || remaining == 0,
            "a reservation that waits leaves the bucket in debt",
        ),
        (
            granted == 1 || wait > max_wait,
            "a denial means the wait is longer than MAXWAIT",
        ),
        (
            granted == 1 || remaining < tokens,
            "a denial means fewer than n tokens are there",
        ),
    ];
    match rules.iter().find(|(ok, _)| !ok) {
        Some((_, rule)) => Err(format!("breaks \"{rule}\"")),
        None => Ok(()),
    }
}

/// The reply as four integers, if it is exactly that, or a denial's four and its reason.
pub fn four_integers(value: &Value) -> Option<[i64; 4]> {
    let Value::Array(items) = value else {
        return None;
    };
    let ints: Vec<i64> = items
        .iter()
        .map(|item| match item {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect::<Option<_>>()?;
    // A denial ends with what held it back: a sum of 1, 2, 4 and 8, never 0.
    match ints[..] {
        [0, remaining, wait, reset, reason] if (1..=15).contains(&reason) => {
            Some([0, remaining, wait, reset])
        }
        [0, _, _, _] => None,
        _ => ints.try_into().ok(),
    }
}

#[test]
fn the_reply_check_knows_the_contract() {
    let args = |text: &str| {
        let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
        TakeArgs::parse(&words).unwrap()
    };
    let plain = args("8 9");
    let reserve = args("8 9 MAXWAIT 200");
    let inspect = args("8 9 TOKENS 0");
    for (args, reply) in [
        (&plain, [1, 7, 0, 112]),
        (&plain, [0, 0, 112, 1001]),
        (&reserve, [1, 0, 112, 1001]),
        (&reserve, [0, 0, 223, 1112]),
        (&inspect, [1, 8, 0, 0]),
    ] {
        assert_eq!(check_reply(args, &reply), Ok(()), "{args:?} {reply:?}");
    }
    for (args, reply, rule) in [
        (&plain, [2, 7, 0, 112], "granted is 0 or 1"),
        (&plain, [1, -1, 0, 112], "nothing negative"),
        (&plain, [1, 9, 0, 112], "remaining <= capacity"),
        (&plain, [1, 8, 0, 112], "capacity - n"),
        (&plain, [1, 0, 5, 112], "at most MAXWAIT"),
        (&reserve, [1, 0, 201, 1001], "at most MAXWAIT"),
        (&reserve, [1, 3, 100, 1001], "in debt"),
        (&reserve, [0, 0, 200, 1001], "longer than MAXWAIT"),
        (&plain, [0, 1, 112, 1001], "fewer than n"),
        (&plain, [1, 7, 0, 0], "not full"),
        (&plain, [0, 0, 112, 100], "reset >= wait"),
        (&inspect, [0, 0, 5, 100], "TOKENS 0"),
    ] {
        let why = check_reply(args, &reply).expect_err(rule);
        assert!(why.contains(rule), "{args:?} {reply:?}: {why}");
    }
}
