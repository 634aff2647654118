//! What a supplier says of its own quota in a response's headers: the calls and tokens it has
//! left, when they come back, and a pause it asks for outside `Retry-After`.
//!
//! Pure: no I/O, no clock (the adapters pass `now`). Every reader is linear in its input (a
//! pass or two over the bytes, no backtracking) and never fails: a value that cannot be read
//! is left out, as the IETF draft asks ("Malformed RateLimit header fields MUST be ignored"),
//! so a supplier's typo never stops a call. Durations never exceed [`MAX_PAUSE`], the longest
//! pause the module takes; counts saturate at `u64::MAX`. The `RateLimit` fields are
//! Structured Fields, parsed strictly by the `sfv` crate as RFC 9651 asks: there an Integer
//! has at most 15 digits, and one more fails the whole field.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use ::http::HeaderMap;
use sfv::{BareItem, Dictionary, List, ListEntry, Parser};

use super::retry::{parse_retry_after, MAX_PAUSE};
use crate::{Remaining, SupplierCount};

/// Reads what the supplier said of its quota in a response's headers, measured from `now`.
///
/// `requests` comes from the first of these that gives a readable remaining count:
/// 1. `RateLimit` (draft-ietf-httpapi-ratelimit-headers-08 and later): a Structured Fields
///    List such as `"default";r=50;t=30`, `r` the remaining units and `t` the seconds to the
///    reset. Of several members (one per policy, over one or more lines) the most restrictive
///    wins: the smallest `r`, then the longest reset. A member without `t` takes the `w`
///    (window) of the `RateLimit-Policy` member of the same name, if any, as its reset; a
///    member whose policy counts other units (`qu="content-bytes"`, ...) is not a call count
///    and is skipped. The draft-07 Dictionary form `limit=100, remaining=50, reset=30` is read
///    too;
/// 2. `RateLimit-Remaining` with `RateLimit-Reset` (drafts up to 06): delta seconds, or an
///    HTTP date;
/// 3. `X-RateLimit-Remaining` with `X-RateLimit-Reset`: see below;
/// 4. `x-ratelimit-remaining-requests` with `x-ratelimit-reset-requests` (OpenAI and
///    compatible APIs): a Go duration such as `6m0s` or `59.9s`, or bare seconds.
///
/// `tokens` comes only from `x-ratelimit-remaining-tokens` with `x-ratelimit-reset-tokens`,
/// read like the requests pair. `retry_after` is the longest of `x-ms-retry-after-ms` and
/// `retry-after-ms` (milliseconds, a fraction allowed).
///
/// `X-RateLimit-Reset` is sent as delta seconds by some suppliers and as a Unix time by
/// others (GitHub): no delta that large is meant, so a value from 1 000 000 000 (2001) is
/// epoch seconds, and from 1 000 000 000 000 epoch milliseconds, each measured from `now`
/// (past: zero); below that it is delta seconds. A fraction is kept; an HTTP date is read too.
///
/// A count without a reset header has `reset` zero. Header names are case-insensitive; of a
/// count or reset header sent several times, the first line is read (the `RateLimit` fields
/// are Lists: all their lines are read, and one malformed line makes the whole field ignored,
/// as RFC 9651 combines them).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use http::{HeaderMap, HeaderValue};
/// use redis_throttle::http::read_supplier_count;
/// use redis_throttle::Remaining;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// let mut headers = HeaderMap::new();
/// headers.insert(
///     "ratelimit",
///     HeaderValue::from_static(r#""burst";r=5;t=2, "daily";r=900;t=3600"#),
/// );
/// headers.insert("x-ratelimit-remaining-tokens", HeaderValue::from_static("15000"));
/// headers.insert("x-ratelimit-reset-tokens", HeaderValue::from_static("6m0s"));
/// headers.insert("retry-after-ms", HeaderValue::from_static("250"));
///
/// let count = read_supplier_count(&headers, now);
/// let left = |left, seconds| Remaining {
///     left,
///     reset: Duration::from_secs(seconds),
/// };
/// assert_eq!(count.requests, Some(left(5, 2)));
/// assert_eq!(count.tokens, Some(left(15_000, 360)));
/// assert_eq!(count.retry_after, Some(Duration::from_millis(250)));
/// ```
pub fn read_supplier_count(headers: &HeaderMap, now: SystemTime) -> SupplierCount {
    let requests = ietf_ratelimit(headers)
        .or_else(|| {
            counter(headers, "ratelimit-remaining", "ratelimit-reset", |v| {
                parse_retry_after(v, now)
            })
        })
        .or_else(|| {
            counter(headers, "x-ratelimit-remaining", "x-ratelimit-reset", |v| {
                x_ratelimit_reset(v, now)
            })
        })
        .or_else(|| {
            counter(
                headers,
                "x-ratelimit-remaining-requests",
                "x-ratelimit-reset-requests",
                llm_reset,
            )
        });
    let tokens = counter(
        headers,
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
        llm_reset,
    );
    // Both name the same pause; should they differ, the longer is the cautious one.
    let retry_after = ["x-ms-retry-after-ms", "retry-after-ms"]
        .into_iter()
        .filter_map(|name| headers.get(name))
        .filter_map(|value| millis(value.as_bytes()))
        .max();
    SupplierCount {
        requests,
        tokens,
        retry_after,
    }
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;
const NANOS_PER_MILLI: u64 = 1_000_000;

/// From here an `X-RateLimit-Reset` is a Unix time in seconds (2001-09-09), not a delta:
/// 31 years, three times the longest pause, is no window anyone means.
const EPOCH_SECONDS_FROM: u64 = 1_000_000_000;

/// From here a Unix time is in milliseconds: in seconds it would be in the year 33658.
const EPOCH_MILLIS_FROM: u64 = 1_000_000_000_000;

/// A count and a reset sent as two headers. `None` unless the count is there and readable;
/// a reset absent or unreadable is zero.
fn counter(
    headers: &HeaderMap,
    remaining: &str,
    reset: &str,
    read_reset: impl Fn(&[u8]) -> Option<Duration>,
) -> Option<Remaining> {
    let left = count(headers.get(remaining)?.as_bytes())?;
    let reset = headers
        .get(reset)
        .and_then(|value| read_reset(value.as_bytes()))
        .unwrap_or(Duration::ZERO);
    Some(Remaining { left, reset })
}

/// A non-negative decimal integer, surrounding whitespace allowed, saturating at `u64::MAX`.
fn count(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then(|| integer(digits))
}

/// The value of ASCII digits, saturating at `u64::MAX`.
fn integer(digits: &[u8]) -> u64 {
    digits.iter().fold(0u64, |acc, digit| {
        acc.saturating_mul(10)
            .saturating_add(u64::from(digit.wrapping_sub(b'0')))
    })
}

/// An `X-RateLimit-Reset`: delta seconds, epoch seconds or epoch milliseconds by size (see
/// [`read_supplier_count`]), a fraction allowed; or else an HTTP date.
fn x_ratelimit_reset(value: &[u8], now: SystemTime) -> Option<Duration> {
    let text = value.trim_ascii();
    let Some((whole, billionths)) = whole_decimal(text) else {
        return parse_retry_after(text, now);
    };
    Some(if whole >= EPOCH_MILLIS_FROM {
        until(scaled(whole, billionths, NANOS_PER_MILLI), now)
    } else if whole >= EPOCH_SECONDS_FROM {
        until(scaled(whole, billionths, NANOS_PER_SECOND), now)
    } else {
        scaled(whole, billionths, NANOS_PER_SECOND).min(MAX_PAUSE)
    })
}

/// From `now` to a time given since the Unix epoch: zero if it is past, at most `MAX_PAUSE`.
fn until(since_epoch: Duration, now: SystemTime) -> Duration {
    SystemTime::UNIX_EPOCH
        .checked_add(since_epoch)
        .map_or(MAX_PAUSE, |at| {
            at.duration_since(now).unwrap_or(Duration::ZERO)
        })
        .min(MAX_PAUSE)
}

/// An LLM API's reset (`x-ratelimit-reset-requests`, `-tokens`): a Go duration, or bare
/// seconds from the suppliers that copy the header name but not its format.
fn llm_reset(value: &[u8]) -> Option<Duration> {
    parse_go_duration(value).or_else(|| {
        let (whole, billionths) = whole_decimal(value.trim_ascii())?;
        Some(scaled(whole, billionths, NANOS_PER_SECOND).min(MAX_PAUSE))
    })
}

/// Milliseconds (`x-ms-retry-after-ms`), a fraction allowed.
fn millis(value: &[u8]) -> Option<Duration> {
    let (whole, billionths) = whole_decimal(value.trim_ascii())?;
    Some(scaled(whole, billionths, NANOS_PER_MILLI).min(MAX_PAUSE))
}

/// A duration as Go's `time.Duration` prints it, which OpenAI's reset headers use: one or
/// more of a decimal number and a unit, `h`, `m`, `s`, `ms`, `us` (`µs`, `μs`) or `ns`
/// (`6m0s`, `1h2m3.5s`, `20ms`, `.5s`), or a lone `0`. No sign: a reset is never negative.
fn parse_go_duration(value: &[u8]) -> Option<Duration> {
    let text = value.trim_ascii();
    if text == b"0" {
        return Some(Duration::ZERO);
    }
    let mut cursor = Cursor::new(text);
    if cursor.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    while !cursor.is_empty() {
        let (whole, billionths) = decimal(&mut cursor)?;
        let unit = match cursor.take_while(|b| !b.is_ascii_digit() && b != b'.') {
            b"h" => 3_600 * NANOS_PER_SECOND,
            b"m" => 60 * NANOS_PER_SECOND,
            b"s" => NANOS_PER_SECOND,
            b"ms" => NANOS_PER_MILLI,
            // "µs" (micro sign) and "μs" (Greek mu), as Go accepts both.
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ns" => 1,
            _ => return None,
        };
        total = total.saturating_add(scaled(whole, billionths, unit));
    }
    Some(total.min(MAX_PAUSE))
}

/// `text` as a whole is a [`decimal`].
fn whole_decimal(text: &[u8]) -> Option<(u64, u32)> {
    let mut cursor = Cursor::new(text);
    decimal(&mut cursor).filter(|_| cursor.is_empty())
}

/// Digits, a `.` and digits, with a digit on at least one side: the whole part (saturating)
/// and the fraction in billionths (digits past the ninth are dropped, still in one pass).
fn decimal(cursor: &mut Cursor<'_>) -> Option<(u64, u32)> {
    let whole = cursor.take_while(|b| b.is_ascii_digit());
    let fraction = if cursor.eat(b'.') {
        cursor.take_while(|b| b.is_ascii_digit())
    } else {
        &[]
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let kept = fraction.len().min(9);
    let billionths = fraction.iter().take(9).fold(0u32, |acc, digit| {
        acc * 10 + u32::from(digit.wrapping_sub(b'0'))
    }) * 10u32.pow(9 - kept as u32);
    Some((integer(whole), billionths))
}

/// `whole.billionths` units of `unit_nanos` nanoseconds each, without overflow (u128), the
/// seconds saturating at `u64::MAX`.
fn scaled(whole: u64, billionths: u32, unit_nanos: u64) -> Duration {
    let unit = u128::from(unit_nanos);
    let nanos =
        u128::from(whole) * unit + u128::from(billionths) * unit / u128::from(NANOS_PER_SECOND);
    let second = u128::from(NANOS_PER_SECOND);
    let seconds = u64::try_from(nanos / second).unwrap_or(u64::MAX);
    let subsec = u32::try_from(nanos % second).unwrap_or(0);
    Duration::new(seconds, subsec)
}

/// The IETF `RateLimit` field: the current draft's List, else draft 07's Dictionary.
fn ietf_ratelimit(headers: &HeaderMap) -> Option<Remaining> {
    let field = combined(headers, "ratelimit")?;
    service_limits(&field, headers).or_else(|| draft_07(&field))
}

/// All the lines of a Structured Field joined by commas, as RFC 9651 (section 4.2) has a
/// parser combine them; `None` when the field is absent.
fn combined(headers: &HeaderMap, name: &str) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(name).iter();
    let mut field = lines.next()?.as_bytes().to_vec();
    for line in lines {
        field.extend_from_slice(b", ");
        field.extend_from_slice(line.as_bytes());
    }
    Some(field)
}

/// A List field, `None` when it is not one: RFC 9651 fails the whole field on any error.
fn list(field: &[u8]) -> Option<List> {
    Parser::new(field).parse_list().ok()
}

/// What a `RateLimit-Policy` member tells of the `RateLimit` member of the same name.
#[derive(Clone, Copy, Debug, Default)]
struct Policy {
    /// `w`: the window, in seconds; a reset can be no further off than that.
    window: Option<u64>,
    /// `qu` names a unit other than requests: the member's `r` is not a number of calls.
    other_unit: bool,
}

/// The `RateLimit-Policy` members by name. Empty when the field is absent or malformed.
fn policies(members: &List) -> HashMap<&str, Policy> {
    members
        .iter()
        .filter_map(|member| {
            let ListEntry::Item(member) = member else {
                return None;
            };
            let policy = Policy {
                window: member
                    .params
                    .get("w")
                    .and_then(non_negative)
                    .filter(|&seconds| seconds > 0),
                other_unit: member
                    .params
                    .get("qu")
                    .and_then(identifier)
                    .is_some_and(|unit| unit != "requests" && unit != "request"),
            };
            Some((identifier(&member.bare_item)?, policy))
        })
        .collect()
}

/// The most restrictive service limit of the current draft's `RateLimit` List.
fn service_limits(field: &[u8], headers: &HeaderMap) -> Option<Remaining> {
    let limits = list(field)?;
    let policy_field = combined(headers, "ratelimit-policy").and_then(|field| list(&field));
    let policies = policy_field.as_ref().map(policies).unwrap_or_default();
    limits
        .iter()
        .filter_map(|member| service_limit(member, &policies))
        // The first of equals, as `min_by_key` keeps it.
        .min_by_key(|&limit| tightness(limit))
}

/// Orders service limits, the most restrictive first.
fn tightness(limit: Remaining) -> (u64, Reverse<Duration>) {
    (limit.left, Reverse(limit.reset))
}

/// One `RateLimit` member: `None` unless it names a policy and has a readable `r`, or when
/// its policy counts something other than requests.
fn service_limit(member: &ListEntry, policies: &HashMap<&str, Policy>) -> Option<Remaining> {
    let ListEntry::Item(member) = member else {
        return None;
    };
    let name = identifier(&member.bare_item)?;
    let left = member.params.get("r").and_then(non_negative)?;
    let policy = policies.get(name).copied().unwrap_or_default();
    if policy.other_unit {
        return None;
    }
    let reset = member
        .params
        .get("t")
        .and_then(non_negative)
        .or(policy.window)
        .map_or(Duration::ZERO, clamped_secs);
    Some(Remaining { left, reset })
}

/// Draft 07's `RateLimit: limit=100, remaining=50, reset=30` (a Dictionary; the last of a
/// key wins).
fn draft_07(field: &[u8]) -> Option<Remaining> {
    let members: Dictionary = Parser::new(field).parse_dictionary().ok()?;
    let item = |key: &str| match members.get(key) {
        Some(ListEntry::Item(item)) => non_negative(&item.bare_item),
        _ => None,
    };
    let left = item("remaining")?;
    let reset = item("reset").map_or(Duration::ZERO, clamped_secs);
    Some(Remaining { left, reset })
}

/// A non-negative Integer.
fn non_negative(item: &BareItem) -> Option<u64> {
    item.as_integer()
        .and_then(|integer| u64::try_from(integer).ok())
}

/// A policy's identifier or a unit: a String (draft 08, 09) or a Token (later drafts).
fn identifier(item: &BareItem) -> Option<&str> {
    match item {
        BareItem::String(text) => Some(text.as_str()),
        BareItem::Token(text) => Some(text.as_str()),
        _ => None,
    }
}

/// Whole seconds, at most `MAX_PAUSE`.
fn clamped_secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds).min(MAX_PAUSE)
}

