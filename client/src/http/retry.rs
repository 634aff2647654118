//! When a throttled HTTP request is retried, and how long its bucket pauses.
//!
//! Pure: no I/O, no clock, no randomness. The adapters pass in the current time and a jitter
//! sample, and get back a [`Step`]; they do the pausing, acquiring and sending.

use std::time::{Duration, SystemTime};

use ::http::{HeaderValue, Method, StatusCode};
use throttle_bucket::MAX_WAIT_MS;

use crate::Cut;

/// The longest pause the module takes (`THROTTLE.PAUSE`'s limit, 10 years).
pub const MAX_PAUSE: Duration = Duration::from_millis(MAX_WAIT_MS);

/// What the HTTP integrations do when the supplier pushes back (429 or 503).
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
}

impl Default for RetryPolicy {
    /// 3 attempts in all, a pause of 1 s when the supplier gives no usable `Retry-After`,
    /// up to 100 ms of jitter, idempotent methods only; every 429 and 503 cuts the fleet's
    /// rate to 0.7 of what it is, recovering over 30 s ([`Cut`]'s defaults); the supplier's
    /// rate-limit headers lower the bucket.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            default_pause: Duration::from_secs(1),
            max_jitter: Duration::from_millis(100),
            retry_non_idempotent: false,
            cut: Some(Cut::after(Duration::ZERO)),
            sync_with_supplier: true,
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

    /// Whether the supplier's rate-limit headers (`RateLimit`, `X-RateLimit-Remaining`,
    /// `x-ratelimit-remaining-requests`, ... read by [`read_supplier_count`](super::read_supplier_count))
    /// lower the bucket to what the supplier says is left (default `true`).
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

    /// What to do with the response to the `attempt`-th send. `asked` is the pause the
    /// supplier asked for in another header (`x-ms-retry-after-ms`), used when `Retry-After`
    /// is missing or unreadable; `has_copy` says whether the adapter kept a copy to send
    /// again; `jitter` is a sample in `0..1`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn after_response(
        &self,
        status: StatusCode,
        retry_after: Option<&HeaderValue>,
        asked: Option<Duration>,
        attempt: u32,
        has_copy: bool,
        now: SystemTime,
        jitter: f64,
    ) -> Step {
        if !is_pushback(status) {
            return Step::Done;
        }
        let retry_after = retry_after
            .and_then(|value| parse_retry_after(value.as_bytes(), now))
            .or(asked)
            .unwrap_or(self.default_pause);
        let extra = self.max_jitter.mul_f64(jitter.clamp(0.0, 1.0));
        Step::Pause {
            pause: retry_after.saturating_add(extra).min(MAX_PAUSE),
            retry: has_copy && attempt < self.max_attempts,
        }
    }
}

/// The decision after one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Not pushed back: the response goes to the caller.
    Done,
    /// Pushed back: pause the bucket this long, then send again or hand the response over.
    Pause { pause: Duration, retry: bool },
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

    #[test]
    fn pushback_pauses_for_retry_after_plus_jitter() {
        let policy = RetryPolicy::default()
            .default_pause(SECOND * 2)
            .max_jitter(Duration::from_millis(100));
        let now = at(OCT_21);
        let value = HeaderValue::from_static("1");
        let step = |status: u16, header: Option<&HeaderValue>, attempt, has_copy, jitter| {
            policy.after_response(
                StatusCode::from_u16(status).unwrap(),
                header,
                None,
                attempt,
                has_copy,
                now,
                jitter,
            )
        };
        let pause = |ms: u64, retry| Step::Pause {
            pause: Duration::from_millis(ms),
            retry,
        };
        assert_eq!(step(200, Some(&value), 1, true, 0.5), Step::Done);
        assert_eq!(step(500, Some(&value), 1, true, 0.5), Step::Done);
        assert_eq!(step(429, Some(&value), 1, true, 0.0), pause(1000, true));
        assert_eq!(step(429, Some(&value), 1, true, 0.5), pause(1050, true));
        assert_eq!(step(503, Some(&value), 2, true, 0.25), pause(1025, true));
        // No copy (not idempotent, or a body that cannot be cloned): pause, no retry.
        assert_eq!(step(429, Some(&value), 1, false, 0.0), pause(1000, false));
        // The last attempt pauses too: the supplier's word holds for everyone else.
        assert_eq!(step(429, Some(&value), 3, true, 0.0), pause(1000, false));
        // No Retry-After, or garbage: the default pause.
        assert_eq!(step(429, None, 1, true, 0.0), pause(2000, true));
        let garbage = HeaderValue::from_static("later");
        assert_eq!(step(503, Some(&garbage), 1, true, 0.0), pause(2000, true));
        // A jitter sample out of range cannot make the pause negative or huge.
        assert_eq!(step(429, Some(&value), 1, true, -3.0), pause(1000, true));
        assert_eq!(step(429, Some(&value), 1, true, 7.0), pause(1100, true));
    }

    #[test]
    fn retry_after_wins_over_the_suppliers_other_pause_header_which_wins_over_the_default() {
        let policy = RetryPolicy::default()
            .default_pause(SECOND * 2)
            .max_jitter(Duration::ZERO);
        let now = at(OCT_21);
        let one = HeaderValue::from_static("1");
        let garbage = HeaderValue::from_static("soon");
        let asked = Some(Duration::from_millis(300));
        let step = |header: Option<&HeaderValue>, asked| {
            policy.after_response(
                StatusCode::TOO_MANY_REQUESTS,
                header,
                asked,
                1,
                true,
                now,
                0.0,
            )
        };
        let pause = |ms: u64| Step::Pause {
            pause: Duration::from_millis(ms),
            retry: true,
        };
        assert_eq!(step(Some(&one), asked), pause(1000));
        assert_eq!(step(Some(&garbage), asked), pause(300));
        assert_eq!(step(None, asked), pause(300));
        assert_eq!(step(None, None), pause(2000));
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
        let huge = HeaderValue::from_static("99999999999999");
        assert_eq!(
            policy.after_response(
                StatusCode::TOO_MANY_REQUESTS,
                Some(&huge),
                None,
                1,
                true,
                at(OCT_21),
                0.99
            ),
            Step::Pause {
                pause: MAX_PAUSE,
                retry: true
            }
        );
        let policy = RetryPolicy::default()
            .default_pause(Duration::MAX)
            .max_jitter(Duration::MAX);
        assert_eq!(
            policy.after_response(
                StatusCode::TOO_MANY_REQUESTS,
                None,
                None,
                1,
                true,
                at(OCT_21),
                1.0
            ),
            Step::Pause {
                pause: MAX_PAUSE,
                retry: true
            }
        );
    }
}
