//! The book that hands stretches of time to accounts, first come first served.

use super::{Account, AccountKind, Ledger};
use crate::run::{Spans, merged, minus, total};
use crate::{Basis, round};

/// Claims time for accounts, first come first served.
pub(crate) struct Book {
    wall: [f64; 2],
    /// What is claimed so far.
    pub taken: Spans,
    pub accounts: Vec<Account>,
}

impl Book {
    /// An empty book of the wall time `[0, end_s]`.
    pub fn new(end_s: f64) -> Self {
        Self { wall: [0.0, end_s], taken: Vec::new(), accounts: Vec::new() }
    }

    /// Gives `account` what of `spans` is not yet claimed; returns those stretches.
    pub fn claim(
        &mut self,
        account: AccountKind,
        label: &str,
        basis: Basis,
        evidence: &str,
        spans: Vec<[f64; 2]>,
    ) -> Spans {
        let free = self.take(spans);
        self.add(account, label, basis, evidence, total(&free));
        free
    }

    /// Claims what of `spans` is not yet claimed for no account (the accounts that split it
    /// come after); returns those stretches.
    pub fn take(&mut self, spans: Vec<[f64; 2]>) -> Spans {
        let free = minus(&merged(spans, self.wall[0], self.wall[1]), &self.taken);
        if total(&free) > 0.0 {
            let mut all = std::mem::take(&mut self.taken);
            all.extend_from_slice(&free);
            self.taken = merged(all, self.wall[0], self.wall[1]);
        }
        free
    }

    /// What of the wall time no account has claimed.
    pub fn left_s(&self) -> f64 {
        total(&minus(&[self.wall], &self.taken))
    }

    /// Adds seconds that were split off claimed time (no new time is claimed).
    pub fn add(&mut self, account: AccountKind, label: &str, basis: Basis, evidence: &str, seconds: f64) {
        if seconds > 0.0 {
            match self.accounts.iter_mut().find(|a| a.account == account && a.label == label) {
                Some(a) => a.seconds += seconds,
                None => self.accounts.push(Account {
                    account,
                    label: label.to_owned(),
                    seconds,
                    share: 0.0,
                    basis,
                    evidence: evidence.to_owned(),
                    finding: None,
                    finding_gpu: None,
                }),
            }
        }
    }

    /// The accounts, their seconds rounded to the millisecond and their shares of the wall time
    /// to 0.01 %.
    pub fn into_ledger(self) -> Ledger {
        let end = self.wall[1];
        let accounts = self
            .accounts
            .into_iter()
            .map(|mut a| {
                a.share = round(a.seconds / end.max(1e-9), 4);
                a.seconds = round(a.seconds, 3);
                a
            })
            .collect();
        Ledger { wall_s: round(end, 3), accounts }
    }
}
