//! Bytes and errors as the soak's messages and summary show them.

/// Bytes for a message: printable ASCII as is, the rest escaped, long ones cut.
pub fn show(bytes: &[u8]) -> String {
    let escaped: String = bytes
        .iter()
        .take(60)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if bytes.len() > 60 {
        format!("\"{escaped}\"...({} bytes)", bytes.len())
    } else {
        format!("\"{escaped}\"")
    }
}

pub fn show_args(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

/// An error line for the summary: digits folded, cut after the problem's name.
pub fn error_class(text: &str) -> String {
    let folded: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    let cut: String = folded
        .chars()
        .take_while(|c| !matches!(c, ':' | '(' | ','))
        .take(60)
        .collect();
    cut.trim_end().to_owned()
}
