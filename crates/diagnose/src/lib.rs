//! Findings: why a run is slow, with the evidence they rest on and advice in PyTorch terms.
//!
//! Each rule lives in `rules/` and reads a [`Run`]: per-GPU series cut to the window where the
//! job was active, plus processes, the host and events when the input has them. Rules state what
//! they could not tell when the input lacks a field. Thresholds are reasoned in
//! `docs/diagnosis.md`, not fitted to any trace.

mod analysis;
pub mod compare;
mod energy;
mod finding_id;
mod forecast;
mod ledger;
pub mod main_thread;
mod rolling;
pub mod roofline;
mod rules;
mod series;
mod steps;

use serde::Serialize;
use serde_json::{Map, Value};

pub use analysis::Diagnosis;
pub use energy::Energy;
pub use finding_id::{Concern, FindingId, UnknownFindingId};
pub use forecast::{Forecast, time_to_full};
pub use ledger::{Account, AccountKind, Ledger, ledger};
pub use rolling::RollingDiagnosis;
pub use roofline::{Efficiency, efficiency};
pub use series::{GpuSeries, Run, RunBuilder};
pub use steps::Steps;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

/// What a finding's cause rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Read directly: the loop's own marks, or a counter of the very thing the finding names.
    Measured,
    /// Deduced from a pattern (utilization, CPU) that more than one cause can produce.
    Inferred,
}

/// One diagnosis. The typed fields are what renderers place on a chart or a screen; in JSON they
/// sit inside `evidence` under their own names, beside the numbers that only get printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Which finding; its name, such as `input_bound`, is what JSON and views show.
    pub id: FindingId,
    pub severity: Severity,
    /// One line with the key number.
    pub title: String,
    /// The GPU it concerns; `None` for the host or the run as a whole.
    pub gpu: Option<u32>,
    /// The stretch of the run it rests on, seconds from the run's start.
    pub window_s: Option<[f64; 2]>,
    /// The pauses a stall is made of, seconds from the run's start.
    pub pauses_s: Vec<[f64; 2]>,
    /// Seconds until memory runs out at the present trend.
    pub time_to_oom_s: Option<f64>,
    /// The share of the wall time it costs, 0 to 1, where it can be estimated.
    pub lost_share: Option<f64>,
    /// How `lost_share` was estimated.
    pub lost_share_basis: Option<&'static str>,
    pub basis: Basis,
    /// The other numbers it rests on.
    pub evidence: Map<String, Value>,
    /// What to do, in PyTorch terms.
    pub advice: Vec<String>,
    /// What the input could not tell, and what to record to be sure.
    pub limits: Vec<String>,
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            id: FindingId,
            severity: Severity,
            basis: Basis,
            title: &'a str,
            evidence: Map<String, Value>,
            advice: &'a [String],
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            limits: &'a [String],
        }
        Json {
            id: self.id,
            severity: self.severity,
            basis: self.basis,
            title: &self.title,
            evidence: self.all_evidence(),
            advice: &self.advice,
            limits: &self.limits,
        }
        .serialize(s)
    }
}

impl Finding {
    /// The evidence as shown and written: the typed fields under their own names among the rest.
    pub fn all_evidence(&self) -> Map<String, Value> {
        let mut evidence = self.evidence.clone();
        if let Some(g) = self.gpu {
            evidence.insert("gpu".into(), g.into());
        }
        if let Some(w) = self.window_s {
            evidence.insert("window_s".into(), w.to_vec().into());
        }
        if !self.pauses_s.is_empty() {
            evidence.insert("pauses".into(), self.pauses_s.iter().map(|p| p.to_vec()).collect::<Vec<_>>().into());
        }
        if let Some(t) = self.time_to_oom_s {
            evidence.insert("time_to_oom_s".into(), t.into());
        }
        if let Some(l) = self.lost_share {
            evidence.insert("lost_share".into(), l.into());
        }
        if let Some(b) = self.lost_share_basis {
            evidence.insert("lost_share_basis".into(), b.into());
        }
        evidence
    }

