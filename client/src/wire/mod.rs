//! How a limiter talks to Redis: which backend serves the commands (the module, the function
//! library or the script) and how each call is sent and its reply read, the connection a
//! process makes, and the subscription that hears the fleet's announcements.

pub(crate) mod backend;
pub(crate) mod commands;
pub(crate) mod connect;
pub(crate) mod listen;
pub(crate) mod reply;
pub mod script;
