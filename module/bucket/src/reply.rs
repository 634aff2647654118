//! A reply as the server sends it: integers, or an array of them. Each command's reply type
//! writes itself into one of these (the module) and reads itself back from the integers (the
//! client), so both follow one definition: [`WireReply`], or for THROTTLE.TAKE and MTAKE, whose
//! shape depends on the call's options, the command's own `reply` and `decode`. A reply struct
//! gets its [`WireReply`] from `wire_reply!`, which takes its fields in order as its integers,
//! each written and read by its type ([`ReplyInt`]): the struct is the wire's one definition.

/// A reply that is the same whatever the call's options: written into its integers and read
/// back from them.
pub trait WireReply: Sized {
    /// The reply is one integer, not an array.
    const INTEGER: bool = false;
    /// What the reply is, for a client's error about one that is not: `an array of six
    /// integers`.
    const SHAPE: &'static str;
    /// The integers, inline (the module builds one per call, allocating nothing).
    type Ints: AsRef<[i64]>;

    /// The integers the server sends.
    fn ints(&self) -> Self::Ints;

    /// The reply read back from its integers; `None` for any other shape.
    fn read(ints: &[i64]) -> Option<Self>;
}

/// One field of a reply, as its integer on the wire.
pub(crate) trait ReplyInt: Sized {
    /// The field's integer.
    fn to_int(self) -> i64;
    /// The field read back; `None` for an integer it cannot be.
    fn from_int(value: i64) -> Option<Self>;
}

/// A count or a duration in ms: never negative.
impl ReplyInt for u64 {
    #[inline]
    fn to_int(self) -> i64 {
        int(self)
    }

    #[inline]
    fn from_int(value: i64) -> Option<u64> {
        count(value)
    }
}

/// A flag: 0 or 1.
impl ReplyInt for bool {
    #[inline]
    fn to_int(self) -> i64 {
        i64::from(self)
    }

    #[inline]
    fn from_int(value: i64) -> Option<bool> {
        flag(value)
    }
}

/// A rate factor in basis points, the one `u16` a reply holds: at most the configured rate.
impl ReplyInt for u16 {
    #[inline]
    fn to_int(self) -> i64 {
        i64::from(self)
    }

    #[inline]
    fn from_int(value: i64) -> Option<u16> {
        u16::try_from(value)
            .ok()
            .filter(|f| *f <= crate::state::FULL_FACTOR_BP)
    }
}

/// [`WireReply`] for a reply struct whose integers are its fields, in the order given (the
/// order of the struct's own fields, so that the type reads as its wire form).
macro_rules! wire_reply {
    // A reply of one integer, not an array.
    ($reply:ty, $shape:literal) => {
        impl $crate::reply::WireReply for $reply {
            const INTEGER: bool = true;
            const SHAPE: &'static str = $shape;
            type Ints = $crate::reply::Ints<1>;

            #[inline]
            fn ints(&self) -> $crate::reply::Ints<1> {
                $crate::reply::Ints::new([$crate::reply::ReplyInt::to_int(*self)])
            }

            #[inline]
            fn read(ints: &[i64]) -> Option<$reply> {
                $crate::reply::ReplyInt::from_int($crate::reply::only(ints)?)
            }
        }
    };
    ($reply:ident { $($field:ident),+ }, $shape:literal) => {
        impl $crate::reply::WireReply for $reply {
            const SHAPE: &'static str = $shape;
            type Ints = $crate::reply::Ints<{ [$(stringify!($field)),+].len() }>;

            #[inline]
            fn ints(&self) -> Self::Ints {
                $crate::reply::Ints::new([$($crate::reply::ReplyInt::to_int(self.$field)),+])
            }

            #[inline]
            fn read(ints: &[i64]) -> Option<$reply> {
                let [$($field),+] = ints else {
                    return None;
                };
                Some($reply {
                    $($field: $crate::reply::ReplyInt::from_int(*$field)?),+
                })
            }
        }
    };
}
pub(crate) use wire_reply;

// A count or a duration in ms: THROTTLE.PAUSE's, THROTTLE.GIVE's.
wire_reply!(u64, "a non-negative integer");
// Whether it happened: THROTTLE.RESUME's, RENEW's, RELEASE's.
wire_reply!(bool, "the integer 0 or 1");

/// An integer reply's one integer.
#[inline]
pub(crate) fn only(ints: &[i64]) -> Option<i64> {
    match ints {
        [value] => Some(*value),
        _ => None,
    }
}

/// An array of at most `N` integers, kept inline (the module builds one per call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ints<const N: usize> {
    values: [i64; N],
    len: usize,
}

impl<const N: usize> Ints<N> {
    /// The integers of `values`, as many as fit.
    pub(crate) fn new(values: impl IntoIterator<Item = i64>) -> Ints<N> {
        let mut ints = Ints {
            values: [0; N],
            len: 0,
        };
        for (slot, value) in ints.values.iter_mut().zip(values) {
            *slot = value;
            ints.len += 1;
        }
        ints
    }

    /// `value` after the integers, if it fits.
    pub(crate) fn push(&mut self, value: i64) {
        if let Some(slot) = self.values.get_mut(self.len) {
            *slot = value;
            self.len += 1;
        }
    }

    /// The integers, in order.
    pub fn as_slice(&self) -> &[i64] {
        self.values.get(..self.len).unwrap_or(&self.values)
    }
}

impl<const N: usize> AsRef<[i64]> for Ints<N> {
    fn as_ref(&self) -> &[i64] {
        self.as_slice()
    }
}

/// A count or a duration in ms as the reply's integer (none comes near `i64::MAX`).
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A duration in ns as the reply's ms, rounded up: 0 for none (or a negative one).
pub(crate) fn ms_up(ns: i128) -> u64 {
    u64::try_from(crate::gcra::ceil_ms_wide(ns.max(0))).unwrap_or(u64::MAX)
}

/// A reply's integer as a count or a duration: never negative.
pub(crate) fn count(value: i64) -> Option<u64> {
    u64::try_from(value).ok()
}

/// A reply's integer as a flag: 0 or 1.
pub(crate) fn flag(value: i64) -> Option<bool> {
    match value {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_replies_read_back_as_written_and_nothing_else() {
        assert_eq!(1500u64.ints().as_slice(), [1500]);
        assert_eq!(u64::read(&[1500]), Some(1500));
        assert_eq!(true.ints().as_slice(), [1]);
        assert_eq!(
            (bool::read(&[0]), bool::read(&[1])),
            (Some(false), Some(true))
        );
        for bad in [&[][..], &[-1], &[2], &[1, 1]] {
            assert_eq!(bool::read(bad), None, "{bad:?}");
        }
        for bad in [&[][..], &[-1], &[1, 1]] {
            assert_eq!(u64::read(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn durations_are_sent_in_ms_rounded_up() {
        for (ns, ms) in [
            (-5, 0),
            (0, 0),
            (1, 1),
            (999_999, 1),
            (1_000_000, 1),
            (699_000_001, 700),
            (i128::from(i64::MAX), 9_223_372_036_855),
            (i128::MAX, u64::MAX),
        ] {
            assert_eq!(ms_up(ns), ms, "{ns} ns");
        }
    }
}
