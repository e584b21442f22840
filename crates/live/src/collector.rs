//! Sampling on its own thread, so that a slow driver call never delays the marks or a frame.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpulse_model::{HostSample, Poll};
use gpulse_sample::{Poller, SampleError, Source};

use crate::paced::Schedule;

/// What the collector sends, and any [`Feed`](crate::Feed) hands over: a poll, or the failure
/// that ended sampling (told once).
pub type Collected = Result<Poll, SampleError>;

/// What the collector's thread reads each time: everything ([`Poller`]), or the GPUs alone
/// ([`GpusOnly`]).
pub trait Polling: Send + 'static {
    fn poll(&mut self) -> Collected;
    /// The watch's last poll, taken at once.
    fn closing_poll(&mut self) -> Collected {
        self.poll()
    }
    /// Follows the tree under `pid` from the next poll on; a source of no tree ignores it.
    fn follow(&mut self, _pid: u32) {}
}

impl Polling for Poller {
    fn poll(&mut self) -> Collected {
        Poller::poll(self)
    }
    fn closing_poll(&mut self) -> Collected {
        Poller::closing_poll(self)
    }
    fn follow(&mut self, pid: u32) {
        Poller::follow(self, pid);
    }
}

/// A GPU source alone, for a view that shows nothing else (`watch`, `query -l`, `demo`): each
/// poll is its snapshot, with no host or tree reading, so a view costs no more than its GPUs.
pub struct GpusOnly<S>(pub S);

impl<S: Source + Send + 'static> Polling for GpusOnly<S> {
    fn poll(&mut self) -> Collected {
        let snapshot = self.0.sample()?;
        let host = HostSample { timestamp_us: snapshot.timestamp_us, ..HostSample::default() };
        Ok(Poll { snapshot: Some(snapshot), host, ..Poll::default() })
    }
}

/// What the loop tells the collector's thread.
enum Order {
    Follow(u32),
    /// One more poll, at once, then stop.
    Last,
    Stop,
}

/// A thread that polls every `interval`, on a fixed [`Schedule`] from its start, until stopped,
/// a poll fails, or its duration or count is over. The first poll is taken at once.
///
/// One rule for time: the schedule and the duration are kept on the monotonic clock, here and
/// nowhere else, so whether a poll belongs to a timed run is decided once, when it is due; each
/// poll's timestamp is the wall clock's reading when it was taken, which is what the recording
/// keeps and what the loop's marks (wall-clock times from another process) are compared with.
pub struct Collector {
    polls: Receiver<Collected>,
    orders: Sender<Order>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    pub fn spawn(poller: impl Polling, interval: Duration) -> Self {
        Self::spawn_for(poller, interval, None)
    }

