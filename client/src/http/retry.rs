//! When a throttled HTTP request is retried, and how long its bucket pauses.
//!
//! Pure: no I/O, no clock, no randomness. The adapters pass in the current time and a jitter
//! sample, and get back a [`Step`]; they do the pausing, acquiring and sending.

use std::time::{Duration, SystemTime};

use ::http::{HeaderMap, Method, StatusCode};
use throttle_bucket::MAX_WAIT_MS;

use crate::{Cut, SupplierCount};

/// The longest pause the module takes (`THROTTLE.PAUSE`'s limit, 10 years).
pub const MAX_PAUSE: Duration = Duration::from_millis(MAX_WAIT_MS);

/// What the HTTP integrations do when the supplier pushes back.
///
/// Pushback is a 429 or a 503, whatever its headers, or a status of the policy's others
/// ([`pushback_status`](RetryPolicy::pushback_status); by default 403) when the response says
/// it is a rate limit: a readable `Retry-After` (or `x-ms-retry-after-ms`, `retry-after-ms`),
/// or a remaining count of 0 in any of the rate-limit headers
/// [`read_supplier_count`](super::read_supplier_count) reads. GitHub answers its secondary
/// rate limit so (403 with `Retry-After`, or with `x-ratelimit-remaining: 0`); a plain 403
/// (forbidden) is never pushback, and comes back as it is.
///
/// A pushback whose headers say the supplier's window is spent (a remaining count of 0 and
/// when it resets) pauses the fleet until the reset (or the `Retry-After`, if that is later)
/// without cutting its rate: nothing is left, the rate is not too high. Any other pushback
/// pauses for its `Retry-After` and cuts the rate ([`cut_rate`](RetryPolicy::cut_rate)).
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::http::RetryPolicy;
///
/// let policy = RetryPolicy::default()
///     .max_attempts(5)
///     .default_pause(Duration::from_secs(2))
///     .max_jitter(Duration::from_millis(200))
///     .retry_non_idempotent(false)
///     .cut_rate(0.5, Duration::from_secs(60));
/// assert_eq!(policy.attempts(), 5);
///
/// // Pause only, never cut the rate; leave the supplier's rate-limit headers alone.
/// let plain = RetryPolicy::default().no_cut().sync_with_supplier(false);
/// # let _ = plain;
///
/// // A 509 that says it is a rate limit is pushback too; a 403 never is.
/// use http::StatusCode;
/// let custom = RetryPolicy::default()
///     .with_pushback_statuses([])
///     .pushback_status(StatusCode::from_u16(509)?);
/// assert!(!custom.is_pushback_status(StatusCode::FORBIDDEN));
/// # Ok::<(), http::status::InvalidStatusCode>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    default_pause: Duration,
    max_jitter: Duration,
    retry_non_idempotent: bool,
    /// The cut a 429 or 503 makes, with the pause filled in; `None`: pause only.
    cut: Option<Cut>,
    sync_with_supplier: bool,
    /// The statuses beside 429 and 503 that are pushback when the response says it is a rate
    /// limit.
    others: StatusSet,
}

impl Default for RetryPolicy {
    /// 3 attempts in all, a pause of 1 s when the supplier gives no usable `Retry-After`,
    /// up to 100 ms of jitter, idempotent methods only; every 429 and 503 cuts the fleet's
    /// rate to 0.7 of what it is, recovering over 30 s ([`Cut`]'s defaults), unless its
    /// headers say the window is spent; a 403 that says it is a rate limit is pushback too;
    /// the supplier's rate-limit headers lower the bucket.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            default_pause: Duration::from_secs(1),
            max_jitter: Duration::from_millis(100),
            retry_non_idempotent: false,
            cut: Some(Cut::after(Duration::ZERO)),
            sync_with_supplier: true,
            others: StatusSet::EMPTY.with(StatusCode::FORBIDDEN),
        }
    }
}

