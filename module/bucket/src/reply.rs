//! A reply as the server sends it: integers, or an array of them. Each command's reply type
//! writes itself into one of these (the module) and reads itself back from the integers (the
//! client), so both follow one definition.

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
