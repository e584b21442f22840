//! When polls are due, kept once for both ways of taking them: the [`Collector`](crate::Collector)'s
//! thread (a watch with work between polls: marks, a job, a server), or [`Inline`], on the loop's
//! own thread, for a view that does nothing between polls (`watch`, `query -l`, `demo`), where a
//! thread would only add a hand-over to every poll.

use std::time::{Duration, Instant};

use crate::{Collected, Feed, Polling};

/// Every `interval` from `start`, the first poll at once; with a `duration`, the last at its end
/// (the samples span the time asked for); with a `count`, that many and no more. Kept on the
/// monotonic clock.
#[derive(Clone, Copy)]
pub(crate) struct Schedule {
    pub start: Instant,
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub count: Option<u64>,
}

impl Schedule {
    /// After `taken` polls, when the next is due and whether it is the last (the duration's
    /// end); `None` when the count is reached.
    pub fn after(&self, taken: u32) -> Option<(Instant, bool)> {
        if self.count.is_some_and(|c| u64::from(taken) >= c) {
            return None;
        }
        let due = self.interval.saturating_mul(taken);
        let over = self.duration.is_some_and(|d| due >= d);
        Some((self.start + if over { self.duration.unwrap_or(due) } else { due }, over))
    }
}

/// Polls on the loop's own thread, on the [`Schedule`]: `count` polls at most (every one when
/// `None`), the last ending the feed at once (`watch -n 2` waits one interval, no more).
pub struct Inline<P> {
    poller: P,
    schedule: Schedule,
    taken: u32,
    /// The next poll's time and whether it is the last; `None` once over or failed.
    next: Option<(Instant, bool)>,
}

impl<P: Polling> Inline<P> {
    pub fn new(poller: P, interval: Duration, count: Option<u64>) -> Self {
        let start = Instant::now();
        let schedule = Schedule { start, interval, duration: None, count };
        Self { poller, schedule, taken: 0, next: schedule.after(0).map(|_| (start, false)) }
    }
}

impl<P: Polling> Feed for Inline<P> {
    fn next(&mut self, wait: Duration) -> Option<Collected> {
        let (due, last) = self.next?;
        let early = due.saturating_duration_since(Instant::now());
        if !early.is_zero() {
            std::thread::sleep(early.min(wait));
            if Instant::now() < due {
                return None;
            }
        }
        let polled = if last { self.poller.closing_poll() } else { self.poller.poll() };
        self.taken += 1;
        self.next = if polled.is_err() || last { None } else { self.schedule.after(self.taken) };
        Some(polled)
    }

    fn is_finished(&self) -> bool {
        self.next.is_none()
    }

    /// Nothing is ever taken ahead; a closing poll, where asked for and sampling goes on.
    fn end(mut self, closing: bool) -> Vec<Collected> {
        match self.next {
            Some(_) if closing => vec![self.poller.closing_poll()],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use gpulse_model::{DeviceInfo, Snapshot};
    use gpulse_sample::{SampleError, Source};

    use super::*;
    use crate::GpusOnly;

    /// A GPU source whose snapshots are timed 1, 2, 3… µs.
    struct Counting(i64);

    impl Source for Counting {
        fn devices(&self) -> &[DeviceInfo] {
            &[]
        }
        fn sample(&mut self) -> Result<Snapshot, SampleError> {
            self.0 += 1;
            Ok(Snapshot { timestamp_us: self.0, gpus: Vec::new() })
        }
    }

    #[test]
    fn a_count_ends_with_its_last_poll_not_an_interval_later() {
        // An hour between polls, and a wait of a minute at most: the first comes at once, and
        // the feed is over with it.
        let mut feed = Inline::new(GpusOnly(Counting(0)), Duration::from_secs(3600), Some(1));
        let poll = feed.next(Duration::from_secs(60)).expect("the first poll is taken at once").unwrap();
        assert_eq!(poll.snapshot.map(|s| s.timestamp_us), Some(1));
        assert_eq!(poll.host.timestamp_us, 1, "a GPU source's poll is timed by its snapshot");
        assert!(poll.tree.is_none());
        assert!(feed.is_finished());
        assert!(feed.next(Duration::from_secs(60)).is_none());
    }

    #[test]
    fn polls_come_on_schedule_and_a_wait_shorter_than_the_interval_gives_none() {
        let mut feed = Inline::new(GpusOnly(Counting(0)), Duration::from_secs(3600), None);
        assert!(feed.next(Duration::ZERO).is_some(), "the first at once");
        let t0 = Instant::now();
        assert!(feed.next(Duration::from_millis(10)).is_none(), "the second is an hour away");
        assert!(t0.elapsed() < Duration::from_secs(60));
        assert!(!feed.is_finished());
        let closing = feed.end(true);
        assert_eq!(closing.len(), 1, "a closing poll where asked for");
    }

    #[test]
    fn the_schedule_keeps_to_its_start_and_its_duration() {
        let start = Instant::now();
        let s = Schedule {
            start,
            interval: Duration::from_millis(40),
            duration: Some(Duration::from_millis(100)),
            count: None,
        };
        assert_eq!(s.after(1), Some((start + Duration::from_millis(40), false)));
        assert_eq!(s.after(2), Some((start + Duration::from_millis(80), false)));
        assert_eq!(s.after(3), Some((start + Duration::from_millis(100), true)), "the last at the duration's end");
        let counted = Schedule { count: Some(2), duration: None, ..s };
        assert!(counted.after(1).is_some() && counted.after(2).is_none());
    }
}
