//! The one loop of every view (`record`, `serve`, `run`, `attach`, `top`, `watch`, `query -l`,
//! `demo`): polls into the pipeline, and between them whatever its [`Control`] looks after,
//! until the control says it is over.

use std::time::Duration;

use gpulse_sample::SampleError;

use crate::{Fed, Feed, Lost, Pipeline};

/// What a loop looks after besides feeding polls, and what ends it. Each answer `Some(end)` ends
/// the loop; `None` goes on.
pub trait Control {
    type End;
    /// Between polls, every [`tick`](Self::tick) at most: takes in what arrived besides polls (the loop's
    /// marks, the job's events) and says whether the loop is over (a signal, the job exited).
    fn between(&mut self, pipeline: &mut Pipeline) -> Option<Self::End>;
    /// The followed root is gone; its last poll is in the pipeline.
    fn root_gone(&mut self) -> Option<Self::End>;
    /// Sampling failed and has stopped.
    fn sampling_failed(&mut self, error: SampleError) -> Option<Self::End>;
    /// The collector's schedule is over (its duration is reached).
    fn schedule_over(&mut self) -> Option<Self::End>;
    /// How long to wait for a poll before looking after the rest again: each look is a wake-up
    /// (a timed wait on the channel), so a loop with nothing urgent between polls waits longer.
    fn tick(&self) -> Duration {
        Duration::from_millis(50)
    }
    /// Whether the loop ends with one more poll, taken at once: a job's end, to keep what it
    /// left on the GPUs and the Xids its last kernels raised.
    fn closing_poll(&self) -> bool {
        false
    }
    /// The recording stopped being written (told once); the sinks were told already.
    fn recording_lost(&mut self, _lost: &Lost) -> Option<Self::End> {
        None
    }
}

/// Feeds `feed`'s polls to `pipeline` until `control` ends it, then the polls taken while
/// stopping (and the closing poll, where the control asks for one). After the root is gone, one
/// poll is kept (what the job left on the GPUs), no more, and the closing poll.
pub fn drive<F: Feed, W: Control>(feed: F, pipeline: &mut Pipeline, control: &mut W) -> W::End {
    let mut feed = Some(feed);
    let mut root_gone = false;
    let mut lost_told = false;
    let end = loop {
        if let Some(end) = control.between(pipeline) {
            break end;
        }
        let Some(f) = feed.as_mut() else {
            // Sampling is over; the loop goes on (a job outlives its samples, a view its replay).
            std::thread::sleep(control.tick());
            continue;
        };
        let ended = match f.next(control.tick()) {
            Some(Ok(p)) => take(pipeline, &mut root_gone, p, false).then(|| control.root_gone()).flatten(),
            Some(Err(e)) => {
                feed = None;
                control.sampling_failed(e)
            }
            None if f.is_finished() => {
                // The last poll may have come between the wait and the look: it is the run's.
                for p in feed.take().map(|f| f.end(false)).unwrap_or_default().into_iter().flatten() {
                    take(pipeline, &mut root_gone, p, false);
                }
                control.schedule_over()
            }
            None => None,
        };
        if let Some(end) = ended {
            break end;
        }
        if !lost_told && let Some(lost) = pipeline.lost().cloned() {
            lost_told = true;
            if let Some(end) = control.recording_lost(&lost) {
                break end;
            }
        }
    };
    let closing = control.closing_poll();
    let rest = feed.map(|f| f.end(closing)).unwrap_or_default();
    let last = rest.len();
    for (i, p) in rest.into_iter().enumerate() {
        if let Ok(p) = p {
            take(pipeline, &mut root_gone, p, closing && i + 1 == last);
        }
    }
    end
}

/// Hands `fed` to the pipeline (a replay's stack samples and marks first), but for a poll after
/// the one that found the root gone (what the job left on the GPUs is one poll, no more) unless
/// `keep` (the closing poll). Whether its poll is the first to find the root gone.
fn take(pipeline: &mut Pipeline, root_gone: &mut bool, fed: Fed, keep: bool) -> bool {
    let Fed { poll: p, marks, stacks } = fed;
    if *root_gone && p.root_gone && !keep {
        return false;
    }
    pipeline.stacks(stacks);
    if !marks.is_empty() {
        pipeline.marks(marks);
    }
    let first = p.root_gone && !*root_gone;
    *root_gone |= p.root_gone;
    pipeline.poll(p);
    first
}

/// Why a loop without a job (`record`, `serve`) ended.
#[derive(Debug)]
pub enum Stopped {
    /// `stop` said so, with this reason.
    Asked(String),
    /// The collector's duration is reached.
    DurationReached,
    /// The followed root exited.
    RootGone,
    SamplingFailed(SampleError),
    WriteFailed(Lost),
}

