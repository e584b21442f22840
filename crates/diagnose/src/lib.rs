//! Findings: why a run is slow, with the evidence they rest on and advice in PyTorch terms.
//!
//! Each rule lives in `rules/` and reads a [`Run`]: per-GPU series cut to the window where the
//! job was active, plus processes, the host and events when the input has them. Rules state what
//! they could not tell when the input lacks a field. Thresholds are reasoned in
//! `docs/diagnosis.md`, not fitted to any trace.

mod account_kind;
mod analysis;
pub mod compare;
mod energy;
mod finding_id;
mod forecast;
mod ledger;
pub mod main_thread;
pub mod ranks;
mod rolling;
pub mod roofline;
mod rules;
mod run;
mod steps;

use serde::Serialize;
use serde_json::{Map, Value};

pub use analysis::Diagnosis;
pub use energy::Energy;
pub use finding_id::{Concern, FindingId, Headline, UnknownFindingId};
pub use forecast::{Forecast, time_to_full};
pub use ledger::{Account, AccountKind, Ledger, ledger};
pub use rolling::RollingDiagnosis;
pub use roofline::{Efficiency, efficiency};
pub use run::{GpuSeries, IoBlocked, Run, RunBuilder, TreeIo, TreePss};
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
    /// What it costs: the one number every view prints. A rule sets its own estimate; once the
    /// ledger is drawn, a finding that explains an account costs that account's time.
    pub cost: Option<Cost>,
    pub basis: Basis,
    /// What the pricing, other rules and the headline read of it, typed; in JSON among the
    /// evidence.
    pub facts: Facts,
    /// The other numbers it rests on, for the reader.
    pub evidence: Map<String, Value>,
    /// What to do, in PyTorch terms.
    pub advice: Vec<String>,
    /// What the input could not tell, and what to record to be sure.
    pub limits: Vec<String>,
}

/// What other rules, the ledger's pricing and the headline read of a finding: typed values, so
/// that no rule reads another's evidence by a key. In JSON each sits in `evidence` under its
/// name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The process it is about (`pid`).
    pub pid: Option<u32>,
    /// Its cause in the headline's words: a mechanism at the user's line (`mechanism`).
    pub mechanism: Option<String>,
    /// The library its time was in (`domain`), and the user's line it was at (`site`).
    pub domain: Option<&'static str>,
    pub site: Option<String>,
    /// The marked phase it is about (`phase`).
    pub phase: Option<String>,
    /// A process outside the job: its share of the GPU's SMs while both ran, % (`sm_share_pct`).
    /// Processes that share a GPU split its time by it.
    pub sm_share_pct: Option<f64>,
    /// A stall's cause (`cause`).
    pub stall_cause: Option<&'static str>,
    /// Of the loop's measured data wait, the share inside a stall's pauses
    /// (`data_wait_in_pauses_share`): the stall carries that wait.
    pub data_wait_in_pauses_share: Option<f64>,
    /// What its rule's own share is of, in words (`own_share_of`).
    pub own_share_of: Option<&'static str>,
}

impl Facts {
    /// Each fact under its name, into `evidence`.
    fn fill(&self, evidence: &mut Map<String, Value>) {
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                evidence.insert(k.into(), v);
            }
        };
        put("pid", self.pid.map(|p| u64::from(p).into()));
        put("mechanism", self.mechanism.clone().map(Value::from));
        put("domain", self.domain.map(Value::from));
        put("site", self.site.clone().map(Value::from));
        put("phase", self.phase.clone().map(Value::from));
        put("sm_share_pct", self.sm_share_pct.map(Value::from));
        put("cause", self.stall_cause.map(Value::from));
        put("data_wait_in_pauses_share", self.data_wait_in_pauses_share.map(Value::from));
        put("own_share_of", self.own_share_of.map(Value::from));
    }
}

/// What one finding costs the run: worked out once, rounded once, and printed by every view
/// (the headline, the title, the ledger line, JSON, the report, `top`, `/metrics`) through
/// [`pct`], so they cannot disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// Seconds of the wall time, where the ledger counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Of the wall time, 0 to 1: the seconds of the accounts it explains over the wall time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_share: Option<f64>,
    /// Of the loop's window, 0 to 1, where the time lies in the loop: what the steps/s would
    /// gain without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_share: Option<f64>,
    /// Its rule's own estimate over a base of its own (a GPU's active window), before the ledger
    /// priced it, or where no account holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_share: Option<f64>,
    /// How it was counted.
    pub basis: &'static str,
    /// The ledger's accounts whose seconds it is, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<&'static str>,
}

impl Cost {
    /// A rule's own estimate, before the ledger is drawn.
    pub fn own(share: f64, how: &'static str) -> Self {
        Cost {
            seconds: None,
            wall_share: None,
            loop_share: None,
            own_share: Some(round(share.clamp(0.0, 1.0), 3)),
            basis: how,
            accounts: Vec::new(),
        }
    }