/// A byte reader that cannot run past its end: every step checks.
#[derive(Clone, Copy, Debug)]
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { rest: bytes }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let here = self.rest.first() == Some(&byte);
        if here {
            self.rest = self.rest.get(1..).unwrap_or_default();
        }
        here
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> &'a [u8] {
        let end = self
            .rest
            .iter()
            .position(|&b| !keep(b))
            .unwrap_or(self.rest.len());
        let (taken, rest) = self.rest.split_at_checked(end).unwrap_or((self.rest, &[]));
        self.rest = rest;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ::http::{HeaderName, HeaderValue};

    const SECOND: Duration = Duration::from_secs(1);

    /// 2023-11-14 22:13:20 UTC, in Unix seconds.
    const NOW: u64 = 1_700_000_000;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(NOW)
    }

    /// The headers, in order; a name given twice is two lines.
    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    fn read(pairs: &[(&str, &[u8])]) -> SupplierCount {
        read_supplier_count(&headers(pairs), now())
    }

    fn left(left: u64, reset: Duration) -> Option<Remaining> {
        Some(Remaining { left, reset })
    }

    #[test]
    fn no_headers_say_nothing() {
        assert_eq!(read(&[]), SupplierCount::default());
        assert_eq!(
            read(&[
                ("content-type", b"application/json"),
                ("retry-after", b"5"),
                ("x-ratelimit-reset", b"30"),
                ("ratelimit-policy", br#""default";q=100;w=60"#),
            ]),
            SupplierCount::default(),
            "a reset or a policy without a count is no count; Retry-After is read elsewhere"
        );
    }

    #[test]
    fn ietf_service_limits() {
        let policy = "ratelimit-policy";
        for (pairs, expected) in [
            (
                &[("RateLimit", &br#""default";r=50;t=30"#[..])][..],
                left(50, SECOND * 30),
            ),
            (
                &[("ratelimit", b"default;r=50;t=30")],
                left(50, SECOND * 30),
            ),
            (
                &[("ratelimit", br#""default";r=0;t=0"#)],
                left(0, Duration::ZERO),
            ),
            // No `t`, no policy: the reset is unknown.
            (
                &[("ratelimit", br#""default";r=999"#)],
                left(999, Duration::ZERO),
            ),
            // No `t`: the window of the policy of the same name.
            (
                &[
                    ("ratelimit", br#""default";r=50"#),
                    (policy, br#""default";q=100;w=60"#),
                ],
                left(50, SECOND * 60),
            ),
            (
                &[
                    ("ratelimit", br#""default";r=50"#),
                    (policy, br#""other";q=100;w=60"#),
                ],
                left(50, Duration::ZERO),
            ),
            // A String policy name matches the same Token.
            (
                &[("ratelimit", b"basic;r=5"), (policy, br#""basic";q=9;w=7"#)],
                left(5, SECOND * 7),
            ),
            // `t` wins over the window.
            (
                &[
                    ("ratelimit", br#""basic";r=60;t=58"#),
                    (policy, br#""basic";q=100;w=60"#),
                ],
                left(60, SECOND * 58),
            ),
            // An unreadable `t` is absent.
            (
                &[
                    ("ratelimit", br#""p";r=3;t=1.5"#),
                    (policy, br#""p";q=10;w=60"#),
                ],
                left(3, SECOND * 60),
            ),
            (
                &[("ratelimit", br#""p";r=3;t=-4"#)],
                left(3, Duration::ZERO),
            ),
            (&[("ratelimit", br#""p";r=3;t"#)], left(3, Duration::ZERO)),
            // Several members: the smallest `r` wins, then the longest reset.
            (
                &[("ratelimit", br#""burst";r=5;t=2, "daily";r=900;t=3600"#)],
                left(5, SECOND * 2),
            ),
            (
                &[("ratelimit", br#""daily";r=900;t=3600,"burst";r=5;t=2"#)],
                left(5, SECOND * 2),
            ),
            (
                &[("ratelimit", br#""a";r=0;t=1, "b";r=0;t=9, "c";r=0;t=3"#)],
                left(0, SECOND * 9),
            ),
            // Over several lines.
            (
                &[
                    ("ratelimit", br#""hour";r=400;t=100"#),
                    ("ratelimit", br#""minute";r=12;t=40, "day";r=4000;t=9000"#),
                ],
                left(12, SECOND * 40),
            ),
            // Members without a readable `r` are skipped.
            (
                &[(
                    "ratelimit",
                    br#"quota;t=1, "b";r=7;t=3, "c";r=-1, "d";r=2.5, "e";r="1""#,
                )],
                left(7, SECOND * 3),
            ),
            (&[("ratelimit", b"quota;t=1")], None),
            (&[("ratelimit", br#""a";r=-0;t=2"#)], left(0, SECOND * 2)),
            // RFC 9651 Dates and Display Strings are items, not policy names.
            (
                &[(
                    "ratelimit",
                    br#"@1659578233;r=1, %"caf%c3%a9";r=2, "a";r=5"#,
                )],
                left(5, Duration::ZERO),
            ),
            // A member must name its policy.
            (&[("ratelimit", b"10;r=5;t=1, ?1;r=4, :AA==:;r=3")], None),
            (
                &[("ratelimit", br#"("a" "b");r=1, "c";r=4;t=1"#)],
                left(4, SECOND),
            ),
            // A policy that counts other units is not about calls.
            (
                &[
                    ("ratelimit", br#""bytes";r=10;t=5, "calls";r=40;t=20"#),
                    (policy, br#""bytes";q=65535;qu="content-bytes";w=10"#),
                    (policy, br#""calls";q=100;qu="requests";w=60"#),
                ],
                left(40, SECOND * 20),
            ),
            (
                &[
                    ("ratelimit", br#""c";r=1;t=5"#),
                    (policy, br#""c";q=8;qu="concurrent-requests""#),
                ],
                None,
            ),
            // A malformed policy field is ignored, not the RateLimit field.
            (
                &[
                    ("ratelimit", br#""c";r=1"#),
                    (policy, br#""c";q=8;w=60"#),
                    (policy, br#""d";q=8;w="#),
                ],
                left(1, Duration::ZERO),
            ),
            // Other parameters are comments; the last of a key wins.
            (
                &[(
                    "ratelimit",
                    br#""default";r=300000000;t=60;pk=:QXBwLTk5OQ==:"#,
                )],
                left(300_000_000, SECOND * 60),
            ),
            (
                &[("ratelimit", br#""s";q=12;r=6;t=1;acme-burst=?1;x="y""#)],
                left(6, SECOND),
            ),
            (
                &[("ratelimit", br#""s";r=1;r=8;t=2;t=3"#)],
                left(8, SECOND * 3),
            ),
            // Whitespace where RFC 9651 allows it.
            (
                &[("ratelimit", b" \"a\";r=9;t=2 ,\t\"b\"; r=3 ")],
                left(3, Duration::ZERO),
            ),
            // An escaped String names its policy too.
            (
                &[
                    ("ratelimit", br#""a\"b";r=2"#),
                    (policy, br#""a\"b";q=5;w=9"#),
                ],
                left(2, SECOND * 9),
            ),
        ] {
            assert_eq!(read(pairs).requests, expected, "{pairs:?}");
        }
    }

    #[test]
    fn ietf_draft_07_dictionary() {
        for (value, expected) in [
            (
                &b"limit=100, remaining=50, reset=30"[..],
                left(50, SECOND * 30),
            ),
            (b"remaining=50,reset=30,limit=100", left(50, SECOND * 30)),
            (b"limit=100, remaining=50", left(50, Duration::ZERO)),
            (
                b"limit=100, remaining=50, reset=-3",
                left(50, Duration::ZERO),
            ),
            (
                b"limit=10, remaining=0;w=1, reset=10;x",
                left(0, SECOND * 10),
            ),
            (b"remaining=5, remaining=4, reset=1", left(4, SECOND)),
            (b"limit=100, reset=30", None),
            (b"limit=100, remaining=\"50\", reset=30", None),
            (b"limit=100, remaining, reset=30", None),
            (b"limit=100, remaining=50, reset=30,", None),
            (b"Limit=100, Remaining=50", None),
        ] {
            assert_eq!(
                read(&[("ratelimit", value)]).requests,
                expected,
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn malformed_ietf_fields_are_ignored() {
        for value in [
            &br#""default";r="#[..],
            br#""default;r=5"#,
            br#""a";r=5,"#,
            br#","a";r=5"#,
            br#""a",,"b";r=5"#,
            br#""a" ;r=5"#,
            br#""a";R=5"#,
            br#""a";r=5;t=3 garbage"#,
            br#""a";r=5 "b";r=1"#,
            br#""a\q";r=5"#,
            br#""a";r=:abc"#,
            br#""a";r=?2"#,
            br#""a";r=-"#,
            br#""a";r=1.;t=1"#,
            // RFC 9651 Decimals: at most 12 digits before the point and 3 after.
            br#""a";r=5;x=1.2345"#,
            br#""a";r=5;x=1234567890123.5"#,
            // Byte Sequences: base64 characters only.
            br#""a";r=5;x=:a-b:"#,
            br#"("a";r=5"#,
            br#"(("a"));r=5"#,
            br#""a";r=5;"#,
            b"\"\x80\";r=5",
            b"\"a\";r=5\x80",
            b"\"a\tb\";r=5",
            b"@1659578233;r=5",
            // RFC 9651 discards spaces before a field, not tabs (HTTP strips both first).
            b"\t\"a\";r=5",
        ] {
            let count = read(&[("ratelimit", value)]);
            assert_eq!(count.requests, None, "{:?}", String::from_utf8_lossy(value));
            // The next family is read instead.
            let count = read(&[("ratelimit", value), ("x-ratelimit-remaining", b"7")]);
            assert_eq!(
                count.requests,
                left(7, Duration::ZERO),
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
        // One malformed line makes the whole field malformed; so does an empty one, as the
        // lines joined by commas then end in a comma (RFC 9651, section 4.2).
        for last in [&br#""b";r=0;t="#[..], b""] {
            assert_eq!(
                read(&[("ratelimit", br#""a";r=1;t=1"#), ("ratelimit", last)]).requests,
                None
            );
        }
    }

    #[test]
    fn older_draft_fields() {
        for (pairs, expected) in [
            (
                &[
                    ("RateLimit-Remaining", &b"50"[..]),
                    ("RateLimit-Reset", b"30"),
                ][..],
                left(50, SECOND * 30),
            ),
            (
                &[
                    ("ratelimit-limit", b"100"),
                    ("ratelimit-remaining", b" 0 "),
                    ("ratelimit-reset", b"7"),
                ],
                left(0, SECOND * 7),
            ),
            // An HTTP date, as Retry-After has it.
            (
                &[
                    ("ratelimit-remaining", b"3"),
                    ("ratelimit-reset", b"Tue, 14 Nov 2023 22:14:00 GMT"),
                ],
                left(3, SECOND * 40),
            ),
            (&[("ratelimit-remaining", b"3")], left(3, Duration::ZERO)),
            (
                &[("ratelimit-remaining", b"3"), ("ratelimit-reset", b"soon")],
                left(3, Duration::ZERO),
            ),
            (
                &[("ratelimit-remaining", b"3"), ("ratelimit-reset", b"-1")],
                left(3, Duration::ZERO),
            ),
            (
                &[("ratelimit-remaining", b"3"), ("ratelimit-reset", b"1.5")],
                left(3, Duration::ZERO),
            ),
            // The first line of a count sent twice.
            (
                &[("ratelimit-remaining", b"3"), ("ratelimit-remaining", b"1")],
                left(3, Duration::ZERO),
            ),
            (
                &[("ratelimit-remaining", b"many"), ("ratelimit-reset", b"1")],
                None,
            ),
            (&[("ratelimit-remaining", b"-1")], None),
            (&[("ratelimit-remaining", b"1.0")], None),
            (&[("ratelimit-remaining", b"")], None),
            (&[("ratelimit-remaining", b"5, 5")], None),
            (&[("ratelimit-remaining", b"+5")], None),
        ] {
            assert_eq!(read(pairs).requests, expected, "{pairs:?}");
        }
    }

    #[test]
    fn x_ratelimit_resets_in_delta_or_epoch_seconds() {
        let ms = Duration::from_millis;
        for (reset, expected) in [
            (&b"30"[..], SECOND * 30),
            (b"0", Duration::ZERO),
            (b" 2.5 ", ms(2500)),
            (b".25", ms(250)),
            // GitHub: the Unix time of the reset.
            (b"1700000042", SECOND * 42),
            (b"1700000000", Duration::ZERO),
            (b"1699999000", Duration::ZERO),
            (b"1000000000", Duration::ZERO),
            // Discord: with a fraction.
            (b"1700000001.250", ms(1250)),
            // Epoch milliseconds.
            (b"1700000042000", SECOND * 42),
            (b"1700000000500", ms(500)),
            (b"1000000000000", Duration::ZERO),
            // Just under the epoch: a delta, over ten years.
            (b"999999999", MAX_PAUSE),
            (b"315359999", MAX_PAUSE - SECOND),
            // An HTTP date.
            (b"Tue, 14 Nov 2023 22:15:00 GMT", SECOND * 100),
            (b"99999999999999999999999999", MAX_PAUSE),
            // Unreadable: unknown.
            (b"", Duration::ZERO),
            (b"later", Duration::ZERO),
            (b"-30", Duration::ZERO),
            (b"1e9", Duration::ZERO),
            (b"30s", Duration::ZERO),
            (b"2023-11-14T22:15:00Z", Duration::ZERO),
        ] {
            assert_eq!(
                read(&[
                    ("X-RateLimit-Remaining", b"4999"),
                    ("X-RateLimit-Reset", reset)
                ])
                .requests,
                left(4999, expected),
                "{:?}",
                String::from_utf8_lossy(reset)
            );
        }
        assert_eq!(read(&[("x-ratelimit-remaining", b"")]).requests, None);
        assert_eq!(read(&[("x-ratelimit-remaining", b"lots")]).requests, None);
    }

    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        for (value, expected) in [
            (&b"6m0s"[..], Some(SECOND * 360)),
            (b"1s", Some(SECOND)),
            (b"20ms", Some(ms(20))),
            (b"1h2m3.5s", Some(ms(3_723_500))),
            (b"0.5s", Some(ms(500))),
            (b"59.9s", Some(ms(59_900))),
            (b"0", Some(Duration::ZERO)),
            (b"0s", Some(Duration::ZERO)),
            (b"1.5h", Some(SECOND * 5400)),
            (b".5s", Some(ms(500))),
            (b"5.s", Some(SECOND * 5)),
            (b"2m59.56s", Some(ms(179_560))),
            (b"1h1h", Some(SECOND * 7200)),
            (b"100us", Some(Duration::from_micros(100))),
            ("100µs".as_bytes(), Some(Duration::from_micros(100))),
            ("100μs".as_bytes(), Some(Duration::from_micros(100))),
            (b"7ns", Some(Duration::from_nanos(7))),
            (b"1.0000000019s", Some(Duration::from_nanos(1_000_000_001))),
            (b"0.000000001h", Some(Duration::from_nanos(3600))),
            (b" 1s\t", Some(SECOND)),
            (b"99999999999h", Some(MAX_PAUSE)),
            (b"99999999999999999999999999999h", Some(MAX_PAUSE)),
            (b"87600h", Some(MAX_PAUSE)),
            (b"87599h59m59s", Some(MAX_PAUSE - SECOND)),
            (b"", None),
            (b"1", None),
            (b"00", None),
            (b"s", None),
            (b".s", None),
            (b"1x", None),
            (b"1d", None),
            (b"1S", None),
            (b"-1s", None),
            (b"+1s", None),
            (b"1s2", None),
            (b"1 s", None),
            (b"1s 2s", None),
            (b"1..5s", None),
            (b"\xc2s", None),
        ] {
            assert_eq!(
                parse_go_duration(value),
                expected,
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn llm_api_fields() {
        let ms = Duration::from_millis;
        for (reset, expected) in [
            (&b"6m0s"[..], SECOND * 360),
            (b"1s", SECOND),
            (b"20ms", ms(20)),
            (b"1h2m3.5s", ms(3_723_500)),
            (b"0.5s", ms(500)),
            (b"59.9s", ms(59_900)),
            // Bare seconds, from suppliers that copied the name only.
            (b"60", SECOND * 60),
            (b"1.5", ms(1500)),
            (b"later", Duration::ZERO),
            (b"-1s", Duration::ZERO),
        ] {
            let count = read(&[
                ("x-ratelimit-limit-requests", b"10000"),
                ("x-ratelimit-remaining-requests", b"9999"),
                ("x-ratelimit-reset-requests", reset),
                ("x-ratelimit-limit-tokens", b"2000000"),
                ("x-ratelimit-remaining-tokens", b"1999000"),
                ("x-ratelimit-reset-tokens", reset),
            ]);
            assert_eq!(
                count,
                SupplierCount {
                    requests: left(9999, expected),
                    tokens: left(1_999_000, expected),
                    retry_after: None,
                },
                "{:?}",
                String::from_utf8_lossy(reset)
            );
        }
        // Tokens alone do not count calls.
        let count = read(&[
            ("x-ratelimit-remaining-tokens", b"150"),
            ("x-ratelimit-reset-tokens", b"1m"),
        ]);
        assert_eq!(
            count,
            SupplierCount {
                tokens: left(150, SECOND * 60),
                ..SupplierCount::default()
            }
        );
        assert_eq!(
            read(&[("x-ratelimit-remaining-tokens", b"many")]).tokens,
            None
        );
    }

    #[test]
    fn requests_come_from_the_first_family_with_a_count() {
        let ietf: (&str, &[u8]) = ("ratelimit", br#""default";r=1;t=10"#);
        let draft: (&str, &[u8]) = ("ratelimit-remaining", b"2");
        let draft_reset: (&str, &[u8]) = ("ratelimit-reset", b"20");
        let x: (&str, &[u8]) = ("x-ratelimit-remaining", b"3");
        let x_reset: (&str, &[u8]) = ("x-ratelimit-reset", b"30");
        let llm: (&str, &[u8]) = ("x-ratelimit-remaining-requests", b"4");
        let llm_reset: (&str, &[u8]) = ("x-ratelimit-reset-requests", b"40s");
        let unreadable: (&str, &[u8]) = ("ratelimit", br#""default";t=10"#);
        for (pairs, expected) in [
            (
                &[llm, llm_reset, x, x_reset, draft, draft_reset, ietf][..],
                left(1, SECOND * 10),
            ),
            (
                &[llm, llm_reset, x, x_reset, draft, draft_reset],
                left(2, SECOND * 20),
            ),
            (
                &[llm, llm_reset, x, x_reset, draft_reset, unreadable],
                left(3, SECOND * 30),
            ),
            (
                &[llm, llm_reset, x_reset, draft_reset],
                left(4, SECOND * 40),
            ),
            // A family's reset never goes with another family's count.
            (&[llm, x_reset, draft_reset], left(4, Duration::ZERO)),
        ] {
            assert_eq!(read(pairs).requests, expected, "{pairs:?}");
        }
    }

    #[test]
    fn retry_after_in_milliseconds() {
        let ms = Duration::from_millis;
        for (pairs, expected) in [
            (&[("x-ms-retry-after-ms", &b"1500"[..])][..], Some(ms(1500))),
            (&[("retry-after-ms", b"20")], Some(ms(20))),
            (&[("retry-after-ms", b" 0 ")], Some(Duration::ZERO)),
            (
                &[("retry-after-ms", b"1.5")],
                Some(Duration::from_micros(1500)),
            ),
            (
                &[("x-ms-retry-after-ms", b"200"), ("retry-after-ms", b"900")],
                Some(ms(900)),
            ),
            (
                &[("x-ms-retry-after-ms", b"900"), ("retry-after-ms", b"soon")],
                Some(ms(900)),
            ),
            (&[("retry-after-ms", b"315360000000")], Some(MAX_PAUSE)),
            (
                &[("retry-after-ms", b"99999999999999999999999")],
                Some(MAX_PAUSE),
            ),
            (&[("retry-after-ms", b"soon")], None),
            (&[("retry-after-ms", b"-5")], None),
            (&[("retry-after-ms", b"5ms")], None),
            (&[("retry-after", b"5")], None),
        ] {
            assert_eq!(read(pairs).retry_after, expected, "{pairs:?}");
        }
    }

    #[test]
    fn huge_values_saturate_and_clamp() {
        let huge = &b"99999999999999999999999999999999"[..];
        for (pairs, expected) in [
            // RFC 9651 Integers have at most 15 digits; a 16th fails the whole field.
            (
                &[(
                    "ratelimit",
                    &br#""a";r=999999999999999;t=999999999999999"#[..],
                )][..],
                left(999_999_999_999_999, MAX_PAUSE),
            ),
            (
                &[("ratelimit", br#""a";r=1;t=1, "b";r=1000000000000000"#)],
                None,
            ),
            (
                &[(
                    "ratelimit",
                    b"remaining=999999999999999, reset=999999999999",
                )],
                left(999_999_999_999_999, MAX_PAUSE),
            ),
            (
                &[("ratelimit", b"remaining=1, reset=1000000000000000")],
                None,
            ),
            (
                &[
                    ("ratelimit", br#""a";r=1"#),
                    ("ratelimit-policy", br#""a";q=1;w=999999999999"#),
                ],
                left(1, MAX_PAUSE),
            ),
            (
                &[("ratelimit-remaining", huge), ("ratelimit-reset", huge)],
                left(u64::MAX, MAX_PAUSE),
            ),
            (
                &[
                    ("x-ratelimit-remaining", b"18446744073709551616"),
                    ("x-ratelimit-reset", huge),
                ],
                left(u64::MAX, MAX_PAUSE),
            ),
            (
                &[("x-ratelimit-remaining", b"18446744073709551615")],
                left(u64::MAX, Duration::ZERO),
            ),
            (
                &[
                    ("x-ratelimit-remaining-requests", huge),
                    ("x-ratelimit-reset-requests", huge),
                ],
                left(u64::MAX, MAX_PAUSE),
            ),
        ] {
            assert_eq!(read(pairs).requests, expected, "{pairs:?}");
        }
    }

    #[test]
    fn garbage_says_nothing() {
        let names = [
            "ratelimit",
            "ratelimit-policy",
            "ratelimit-remaining",
            "ratelimit-reset",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
            "x-ratelimit-remaining-requests",
            "x-ratelimit-reset-requests",
            "x-ratelimit-remaining-tokens",
            "x-ratelimit-reset-tokens",
            "x-ms-retry-after-ms",
            "retry-after-ms",
        ];
        for value in [
            &b"-"[..],
            b".",
            b"?",
            b"\"",
            b"\\",
            b":",
            b"(",
            b")",
            b",",
            b";",
            b"=",
            b"\"\\",
            b"1e5",
            b"\x80\xff",
            "µ".as_bytes(),
            b"\t",
            b"r=",
        ] {
            let pairs: Vec<(&str, &[u8])> = names.iter().map(|&name| (name, value)).collect();
            assert_eq!(
                read(&pairs),
                SupplierCount::default(),
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
    }

    const MEGABYTE: usize = 1 << 20;

    /// `unit` repeated to about a megabyte.
    fn megabyte(unit: &str) -> Vec<u8> {
        unit.repeat(MEGABYTE / unit.len()).into_bytes()
    }

    #[test]
    fn megabyte_values_are_read_whole() {
        // A well-formed List of 60 000 members, the tightest in the middle, each with its
        // own policy.
        let members = 60_000;
        let mut limits: Vec<String> = (0..members)
            .map(|i| format!("\"p{i}\";r={};t=5", 1_000 + i))
            .collect();
        limits[members / 2] = format!("\"p{}\";r=3", members / 2);
        let limits = limits.join(", ");
        let policies = (0..members)
            .map(|i| format!("\"p{i}\";q=5000;w={}", 10 + i))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(limits.len() + policies.len() > MEGABYTE);
        assert_eq!(
            read(&[
                ("ratelimit", limits.as_bytes()),
                ("ratelimit-policy", policies.as_bytes()),
            ])
            .requests,
            left(3, Duration::from_secs(10 + members as u64 / 2))
        );

        let digits = megabyte("9");
        let unterminated = [&b"\""[..], &megabyte("a")].concat();
        let params = [&br#""a";r=1"#[..], &megabyte(";x")].concat();
        let spaces = [&b"(\"a\""[..], &megabyte(" ")].concat();
        let dictionary = megabyte("remaining=1,");
        for (pairs, expected) in [
            (
                &[("x-ratelimit-remaining", &digits[..])][..],
                left(u64::MAX, Duration::ZERO),
            ),
            (
                &[("ratelimit-remaining", b"1"), ("ratelimit-reset", &digits)],
                left(1, MAX_PAUSE),
            ),
            (
                &[
                    ("x-ratelimit-remaining", b"1"),
                    ("x-ratelimit-reset", &digits),
                ],
                left(1, MAX_PAUSE),
            ),
            (&[("ratelimit", &unterminated)], None),
            (&[("ratelimit", &params)], left(1, Duration::ZERO)),
            (&[("ratelimit", &spaces)], None),
            // A trailing comma: malformed, after a megabyte of members.
            (&[("ratelimit", &dictionary)], None),
        ] {
            assert_eq!(read(pairs).requests, expected);
        }

        let seconds = megabyte("1s");
        let ones = [&megabyte("1")[..], b"ns"].concat();
        let fraction = [&b"0."[..], &megabyte("9"), b"s"].concat();
        for (value, expected) in [
            (&seconds[..], Some(SECOND * (MEGABYTE as u32 / 2))),
            (&ones, Some(MAX_PAUSE)),
            (&fraction, Some(Duration::from_nanos(999_999_999))),
            (&digits, None),
        ] {
            assert_eq!(parse_go_duration(value), expected);
        }
        assert_eq!(
            read(&[("retry-after-ms", &digits)]).retry_after,
            Some(MAX_PAUSE)
        );
    }
}
