//! Command-line arguments.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::duration;

#[derive(Debug, Parser)]
#[command(name = "gpulse", version, about = "See why a PyTorch training run is slow: GPU, GPM and host telemetry.")]
#[command(after_help = "With no command, gpulse prints `status`. nvidia-smi query flags work directly: \
`gpulse --query-gpu=utilization.gpu,memory.used --format=csv -l 1`.")]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options every command that opens NVML understands: on those commands, and before any command
/// (for the default `status`). Commands that read files (diagnose, report, export, compare,
/// import, demo) do not list them.
#[derive(Debug, Clone, Default, Args)]
pub struct GlobalArgs {
    /// Load this NVML library instead of the driver's libnvidia-ml.so.1 (default: the
    /// GPULSE_NVML_LIB environment variable, when set).
    #[arg(long, value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,
    /// Do not read GPM performance counters (they can disturb DCGM profiling).
    #[arg(long)]
    pub no_gpm: bool,
    /// How long each GPM window spans (at least 100ms). Closing one costs about 3 ms of CPU on an
    /// H200; samples in between report the latest window. Default: 1s, or 100ms for one-shot views.
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", value_parser = duration::gpm_window)]
    pub gpm_interval: Option<Duration>,
}

impl GlobalArgs {
    /// These options as given on the command, else as given before it, else (the library) from
    /// the environment: a flag typed on either side wins over GPULSE_NVML_LIB.
    pub fn or(&self, before: &GlobalArgs) -> GlobalArgs {
        let env = || std::env::var_os("GPULSE_NVML_LIB").filter(|v| !v.is_empty()).map(PathBuf::from);
        GlobalArgs {
            nvml_lib: self.nvml_lib.clone().or_else(|| before.nvml_lib.clone()).or_else(env),
            no_gpm: self.no_gpm || before.no_gpm,
            gpm_interval: self.gpm_interval.or(before.gpm_interval),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// nvidia-smi's query mode (--query-gpu, --query-compute-apps), byte for byte.
    Query(QueryArgs),
    /// A summary of every GPU and its processes (the default command).
    Status(StatusArgs),
    /// One line per GPU per sample: time, GPU-Util, SM activity, memory, temperature, power.
    Watch(WatchArgs),
    /// Record every GPU, the host and a process tree to a crash-safe file.
    Record(RecordArgs),
    /// Run a training command and watch it: record GPUs, host and its processes, then diagnose.
    #[command(after_help = "Example: gpulse run --instrument -- python train.py --epochs 3\n\
The command's stdin, stdout and stderr pass through; gpulse exits with its status.")]
    Run(RunArgs),
    /// Watch a job that is already running until it exits (or Ctrl-C), then diagnose.
    Attach(AttachArgs),
    /// Turn nvidia-smi CSV logs into a recording.
    Import(ImportArgs),
    /// Write a recording (or an nvidia-smi log) as the CSV nvidia-smi would have written.
    Export(ExportArgs),
    /// Explain why a run is slow, with evidence and advice, from a recording or an nvidia-smi log.
    Diagnose(DiagnoseArgs),
    /// Compare two runs (recordings or nvidia-smi logs): figures, findings, verdict.
    Compare(CompareArgs),
    /// Write a self-contained HTML report: timelines with findings marked, and processes.
    Report(ReportArgs),
    /// Replay a bundled real H200 recording through the whole pipeline; needs no GPU.
    Demo(DemoArgs),
    /// Serve live metrics under dcgm-exporter's names, a JSON API and a dashboard over HTTP.
    #[command(after_help = "Prometheus scrapes http://HOST:9400/metrics as it scrapes dcgm-exporter. \
The dashboard and the API need the token: from --token-file, else GPULSE_TOKEN, else one is generated \
and printed once as a ready URL.")]
    Serve(ServeArgs),
    /// The live terminal view: every GPU, the host, the processes, and why the training is slow.
    #[command(after_help = "Keys: q quit, ? help, o+key sort, t tree, / filter, Enter a process, \
Space tag, I/T/K signal (after y), p pause. Without a GPU: gpulse top --replay FILE, or gpulse demo.")]
    Top(TopArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TopArgs {
    /// How often to sample.
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", default_value = "1s", value_parser = duration::interval)]
    pub interval: Duration,
    /// Play a recording (or an nvidia-smi log) instead of sampling: the same view, no GPU needed.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Replay speed: recorded seconds per wall-clock second (0.01 to 10000).
    #[arg(allow_hyphen_values = true, long, default_value = "1", value_parser = duration::speed, requires = "replay")]
    pub speed: f64,
    /// Never send a signal: I, T and K are off.
    #[arg(long)]
    pub readonly: bool,
    #[command(flatten)]
    pub nvml: GlobalArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Where to listen: HOST:PORT, with a name (`localhost:9400`), an address, an IPv6 one in
    /// brackets (`[::1]:9400`), or `:PORT` for every IPv4 address. Binding beyond loopback needs auth
    /// on (it is, unless --no-auth).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9400", value_parser = listen_addr)]
    pub listen: std::net::SocketAddr,
    /// How often to sample.
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", default_value = "1s", value_parser = duration::interval)]
    pub interval: Duration,
    /// The token, as the file's first line: 128 bits at least, in a file other users cannot
    /// read. SIGHUP reads it again and ends every session.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// /metrics needs `Authorization: Bearer TOKEN` too (by default it is open, as dcgm-exporter's).
    #[arg(long)]
    pub metrics_auth: bool,
    /// No token at all: anyone who reaches the port sees everything. Loopback addresses only.
    #[arg(long, conflicts_with_all = ["token_file", "metrics_auth"])]
    pub no_auth: bool,
    /// Also record to FILE (it must not exist yet); the dashboard links its report.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// TLS and basic auth from a Prometheus exporter web config (the file node_exporter's
    /// --web.config.file reads). SIGHUP reads it again: a renewed certificate, new users.
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<PathBuf>,
    /// Spell dcgm-exporter's host label `hostname`, as its newest code does, instead of `Hostname`.
    #[arg(long)]
    pub lowercase_hostname: bool,
    /// Stop after this long (default: at Ctrl-C).
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", value_parser = duration::positive)]
    pub duration: Option<Duration>,
    /// Also answer to this name (a proxy's, or a DNS name of this machine) on the dashboard and
    /// the API; addresses, `localhost` and the machine's own name always are. Repeatable
    #[arg(long, value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Do not sample the Python main threads of the node's GPU processes (their stacks, kernel
    /// state and who holds the GIL), which say what each did while its GPU waited.
    #[arg(long)]
    pub no_stacks: bool,
    /// Samples a second of each GPU process's Python main thread, 1 to 200, within 1% of a core
    /// for them all (a process whose GPU is busy: down to a quarter).
    #[arg(long, value_name = "HZ", default_value = "50", value_parser = stacks_hz)]
    pub stacks_hz: f64,
    #[command(flatten)]
    pub nvml: GlobalArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A recording, or an nvidia-smi CSV log.
    #[arg(value_name = "FILE")]
    pub input: PathBuf,
    /// The HTML file to write, or `-` for standard output; none when only --png is given. An
    /// existing file is replaced whole (a symlink's target, in place for a FIFO or device); an
    /// input or a recording never is [default: report.html]
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// A PNG of the summary and every chart, for pasting into an issue or a chat (drawn without
    /// a browser; builds with the `png` feature). Alone, it writes no HTML.
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
}

impl ReportArgs {
    /// The HTML report asked for: `-o`, or `report.html` when no output at all was named.
    pub fn html_output(&self) -> Option<PathBuf> {
        match (&self.output, &self.png) {
            (Some(o), _) => Some(o.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(PathBuf::from("report.html")),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The run before the change.
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,
    /// The run after it.
    #[arg(value_name = "AFTER")]
    pub after: PathBuf,
    /// Text to read, or json for scripts (every field, under its key).
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct DiagnoseArgs {
    /// A recording, or an nvidia-smi CSV log.
    #[arg(value_name = "FILE")]
    pub input: PathBuf,
    /// Text to read, or json for scripts (every field, under its key).
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// The recording to create (SQLite; it must not exist yet).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Time between samples: `1s`, `100ms`, `2m`, or plain seconds.
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", default_value = "1s", value_parser = duration::interval)]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl-C, SIGTERM, or the --pid process exits).
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", value_parser = duration::positive)]
    pub duration: Option<Duration>,
    /// Also record this process and everything it spawns (DataLoader workers, torchrun ranks),
    /// and tell its GPU processes from foreign ones.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Do not sample the Python main threads (their stacks, kernel state and who holds the
    /// GIL) of the --pid tree, or without --pid of every GPU process the kernel lets gpulse read.
    #[arg(long)]
    pub no_stacks: bool,
    /// Samples a second of each Python main thread, 1 to 200, within 1% of a core for them all
    /// (a GPU process whose GPU is busy: down to a quarter).
    #[arg(long, value_name = "HZ", default_value = "50", value_parser = stacks_hz)]
    pub stacks_hz: f64,
    #[command(flatten)]
    pub nvml: GlobalArgs,
}

/// How `run` and `attach` show the job as it goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusMode {
    /// A status row at the bottom of a terminal; a line every --status-every otherwise.
    #[default]
    Auto,
    /// A line every --status-every.
    Line,
    Off,
}

/// What `run` and `attach` share.
#[derive(Debug, Clone, Args)]
pub struct JobArgs {
    /// The recording to create (default: a timestamped file in ./gpulse-runs/).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Time between samples: `1s`, `100ms`, or plain seconds.
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", default_value = "1s", value_parser = duration::interval)]
    pub interval: Duration,
    /// The live status.
    #[arg(long, value_enum, default_value = "auto")]
    pub status: StatusMode,
    /// Time between status lines when not on a terminal.
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", default_value = "30s", value_parser = duration::positive)]
    pub status_every: Duration,
    /// Do not write the HTML report at exit.
    #[arg(long)]
    pub no_report: bool,
    /// Also serve the job live, as `gpulse serve` does (metrics with its steps/s and data wait,
    /// the dashboard), on HOST:PORT as `serve --listen` takes it (`localhost:9400`). The token
    /// is GPULSE_TOKEN, or is generated and printed once.
    #[arg(long, value_name = "HOST:PORT", value_parser = listen_addr)]
    pub serve: Option<std::net::SocketAddr>,
    /// TLS and basic auth for --serve, from a Prometheus exporter web config, read and checked as
    /// `gpulse serve --web-config` reads it; once, at the start.
    #[arg(long, value_name = "FILE", requires = "serve")]
    pub web_config: Option<PathBuf>,
    /// Do not sample the job's Python main threads (their stacks, kernel state and who holds
    /// the GIL), which say what the job did while the GPU waited.
    #[arg(long)]
    pub no_stacks: bool,
    /// Samples a second of each Python main thread, 1 to 200 (DataLoader workers: a fifth). The
    /// sampler slows itself down to stay within 1% of a core.
    #[arg(long, value_name = "HZ", default_value = "50", value_parser = stacks_hz)]
    pub stacks_hz: f64,
}

/// `--listen` and `--serve`: `HOST:PORT` as Prometheus exporters take it (node_exporter's
/// `--web.listen-address`): a name that resolves, an address, an IPv6 address in brackets, or
/// `:PORT` for every IPv4 address. A name that resolves to both families listens on IPv4, as
/// `localhost:9400` does for Go's exporters.
fn listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{SocketAddr, ToSocketAddrs};
    let text = s.trim();
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!("{text:?} has no port (try localhost:9400, 0.0.0.0:9400 or [::1]:9400)"));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!("{port:?} is not a port (try localhost:9400, 0.0.0.0:9400 or [::1]:9400)"));
    };
    if host.is_empty() {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if host.contains(':') && !host.starts_with('[') {
        return Err(format!("an IPv6 address takes brackets: [{host}]:{port}"));
    }
    let found: Vec<SocketAddr> =
        (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve {host:?}: {e}"))?.collect();
    found
        .iter()
        .find(|a| a.is_ipv4())
        .or(found.first())
        .copied()
        .ok_or_else(|| format!("{host:?} resolves to no address"))
}

/// `watch --count`: how many samples, one at least (none would print nothing at all).
fn sample_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{:?} is not a number of samples (1 or more)", s.trim())),
    }
}

/// `--stacks-hz`: a rate the sampler takes, or one line saying which it takes.
fn stacks_hz(s: &str) -> Result<f64, String> {
    let range = gpulse_sample::stacks::RATE_HZ;
    match s.trim().parse::<f64>() {
        Ok(hz) if range.contains(&hz) => Ok(hz),
        _ => Err(format!("samples a second, from {} to {}", range.start(), range.end())),
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// In Python jobs, time each wait for a DataLoader batch and count optimizer steps, with no
    /// change to the script.
    #[arg(long)]
    pub instrument: bool,
    #[command(flatten)]
    pub nvml: GlobalArgs,
    /// The command and its arguments, after `--`.
    #[arg(value_name = "COMMAND", required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Args)]
pub struct AttachArgs {
    /// The process to watch, with everything it spawns.
    #[arg(value_name = "PID")]
    pub pid: u32,
    #[command(flatten)]
    pub job: JobArgs,
    #[command(flatten)]
    pub nvml: GlobalArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// nvidia-smi CSV logs (`--query-gpu` and `--query-compute-apps`), in any order.
    #[arg(required = true, value_name = "LOG.csv")]
    pub logs: Vec<PathBuf>,
    /// The recording to create.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// The --query-gpu (or --query-compute-apps) list of logs written with `noheader`; export
    /// writes these fields back.
    #[arg(long, value_name = "FIELDS")]
    pub fields: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// A recording, or an nvidia-smi CSV log.
    #[arg(value_name = "FILE")]
    pub input: PathBuf,
    /// Output format: csv, optionally with noheader and nounits, as nvidia-smi's --format
    /// (default: the format of an imported log, else csv); or the job's sampled Python stacks:
    /// folded (`frame;frame COUNT` lines for flamegraph.pl and inferno) or speedscope (its JSON).
    #[arg(long, value_name = "csv[,noheader][,nounits]|folded|speedscope")]
    pub format: Option<String>,
    /// GPU fields to write (default: the fields an imported log had, else a rich set).
    #[arg(long = "query-gpu", value_name = "FIELDS", conflicts_with = "query_apps")]
    pub query_gpu: Option<String>,
    /// Write processes instead, as nvidia-smi's --query-compute-apps (default fields: those of an
    /// imported compute-apps log). A recording of such a log alone exports this way by default.
    #[arg(long = "query-compute-apps", value_name = "FIELDS", num_args = 0..=1, require_equals = true)]
    pub query_apps: Option<Option<String>>,
    /// Write here instead of standard output. The file appears complete or not at all; an existing
    /// one is replaced (a symlink's target; a FIFO or device is written in place), but an input
    /// or a recording never is.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Args)]
pub struct QueryArgs {
    /// GPU fields to print, comma-separated (nvidia-smi names, plus gpulse's `gpm.*`).
    #[arg(long = "query-gpu", value_name = "FIELDS", conflicts_with = "query_apps")]
    pub query_gpu: Option<String>,
    /// Compute-process fields to print, comma-separated.
    #[arg(long = "query-compute-apps", value_name = "FIELDS")]
    pub query_apps: Option<String>,
    /// Output format: csv, optionally with noheader and nounits.
    #[arg(long, value_name = "csv[,noheader][,nounits]", default_value = "csv")]
    pub format: String,
    /// Repeat every SEC seconds until interrupted (5 when given without a value).
    #[arg(short = 'l', long = "loop", value_name = "SEC", num_args = 0..=1, default_missing_value = "5")]
    pub loop_s: Option<u64>,
    /// Repeat every MS milliseconds (nvidia-smi's `-lms`).
    #[arg(long = "loop-ms", value_name = "MS", conflicts_with = "loop_s")]
    pub loop_ms: Option<u64>,
    /// Write to FILE instead of standard output.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Only these GPUs: indices, UUIDs or PCI bus ids, comma-separated.
    #[arg(short = 'i', long = "id", value_name = "ID")]
    pub id: Option<String>,
    #[command(flatten)]
    pub nvml: GlobalArgs,
}

#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Print the devices and one snapshot as JSON (every field, in the model's units).
    #[arg(long)]
    pub json: bool,
    /// How long the GPM window for SM activity lasts (100ms to 60s); every other field is read
    /// while it runs. With --json, the utilization buffer and per-process utilization cover it.
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", default_value = "0.1", value_parser = duration::status_wait)]
    pub wait: Duration,
    /// Only these GPUs: indices, UUIDs or PCI bus ids, comma-separated.
    #[arg(short = 'i', long = "id", value_name = "ID")]
    pub id: Option<String>,
    #[command(flatten)]
    pub nvml: GlobalArgs,
}

impl Default for StatusArgs {
    fn default() -> Self {
        Self { json: false, wait: Duration::from_millis(100), id: None, nvml: GlobalArgs::default() }
    }
}

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Time between samples (at least 50ms): `1s`, `200ms`, or plain seconds.
    #[arg(allow_hyphen_values = true, short = 'i', long = "interval", value_name = "DURATION", default_value = "1", value_parser = duration::watch_interval)]
    pub interval: Duration,
    /// Stop after this many samples (1 or more).
    #[arg(short = 'n', long = "count", value_name = "N", value_parser = sample_count)]
    pub count: Option<u64>,
    #[command(flatten)]
    pub nvml: GlobalArgs,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Replay speed: trace seconds per wall-clock second (0.01 to 10000).
    #[arg(allow_hyphen_values = true, long, default_value = "10", value_parser = duration::speed)]
    pub speed: f64,
}

/// `--nvml-lib PATH` (or `=PATH`) from raw arguments, else `GPULSE_NVML_LIB`, for the nvidia-smi
/// options handled before the parser runs.
pub fn nvml_lib_arg(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--nvml-lib") => return it.next().map(PathBuf::from),
            Some(s) if s.starts_with("--nvml-lib=") => return Some(PathBuf::from(&s[11..])),
            _ => {}
        }
    }
    std::env::var_os("GPULSE_NVML_LIB").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Accepts nvidia-smi's spellings: `-lms` becomes `--loop-ms`, and query flags without a
/// command run `query`, so `gpulse` can stand in for `nvidia-smi` in existing scripts.
/// Nothing after `--` (a command `run` starts) is touched.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out: Vec<OsString> = args.into_iter().collect();
    let ours = out.iter().position(|a| a == "--").unwrap_or(out.len());
    for a in &mut out[..ours] {
        match a.to_str() {
            Some("-lms") => *a = "--loop-ms".into(),
            Some(s) if s.starts_with("-lms=") => *a = format!("--loop-ms={}", &s[5..]).into(),
            _ => {}
        }
    }
    // Every command clap knows, so that none added later is taken for a query's argument.
    let cli = <Cli as clap::CommandFactory>::command();
    let mut commands: Vec<&str> = vec!["help"];
    for c in cli.get_subcommands() {
        commands.push(c.get_name());
        commands.extend(c.get_all_aliases());
    }
    let has_command = out[1.min(ours)..ours].iter().any(|a| a.to_str().is_some_and(|s| commands.contains(&s)));
    let is_query = out[..ours]
        .iter()
        .any(|a| a.to_str().is_some_and(|s| s.starts_with("--query-gpu") || s.starts_with("--query-compute-apps")));
    if is_query && !has_command && !out.is_empty() {
        out.insert(1, "query".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_args(args.iter().map(OsString::from)).into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn accepts_nvidia_smi_spellings() {
        assert_eq!(
            norm(&["gpulse", "--query-gpu=index", "-lms", "100"]),
            ["gpulse", "query", "--query-gpu=index", "--loop-ms", "100"]
        );
        assert_eq!(
            norm(&["gpulse", "-i", "0", "--query-gpu=index"]),
            ["gpulse", "query", "-i", "0", "--query-gpu=index"]
        );
        assert_eq!(norm(&["gpulse", "watch", "-i", "1"]), ["gpulse", "watch", "-i", "1"]);
        assert_eq!(norm(&["gpulse", "query", "--query-gpu=x"]), ["gpulse", "query", "--query-gpu=x"]);
        // Every command, not only those of nvidia-smi's kind, is one: `top` and `serve` too.
        for cmd in ["top", "serve", "status"] {
            assert_eq!(norm(&["gpulse", cmd, "--query-gpu=x"]), ["gpulse", cmd, "--query-gpu=x"]);
        }
        // A command that `run` starts keeps its arguments as they are.
        assert_eq!(
            norm(&["gpulse", "run", "--", "nvidia-smi", "--query-gpu=index", "-lms", "5"]),
            ["gpulse", "run", "--", "nvidia-smi", "--query-gpu=index", "-lms", "5"]
        );
    }

    #[test]
    fn the_stacks_rate_is_checked_and_sampling_can_be_turned_off() {
        let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
        let Some(Command::Run(r)) = parse(&["gpulse", "run", "--", "python3", "t.py"]).unwrap().command else {
            panic!("not run")
        };
        assert_eq!((r.job.stacks_hz, r.job.no_stacks), (50.0, false));
        let Some(Command::Attach(a)) =
            parse(&["gpulse", "attach", "--no-stacks", "--stacks-hz", "200", "7"]).unwrap().command
        else {
            panic!("not attach")
        };
        assert_eq!((a.job.stacks_hz, a.job.no_stacks), (200.0, true));
        for bad in ["0", "201", "fast", "NaN", "inf", "-5"] {
            let e = parse(&["gpulse", "run", "--stacks-hz", bad, "--", "python3"]).unwrap_err().to_string();
            assert!(e.contains("samples a second, from 1 to 200"), "{bad}: {e}");
        }
    }

    #[test]
    fn listen_takes_names_addresses_and_bracketed_ipv6() {
        let addr = |s: &str| listen_addr(s).map(|a| a.to_string());
        assert_eq!(addr("127.0.0.1:9400").unwrap(), "127.0.0.1:9400");
        assert_eq!(addr("localhost:9400").unwrap(), "127.0.0.1:9400");
        assert_eq!(addr("[::1]:9400").unwrap(), "[::1]:9400");
        assert_eq!(addr(":9400").unwrap(), "0.0.0.0:9400");
        assert!(addr("localhost").unwrap_err().contains("has no port"));
        assert!(addr("localhost:http").unwrap_err().contains("is not a port"));
        assert_eq!(addr("::1:9400").unwrap_err(), "an IPv6 address takes brackets: [::1]:9400");
        assert!(addr("no-such-host.invalid:9400").unwrap_err().starts_with("cannot resolve \"no-such-host.invalid\""));
    }

    #[test]
    fn parses_query_flags() {
        let cli = Cli::try_parse_from(norm(&["gpulse", "--query-gpu=index", "--format=csv,noheader", "-l"])).unwrap();
        let Some(Command::Query(q)) = cli.command else { panic!("not a query") };
        assert_eq!(q.loop_s, Some(5));
        assert_eq!(q.format, "csv,noheader");
    }
}
