//! Stretches of time, and the book that hands them to accounts first come first served.

use super::{Account, AccountKind, Ledger};
use crate::{Basis, round};

/// Sorted, disjoint `[start, end]` stretches.
pub(crate) type Spans = Vec<[f64; 2]>;

/// Sorts and merges overlapping stretches, each clipped to `[lo, hi]`.
pub(crate) fn merged(mut spans: Vec<[f64; 2]>, lo: f64, hi: f64) -> Spans {
    spans.retain_mut(|s| {
        *s = [s[0].max(lo), s[1].min(hi)];
        s[1] > s[0]
    });
    spans.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut out: Spans = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s[0] <= last[1] => last[1] = last[1].max(s[1]),
            _ => out.push(s),
        }
    }
    out
}

/// Whether `t` lies in one of `spans` (sorted, disjoint).
pub(crate) fn covers(spans: &[[f64; 2]], t: f64) -> bool {
    let i = spans.partition_point(|s| s[1] <= t);
    spans.get(i).is_some_and(|s| t >= s[0])
}

/// `spans` less `taken`, both sorted and disjoint.
pub(crate) fn minus(spans: &[[f64; 2]], taken: &[[f64; 2]]) -> Spans {
    let mut out = Vec::new();
    let mut j = 0;
    for s in spans {
        let mut start = s[0];
        while j < taken.len() && taken[j][1] <= start {
            j += 1;
        }
        let mut k = j;
        while k < taken.len() && taken[k][0] < s[1] {
            if taken[k][0] > start {
                out.push([start, taken[k][0]]);
            }
            start = start.max(taken[k][1]);
            k += 1;
        }
        if start < s[1] {
            out.push([start, s[1]]);
        }
    }
    out
}

pub(crate) fn total(spans: &[[f64; 2]]) -> f64 {
    spans.iter().map(|s| s[1] - s[0]).sum()
}

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
