//! The texts the bucket crate defines, found where they are written down again: every command's
//! syntax ([`Spec::syntax`]) in the command reference (module/README.md), the Lua twin's header
//! (client/lua/throttle.lua) and the client's script docs (client/src/wire/script.rs); every error
//! text (each [`ArgError`], [`StateError`], [`WRONG_TYPE`]) in the reference's error table and
//! in the Lua twin's texts. A change to one that the others miss fails here.
//!
//! The texts are read at compile time. Syntax is compared with the names of option values left
//! out (`[TOKENS n]` in the docs, `[TOKENS tokens]` in the spec); an error text's varying parts
//! (a capacity, a count, an option's or a command's name: `%d` and `%s` in the Lua, `N` in the
//! reference) are cut out and its fixed parts looked for.

use throttle_bucket::spec::Keys;
use throttle_bucket::{
    ArgError, Command, CutArgs, DebitArgs, GiveArgs, MTakeArgs, PauseArgs, PeekArgs, ReleaseArgs,
    RenewArgs, SlotsArgs, StateError, SyncArgs, TakeArgs, ThrottleCommand, WRONG_TYPE,
};

const README: &str = include_str!("../../README.md");
const LUA: &str = include_str!("../../../client/lua/throttle.lua");
const SCRIPT_RS: &str = include_str!("../../../client/src/wire/script.rs");

/// A word of a syntax: `[TOKENS` is the token TOKENS with its bracket.
fn bare(word: &str) -> &str {
    word.trim_matches(|c| c == '[' || c == ']' || c == '`')
}