impl RetryPolicy {
    /// Sends in all, the first one included (at least 1: 1 never retries, but a 429 or 503
    /// still pauses the bucket).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The pause when a 429 or 503 has no `Retry-After`, or one that cannot be read.
    pub fn default_pause(mut self, pause: Duration) -> Self {
        self.default_pause = pause.min(MAX_PAUSE);
        self
    }

    /// Each pause gets a uniform random extra in `0..max_jitter`: a margin over the supplier's
    /// word, and replicas that saw the same 429 do not all set the same instant.
    pub fn max_jitter(mut self, jitter: Duration) -> Self {
        self.max_jitter = jitter.min(MAX_PAUSE);
        self
    }

    /// Also retry requests whose method is not idempotent (POST, PATCH, ...). Off by
    /// default: the supplier may have acted on a request it answered 429 or 503.
    pub fn retry_non_idempotent(mut self, yes: bool) -> Self {
        self.retry_non_idempotent = yes;
        self
    }

    /// A 429 or 503 cuts the fleet's rate by `factor` (0.01 to 1), climbing back to the
    /// configured rate over `recovery` without another cut (`THROTTLE.CUT`; once per episode
    /// however many replicas saw it). The default is 0.7 and 30 s.
    pub fn cut_rate(mut self, factor: f64, recovery: Duration) -> Self {
        self.cut = Some(
            Cut::after(Duration::ZERO)
                .with_factor(factor)
                .with_recovery(recovery),
        );
        self
    }

    /// A 429 or 503 only pauses the fleet (`THROTTLE.PAUSE`), never cuts its rate.
    pub fn no_cut(mut self) -> Self {
        self.cut = None;
        self
    }

    /// Also treats `status` as pushback when the response says it is a rate limit (a readable
    /// `Retry-After`, or a remaining count of 0; see [`RetryPolicy`]), beside 429 and 503
    /// (always pushback) and the statuses set so far (by default 403). A status outside
    /// 400..=599 is ignored: a success or a redirect is never pushback.
    pub fn pushback_status(mut self, status: StatusCode) -> Self {
        self.others = self.others.with(status);
        self
    }

    /// Treats exactly `statuses` as pushback when the response says it is a rate limit,
    /// beside 429 and 503 (always pushback): `with_pushback_statuses([])` hands every 403 to
    /// the caller as it is. A status outside 400..=599 is ignored.
    pub fn with_pushback_statuses(
        mut self,
        statuses: impl IntoIterator<Item = StatusCode>,
    ) -> Self {
        self.others = statuses.into_iter().fold(StatusSet::EMPTY, StatusSet::with);
        self
    }

    /// Whether `status` is pushback when the response says it is a rate limit: 429 and 503,
    /// whatever the response says, and the policy's others ([`pushback_status`](Self::pushback_status)).
    pub fn is_pushback_status(&self, status: StatusCode) -> bool {
        is_pushback(status) || self.others.contains(status)
    }

    /// Whether the supplier's rate-limit headers (`RateLimit`, `X-RateLimit-Remaining`,
    /// `x-ratelimit-remaining-requests`, ... read by [`read_supplier_count`](super::read_supplier_count))
    /// lower the bucket to what the supplier says is left (default `true`). Off, they still
    /// say whether a 403 is a rate limit and whether a window is spent.
    pub fn sync_with_supplier(mut self, sync: bool) -> Self {
        self.sync_with_supplier = sync;
        self
    }

    /// Whether the supplier's rate-limit headers are read and sync the bucket.
    pub fn syncs_with_supplier(&self) -> bool {
        self.sync_with_supplier
    }

    /// The cut a pushback of `pause` makes (`None`: pause only).
    pub fn cut_for(&self, pause: Duration) -> Option<Cut> {
        self.cut.map(|cut| cut.with_pause(pause))
    }

