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
    /// The arguments as a manual writes them: `key capacity rate [TOKENS tokens] ...`.
    pub fn syntax(&self) -> String {
        syntax(self.args)
    }
}

fn syntax(args: &[Arg]) -> String {
    args.iter().map(Arg::syntax).collect::<Vec<_>>().join(" ")
}

/// The arguments every one-key command starts with.
pub(crate) const KEY: Arg = Arg::new("key", Kind::Key);
pub(crate) const CAPACITY: Arg = Arg::new("capacity", Kind::Integer);
pub(crate) const RATE: Arg = Arg::new("rate", Kind::Double);
pub(crate) const MAXWAIT: Arg = Arg::option("maxwait", "MAXWAIT", Kind::Integer);
