//! One test per server and backend from a scenario that takes both, shared by the test files
//! that run their scenarios on several backends.

/// `backends!(scenario => name(Backend), ...)`: for each entry, `fn name(flavor)` runs
/// `scenario(flavor, Backend::Backend)`, and is a test on every server ([`per_server!`]), or
/// on the servers given first as `[module Flavor, ...]` ([`on_servers!`]).
///
/// [`per_server!`]: throttle_testkit::per_server
/// [`on_servers!`]: throttle_testkit::on_servers
macro_rules! backends {
    ([$($servers:tt)*] $($case:ident => $name:ident($backend:ident)),* $(,)?) => {
        $( fn $name(flavor: Flavor) { $case(flavor, Backend::$backend) } )*
        throttle_testkit::on_servers!([$($servers)*] $($name),*);
    };
    ($($case:ident => $name:ident($backend:ident)),* $(,)?) => {
        $( fn $name(flavor: Flavor) { $case(flavor, Backend::$backend) } )*
        throttle_testkit::per_server!($($name),*);
    };
}

pub(crate) use backends;