    /// The ledger's seconds of `accounts`, over the wall time and over the loop.
    pub fn of_ledger(seconds: f64, wall_s: f64, loop_s: Option<f64>, accounts: Vec<&'static str>) -> Self {
        Cost {
            seconds: Some(round(seconds, 3)),
            wall_share: Some(round((seconds / wall_s.max(1e-9)).clamp(0.0, 1.0), 4)),
            loop_share: loop_s.filter(|l| *l > 0.0).map(|l| round((seconds / l).clamp(0.0, 1.0), 3)),
            own_share: None,
            basis: rules::LEDGER_SHARE,
            accounts,
        }
    }

    /// `part` of the seconds of `accounts`, as the ledger shows them: a single account's share
    /// is its own, so its line and the finding print the same number.
    pub fn of_accounts(accounts: &[&Account], part: f64, loop_s: Option<f64>) -> Self {
        let seconds: f64 = part * accounts.iter().map(|a| a.seconds).sum::<f64>();
        let mut names: Vec<&'static str> = accounts.iter().map(|a| a.account.as_str()).collect();
        names.dedup();
        Cost {
            seconds: Some(round(seconds, 3)),
            wall_share: Some(round((part * accounts.iter().map(|a| a.share).sum::<f64>()).clamp(0.0, 1.0), 4)),
            loop_share: loop_s.filter(|l| *l > 0.0).map(|l| round((seconds / l).clamp(0.0, 1.0), 3)),
            own_share: None,
            basis: rules::LEDGER_SHARE,
            accounts: names,
        }
    }

    /// What the loop's steps/s would gain without it: the loop's share, else the run's.
    pub fn speedup(&self) -> Option<f64> {
        let lost = self.loop_share.or(self.wall_share)?;
        (lost > 0.0).then(|| 1.0 / (1.0 - lost).max(1e-9))
    }
}

