//! A command's words: how the arguments are read from them (the module, the tests' fake) and
//! written to them (the client), so both sides follow one definition.

use std::ops::RangeInclusive;

use crate::error::ArgError;
use crate::limits::{MAX_SLOT_ID, MAX_WAIT_MS};

/// One word of a command after its keys, as a client writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word<'a> {
    /// A keyword or a decimal, as text.
    Text(&'a str),
    /// A whole number.
    Number(u64),
    /// A decimal from 0 to 1 given in basis points, written as the shortest decimal of its
    /// value: 7000 is `0.7`, 10 000 is `1`.
    BasisPoints(u16),
}

impl Word<'_> {
    /// The word as the text a client sends.
    pub fn to_text(self) -> String {
        match self {
            Word::Text(text) => text.to_owned(),
            Word::Number(n) => n.to_string(),
            Word::BasisPoints(bp) => {
                let (whole, fraction) = (bp / 10_000, bp % 10_000);
                if fraction == 0 {
                    whole.to_string()
                } else {
                    let digits = format!("{fraction:04}");
                    format!("{whole}.{}", digits.trim_end_matches('0'))
                }
            }
        }
    }
}

/// A non-negative decimal integer: ASCII digits only, no sign, no spaces.
pub(crate) fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// A whole number in `range`, or `error`: every bounded count, id and duration of the commands'
/// words.
pub(crate) fn parse_within(
    text: &[u8],
    range: RangeInclusive<u64>,
    error: ArgError,
) -> Result<u64, ArgError> {
    parse_u64(text).filter(|n| range.contains(n)).ok_or(error)
}

/// `TOKENS n` (or an MTAKE triple's tokens): 0..=capacity.
pub(crate) fn parse_tokens(text: &[u8], capacity: u64) -> Result<u64, ArgError> {
    parse_within(text, 0..=capacity, ArgError::Tokens { capacity })
}

/// A slot id, as THROTTLE.RENEW and RELEASE take it: 0..=MAX_SLOT_ID (0 is never held).
pub(crate) fn parse_slot(text: &[u8]) -> Result<u64, ArgError> {
    parse_within(text, 0..=MAX_SLOT_ID, ArgError::SlotId)
}

/// `MAXWAIT ms`: 0..=MAX_WAIT_MS.
pub(crate) fn parse_max_wait(text: &[u8]) -> Result<u64, ArgError> {
    parse_within(text, 0..=MAX_WAIT_MS, ArgError::MaxWait)
}

/// Stores an option's value in `slot`, refusing one given twice (THROTTLE.TAKE's options, read
/// by hand: its hot path has no room for [`read_options`]'s table, through which parsing
/// `8 9 TOKENS 3 MAXWAIT 5000` took a quarter more instructions, under callgrind).
pub(crate) fn once<'a>(
    slot: &mut Option<&'a [u8]>,
    value: &'a [u8],
    label: &'static str,
) -> Result<(), ArgError> {
    if slot.is_some() {
        return Err(ArgError::Repeated(label));
    }
    *slot = Some(value);
    Ok(())
}

/// A command's options (the words after its required ones), read for their structure: each
/// option of `valued` (its word, matched in any case) at most once and with its value, each
/// word `other` knows with as many values as it says it takes (`Some(n)`; TICKET, MTAKE's FLOOR
/// block), and any other word refused as `unknown`. Returns the valued
/// options' values, in `valued`'s order; their values are checked by the caller, after.
pub(crate) fn read_options<'r, 'a, const N: usize>(
    mut rest: &'r [&'a [u8]],
    valued: [&'static str; N],
    mut other: impl FnMut(&[u8], &'r [&'a [u8]]) -> Result<Option<usize>, ArgError>,
    unknown: ArgError,
) -> Result<[Option<&'a [u8]>; N], ArgError> {
    let mut values = [None; N];
    while let [name, tail @ ..] = rest {
        let named = valued
            .iter()
            .zip(values.iter_mut())
            .find(|(label, _)| name.eq_ignore_ascii_case(label.as_bytes()));
        if let Some((&label, slot)) = named {
            let [value, tail @ ..] = tail else {
                return Err(ArgError::MissingValue(label));
            };
            if slot.replace(*value).is_some() {
                return Err(ArgError::Repeated(label));
            }
            rest = tail;
            continue;
        }
        let Some(taken) = other(name, tail)? else {
            return Err(unknown);
        };
        rest = tail.get(taken..).unwrap_or(&[]);
    }
    Ok(values)
}
