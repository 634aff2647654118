//! `acl`: the ACL lines docs/trust-model.md documents, kept here in one place (a test checks
//! that each is in that file verbatim).

use crate::cli::AclBackend;
use crate::failure::{fail, Failure};

/// The documented key pattern, which `--keys` replaces (and the channel patterns made from it).
pub(crate) const DOC_KEYS: &str = "quota:*";

/// The lines for the module's users.
const MODULE: &[&str] = &[
    "# read-only (dashboards: THROTTLE.PEEK and THROTTLE.SLOTS only)",
    "ACL SETUSER throttle-ro on >secret resetkeys ~quota:* resetchannels -@all +throttle.peek +throttle.slots",
    "# the fleet",
    "ACL SETUSER throttle-rw on >secret resetkeys ~quota:* resetchannels -@all +throttle.take +throttle.mtake +throttle.pause +throttle.resume +throttle.give +throttle.peek +throttle.cut +throttle.sync +throttle.debit +throttle.renew +throttle.release +throttle.slots",
    "# the subscription of a process that listens to pause announcements",
    "ACL SETUSER throttle-listen on >secret resetkeys resetchannels &throttle:pause:{quota:*} &throttle:pause:quota:* -@all +ssubscribe +subscribe +ping",
];

/// The lines for the function library's users, its loader first.
const LIBRARY: &[&str] = &[
    "# the administrator who loads the function library",
    "ACL SETUSER throttle-admin on >secret resetkeys resetchannels -@all +function|load +function|list",
    "# function library (FCALL), read-only: peek (the library loaded by the admin)",
    "ACL SETUSER throttle-ro on >secret resetkeys ~quota:* resetchannels -@all +fcall_ro +function|list +get +time",
    "# function library (FCALL), the fleet (the library loaded by the admin)",
    "ACL SETUSER throttle-rw on >secret resetkeys ~quota:* resetchannels &throttle:pause:{quota:*} &throttle:pause:quota:* -@all +fcall +fcall_ro +function|list +get +set +del +time +spublish",
];

/// The lines for the script's users.
const SCRIPT: &[&str] = &[
    "# script (EVALSHA), read-only: peek",
    "ACL SETUSER throttle-ro on >secret resetkeys ~quota:* resetchannels -@all +evalsha_ro +script|load +get +time",
    "# script (EVALSHA), the fleet",
    "ACL SETUSER throttle-rw on >secret resetkeys ~quota:* resetchannels &throttle:pause:{quota:*} &throttle:pause:quota:* -@all +evalsha +evalsha_ro +script|load +get +set +del +time +spublish",
];

/// The channel rules (`&...`) of the users whose keys are `~keys`: their keys' pause
/// channels alone ([`throttle_bucket::pause_channel_patterns`]).
pub(crate) fn channels(keys: &str) -> String {
    throttle_bucket::pause_channel_patterns(keys.as_bytes())
        .iter()
        .map(|p| format!("&{}", String::from_utf8_lossy(p)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines for `backend`'s users, their keys `~keys` and their channels those keys'.
pub(crate) fn lines(backend: AclBackend, keys: &str) -> Result<String, Failure> {
    if keys.is_empty() || keys.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return fail(format!(
            "--keys {keys:?} is not one ACL key pattern: give one pattern without spaces, like \
             quota:payments:*"
        ));
    }
    let lines = match backend {
        AclBackend::Module => MODULE,
        AclBackend::Library => LIBRARY,
        AclBackend::Script => SCRIPT,
    };
    let (doc_channels, channels) = (channels(DOC_KEYS), channels(keys));
    let mut out = String::new();
    for line in lines {
        let line = line
            .replace(&format!(" ~{DOC_KEYS} "), &format!(" ~{keys} "))
            .replace(&format!(" {doc_channels} "), &format!(" {channels} "));
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("# (replace >secret with each user's password)\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUST_MODEL: &str = include_str!("../../../docs/trust-model.md");

    #[test]
    fn every_printed_line_is_the_documented_one() {
        for backend in [AclBackend::Module, AclBackend::Library, AclBackend::Script] {
            let text = lines(backend, DOC_KEYS).unwrap();
            let mut printed = text.lines().collect::<Vec<_>>();
            // The last line is the tool's own reminder.
            assert_eq!(
                printed.pop(),
                Some("# (replace >secret with each user's password)")
            );
            for line in printed {
                assert!(
                    TRUST_MODEL.lines().any(|doc| doc == line),
                    "{backend:?}: not in docs/trust-model.md verbatim: {line}"
                );
            }
        }
    }

    #[test]
    fn keys_replace_the_documented_pattern_and_its_channels() {
        assert_eq!(
            channels(DOC_KEYS),
            "&throttle:pause:{quota:*} &throttle:pause:quota:*"
        );
        let text = lines(AclBackend::Script, "quota:payments:*").unwrap();
        assert!(text.contains(
            "ACL SETUSER throttle-rw on >secret resetkeys ~quota:payments:* resetchannels \
             &throttle:pause:{quota:payments:*} &throttle:pause:quota:payments:* -@all +evalsha "
        ));
        assert!(!text.contains("quota:* "), "{text}");
        let text = lines(AclBackend::Module, "{tenant:a}:*").unwrap();
        assert!(text.contains(
            "ACL SETUSER throttle-listen on >secret resetkeys resetchannels \
             &throttle:pause:{tenant:a}:* -@all +ssubscribe"
        ));
        for bad in ["", "quota:a:* ~*", "quota:\n"] {
            let refused = lines(AclBackend::Module, bad).unwrap_err();
            assert!(
                refused.0.contains("is not one ACL key pattern"),
                "{refused}"
            );
        }
    }

    #[test]
    fn every_documented_channel_rule_is_made_from_the_key_pattern() {
        for line in MODULE.iter().chain(LIBRARY).chain(SCRIPT) {
            let channels: Vec<&str> = line.split(' ').filter(|w| w.starts_with('&')).collect();
            if !channels.is_empty() {
                assert_eq!(channels.join(" "), super::channels(DOC_KEYS), "{line}");
            }
        }
    }
}
