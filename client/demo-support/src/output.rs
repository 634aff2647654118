//! Where a demo's results go, and the knobs for it: the SVG chart to a file, the report to
//! stdout, or with `--json` the summary to stdout and the report to stderr (for scripts and
//! tests).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::{Deserialize, Serialize};

/// The knobs of the output, flattened into a demo's own. A demo names its default chart
/// file in its `--chart` help (`#[command(mut_arg("chart", ...))]`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct OutputArgs {
    /// Where to write the SVG chart [default: the demo's own, under the target dir].
    #[arg(long, value_name = "PATH")]
    pub chart: Option<PathBuf>,
    /// Print a machine-readable summary (JSON) on stdout; the report goes to stderr.
    #[arg(long)]
    pub json: bool,
}

impl OutputArgs {
    /// Writes `svg` to `--chart`, else to `target/<program>/<file_name>`; returns where, as
    /// an absolute path, for the report. A chart that cannot be written is said on stderr:
    /// the report still comes.
    pub fn save_chart(&self, program: &str, file_name: &str, svg: &str) -> Option<String> {
        let path = self
            .chart
            .clone()
            .unwrap_or_else(|| default_chart_path(program, file_name));
        match write_chart(&path, svg) {
            Ok(()) => {
                let shown = std::path::absolute(&path).unwrap_or(path);
                Some(shown.display().to_string())
            }
            Err(err) => {
                eprintln!("{program}: cannot write the chart: {err}");
                None
            }
        }
    }

    /// Prints the report `text`, or with `--json` the `summary` on stdout and the report on
    /// stderr.
    pub fn print(&self, program: &str, text: &str, summary: &impl Serialize) -> ExitCode {
        if !self.json {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        eprint!("{text}");
        match serde_json::to_string_pretty(summary) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("{program}: {err}");
                ExitCode::FAILURE
            }
        }
    }
}

/// `target/<program>/<file_name>` in the workspace's target dir: the one this binary was
/// built into (`target/<profile>/<program>`), or `$CARGO_TARGET_DIR`.
fn default_chart_path(program: &str, file_name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            let target = exe.parent()?.parent()?;
            target
                .join("CACHEDIR.TAG")
                .is_file()
                .then(|| target.to_path_buf())
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join(program).join(file_name)
}

fn write_chart(path: &Path, svg: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg)
}