    /// Sends in all, the first one included.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Whether a request with this method, about to make its `attempt`-th send (from 1),
    /// could be retried after it: the adapters keep a copy of the request only then.
    pub(crate) fn may_retry(&self, method: &Method, attempt: u32) -> bool {
        attempt < self.max_attempts && (self.retry_non_idempotent || is_idempotent(method))
    }

    /// What to do with the response to the `attempt`-th send: its `status`, its `headers`,
    /// and the `count` [`read_supplier_count`](super::read_supplier_count) read in them at
    /// `now`. `has_copy` says whether the adapter kept a copy to send again; `jitter` is a
    /// sample in `0..1`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn after_response(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        count: &SupplierCount,
        attempt: u32,
        has_copy: bool,
        now: SystemTime,
        jitter: f64,
    ) -> Step {
        // The pause the supplier asked for: `Retry-After`, else its other header.
        let asked = headers
            .get(::http::header::RETRY_AFTER)
            .and_then(|value| parse_retry_after(value.as_bytes(), now))
            .or(count.retry_after);
        let says_rate_limit = asked.is_some() || nothing_left(count);
        if !(is_pushback(status) || (self.others.contains(status) && says_rate_limit)) {
            return Step::Done;
        }
        let spent = spent_window(count);
        let wait = match spent {
            // Nothing is left until the reset; a later `Retry-After` holds too.
            Some(reset) => asked.map_or(reset, |asked| asked.max(reset)),
            None => asked.unwrap_or(self.default_pause),
        };
        let extra = self.max_jitter.mul_f64(jitter.clamp(0.0, 1.0));
        let pause = wait.saturating_add(extra).min(MAX_PAUSE);
        Step::Pause {
            pause,
            retry: has_copy && attempt < self.max_attempts,
            // A spent window is no sign of sending too fast: its rate stays.
            cut: if spent.is_some() {
                None
            } else {
                self.cut_for(pause)
            },
        }
    }
}

/// A count of 0 in any of the supplier's counts (calls or tokens).
fn nothing_left(count: &SupplierCount) -> bool {
    [count.requests, count.tokens]
        .into_iter()
        .flatten()
        .any(|remaining| remaining.left == 0)
}

/// The latest reset of the supplier's counts that say nothing is left and when that changes:
/// `None` when none says both (a reset of zero is one the supplier did not say).
fn spent_window(count: &SupplierCount) -> Option<Duration> {
    [count.requests, count.tokens]
        .into_iter()
        .flatten()
        .filter(|remaining| remaining.left == 0 && remaining.reset > Duration::ZERO)
        .map(|remaining| remaining.reset)
        .max()
}

/// The decision after one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Not pushed back: the response goes to the caller.
    Done,
    /// Pushed back: pause the bucket this long, cutting its rate by `cut` (its pause filled
    /// in) or not, then send again or hand the response over.
    Pause {
        pause: Duration,
        retry: bool,
        cut: Option<Cut>,
    },
}

/// Statuses 400..=599, one bit each: a set that is `Copy`, as [`RetryPolicy`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StatusSet([u64; 4]);

impl StatusSet {
    const EMPTY: StatusSet = StatusSet([0; 4]);
    const FIRST: u16 = 400;
    const LAST: u16 = 599;

    /// The set with `status`; the same set for a status outside 400..=599.
    fn with(mut self, status: StatusCode) -> StatusSet {
        if let Some(bit) = Self::bit(status) {
            self.0[bit / 64] |= 1 << (bit % 64);
        }
        self
    }

    fn contains(&self, status: StatusCode) -> bool {
        Self::bit(status).is_some_and(|bit| self.0[bit / 64] & (1 << (bit % 64)) != 0)
    }

    /// The status's bit, `None` outside 400..=599.
    fn bit(status: StatusCode) -> Option<usize> {
        let code = status.as_u16();
        (Self::FIRST..=Self::LAST)
            .contains(&code)
            .then(|| usize::from(code - Self::FIRST))
    }
}

/// The statuses by which a supplier says "too much, come back later": 429 Too Many
/// Requests and 503 Service Unavailable.
pub fn is_pushback(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE
}