fn is_token(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// `syntax` with every option value's name (a word right after an upper-case token, and that
/// word again, as in `[FLOOR f [f ...]]`) written `_`, and its spacing made single.
fn normalized(syntax: &str) -> String {
    let words: Vec<&str> = syntax.split_whitespace().collect();
    let mut values: Vec<&str> = Vec::new();
    for pair in words.windows(2) {
        if let [token, value] = pair {
            let (token, value) = (bare(token), bare(value));
            if is_token(token) && !is_token(value) && value != "..." && !value.is_empty() {
                values.push(value);
            }
        }
    }
    words
        .iter()
        .map(|word| {
            let name = bare(word);
            if values.contains(&name) {
                word.replacen(name, "_", 1)
            } else {
                (*word).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Each place `text` writes `start`, the words after it up to `end` (or the end of the line
/// when `end` is a newline), comment markers of continued lines (`--`, `//!`) left out.
fn entries(text: &str, start: &str, end: &str) -> Vec<String> {
    text.match_indices(start)
        .filter_map(|(at, _)| {
            let after = text.get(at + start.len()..)?;
            let entry = after.get(..after.find(end)?)?;
            let words: Vec<&str> = entry
                .lines()
                .map(|line| {
                    line.trim_start()
                        .trim_start_matches("//!")
                        .trim_start_matches("--")
                })
                .collect();
            Some(words.join(" "))
        })
        .collect()
}

/// The commands, each with its syntax.
fn syntaxes() -> Vec<(Command, String, bool)> {
    fn of<C: ThrottleCommand>() -> (Command, String, bool) {
        let counted = matches!(C::spec().keys, Keys::Counted(_));
        (C::COMMAND, C::spec().syntax(), counted)
    }
    vec![
        of::<TakeArgs>(),
        of::<MTakeArgs>(),
        of::<PauseArgs>(),
        of::<GiveArgs>(),
        of::<PeekArgs>(),
        of::<CutArgs>(),
        of::<SyncArgs>(),
        of::<DebitArgs>(),
        of::<RenewArgs>(),
        of::<ReleaseArgs>(),
        of::<SlotsArgs>(),
    ]
}

#[test]
fn every_syntax_is_in_the_command_reference() {
    for (command, syntax, _) in syntaxes() {
        let name = command.name().to_uppercase();
        let want = normalized(&syntax);
        let found = entries(README, &format!("`{name} "), "`");
        assert!(
            found.iter().any(|entry| normalized(entry) == want),
            "module/README.md has no `{name} {syntax}` (value names aside): it has {found:?}"
        );
    }
}

/// The Lua twin's header and the client's script docs write each one-key command as `FCALL
/// throttle_take 1 key capacity rate ...`, the module's syntax after the `1`. THROTTLE.MTAKE's
/// entry writes its keys its own way (`N key_1 .. key_N capacity rate tokens [...]`); there
/// every option the spec has must be written (a missing `[TICKET]` is what this catches).
#[test]
fn every_syntax_is_in_the_lua_and_the_script_docs() {
    for (file, text) in [
        ("client/lua/throttle.lua", LUA),
        ("client/src/wire/script.rs", SCRIPT_RS),
    ] {
        for (command, syntax, counted) in syntaxes() {
            let function = format!(" throttle_{} ", command.short_name());
            let found = entries(text, &function, "->");
            let entry = found
                .first()
                .unwrap_or_else(|| panic!("{file} does not document{function}"));
            if counted {
                let tokens: Vec<&str> = syntax
                    .split_whitespace()
                    .map(bare)
                    .filter(|w| is_token(w))
                    .collect();
                for token in tokens {
                    assert!(
                        entry.split_whitespace().any(|w| bare(w) == token),
                        "{file}:{function}lacks {token}: {entry:?}"
                    );
                }
            } else {
                assert_eq!(
                    normalized(entry),
                    normalized(&format!("1 {syntax}")),
                    "{file}:{function}(value names aside)"
                );
            }
        }
    }
}

/// Every error the crate can name, with the parts that vary from one call to the next.
fn errors() -> Vec<(String, Vec<String>)> {
    let mut all: Vec<(ArgError, Vec<String>)> = Vec::new();
    for command in Command::ALL {
        all.push((
            ArgError::Arity(command),
            vec![command.short_name().to_owned()],
        ));
    }
    let capacity = 987_654_321;
    let keys = 13;
    let varying = |n: u64| vec![n.to_string()];
    let keys_text = vec![keys.to_string()];
    all.extend([
        (ArgError::Capacity, vec![]),
        (ArgError::Rate, vec![]),
        (ArgError::FillTooLong, vec![]),
        (ArgError::Tokens { capacity }, varying(capacity)),
        (ArgError::MaxWait, vec![]),
        (ArgError::UnknownOption(Command::Take), vec![]),
        (ArgError::UnknownOption(Command::MTake), vec![]),
        (ArgError::UnknownOption(Command::Release), vec![]),
        (
            ArgError::MissingValue("MAXWAIT"),
            vec!["MAXWAIT".to_owned()],
        ),
        (ArgError::Repeated("MAXWAIT"), vec!["MAXWAIT".to_owned()]),
        (ArgError::PauseMs, vec![]),
        (ArgError::GiveTokens { capacity }, varying(capacity)),
        (ArgError::Ticket, vec![]),
        (ArgError::NumKeys, vec![]),
        (ArgError::Triples { keys }, keys_text.clone()),
        (ArgError::DuplicateKey, vec![]),
        (ArgError::Floor { capacity }, varying(capacity)),
        (ArgError::Floors { keys }, keys_text.clone()),
        (ArgError::Factor, vec![]),
        (ArgError::Recovery, vec![]),
        (ArgError::Remaining, vec![]),
        (ArgError::ResetMs, vec![]),
        (ArgError::DebitTokens, vec![]),
        (ArgError::DebtTooDeep, vec![]),
        (ArgError::Inflight, vec![]),
        (ArgError::Lease, vec![]),
        (ArgError::InflightLease, vec![]),
        (ArgError::SlotId, vec![]),
        (ArgError::LineInflight, vec![]),
        (ArgError::WaiterLine, vec![]),
        (ArgError::LineFloor, vec![]),
        (ArgError::PlaceMs, vec![]),
        (ArgError::LineFull, vec![]),
    ]);
    // Every variant is above: a new one does not compile here until it is added.
    for (error, _) in &all {
        match error {
            ArgError::Arity(_)
            | ArgError::Capacity
            | ArgError::Rate
            | ArgError::FillTooLong
            | ArgError::Tokens { .. }
            | ArgError::MaxWait
            | ArgError::UnknownOption(_)
            | ArgError::MissingValue(_)
            | ArgError::Repeated(_)
            | ArgError::PauseMs
            | ArgError::GiveTokens { .. }
            | ArgError::Ticket
            | ArgError::NumKeys
            | ArgError::Triples { .. }
            | ArgError::DuplicateKey
            | ArgError::Floor { .. }
            | ArgError::Floors { .. }
            | ArgError::Factor
            | ArgError::Recovery
            | ArgError::Remaining
            | ArgError::ResetMs
            | ArgError::DebitTokens
            | ArgError::DebtTooDeep
            | ArgError::Inflight
            | ArgError::Lease
            | ArgError::InflightLease
            | ArgError::SlotId
            | ArgError::LineInflight
            | ArgError::WaiterLine
            | ArgError::LineFloor
            | ArgError::PlaceMs
            | ArgError::LineFull => {}
        }
    }
    let mut texts: Vec<(String, Vec<String>)> = all
        .into_iter()
        .map(|(error, varying)| (error.to_string(), varying))
        .collect();
    texts.push((StateError.to_string(), vec![]));
    texts.push((WRONG_TYPE.to_owned(), vec![]));
    texts
}

/// The fixed parts of `text`: what is left between its varying parts.
fn fixed_parts(text: &str, varying: &[String]) -> Vec<String> {
    let mut parts = vec![text.to_owned()];
    for cut in varying {
        parts = parts
            .iter()
            .flat_map(|part| part.split(cut.as_str()).map(str::to_owned))
            .collect();
    }
    // A part of a letter or two (the ` n` of `TOKENS n`) says nothing.
    parts.retain(|part| part.trim().len() > 2);
    parts
}

/// The Lua with each string continued on the next line (`'...' .. '...'`) joined into one.
fn lua_joined() -> String {
    let mut joined = String::new();
    for line in LUA.lines() {
        let rest = line.trim_start();
        let continued = rest
            .strip_prefix(".. '")
            .or_else(|| rest.strip_prefix(".. \""));
        let end = joined.trim_end().len();
        let closes_string = joined.get(..end).is_some_and(|s| s.ends_with(['\'', '"']));
        match continued {
            Some(tail) if closes_string => {
                joined.truncate(end.saturating_sub(1));
                joined.push_str(tail);
            }
            _ => {
                joined.push('\n');
                joined.push_str(line);
            }
        }
    }
    joined
}

#[test]
fn every_error_text_is_in_the_reference_and_the_lua() {
    let lua = lua_joined();
    for (text, varying) in errors() {
        let parts = fixed_parts(&text, &varying);
        assert!(!parts.is_empty(), "{text}");
        for part in parts {
            assert!(
                README.contains(&part),
                "module/README.md lacks {part:?}, of the error {text:?}"
            );
            assert!(
                lua.contains(&part),
                "client/lua/throttle.lua lacks {part:?}, of the error {text:?}"
            );
        }
    }
}

#[test]
fn the_comparisons_see_a_difference() {
    assert_eq!(
        normalized("key [TOKENS n] [FLOOR f [f ...]] [TICKET]"),
        normalized("key [TOKENS tokens] [FLOOR floor [floor ...]] [TICKET]")
    );
    assert_ne!(
        normalized("key [TOKENS n]"),
        normalized("key [TOKENS n] [TICKET]")
    );
    assert_eq!(
        fixed_parts("ERR TOKENS must be from 0 to (8)", &["8".to_owned()]),
        ["ERR TOKENS must be from 0 to ("]
    );
    assert!(lua_joined().contains(
        "ERR rate must be a decimal number of tokens per second from 0.000001 to 1000000000"
    ));
}