/// A control that ends the loop when `stop` says so (asked between polls), or on the root gone, a failed
/// poll, the end of the schedule, or (with `needs_recording`) the recording lost.
pub struct Until<F> {
    pub stop: F,
    pub needs_recording: bool,
    /// A stop asked for (Ctrl-C, SIGTERM, the followed process gone) keeps one more poll, taken
    /// at once: a recording reaches the moment it stopped, not the poll an interval before. A
    /// view that only shows (`watch`, `query -l`, `demo`) takes none: the samples on schedule,
    /// no more.
    pub closing_poll: bool,
}

impl<F: FnMut() -> Option<String>> Control for Until<F> {
    type End = Stopped;

    fn between(&mut self, _: &mut Pipeline) -> Option<Stopped> {
        (self.stop)().map(Stopped::Asked)
    }

    fn root_gone(&mut self) -> Option<Stopped> {
        Some(Stopped::RootGone)
    }

    fn sampling_failed(&mut self, error: SampleError) -> Option<Stopped> {
        Some(Stopped::SamplingFailed(error))
    }

    fn schedule_over(&mut self) -> Option<Stopped> {
        Some(Stopped::DurationReached)
    }

    fn recording_lost(&mut self, lost: &Lost) -> Option<Stopped> {
        self.needs_recording.then(|| Stopped::WriteFailed(lost.clone()))
    }

    fn closing_poll(&self) -> bool {
        self.closing_poll
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use gpulse_model::{Marker, MarkerKind, Poll};

    use super::*;
    use crate::{Next, Store, StoreError};

    /// A recording of the order it was written in.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    impl Log {
        fn push(&self, what: String) -> Result<(), StoreError> {
            self.0.lock().unwrap().push(what);
            Ok(())
        }
    }

    impl Store for Log {
        fn poll(&mut self, poll: &Poll) -> Result<(), StoreError> {
            self.push(format!("poll {}", poll.host.timestamp_us))
        }
        fn markers(&mut self, marks: &[Marker]) -> Result<(), StoreError> {
            self.push(format!("marks {}", marks.len()))
        }
        fn event(&mut self, _: &gpulse_model::Event) -> Result<(), StoreError> {
            Ok(())
        }
        fn stacks(&mut self, _: &gpulse_model::StackBatch) -> Result<(), StoreError> {
            Ok(())
        }
        fn set_meta(&mut self, _: gpulse_model::MetaKey, _: &str) -> Result<(), StoreError> {
            Ok(())
        }
        fn finish(self: Box<Self>) -> Result<(), StoreError> {
            Ok(())
        }
    }

    /// A replay of its list, every poll due at once, then over (or failed, with `then`).
    struct Listed(Vec<Next>);

    impl Feed for Listed {
        fn next(&mut self, _: Duration) -> Option<Next> {
            (!self.0.is_empty()).then(|| self.0.remove(0))
        }
        fn is_finished(&self) -> bool {
            self.0.is_empty()
        }
        fn end(self, _: bool) -> Vec<Next> {
            self.0
        }
    }

    fn fed(t_us: i64, marks: usize) -> Next {
        let mark = Marker::one(t_us, 1, MarkerKind::Phase, Some("eval".into()), Some(1));
        let poll =
            Poll { host: gpulse_model::HostSample { timestamp_us: t_us, ..Default::default() }, ..Poll::default() };
        Ok(Fed { poll, marks: vec![mark; marks], stacks: Default::default() })
    }

    #[test]
    fn a_replays_marks_go_before_their_poll_and_its_end_ends_a_view() {
        let log = Log::default();
        let mut pipeline = Pipeline::new(Some(Box::new(log.clone())), None);
        let feed = Listed(vec![fed(1, 2), fed(2, 0)]);
        let end = drive(feed, &mut pipeline, &mut Until { stop: || None, needs_recording: false, closing_poll: false });
        assert!(matches!(end, Stopped::DurationReached), "{end:?}");
        assert_eq!(*log.0.lock().unwrap(), ["marks 2", "poll 1", "poll 2"]);
    }

    #[test]
    fn a_failed_feed_ends_a_view_with_its_failure() {
        let mut pipeline = Pipeline::new(None, None);
        let feed = Listed(vec![fed(1, 0), Err(SampleError::Nvml("gone".into())), fed(3, 0)]);
        let end = drive(feed, &mut pipeline, &mut Until { stop: || None, needs_recording: false, closing_poll: false });
        assert!(matches!(end, Stopped::SamplingFailed(SampleError::Nvml(_))), "{end:?}");
        assert_eq!(pipeline.polls(), 1, "nothing after the failure");
    }
}
