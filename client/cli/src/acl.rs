//! `acl`: the ACL lines docs/trust-model.md documents, kept here in one place (a test checks
//! that each is in that file verbatim).

use crate::cli::AclBackend;

/// The documented key pattern, which `--keys` replaces.
pub(crate) const DOC_KEYS: &str = "quota:*";

/// The lines for the module's users.
const MODULE: &[&str] = &[
    "# read-only (dashboards: THROTTLE.PEEK and THROTTLE.SLOTS only)",
    "ACL SETUSER throttle-ro on >secret resetkeys ~quota:* resetchannels -@all +throttle.peek +throttle.slots",
    "# the fleet",
    "ACL SETUSER throttle-rw on >secret resetkeys ~quota:* resetchannels -@all +throttle.take +throttle.mtake +throttle.pause +throttle.give +throttle.peek +throttle.cut +throttle.sync +throttle.debit +throttle.renew +throttle.release +throttle.slots",
    "# the subscription of a process that listens to pause announcements",
    "ACL SETUSER throttle-listen on >secret resetkeys resetchannels &throttle:pause:* -@all +ssubscribe +subscribe +ping",
];

/// The lines for the function library's users, its loader first.
const LIBRARY: &[&str] = &[
    "# the administrator who loads the function library",
    "ACL SETUSER throttle-admin on >secret resetkeys resetchannels -@all +function|load +function|list",
    "# function library (FCALL), read-only: peek (the library loaded by the admin)",
    "ACL SETUSER throttle-ro on >secret resetkeys ~quota:* resetchannels -@all +fcall_ro +function|list +get +time",
    "# function library (FCALL), the fleet (the library loaded by the admin)",
    "ACL SETUSER throttle-rw on >secret resetkeys ~quota:* resetchannels &throttle:pause:* -@all +fcall +fcall_ro +function|list +get +set +del +time +spublish",
];

/// The lines for the script's users.
const SCRIPT: &[&str] = &[
    "# script (EVALSHA), read-only: peek",
    "ACL SETUSER throttle-ro on >secret resetkeys ~quota:* resetchannels -@all +evalsha_ro +script|load +get +time",
    "# script (EVALSHA), the fleet",
    "ACL SETUSER throttle-rw on >secret resetkeys ~quota:* resetchannels &throttle:pause:* -@all +evalsha +evalsha_ro +script|load +get +set +del +time +spublish",
];

/// The lines for `backend`'s users, their keys `~keys`.
pub(crate) fn lines(backend: AclBackend, keys: &str) -> String {
    let lines = match backend {
        AclBackend::Module => MODULE,
        AclBackend::Library => LIBRARY,
        AclBackend::Script => SCRIPT,
    };
    let mut out = String::new();
    for line in lines {
        out.push_str(&line.replace(&format!(" ~{DOC_KEYS} "), &format!(" ~{keys} ")));
        out.push('\n');
    }
    out.push_str("# (replace >secret with each user's password)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUST_MODEL: &str = include_str!("../../../docs/trust-model.md");

    #[test]
    fn every_printed_line_is_the_documented_one() {
        for backend in [AclBackend::Module, AclBackend::Library, AclBackend::Script] {
            let text = lines(backend, DOC_KEYS);
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
    fn keys_replace_the_documented_pattern() {
        let text = lines(AclBackend::Script, "quota:payments:*");
        assert!(text.contains(" ~quota:payments:* "));
        assert!(!text.contains("~quota:* "));
    }
}