    /// Polls only while less than `duration` has passed since the start (every poll due before
    /// it), then takes a last one when the duration is over and ends: the samples span the time
    /// asked for (`record --duration 2s` at 1 s: 0, 1 and 2 s), not an interval less.
    pub fn spawn_for(mut poller: impl Polling, interval: Duration, duration: Option<Duration>) -> Self {
        let (polls_tx, polls) = mpsc::channel();
        let (orders, orders_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("gpulse-collector".into())
            .spawn(move || {
                let schedule = Schedule { start: Instant::now(), interval, duration, count: None };
                for n in 1u32.. {
                    let result = poller.poll();
                    let failed = result.is_err();
                    if polls_tx.send(result).is_err() || failed {
                        return;
                    }
                    // Wait for the next poll's time (or the end), woken at once by an order.
                    let Some((next, over)) = schedule.after(n) else { return };
                    loop {
                        match orders_rx.recv_timeout(next.saturating_duration_since(Instant::now())) {
                            Ok(Order::Follow(pid)) => poller.follow(pid),
                            Ok(Order::Last) => {
                                let _ = polls_tx.send(poller.closing_poll());
                                return;
                            }
                            Ok(Order::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                            Err(RecvTimeoutError::Timeout) if over => {
                                let _ = polls_tx.send(poller.closing_poll());
                                return;
                            }
                            Err(RecvTimeoutError::Timeout) => break,
                        }
                    }
                }
            })
            .expect("spawning a thread");
        Self { polls, orders, thread: Some(thread) }
    }

    /// Follows the tree under `pid` from the next poll on.
    pub fn follow(&self, pid: u32) {
        let _ = self.orders.send(Order::Follow(pid));
    }

    /// The next poll, waiting at most `timeout`; `None` when none came. After a failure, or once
    /// stopped, it never waits.
    pub fn next(&self, timeout: Duration) -> Option<Collected> {
        match self.polls.recv_timeout(timeout) {
            Ok(c) => Some(c),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Whether the thread has stopped (after a failure, or at the end of its duration).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops the thread after the poll it may be taking, and returns every poll not yet taken,
    /// that one included.
    pub fn stop(self) -> Vec<Collected> {
        self.end(Order::Stop)
    }

    /// Like [`stop`](Self::stop), with one more poll taken at once after the one under way: the
    /// state a job left behind, and what the driver raised as it ended.
    pub fn finish(self) -> Vec<Collected> {
        self.end(Order::Last)
    }

    /// Sends `how` to the thread, waits for it to end, and returns the polls not yet taken.
    fn end(mut self, how: Order) -> Vec<Collected> {
        let _ = self.orders.send(how);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.polls.try_iter().collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.orders.send(Order::Stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_on_schedule_and_stop_returns_the_rest() {
        let spawned = Instant::now();
        let c = Collector::spawn(Poller::new(None, None), Duration::from_millis(30));
        assert!(c.next(Duration::from_secs(30)).is_some_and(|p| p.is_ok()), "the first poll comes at once");
        assert!(c.next(Duration::from_secs(30)).is_some_and(|p| p.is_ok()), "the schedule goes on");
        // Ten intervals for a third poll to be taken and left: one time slice is enough.
        std::thread::sleep(Duration::from_millis(300));
        let rest = c.stop();
        let elapsed = spawned.elapsed();
        // The schedule runs from the start, never ahead of it: at most one poll per 30 ms.
        let most = (elapsed.as_millis() / 30) as usize + 1 - 2;
        assert!((1..=most).contains(&rest.len()), "{} polls left in {elapsed:?} at 30 ms", rest.len());
    }

    /// A GPU source whose second reading fails, as a driver that goes away does.
    struct Failing(u32);

    impl gpulse_sample::Source for Failing {
        fn devices(&self) -> &[gpulse_model::DeviceInfo] {
            &[]
        }
        fn sample(&mut self) -> Result<gpulse_model::Snapshot, SampleError> {
            self.0 += 1;
            match self.0 {
                1 => Ok(gpulse_model::Snapshot::default()),
                _ => Err(SampleError::Nvml("the driver went away".into())),
            }
        }
    }

    #[test]
    fn a_failed_poll_is_sent_and_ends_sampling() {
        let c = Collector::spawn(Poller::new(Some(Box::new(Failing(0))), None), Duration::from_millis(5));
        assert!(c.next(Duration::from_secs(5)).is_some_and(|p| p.is_ok()));
        let failure = c.next(Duration::from_secs(5)).expect("the failure is sent");
        assert!(matches!(failure, Err(SampleError::Nvml(_))), "{failure:?}");
        assert!(c.next(Duration::from_millis(50)).is_none(), "nothing after the failure");
        // The channel closes a moment before the thread counts as finished.
        let t0 = Instant::now();
        while !c.is_finished() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(c.is_finished());
    }

    #[test]
    fn finish_takes_one_more_poll_at_once() {
        let c = Collector::spawn(Poller::new(None, None), Duration::from_secs(3600));
        let first = c.next(Duration::from_secs(30)).expect("the first poll comes at once").unwrap();
        let started = Instant::now();
        let rest = c.finish();
        assert!(started.elapsed() < Duration::from_secs(60), "not an hour's wait: {:?}", started.elapsed());
        assert_eq!(rest.len(), 1, "one closing poll");
        let last = rest.into_iter().next().unwrap().unwrap();
        assert!(last.host.timestamp_us > first.host.timestamp_us, "taken after the first");
    }

    #[test]
    fn a_duration_takes_the_polls_due_before_it_and_one_at_its_end() {
        let started = Instant::now();
        let wall_us = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
        let spawned_us = wall_us(std::time::SystemTime::now());
        let c =
            Collector::spawn_for(Poller::new(None, None), Duration::from_millis(40), Some(Duration::from_millis(100)));
        let polls: Vec<_> = std::iter::from_fn(|| c.next(Duration::from_secs(5))).collect();
        let elapsed = started.elapsed();
        // Due at 0, 40 and 80 ms; 120 ms is past the end, so the last is taken at 100 ms.
        assert_eq!(polls.len(), 4, "{polls:?}");
        assert!(polls.iter().all(Result::is_ok));
        assert!(elapsed >= Duration::from_millis(100), "the duration is waited out: {elapsed:?}");
        let last = polls.last().unwrap().as_ref().unwrap();
        assert!(last.host.timestamp_us >= spawned_us + 100_000, "the last poll closes the 100 ms asked for");
        let t0 = Instant::now();
        while !c.is_finished() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(c.is_finished());
    }

    #[test]
    fn a_followed_root_that_is_gone_says_so() {
        let c = Collector::spawn(Poller::new(None, None), Duration::from_millis(10));
        // No process has PID 0x7fff_fff0.
        c.follow(0x7fff_fff0);
        let gone = (0..100).filter_map(|_| c.next(Duration::from_secs(1))).find_map(|p| p.ok().filter(|p| p.root_gone));
        assert!(gone.is_some(), "a poll after follow() saw the root gone");
    }
}
