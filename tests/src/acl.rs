//! The ACL lines docs/trust-model.md gives, read from the file, so that the tests of users
//! made with them and the doc cannot drift.

use throttle_bucket::pause_channel_patterns;
use throttle_testkit::Server;

use crate::{query, Connection};

/// The password of every documented line.
pub const PASSWORD: &str = "secret";

/// The rules of the `ACL SETUSER` line under `# {comment}` in `doc` (the trust model's text),
/// for user `name` whose keys are `keys` (a key pattern, `quota:a:*`): the doc's `~quota:*`
/// narrowed to `~keys`, and its channel patterns, where it has any (those of `quota:*`), to
/// those of `keys`.
#[track_caller]
pub fn documented(doc: &str, comment: &str, name: &str, keys: &str) -> Vec<String> {
    let heading = format!("# {comment}");
    let mut lines = doc.lines();
    lines
        .find(|l| *l == heading)
        .unwrap_or_else(|| panic!("docs/trust-model.md has no line {heading:?}"));
    let acl = lines.next().expect("a line after the comment");
    let words: Vec<&str> = acl.split_whitespace().collect();
    assert_eq!(words[..2], ["ACL", "SETUSER"], "{acl}");
    let channels: Vec<String> = words
        .iter()
        .filter(|w| w.starts_with('&'))
        .map(|w| (*w).to_owned())
        .collect();
    let has_channels = !channels.is_empty();
    if has_channels {
        assert_eq!(
            channels,
            channel_rules("quota:*"),
            "the doc's channels: {acl}"
        );
    }
    assert!(words.contains(&">secret"), "the line's password: {acl}");
    let mut rules = vec![name.to_owned()];
    for word in &words[3..] {
        match *word {
            "~quota:*" => rules.push(format!("~{keys}")),
            w if w.starts_with('&') => {}
            "resetchannels" => {
                rules.push("resetchannels".to_owned());
                if has_channels {
                    rules.extend(channel_rules(keys));
                }
            }
            other => rules.push(other.to_owned()),
        }
    }
    rules
}

/// `&` and each channel pattern of the keys `keys`.
pub fn channel_rules(keys: &str) -> Vec<String> {
    pause_channel_patterns(keys.as_bytes())
        .into_iter()
        .map(|p| format!("&{}", String::from_utf8_lossy(&p)))
        .collect()
}

/// A connection to `server` logged in as `user` (with [`PASSWORD`]).
pub fn login(server: &Server, user: &str) -> Connection {
    let mut con = server.conn();
    let _: () = query(&mut con, redis::cmd("AUTH").arg(user).arg(PASSWORD));
    con
}