    /// Its share of the whole run: the ledger's account where it has one, else its own
    /// `lost_share` (which for the loop's rules is a share of the loop's window).
    pub fn wall_share(&self) -> Option<f64> {
        self.evidence.get("wall_share").and_then(Value::as_f64).or(self.lost_share)
    }

    /// What a finding is ranked by among those of its severity: [`Finding::wall_share`], those
    /// without one last.
    pub fn ranked_share(&self) -> f64 {
        self.wall_share().unwrap_or(-1.0)
    }

    /// A finding with nothing placed yet; rules fill it with the builders below.
    pub fn new(id: FindingId, severity: Severity, title: String) -> Self {
        Self {
            id,
            severity,
            title,
            gpu: None,
            window_s: None,
            pauses_s: Vec::new(),
            time_to_oom_s: None,
            lost_share: None,
            lost_share_basis: None,
            basis: Basis::Measured,
            evidence: Map::new(),
            advice: Vec::new(),
            limits: Vec::new(),
        }
    }

    pub fn on_gpu(mut self, gpu: u32) -> Self {
        self.gpu = Some(gpu);
        self
    }

    /// Rounded to a tenth of a second, as evidence is shown.
    pub fn over(mut self, window_s: [f64; 2]) -> Self {
        self.window_s = Some(window_s.map(|t| round(t, 1)));
        self
    }

    /// Already rounded: the pauses are shown as they are kept.
    pub fn pauses(mut self, pauses_s: Vec<[f64; 2]>) -> Self {
        self.pauses_s = pauses_s;
        self
    }

    pub fn forecast(mut self, time_to_oom_s: f64) -> Self {
        self.time_to_oom_s = Some(time_to_oom_s);
        self
    }

    /// Costs `share` of the wall time (rounded to 0.1 %), estimated as `how` says.
    pub fn costs(mut self, share: f64, how: &'static str) -> Self {
        self.lost_share = Some(round(share.clamp(0.0, 1.0), 3));
        self.lost_share_basis = Some(how);
        self
    }

    /// The cause is deduced from a pattern, not read.
    pub fn inferred(mut self) -> Self {
        self.basis = Basis::Inferred;
        self
    }

    fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.evidence.insert(key.to_owned(), value.into());
        self
    }

    fn advise(mut self, advice: &[&str]) -> Self {
        self.advice.extend(advice.iter().map(|a| (*a).to_owned()));
        self
    }

    fn limit(mut self, what: &str) -> Self {
        self.limits.push(what.to_owned());
        self
    }
}

/// Every finding for a recording held whole, worst first.
pub fn diagnose(rec: &gpulse_model::RunData) -> Vec<Finding> {
    diagnose_run(&Run::from_recording(rec))
}

/// Every finding for a run, worst first: by severity, then by the share of the wall time it costs
/// (those that cannot say last).
pub fn diagnose_run(run: &Run) -> Vec<Finding> {
    diagnose_with_ledger(run).0
}

/// [`diagnose_run`]'s findings, and the ledger of the run's wall time they rest on.
pub fn diagnose_with_ledger(run: &Run) -> (Vec<Finding>, Ledger) {
    let (mut out, ledger) = rules::all(run);
    // An Xid is the driver's word that the GPU or the job's kernels failed: it leads its severity.
    let xid = |f: &Finding| f.id == FindingId::Xid;
    out.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| xid(b).cmp(&xid(a)))
            .then_with(|| b.ranked_share().total_cmp(&a.ranked_share()))
    });
    (out, ledger)
}