/// RFC 9110's idempotent methods (section 9.2.2): GET, HEAD, OPTIONS, TRACE, PUT, DELETE.
/// Any other method, extensions included, is not.
pub fn is_idempotent(method: &Method) -> bool {
    [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::TRACE,
        Method::PUT,
        Method::DELETE,
    ]
    .contains(method)
}

/// Reads a `Retry-After` value (RFC 9110, section 10.2.3): delta seconds (`120`) or an HTTP
/// date (`Wed, 21 Oct 2015 07:28:00 GMT`, or the obsolete forms), measured from `now`.
/// A date in the past is zero; anything longer than [`MAX_PAUSE`] is `MAX_PAUSE`. `None` when
/// the value is neither.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use redis_throttle::http::parse_retry_after;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
/// assert_eq!(parse_retry_after(b"3", now), Some(Duration::from_secs(3)));
/// assert_eq!(
///     parse_retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT", now),
///     Some(Duration::from_secs(10)),
/// );
/// assert_eq!(parse_retry_after(b"soon", now), None);
/// ```
pub fn parse_retry_after(value: &[u8], now: SystemTime) -> Option<Duration> {
    let text = std::str::from_utf8(value).ok()?.trim_matches([' ', '\t']);
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // So many digits that u64 overflows is still "very long", not garbage.
        let seconds = text.bytes().fold(0u64, |acc, digit| {
            acc.saturating_mul(10)
                .saturating_add(u64::from(digit - b'0'))
        });
        return Some(Duration::from_secs(seconds).min(MAX_PAUSE));
    }
    let at = httpdate::parse_http_date(text).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_PAUSE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::read_supplier_count;
    use ::http::{HeaderName, HeaderValue};

    const SECOND: Duration = Duration::from_secs(1);

    /// Wed, 21 Oct 2015 07:28:00 GMT, in Unix seconds.
    const OCT_21: u64 = 1_445_412_480;

    fn at(unix: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(unix)
    }

    #[test]
    fn retry_after_delta_seconds() {
        let now = at(OCT_21);
        for (value, expected) in [
            ("0", Some(Duration::ZERO)),
            ("1", Some(SECOND)),
            ("120", Some(SECOND * 120)),
            (" 7\t", Some(SECOND * 7)),
            ("007", Some(SECOND * 7)),
            ("", None),
            ("  ", None),
            ("-1", None),
            ("+1", None),
            ("1.5", None),
            ("1 2", None),
            ("1s", None),
            ("soon", None),
            ("0x10", None),
        ] {
            assert_eq!(
                parse_retry_after(value.as_bytes(), now),
                expected,
                "{value:?}"
            );
        }
    }

    #[test]
    fn retry_after_http_dates_in_all_three_forms() {
        let now = at(OCT_21 - 90);
        for value in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(
                parse_retry_after(value.as_bytes(), now),
                Some(SECOND * 90),
                "{value:?}"
            );
        }
        // Sub-second precision of `now` is kept: the date is a whole second.
        let now = at(OCT_21) - Duration::from_millis(250);
        assert_eq!(
            parse_retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn retry_after_in_the_past_or_now_is_zero() {
        let date = b"Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(parse_retry_after(date, at(OCT_21)), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(date, at(OCT_21 + 3600)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(b"Thu, 01 Jan 1970 00:00:00 GMT", at(OCT_21)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn retry_after_garbage_is_none() {
        let now = at(OCT_21);
        for value in [
            &b"Wed, 21 Oct 2015 07:28:00"[..],
            b"Wed, 32 Oct 2015 07:28:00 GMT",
            b"Wed, 21 Oct 2015 25:28:00 GMT",
            b"2015-10-21T07:28:00Z",
            b"\xff\xfe",
            b"1\x002",
        ] {
            assert_eq!(parse_retry_after(value, now), None, "{value:?}");
        }
    }

    #[test]
    fn huge_retry_after_is_clamped_to_ten_years() {
        let now = at(OCT_21);
        assert_eq!(MAX_PAUSE, SECOND * 315_360_000);
        for value in [
            "315360000",
            "315360001",
            "18446744073709551615",
            "99999999999999999999999999999999",
            "Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            assert_eq!(
                parse_retry_after(value.as_bytes(), now),
                Some(MAX_PAUSE),
                "{value:?}"
            );
        }
        assert_eq!(
            parse_retry_after(b"315359999", now),
            Some(MAX_PAUSE - SECOND)
        );
    }

    #[test]
    fn pushback_statuses() {
        for code in [429, 503] {
            assert!(is_pushback(StatusCode::from_u16(code).unwrap()), "{code}");
        }
        for code in [200, 204, 400, 404, 500, 502, 504] {
            assert!(!is_pushback(StatusCode::from_u16(code).unwrap()), "{code}");
        }
    }

    #[test]
    fn idempotent_methods_are_rfc_9110s() {
        for method in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(&method.parse().unwrap()), "{method}");
        }
        for method in ["POST", "PATCH", "CONNECT", "PURGE", "get"] {
            assert!(!is_idempotent(&method.parse().unwrap()), "{method}");
        }
    }

    #[test]
    fn only_idempotent_requests_with_attempts_left_may_retry() {
        let policy = RetryPolicy::default();
        assert!(policy.may_retry(&Method::GET, 1));
        assert!(policy.may_retry(&Method::PUT, 2));
        assert!(
            !policy.may_retry(&Method::GET, 3),
            "the third send is the last"
        );
        assert!(!policy.may_retry(&Method::POST, 1));
        assert!(!policy.may_retry(&Method::PATCH, 1));
        let opted_in = policy.retry_non_idempotent(true);
        assert!(opted_in.may_retry(&Method::POST, 1));
        assert!(!opted_in.may_retry(&Method::POST, 3));
        assert!(!RetryPolicy::default()
            .max_attempts(1)
            .may_retry(&Method::GET, 1));
        assert_eq!(RetryPolicy::default().max_attempts(0).attempts(), 1);
    }

    /// A response's headers, name and value.
    type Headers<'a> = &'a [(&'a str, &'a str)];

    /// The decision on a response with these headers, read as the runner reads them.
    fn decide(
        policy: &RetryPolicy,
        status: u16,
        headers: &[(&str, &str)],
        attempt: u32,
        has_copy: bool,
        jitter: f64,
    ) -> Step {
        let now = at(OCT_21);
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let count = read_supplier_count(&map, now);
        policy.after_response(
            StatusCode::from_u16(status).unwrap(),
            &map,
            &count,
            attempt,
            has_copy,
            now,
            jitter,
        )
    }

    /// A pause of `ms` with the default cut.
    fn cut(ms: u64, retry: bool) -> Step {
        let pause = Duration::from_millis(ms);
        Step::Pause {
            pause,
            retry,
            cut: Some(Cut::after(pause)),
        }
    }

    /// A pause of `ms` without a cut.
    fn pause_only(ms: u64, retry: bool) -> Step {
        Step::Pause {
            pause: Duration::from_millis(ms),
            retry,
            cut: None,
        }
    }

    #[test]
    fn pushback_pauses_for_retry_after_plus_jitter() {
        let policy = RetryPolicy::default()
            .default_pause(SECOND * 2)
            .max_jitter(Duration::from_millis(100));
        let one = [("retry-after", "1")];
        let step = |status, headers: &[(&str, &str)], attempt, has_copy, jitter| {
            decide(&policy, status, headers, attempt, has_copy, jitter)
        };
        assert_eq!(step(200, &one, 1, true, 0.5), Step::Done);
        assert_eq!(step(500, &one, 1, true, 0.5), Step::Done);
        assert_eq!(step(429, &one, 1, true, 0.0), cut(1000, true));
        assert_eq!(step(429, &one, 1, true, 0.5), cut(1050, true));
        assert_eq!(step(503, &one, 2, true, 0.25), cut(1025, true));
        // No copy (not idempotent, or a body that cannot be cloned): pause, no retry.
        assert_eq!(step(429, &one, 1, false, 0.0), cut(1000, false));
        // The last attempt pauses too: the supplier's word holds for everyone else.
        assert_eq!(step(429, &one, 3, true, 0.0), cut(1000, false));
        assert_eq!(step(403, &one, 3, true, 0.0), cut(1000, false));
        // No Retry-After, or garbage: the default pause.
        assert_eq!(step(429, &[], 1, true, 0.0), cut(2000, true));
        assert_eq!(
            step(503, &[("retry-after", "later")], 1, true, 0.0),
            cut(2000, true)
        );
        // A jitter sample out of range cannot make the pause negative or huge.
        assert_eq!(step(429, &one, 1, true, -3.0), cut(1000, true));
        assert_eq!(step(429, &one, 1, true, 7.0), cut(1100, true));
    }

    /// What a response is, by its status and headers: the caller's (`Done`), congestion (a
    /// pause and a cut) or a spent window (a pause until the reset, no cut).
    #[test]
    fn pushback_by_status_and_headers() {
        let policy = RetryPolicy::default()
            .default_pause(SECOND * 2)
            .max_jitter(Duration::ZERO);
        let reset_at = (OCT_21 + 45).to_string();
        let table: &[(u16, Headers<'_>, Step)] = &[
            // Not pushback, whatever the headers say.
            (200, &[], Step::Done),
            (200, &[("retry-after", "1")], Step::Done),
            (
                200,
                &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "5")],
                Step::Done,
            ),
            (500, &[("retry-after", "1")], Step::Done),
            (404, &[("retry-after", "1")], Step::Done),
            // A plain 403 is forbidden, not a rate limit: the caller's.
            (403, &[], Step::Done),
            (403, &[("retry-after", "soon")], Step::Done),
            (403, &[("retry-after", "")], Step::Done),
            (
                403,
                &[("x-ratelimit-remaining", "5"), ("x-ratelimit-reset", "60")],
                Step::Done,
            ),
            (403, &[("x-ratelimit-remaining", "-1")], Step::Done),
            (403, &[("x-ratelimit-remaining", "zero")], Step::Done),
            (403, &[("x-ratelimit-reset", "60")], Step::Done),
            (403, &[("ratelimit", "\"default\";r=0;t=")], Step::Done),
            // A 403 that says it is a rate limit (GitHub's secondary limit): congestion.
            (403, &[("retry-after", "60")], cut(60_000, true)),
            (403, &[("retry-after-ms", "250")], cut(250, true)),
            (403, &[("x-ratelimit-remaining", "0")], cut(2000, true)),
            // A 403 whose window is spent (GitHub's primary limit): until the reset, no cut.
            (
                403,
                &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30")],
                pause_only(30_000, true),
            ),
            (
                403,
                &[
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", reset_at.as_str()),
                ],
                pause_only(45_000, true),
            ),
            (
                403,
                &[("ratelimit", "\"default\";r=0;t=7")],
                pause_only(7_000, true),
            ),
            (
                403,
                &[
                    ("x-ratelimit-remaining-tokens", "0"),
                    ("x-ratelimit-reset-tokens", "1m0s"),
                ],
                pause_only(60_000, true),
            ),
            // 429 and 503: congestion unless the window is spent.
            (429, &[], cut(2000, true)),
            (429, &[("retry-after", "1")], cut(1000, true)),
            (503, &[("retry-after", "2")], cut(2000, true)),
            (
                429,
                &[("retry-after", "1"), ("x-ratelimit-remaining", "0")],
                cut(1000, true),
            ),
            (
                429,
                &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "0")],
                cut(2000, true),
            ),
            (
                429,
                &[("x-ratelimit-remaining", "3"), ("x-ratelimit-reset", "30")],
                cut(2000, true),
            ),
            (
                429,
                &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30")],
                pause_only(30_000, true),
            ),
            (
                503,
                &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30")],
                pause_only(30_000, true),
            ),
            // A spent window waits for the later of its reset and `Retry-After`.
            (
                429,
                &[
                    ("retry-after", "1"),
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", "30"),
                ],
                pause_only(30_000, true),
            ),
            (
                429,
                &[
                    ("retry-after", "90"),
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", "30"),
                ],
                pause_only(90_000, true),
            ),
            // Tokens spent while calls are left: spent all the same, until the later reset.
            (
                429,
                &[
                    ("x-ratelimit-remaining-requests", "10"),
                    ("x-ratelimit-reset-requests", "2s"),
                    ("x-ratelimit-remaining-tokens", "0"),
                    ("x-ratelimit-reset-tokens", "20s"),
                ],
                pause_only(20_000, true),
            ),
            (
                429,
                &[
                    ("x-ratelimit-remaining-requests", "0"),
                    ("x-ratelimit-reset-requests", "50s"),
                    ("x-ratelimit-remaining-tokens", "0"),
                    ("x-ratelimit-reset-tokens", "20s"),
                ],
                pause_only(50_000, true),
            ),
        ];
        for (status, headers, expected) in table {
            assert_eq!(
                decide(&policy, *status, headers, 1, true, 0.0),
                *expected,
                "{status} {headers:?}"
            );
        }
    }

    #[test]
    fn the_pushback_statuses_can_be_changed_but_429_and_503_always_push_back() {
        let retry_after = [("retry-after", "1")];
        let decide = |policy: &RetryPolicy, status, headers: &[(&str, &str)]| {
            decide(
                &policy.max_jitter(Duration::ZERO),
                status,
                headers,
                1,
                true,
                0.0,
            )
        };
        let default = RetryPolicy::default();
        assert!(default.is_pushback_status(StatusCode::FORBIDDEN));
        assert!(!default.is_pushback_status(StatusCode::NOT_FOUND));

        let none = RetryPolicy::default().with_pushback_statuses([]);
        assert_eq!(decide(&none, 403, &retry_after), Step::Done);
        assert_eq!(decide(&none, 429, &retry_after), cut(1000, true));
        assert_eq!(decide(&none, 503, &retry_after), cut(1000, true));
        assert!(!none.is_pushback_status(StatusCode::FORBIDDEN));
        assert!(none.is_pushback_status(StatusCode::TOO_MANY_REQUESTS));

        let bandwidth = StatusCode::from_u16(509).unwrap();
        let more = RetryPolicy::default().pushback_status(bandwidth);
        assert_eq!(decide(&more, 509, &retry_after), cut(1000, true));
        assert_eq!(decide(&more, 509, &[]), Step::Done);
        assert_eq!(decide(&more, 403, &retry_after), cut(1000, true));
        assert_eq!(decide(&more, 403, &[]), Step::Done);

        let only = RetryPolicy::default().with_pushback_statuses([bandwidth]);
        assert_eq!(decide(&only, 403, &retry_after), Step::Done);
        assert_eq!(decide(&only, 509, &retry_after), cut(1000, true));

        // A success, a redirect or a status past 599 is never pushback.
        let odd = RetryPolicy::default()
            .pushback_status(StatusCode::OK)
            .pushback_status(StatusCode::FOUND)
            .pushback_status(StatusCode::from_u16(600).unwrap())
            .pushback_status(StatusCode::from_u16(399).unwrap());
        assert_eq!(odd, RetryPolicy::default());
        assert_eq!(decide(&odd, 200, &retry_after), Step::Done);
        assert_eq!(decide(&odd, 302, &retry_after), Step::Done);
        for code in [400, 403, 463, 464, 527, 528, 599] {
            let status = StatusCode::from_u16(code).unwrap();
            let set = RetryPolicy::default()
                .with_pushback_statuses([])
                .pushback_status(status);
            assert!(set.is_pushback_status(status), "{code}");
            for other in [400, 403, 463, 464, 527, 528, 599] {
                let expected = other == code || other == 429 || other == 503;
                let other = StatusCode::from_u16(other).unwrap();
                assert_eq!(set.is_pushback_status(other), expected, "{code} {other}");
            }
        }
    }

    #[test]
    fn a_policy_that_never_cuts_pauses_for_both_kinds() {
        let policy = RetryPolicy::default()
            .no_cut()
            .default_pause(SECOND * 2)
            .max_jitter(Duration::ZERO);
        let spent = [("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30")];
        assert_eq!(
            decide(&policy, 429, &[], 1, true, 0.0),
            pause_only(2000, true)
        );
        assert_eq!(
            decide(&policy, 429, &spent, 1, true, 0.0),
            pause_only(30_000, true)
        );
        assert_eq!(
            decide(&policy, 403, &spent, 1, false, 0.0),
            pause_only(30_000, false)
        );
    }

    #[test]
    fn retry_after_wins_over_the_suppliers_other_pause_header_which_wins_over_the_default() {
        let policy = RetryPolicy::default()
            .default_pause(SECOND * 2)
            .max_jitter(Duration::ZERO);
        let step = |headers: &[(&str, &str)]| decide(&policy, 429, headers, 1, true, 0.0);
        let asked = ("x-ms-retry-after-ms", "300");
        assert_eq!(step(&[("retry-after", "1"), asked]), cut(1000, true));
        assert_eq!(step(&[("retry-after", "soon"), asked]), cut(300, true));
        assert_eq!(step(&[asked]), cut(300, true));
        assert_eq!(step(&[]), cut(2000, true));
    }

    #[test]
    fn the_default_cut_is_0_7_over_30_s_and_can_be_changed_or_turned_off() {
        let pause = SECOND * 3;
        let cut = RetryPolicy::default().cut_for(pause).unwrap();
        assert_eq!(
            (cut.pause(), cut.factor_bp(), cut.recovery()),
            (pause, 7_000, SECOND * 30)
        );
        let cut = RetryPolicy::default()
            .cut_rate(0.5, SECOND * 60)
            .cut_for(pause)
            .unwrap();
        assert_eq!((cut.factor_bp(), cut.recovery()), (5_000, SECOND * 60));
        // Every factor as it was set: 113 bp (0.01135) went back through f64 as 112.
        for bp in 100..10_000u16 {
            let factor = (f64::from(bp) + 0.5) / 10_000.0;
            let set = Cut::after(pause).with_factor(factor).factor_bp();
            let policy = RetryPolicy::default().cut_rate(factor, SECOND);
            assert_eq!(policy.cut_for(pause).unwrap().factor_bp(), set, "{bp}");
        }
        assert_eq!(RetryPolicy::default().no_cut().cut_for(pause), None);
        assert!(RetryPolicy::default().syncs_with_supplier());
        assert!(!RetryPolicy::default()
            .sync_with_supplier(false)
            .syncs_with_supplier());
    }

    #[test]
    fn huge_pauses_stay_within_the_modules_limit() {
        let policy = RetryPolicy::default().max_jitter(SECOND);
        assert_eq!(
            decide(
                &policy,
                429,
                &[("retry-after", "99999999999999")],
                1,
                true,
                0.99
            ),
            cut(MAX_PAUSE.as_millis() as u64, true)
        );
        let spent = [
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "99999999999"),
        ];
        assert_eq!(
            decide(&policy, 403, &spent, 1, true, 0.99),
            pause_only(MAX_PAUSE.as_millis() as u64, true)
        );
        let policy = RetryPolicy::default()
            .default_pause(Duration::MAX)
            .max_jitter(Duration::MAX);
        assert_eq!(
            decide(&policy, 429, &[], 1, true, 1.0),
            cut(MAX_PAUSE.as_millis() as u64, true)
        );
    }
}
