//! The THROTTLE commands by name: what the server registers, the Lua twin dispatches on and
//! `INFO throttle` counts. Each command's own file holds its definition; `registry` maps the
//! name to it.

/// The THROTTLE commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// THROTTLE.TAKE: take tokens, or reserve them.
    Take,
    /// THROTTLE.MTAKE: take from several buckets, from all or none.
    MTake,
    /// THROTTLE.PAUSE: the supplier pushed back.
    Pause,
    /// THROTTLE.GIVE: give back what a take did not use.
    Give,
    /// THROTTLE.PEEK: read a bucket.
    Peek,
    /// THROTTLE.CUT: the supplier is congested, slow the fleet down.
    Cut,
    /// THROTTLE.SYNC: the supplier said how much is left.
    Sync,
    /// THROTTLE.DEBIT: a call cost more than it took.
    Debit,
    /// THROTTLE.RENEW: a call in flight runs on, extend its slot's lease.
    Renew,
    /// THROTTLE.RELEASE: a call in flight ended, free its slot.
    Release,
    /// THROTTLE.SLOTS: read a bucket's calls in flight.
    Slots,
    /// THROTTLE.RESUME: an operator ends a pause or a cut early.
    Resume,
    /// THROTTLE.QUOTA: an operator keeps a key's quota at the server, or gives it back.
    Quota,
}

impl Command {
    /// Every command, in the order the module registers them and `INFO throttle` counts them.
    pub const ALL: [Command; 13] = [
        Command::Take,
        Command::MTake,
        Command::Pause,
        Command::Give,
        Command::Peek,
        Command::Cut,
        Command::Sync,
        Command::Debit,
        Command::Renew,
        Command::Release,
        Command::Slots,
        Command::Resume,
        Command::Quota,
    ];

    /// The name the server knows it by, lower case as the server writes it in its own arity
    /// error: `throttle.take`.
    pub fn name(self) -> &'static str {
        match self {
            Command::Take => "throttle.take",
            Command::MTake => "throttle.mtake",
            Command::Pause => "throttle.pause",
            Command::Give => "throttle.give",
            Command::Peek => "throttle.peek",
            Command::Cut => "throttle.cut",
            Command::Sync => "throttle.sync",
            Command::Debit => "throttle.debit",
            Command::Renew => "throttle.renew",
            Command::Release => "throttle.release",
            Command::Slots => "throttle.slots",
            Command::Resume => "throttle.resume",
            Command::Quota => "throttle.quota",
        }
    }

    /// The name without the `throttle.` prefix: the Lua twin's first argument, and the
    /// suffix of its counter in `INFO throttle` (`calls_take`).
    pub fn short_name(self) -> &'static str {
        let name = self.name();
        name.strip_prefix("throttle.").unwrap_or(name)
    }

    /// Its place in [`Command::ALL`].
    pub fn index(self) -> usize {
        Command::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}
