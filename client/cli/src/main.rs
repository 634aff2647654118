//! `throttle`, the operator's tool for redis-throttle: see `throttle --help` and README.md.

mod acl;
mod args;
mod check;
mod cli;
mod cluster;
mod dashboard;
mod failure;
mod library;
mod server;
mod status;
mod text;
mod verbs;
mod watch;

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};
use failure::Failure;
use server::Server;

fn main() -> ExitCode {
    // A usage error exits 2, with clap's message.
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return report(Err(Failure(format!("cannot start the runtime: {err}")))),
    };
    report(runtime.block_on(run(cli)))
}

/// Prints the output (exit 0) or the failure (exit 1).
fn report(outcome: Result<String, Failure>) -> ExitCode {
    match outcome {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is not a failure of the command.
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("throttle: {failure}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<String, Failure> {
    if let Command::Acl { backend, keys } = &cli.command {
        return acl::lines(*backend, keys);
    }
    if let Command::Dashboard { listen, public, .. } = &cli.command {
        // Before connecting: a refused address needs no server to say so.
        dashboard::check_listen(*listen, *public)?;
    }
    let mut server = Server::connect(&cli.url).await?;
    if let Some(key) = cli.command.key() {
        // A verb on one key goes to the node that serves it.
        server = cluster::node_for(&cli.url, server, key).await?;
    }
    match cli.command {
        Command::Status {
            pattern,
            quota,
            json,
        } => {
            status::run(
                &cli.url,
                &mut server,
                pattern.as_deref(),
                quota.as_ref(),
                json,
            )
            .await
        }
        Command::Watch {
            pattern,
            quota,
            every,
            count,
        } => {
            watch::run(
                &cli.url,
                &mut server,
                pattern.as_deref(),
                quota.as_ref(),
                every.ms,
                count,
            )
            .await
        }
        Command::Dashboard {
            pattern,
            quota,
            listen,
            public,
        } => dashboard::run(cli.url, server, pattern, quota, listen, public).await,
        Command::Pause {
            key,
            duration,
            quota,
            force,
        } => verbs::pause(&mut server, &key, duration, quota, force).await,
        Command::Cut {
            key,
            factor,
            recovery,
            pause,
            quota,
            force,
        } => verbs::cut(&mut server, &key, &factor, recovery, pause, quota, force).await,
        Command::Sync {
            key,
            remaining,
            reset,
            quota,
        } => verbs::sync(&mut server, &key, remaining, reset, quota).await,
        Command::Resume { key, quota } => verbs::resume(&mut server, &key, quota).await,
        Command::Quota { key, quota, clear } => verbs::quota(&mut server, &key, quota, clear).await,
        Command::LoadLibrary => library::load(&mut server).await,
        Command::Check => check::run(&cli.url, &mut server).await,
        Command::Acl { .. } => unreachable!("answered above"),
    }
}
