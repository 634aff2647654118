//! What the tool prints of text read from Redis (report keys, rates, server messages): that
//! text comes from whoever may write a report, so it is input, never markup. Control
//! characters are escaped (an escape sequence cannot clear the screen or set the title, a
//! newline cannot forge a table row), and long text is cut with an ellipsis (a cell stays a
//! cell). Pure.

use std::fmt::Write as _;

/// The longest key (or other text cell) a table shows, in characters; longer ones are cut.
pub(crate) const MAX_CELL: usize = 60;
/// The longest message (a problem, a note) shown under a table, in characters.
pub(crate) const MAX_MESSAGE: usize = 300;
/// What a cut text ends with.
pub(crate) const ELLIPSIS: char = '…';

/// `text` safe to print on a terminal: `\n`, `\r`, `\t` and `\\` as such, every other control
/// character (C0, DEL, C1) as `\xHH`, and the Unicode controls that reorder or hide text
/// (bidirectional overrides and isolates, zero-width marks) as `\u{HHHH}`.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if hides_text(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Unicode format characters that reorder or hide what a terminal shows.
fn hides_text(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}'
    )
}

/// `text` printable and at most `max` characters: a longer one is cut and ends with `…`.
pub(crate) fn cell(text: &str, max: usize) -> String {
    let shown = printable(text);
    if shown.chars().count() <= max {
        return shown;
    }
    let mut cut: String = shown.chars().take(max.saturating_sub(1)).collect();
    cut.push(ELLIPSIS);
    cut
}

/// `text` and then spaces up to `width` characters (no format width: it has a bound).
pub(crate) fn pad_right(text: &str, width: usize) -> String {
    let len = text.chars().count();
    let mut out = text.to_owned();
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    out
}

/// Spaces up to `width` characters and then `text`.
pub(crate) fn pad_left(text: &str, width: usize) -> String {
    let len = text.chars().count();
    let mut out: String = std::iter::repeat_n(' ', width.saturating_sub(len)).collect();
    out.push_str(text);
    out
}

/// JSON text (as serde_json writes it, which escapes C0 controls) with DEL, the C1 controls
/// and the characters of [`printable`]'s `\u{..}` escaped too, so that it is as safe to print
/// on a terminal. Those characters can only be inside JSON strings, so the text stays valid
/// JSON with the same values.
pub(crate) fn json_for_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_control() || hides_text(c) {
            if c == '\n' {
                // serde_json's own layout (pretty printing); inside strings it writes `\n`.
                out.push(c);
            } else {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped() {
        assert_eq!(
            printable("a\x1b[2J\x1b]0;owned\x07b\nc\r\td\\e\u{9b}f\u{7f}"),
            "a\\x1b[2J\\x1b]0;owned\\x07b\\nc\\r\\td\\\\e\\x9bf\\x7f"
        );
        assert_eq!(
            printable("quota:a\u{202e}gnp.exe"),
            "quota:a\\u{202e}gnp.exe"
        );
        assert_eq!(printable("quota:élan:☃"), "quota:élan:☃");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(cell("abc", 3), "abc");
        assert_eq!(cell("abcd", 3), "ab…");
        let long = "k".repeat(70_000);
        let shown = cell(&long, MAX_CELL);
        assert_eq!(shown.chars().count(), MAX_CELL);
        assert_eq!(shown, format!("{}…", "k".repeat(MAX_CELL - 1)));
        // The escapes count: a cut never shows half of one raw.
        assert_eq!(cell("\n\n\n", 4), "\\n\\…");
    }

    #[test]
    fn padding_has_no_bound() {
        assert_eq!(pad_right("ab", 4), "ab  ");
        assert_eq!(pad_left("ab", 4), "  ab");
        assert_eq!(pad_left("abcdef", 4), "abcdef");
        assert_eq!(pad_right("x", 70_000).len(), 70_000);
    }

    #[test]
    fn json_stays_json_with_c1_and_bidi_escaped() {
        let value = serde_json::json!({"key": "a\u{9b}2J\u{202e}\u{1b}b\nc"});
        let text = json_for_terminal(&serde_json::to_string_pretty(&value).unwrap());
        assert_eq!(text, "{\n  \"key\": \"a\\u009b2J\\u202e\\u001bb\\nc\"\n}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
