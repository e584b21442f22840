//! The one analysis of a finished run: made once, by the use case that read the run, and only
//! rendered after, so every view's numbers and rounding agree by construction.

use crate::main_thread::Profile;
use crate::{Efficiency, Finding, Ledger, Run};

/// Everything gpulse says of a finished run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnosis {
    /// Worst first, as [`crate::diagnose_run`] sorts them.
    pub findings: Vec<Finding>,
    /// Every second of the wall time in one account.
    pub ledger: Ledger,
    /// Each GPU's distance from its roof, with its energy per step.
    pub efficiency: Vec<Efficiency>,
    /// What each sampled process's main thread did.
    pub stacks: Vec<Profile>,
    /// A distributed job's ranks, side by side; empty for a job of one process.
    pub ranks: Vec<crate::ranks::RankRow>,
    /// One line on the primary cause; `None` when nothing is wrong.
    pub summary: Option<String>,
}

impl Diagnosis {
    pub fn of(run: &Run) -> Self {
        let (findings, ledger) = crate::diagnose_with_ledger(run);
        let summary = crate::summary(&findings);
        Self {
            efficiency: crate::efficiency(run),
            stacks: crate::main_thread::profiles(run),
            ranks: crate::ranks::rows(run),
            findings,
            ledger,
            summary,
        }
    }
}
