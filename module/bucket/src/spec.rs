//! What a command says about itself: the server flags and ACL categories it is registered with,
//! where its keys are, and what `COMMAND DOCS` shows (summary, complexity, arity, arguments).
//! Plain data here; the module turns it into the structs the server reads.

use crate::command::Command;

/// One command, as the server registers and documents it.
#[derive(Debug)]
pub struct Spec {
    /// Which command.
    pub command: Command,
    /// One or two sentences for `COMMAND DOCS`.
    pub summary: &'static str,
    /// Its time complexity, `O(1)` and the like.
    pub complexity: &'static str,
    /// Words counting the command name; negative means "at least". The server checks it
    /// before the command runs, also when a call is queued in MULTI.
    pub arity: i32,
    /// Server flags: `write` or `readonly` (where it may run), `deny-oom`, `fast`, and
    /// `getkeys-api` where the module answers the server's key-position requests.
    pub flags: &'static str,
    /// ACL categories (the servers that can give module commands any: Redis 7.2+, Valkey).
    pub acl_categories: &'static str,
    /// Where the keys are, and what the command does with them.
    pub keys: Keys,
    /// The arguments after the command name, keys included.
    pub args: &'static [Arg],
}

/// Where a command's keys are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// Exactly one key, the first argument.
    One(Access),
    /// The first argument is a count, and that many keys follow it: `numkeys key [key ...]`.
    Counted(Access),
}

impl Keys {
    /// What the command does with its keys.
    pub fn access(self) -> Access {
        match self {
            Keys::One(access) | Keys::Counted(access) => access,
        }
    }
}

/// What a command does with its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads the bucket, may write it, and the reply depends on it (like INCR).
    ReadWrite,
    /// Only reads the bucket: it runs on read-only replicas, in EVAL_RO and `no-writes`
    /// functions, and when the server is out of memory.
    ReadOnly,
}

/// One argument, as `COMMAND DOCS` lists it.
#[derive(Debug)]
pub struct Arg {
    /// Its name in the docs.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// The keyword before the value (`TOKENS n`), or the whole argument of a pure token.
    pub token: Option<&'static str>,
    /// It may be left out.
    pub optional: bool,
    /// It may be repeated.
    pub multiple: bool,
}

/// An argument's type.
#[derive(Debug)]
pub enum Kind {
    /// A key.
    Key,
    /// A whole number.
    Integer,
    /// A decimal.
    Double,
    /// A keyword alone.
    PureToken,
    /// A group that repeats or is optional as a whole.
    Block(&'static [Arg]),
}

impl Arg {
    /// A required argument.
    pub const fn new(name: &'static str, kind: Kind) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
        }
    }

    /// `[TOKEN value]` or, for a pure token, `[TOKEN]`.
    pub const fn option(name: &'static str, token: &'static str, kind: Kind) -> Arg {
        Arg {
            token: Some(token),
            optional: true,
            ..Arg::new(name, kind)
        }
    }

    /// The same argument, repeated.
    pub const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }

    /// This argument as a manual writes it: `[TOKENS tokens]`, `key [key ...]`.
    pub fn syntax(&self) -> String {
        let body = match (&self.kind, self.token) {
            (Kind::PureToken, Some(token)) => token.to_owned(),
            (Kind::Block(args), Some(token)) => format!("{token} {}", syntax(args)),
            (Kind::Block(args), None) => syntax(args),
            (_, Some(token)) => format!("{token} {}", self.name),
            (_, None) => self.name.to_owned(),
        };
        let body = if self.multiple {
            format!("{body} [{body} ...]")
        } else {
            body
        };
        if self.optional {
            format!("[{body}]")
        } else {
            body
        }
    }
}

impl Spec {
    /// A one-key command that writes, in O(1): flagged `write deny-oom fast`, in the ACL
    /// categories `write fast`, its arity counted from `args`.
    pub(crate) const fn writes(
        command: Command,
        summary: &'static str,
        args: &'static [Arg],
    ) -> Spec {
        Spec {
            command,
            summary,
            complexity: "O(1)",
            arity: arity(args),
            flags: "write deny-oom fast",
            acl_categories: "write fast",
            keys: Keys::One(Access::ReadWrite),
            args,
        }
    }

    /// A one-key command that only reads, in O(1): flagged `readonly fast`, in the ACL
    /// categories `read fast`, its arity counted from `args`.
    pub(crate) const fn reads(
        command: Command,
        summary: &'static str,
        args: &'static [Arg],
    ) -> Spec {
        Spec {
            flags: "readonly fast",
            acl_categories: "read fast",
            keys: Keys::One(Access::ReadOnly),
            ..Spec::writes(command, summary, args)
        }
    }

    /// This spec with another complexity than O(1).
    pub(crate) const fn costs(self, complexity: &'static str) -> Spec {
        Spec { complexity, ..self }
    }

    /// The arguments as a manual writes them: `key capacity rate [TOKENS tokens] ...`.
    pub fn syntax(&self) -> String {
        syntax(self.args)
    }
}

/// The arity the server checks for a command whose arguments are `args`: the command's name and
/// each argument; with an optional one, at least the name and those before it (negative).
const fn arity(args: &[Arg]) -> i32 {
    let mut count = 1;
    let mut rest = args;
    while let [arg, tail @ ..] = rest {
        if arg.optional {
            return -count;
        }
        count += 1;
        rest = tail;
    }
    count
}

fn syntax(args: &[Arg]) -> String {
    args.iter().map(Arg::syntax).collect::<Vec<_>>().join(" ")
}

/// The arguments every one-key command starts with.
pub(crate) const KEY: Arg = Arg::new("key", Kind::Key);
pub(crate) const CAPACITY: Arg = Arg::new("capacity", Kind::Integer);
pub(crate) const RATE: Arg = Arg::new("rate", Kind::Double);
pub(crate) const MAXWAIT: Arg = Arg::option("maxwait", "MAXWAIT", Kind::Integer);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_key_commands_arity_is_counted_from_its_arguments() {
        for command in Command::ALL {
            let spec = command.spec();
            if let Keys::One(_) = spec.keys {
                assert_eq!(spec.arity, arity(spec.args), "{command:?}");
            }
        }
    }
}
