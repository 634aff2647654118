//! From a command's name to its definition: kept apart from [`Command`] so that the command
//! files, which name themselves in their errors, do not import one another through it.

use crate::command::Command;
use crate::spec::{Access, Spec};

impl Command {
    /// How the server registers and documents it.
    pub fn spec(self) -> &'static Spec {
        match self {
            Command::Take => &crate::take::SPEC,
            Command::MTake => &crate::mtake::SPEC,
            Command::Pause => &crate::pause::SPEC,
            Command::Give => &crate::give::SPEC,
            Command::Peek => &crate::peek::SPEC,
            Command::Cut => &crate::cut::SPEC,
            Command::Sync => &crate::sync::SPEC,
            Command::Debit => &crate::debit::SPEC,
            Command::Renew => &crate::renew::SPEC,
            Command::Release => &crate::release::SPEC,
            Command::Slots => &crate::slots_command::SPEC,
            Command::Resume => &crate::resume::SPEC,
            Command::Quota => &crate::quota_command::SPEC,
        }
    }

    /// Whether it only reads its keys (the Lua twin runs it under `EVALSHA_RO`).
    pub fn read_only(self) -> bool {
        self.spec().keys.access() == Access::ReadOnly
    }
}