/// A share as a whole percentage: the one rounding every view applies to the one stored value.
pub fn pct(share: f64) -> String {
    format!("{:.0}%", 100.0 * share)
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            id: FindingId,
            severity: Severity,
            basis: Basis,
            title: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            cost: Option<&'a Cost>,
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
            cost: self.cost.as_ref(),
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
        self.facts.fill(&mut evidence);
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
        evidence
    }

    /// Its rule's own estimate, over the base its rule read.
    pub fn own_share(&self) -> Option<f64> {
        self.cost.as_ref().and_then(|c| c.own_share)
    }

    /// Its share of the whole run, from its [`Cost`].
    pub fn wall_share(&self) -> Option<f64> {
        self.cost.as_ref().and_then(|c| c.wall_share)
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
            cost: None,
            basis: Basis::Measured,
            facts: Facts::default(),
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

    /// Its rule's own estimate: `share` of the base `how` names (the wall time, or the window
    /// its rule read), until the ledger prices it.
    pub fn costs(mut self, share: f64, how: &'static str) -> Self {
        self.cost = Some(Cost::own(share, how));
        self
    }

    /// Its rule's own estimate as a share of the loop's window, where the loop's own timing
    /// measured it: the title's number, which the ledger's pricing keeps.
    pub fn costs_of_loop(mut self, share: f64, how: &'static str) -> Self {
        let mut c = Cost::own(share, how);
        c.loop_share = c.own_share.take();
        self.cost = Some(c);
        self
    }

    /// Costs what the ledger's accounts hold: its rule's own estimate stays beside it.
    pub fn priced(mut self, cost: Cost) -> Self {
        self.price(cost);
        self
    }

    /// [`Finding::priced`] in place.
    pub fn price(&mut self, mut cost: Cost) {
        if cost.own_share.is_none() {
            cost.own_share = self.cost.as_ref().filter(|c| c.accounts.is_empty()).and_then(|c| c.own_share);
        }
        self.cost = Some(cost);
    }

    /// Whether the ledger has priced it.
    pub fn priced_by_ledger(&self) -> bool {
        self.cost.as_ref().is_some_and(|c| !c.accounts.is_empty())
    }

    /// Fills the title's `{wall}` and `{loop}` with its cost's shares, as every view prints
    /// them; where the ledger gave no such share, its rule's own estimate. `{lost}` says the
    /// share with what it is of: the wall time where the ledger priced it, else the words of the evidence's `own_share_of`
    /// words (the rule's own measure, such as "its active time").
    pub fn settle(&mut self) {
        if !["{wall}", "{loop}", "{lost}"].iter().any(|p| self.title.contains(p)) {
            return;
        }
        let c = self.cost.as_ref();
        let own = c.and_then(|c| c.own_share);
        let wall = c.and_then(|c| c.wall_share).or(own).map_or("?%".to_owned(), pct);
        let of_loop = c.and_then(|c| c.loop_share).or(own).map_or("?%".to_owned(), pct);
        let lost = match (c.and_then(|c| c.wall_share), c.and_then(|c| c.loop_share), own) {
            (Some(w), Some(l), _) => format!("{} of the wall time ({} of the loop's)", pct(w), pct(l)),
            (Some(w), None, _) => format!("{} of the wall time", pct(w)),
            (None, _, Some(o)) => {
                format!("{} of {}", pct(o), self.facts.own_share_of.unwrap_or("the time it rests on"))
            }
            (None, _, None) => "?%".to_owned(),
        };
        self.title = self.title.replace("{wall}", &wall).replace("{loop}", &of_loop).replace("{lost}", &lost);
    }

    /// The cause is deduced from a pattern, not read.
    pub fn inferred(mut self) -> Self {
        self.basis = Basis::Inferred;
        self
    }

    /// The process it is about.
    fn of_pid(mut self, pid: u32) -> Self {
        self.facts.pid = Some(pid);
        self
    }

    /// Its cause in the headline's words.
    fn mechanism(mut self, words: String) -> Self {
        self.facts.mechanism = Some(words);
        self
    }

    /// The marked phase it is about.
    fn phase(mut self, name: String) -> Self {
        self.facts.phase = Some(name);
        self
    }

    /// A process outside the job using `pct` % of the GPU's SMs beside it.
    fn sharing_sms(mut self, pct: f64) -> Self {
        self.facts.sm_share_pct = Some(pct);
        self
    }

    /// A stall's cause, by name.
    fn stall_cause(mut self, cause: &'static str) -> Self {
        self.facts.stall_cause = Some(cause);
        self
    }

    /// What its rule's own share is of, in words.
    fn own_share_of(mut self, words: &'static str) -> Self {
        self.facts.own_share_of = Some(words);
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
    let top = findings.iter().filter(|f| f.id.is_about_the_job()).find(|f| {
        f.severity <= Severity::Warning
            || f.cost.as_ref().is_some_and(|c| c.wall_share.is_some() || c.own_share.is_some())
    })?;
    // A fact, not a fault (a GPU at its power limit under dense math): said as such beside the
    // clean bill of health, with no speed-up promised for what the job cannot remove.
    if top.severity == Severity::Info && !matches!(top.id, FindingId::Startup | FindingId::MarkedPhase) {
        let healthy = findings.iter().find(|f| f.id == FindingId::Healthy);
        return Some(match healthy {
            Some(h) => format!("{}. {}.", h.title, top.title),
            None => format!("Primary finding: {}.", top.title),
        });
    }
    // The finding's own cost, as its title and its ledger line print it: the gain in steps/s
    // from its share of the loop, the share of the whole run from the ledger. A measured share
    // of a base of its own stands in where the ledger holds no account of it.
    let cost = top.cost.as_ref();
    let measured = top.basis == Basis::Measured;
    let own = cost.and_then(|c| c.own_share).filter(|_| measured);
    let loop_share = cost.and_then(|c| c.loop_share);
    let Some(lost) = loop_share.or(own).or(cost.and_then(|c| c.wall_share)).filter(|l| *l > 0.0) else {
        return Some(format!("Primary finding: {}.", top.title));
    };
    let wall = cost.and_then(|c| c.wall_share);
    let (of_loop, pct) = (crate::pct(lost), crate::pct(wall.unwrap_or(lost)));
    // Past 20× the remaining time is too small a share to say how much.
    let gain = 1.0 / (1.0 - lost).max(1e-9);
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
                "The loop waits for data {of_loop} of the loop's time: {gain} more steps/s if it did not."
            ));
        }
        TransferBound if top.basis == Basis::Measured => {
            return Some(format!(
                "Copies to the GPU hold the loop up {of_loop} of its time: {gain} more steps/s if they did not."
            ));
        }
        // A fixed cost: it lengthens the run, it does not slow the steps.
        Startup => return Some(format!("Start-up before the first step took {pct} of the run.")),
        // Time spent on purpose: how much, not what removing it would gain.
        MarkedPhase => {
            let name = top.facts.phase.as_deref().unwrap_or("marked");
            return Some(format!("The loop's '{name}' phase took {pct} of the wall time."));
        }
        id => match id.headline() {
            Headline::Words(w) => w,
            Headline::Mechanism => top.facts.mechanism.as_deref().unwrap_or(top.title.as_str()),
            Headline::Title => top.title.as_str(),
        },
    };
    let about = if top.basis == Basis::Inferred { " about" } else { "" };
    // The gain is the loop's: say its share too where it differs from the run's.
    // No account holds it: its rule's own share, of the window that rule read, said as such.
    if wall.is_none() {
        return Some(format!("{what} cost{about} {pct} of its GPU's active time: {gain} more steps/s without it."));
    }
    let of_loop = if of_loop != pct { format!(" ({of_loop} of the loop's)") } else { String::new() };
    Some(format!("{what} cost{about} {pct} of the wall time{of_loop}: {gain} more steps/s without it."))
}

/// Rounds for display in evidence.
fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}