/// One line on the primary cause and what fixing it would gain, from findings sorted as
/// [`diagnose_run`] sorts them; `None` when nothing is wrong.
pub fn summary(findings: &[Finding]) -> Option<String> {
    // Other processes' memory and a clean bill of health say nothing of what slows the job.
    let top = findings
        .iter()
        .filter(|f| f.id.is_about_the_job())
        .find(|f| f.severity <= Severity::Warning || f.lost_share.is_some() || f.evidence.contains_key("own_share"))?;
    // The gain in steps/s comes from what the cause takes of the loop's time; the share of the
    // whole run is the ledger's.
    let share = |key: &str| top.evidence.get(key).and_then(serde_json::Value::as_f64);
    // The loop's share of the ledger's seconds; a measured share of the loop's own timing where
    // there is no loop account.
    let measured = top.basis == Basis::Measured;
    let own = share("own_share").filter(|_| measured);
    let Some(lost) = share("loop_share").or(own).or(top.lost_share).filter(|l| *l > 0.0) else {
        return Some(format!("Primary finding: {}.", top.title));
    };
    let of_loop = 100.0 * lost;
    let pct = 100.0 * share("wall_share").unwrap_or(lost);
    // Past 20× the remaining time is too small a share to say how much.
    let gain = 1.0 / (1.0 - lost);
    let gain = if gain > 20.0 {
        "over 20×".to_owned()
    } else if gain >= 10.0 {
        format!("about {gain:.0}×")
    } else {
        format!("about {gain:.1}×")
    };
    use FindingId::*;
    let what = match top.id {
        InputBound if top.basis == Basis::Measured => {
            return Some(format!(
                "The loop waits for data {of_loop:.0}% of the loop's time: {gain} more steps/s if it did not."
            ));
        }
        TransferBound if top.basis == Basis::Measured => {
            return Some(format!(
                "Copies to the GPU hold the loop up {of_loop:.0}% of its time: {gain} more steps/s if they did not."
            ));
        }
        // A fixed cost: it lengthens the run, it does not slow the steps.
        Startup => return Some(format!("Start-up before the first step took {pct:.0}% of the run.")),
        // Time spent on purpose: how much, not what removing it would gain.
        MarkedPhase => {
            let name = top.evidence.get("phase").and_then(|p| p.as_str()).unwrap_or("marked");
            return Some(format!("The loop's '{name}' phase took {pct:.0}% of the wall time."));
        }
        EpochRestart => "Restarting the DataLoader's workers at each epoch",
        // The mechanism and its site, without the title's figures.
        HostPython | GilContention | SleepInLoop | NetworkWait | DiskWait | IpcWait | LockWait | MainThreadBlocked => {
            top.evidence.get("mechanism").and_then(|m| m.as_str()).unwrap_or(top.title.as_str())
        }
        InputBound => "Waiting for data (inferred from the GPU's idle bursts)",
        ProcessBound => "The training process starving the GPU (data loading or Python overhead)",
        HostBound => "The host not feeding the GPU (launch overhead or synchronizations)",
        PeriodicStall => "Periodic stalls",
        TransferBound => "Host-to-device copies",
        HostSaturated => "A saturated host CPU",
        // Their own title says it best.
        UtilMisleading | GpuImbalance | Healthy | TensorIdle | Oom | MemoryPressure | MemoryGrowth
        | CheckpointWrites | UnexplainedTime | Throttling | IdleHolder | ForeignProcess | GpuShared
        | CpuOversubscribed | DataParallel | DeviceMisbinding | WorkerMemory | GpuLost | HostOom | NcclTimeout
        | NcclError | DataloaderKilled | Xid | GpuResetPending | NvlinkUnused => top.title.as_str(),
    };
    let about = if top.basis == Basis::Inferred { " about" } else { "" };
    // The gain is the loop's: say its share too where it differs from the run's.
    let of_loop = if (of_loop - pct).abs() >= 1.0 { format!(" ({of_loop:.0}% of the loop's)") } else { String::new() };
    Some(format!("{what} cost{about} {pct:.0}% of the wall time{of_loop}: {gain} more steps/s without it."))
}

/// Rounds for display in evidence.
fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}
