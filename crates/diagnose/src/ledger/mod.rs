//! The ledger: every second of a run's wall time in exactly one account, with what it rests on.
//!
//! Accounts claim time in order of how directly they are known: the loop's marked phases first
//! (what a phase covers is never blamed on anything else), then its timed waits for data (those
//! before its first step are start-up's, as the loop's own figures count them), then start-up
//! before the first step and the time after the last, then a stall's pauses. What is
//! left of the loop is split by the GPU's own reading: the share in which a kernel ran is GPU
//! work, the rest goes to the inferred finding that explains it, or stays unexplained.

mod book;
mod busy;
mod families;

use serde::Serialize;

pub use crate::account_kind::AccountKind;
pub(crate) use families::{GPU_IDLE_IN_LOOP, LOOP_WITHOUT_GPU, NO_LOOP};

use crate::run::{end_s, loop_window, primary};
use crate::{Basis, Finding, FindingId, Run};

/// One account of the wall time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Account {
    /// What kind of time.
    pub account: AccountKind,
    /// Its name for people: a phase's own name, a stall's cause.
    pub label: String,
    pub seconds: f64,
    /// Its seconds over the wall time, 0 to 1.
    pub share: f64,
    pub basis: Basis,
    /// How its seconds were counted.
    pub evidence: String,
    /// The inferred finding whose cause the account is, and its GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<FindingId>,
    #[serde(skip)]
    pub finding_gpu: Option<u32>,
}

/// The run's wall time in accounts that sum to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ledger {
    pub wall_s: f64,
    pub accounts: Vec<Account>,
}

impl Ledger {
    /// Seconds in the accounts of one kind.
    pub fn seconds(&self, account: AccountKind) -> f64 {
        self.accounts.iter().filter(|a| a.account == account).map(|a| a.seconds).sum()
    }

    /// The share of the wall time in the accounts of one kind, 0 to 1.
    pub fn share(&self, account: AccountKind) -> f64 {
        self.seconds(account) / self.wall_s.max(1e-9)
    }
}

/// The label of the start-up from the job's CUDA context to its first step.
pub(crate) const TO_FIRST_STEP: &str = "start-up from the CUDA context to the first step";

/// Every second of the run in one account. `findings` are the rules' (stall pauses and the
/// inferred causes of idle time come from them). Each family of accounts claims in turn.
pub fn ledger(run: &Run, findings: &[Finding]) -> Ledger {
    let end_s = end_s(run);
    let mut book = book::Book::new(end_s);
    // The loop: from its first step to its last, else the GPU's active window.
    let (window_s, marked) = loop_window(run);
    let at = families::Loop { window_s, marked, end_s };
    families::phases(&mut book, run);
    let displaced_s = families::waits(&mut book, run, &at);
    let g = primary(run);
    if let Some([first, last]) = window_s {
        families::startup(&mut book, run, &at, first);
        families::after_loop(&mut book, &at, last);
        families::stalls(&mut book, findings, g);
        if let Some(g) = g {
            families::storage_writes(&mut book, run, g);
        }
        families::loop_rest(&mut book, run, findings, g, [first, last], displaced_s);
    }
    families::unexplained(&mut book, run, &at);
    book.into_ledger()
}

#[cfg(test)]
mod tests;
