//! The demo's side of its child processes (this same executable, a hidden subcommand each):
//! starts them, waits until all are ready, gives them one start instant, reads what they
//! report (one JSON object a line on their stdout), kills them or waits for their exits.
//! Every wait is bounded; a child left behind by an error or a Ctrl-C is killed when the
//! fleet is dropped.

use std::marker::PhantomData;
use std::process::Stdio;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout_at, Instant};

use crate::shared_start::StartInstant;

/// A process start, its connections and a few warm-up calls, on a busy machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a SIGKILLed child gets to be reaped.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// A child's first line on its stdout ([`crate::child::say_ready`]), before its demo's own
/// messages.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Hello {
    /// The child opened its connections and waits for the start instant.
    Ready,
}

struct Process {
    index: u32,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    killed: bool,
}

/// The children of one phase, saying messages of type `M`.
pub struct Fleet<M> {
    /// What the demo calls them, in its errors: "replica", "worker".
    noun: &'static str,
    children: Vec<Process>,
    says: PhantomData<fn() -> M>,
}

impl<M: DeserializeOwned> Fleet<M> {
    /// Starts one process of this executable per argument list (its index is its position)
    /// and waits until every one is ready.
    pub async fn spawn(noun: &'static str, arg_lists: Vec<Vec<String>>) -> Result<Self, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
        let mut children = Vec::with_capacity(arg_lists.len());
        for (index, args) in (0u32..).zip(arg_lists) {
            let mut child = Command::new(&exe)
                .args(&args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start {noun} {index}: {e}"))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(format!("{noun} {index} has no pipes"));
            };
            children.push(Process {
                index,
                child,
                stdin,
                lines: BufReader::new(stdout).lines(),
                killed: false,
            });
        }
        let mut fleet = Fleet {
            noun,
            children,
            says: PhantomData,
        };
        let ready_by = Instant::now() + READY_TIMEOUT;
        for index in 0..fleet.children.len() {
            let Hello::Ready = fleet.read(index, ready_by).await?;
        }
        Ok(fleet)
    }

    /// The children not killed, by index.
    pub fn live(&self) -> Vec<usize> {
        (0..self.children.len())
            .filter(|&i| !self.children[i].killed)
            .collect()
    }

    /// Tells every live child to start `lead` from now (time for the line to reach them
    /// all); returns that instant.
    pub async fn start(&mut self, lead: Duration) -> Result<Instant, String> {
        let (start, at) = StartInstant::in_(lead);
        self.send(&start).await?;
        Ok(at)
    }

    /// One line to every live child, on its stdin.
    pub async fn send<T: Serialize>(&mut self, message: &T) -> Result<(), String> {
        let line = format!(
            "{}\n",
            serde_json::to_string(message).map_err(|e| e.to_string())?
        );
        let noun = self.noun;
        for child in self.children.iter_mut().filter(|c| !c.killed) {
            child
                .stdin
                .write_all(line.as_bytes())
                .await
                .and(child.stdin.flush().await)
                .map_err(|e| format!("cannot reach {noun} {}: {e}", child.index))?;
        }
        Ok(())
    }

    /// Child `index`, and the noun its errors name it by.
    fn child(&mut self, index: usize) -> Result<(&'static str, &mut Process), String> {
        let noun = self.noun;
        let child = self.children.get_mut(index);
        Ok((noun, child.ok_or_else(|| format!("no {noun} {index}"))?))
    }

    /// Child `index`'s next line, read as a `T`, by `by`.
    async fn read<T: DeserializeOwned>(&mut self, index: usize, by: Instant) -> Result<T, String> {
        let (noun, child) = self.child(index)?;
        let line = timeout_at(by, child.lines.next_line())
            .await
            .map_err(|_| format!("{noun} {index} went quiet"))?
            .map_err(|e| format!("reading {noun} {index}: {e}"))?
            .ok_or_else(|| format!("{noun} {index} stopped early (its error is above)"))?;
        serde_json::from_str(&line).map_err(|e| format!("{noun} {index} sent {line:?}: {e}"))
    }

    /// Every live child's messages, each up to the one `last` says ends its report, then
    /// their exits (each must succeed), by `by`.
    pub async fn reports(
        mut self,
        by: Instant,
        last: impl Fn(&M) -> bool,
    ) -> Result<Vec<M>, String> {
        let mut messages = Vec::new();
        for index in self.live() {
            loop {
                // A second "ready" is not an `M`: an error, as any line that is not one.
                let message = self.read(index, by).await?;
                let done = last(&message);
                messages.push(message);
                if done {
                    break;
                }
            }
        }
        self.wait(by).await?;
        Ok(messages)
    }

    /// SIGKILL, no warning: what a crash or an OOM kill looks like to the others.
    pub async fn kill(&mut self, index: usize) -> Result<(), String> {
        let (noun, child) = self.child(index)?;
        child
            .child
            .start_kill()
            .map_err(|e| format!("cannot kill {noun} {index}: {e}"))?;
        child.killed = true;
        let _ = tokio::time::timeout(KILL_TIMEOUT, child.child.wait()).await;
        Ok(())
    }

    /// Every live child's exit, by `by`: each must succeed.
    pub async fn wait(mut self, by: Instant) -> Result<(), String> {
        let noun = self.noun;
        for child in self.children.iter_mut().filter(|c| !c.killed) {
            let index = child.index;
            let status = timeout_at(by, child.child.wait())
                .await
                .map_err(|_| format!("{noun} {index} did not exit"))?
                .map_err(|e| format!("{noun} {index}: {e}"))?;
            if !status.success() {
                return Err(format!("{noun} {index} failed ({status})"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_says_ready_as_one_tagged_json_line_no_demo_message_is() {
        let ready = serde_json::to_string(&Hello::Ready).unwrap();
        assert_eq!(ready, r#"{"type":"ready"}"#);
        assert!(serde_json::from_str::<Hello>(&ready).is_ok());
        for line in [
            r#"{"type":"call","replica":1}"#,
            r#"{"type":"report"}"#,
            "ready",
        ] {
            assert!(serde_json::from_str::<Hello>(line).is_err(), "{line}");
        }
    }
}
