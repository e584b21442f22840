//! The one loop of every view (`record`, `serve`, `run`, `attach`, `top`, `watch`, `query -l`,
//! `demo`): polls into the pipeline, with its [`Input`]s drained between them, until its
//! [`Control`] says it is over.

use std::time::Duration;

use gpulse_model::Poll;
use gpulse_sample::SampleError;

use crate::{Feed, Input, Lost, Pipeline};

/// What ends a loop, and nothing else: data besides the polls comes in through [`Input`]s. Each
/// answer `Some(end)` ends the loop; `None` goes on.
pub trait Control {
    type End;
    /// Between polls, every [`tick`](Self::tick) at most: whether the loop is over (a signal,
    /// the job exited).
    fn between(&mut self) -> Option<Self::End>;
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
/// stopping (and the closing poll, where the control asks for one); each input is drained after
/// every look of the control and before each poll, in order, and finished at the end. After the
/// root is gone, one poll is kept (what the job left on the GPUs), no more, and the closing poll.
pub fn drive<F: Feed, W: Control>(
    feed: F,
    pipeline: &mut Pipeline,
    control: &mut W,
    inputs: &mut [&mut dyn Input],
) -> W::End {
    let mut feed = Some(feed);
    let mut root_gone = false;
    let mut lost_told = false;
    let end = loop {
        if let Some(end) = control.between() {
            break end;
        }
        drain(inputs, pipeline, None);
        let Some(f) = feed.as_mut() else {
            // Sampling is over; the loop goes on (a job outlives its samples, a view its replay).
            std::thread::sleep(control.tick());
            continue;
        };
        let ended = match f.next(control.tick()) {
            Some(Ok(p)) => take(pipeline, inputs, &mut root_gone, p, false).then(|| control.root_gone()).flatten(),
            Some(Err(e)) => {
                feed = None;
                control.sampling_failed(e)
            }
            None if f.is_finished() => {
                // The last poll may have come between the wait and the look: it is the run's.
                for p in feed.take().map(|f| f.end(false)).unwrap_or_default().into_iter().flatten() {
                    take(pipeline, inputs, &mut root_gone, p, false);
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
            take(pipeline, inputs, &mut root_gone, p, closing && i + 1 == last);
        }
    }
    inputs.iter_mut().for_each(|i| i.finish(pipeline));
    end
}

fn drain(inputs: &mut [&mut dyn Input], pipeline: &mut Pipeline, until_us: Option<i64>) {
    inputs.iter_mut().for_each(|i| i.drain(pipeline, until_us));
}

/// Hands `p` to the pipeline after what the inputs have due by it (a replay's marks and stack
/// samples), but for a poll after the one that found the root gone (what the job left on the
/// GPUs is one poll, no more) unless `keep` (the closing poll). Whether it is the first poll to
/// find the root gone.
fn take(pipeline: &mut Pipeline, inputs: &mut [&mut dyn Input], root_gone: &mut bool, p: Poll, keep: bool) -> bool {
    if *root_gone && p.root_gone && !keep {
        return false;
    }
    drain(inputs, pipeline, Some(p.host.timestamp_us));
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

    fn between(&mut self) -> Option<Stopped> {
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
    use crate::{Collected, Store, StoreError};

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
    struct Listed(Vec<Collected>);

    impl Feed for Listed {
        fn next(&mut self, _: Duration) -> Option<Collected> {
            (!self.0.is_empty()).then(|| self.0.remove(0))
        }
        fn is_finished(&self) -> bool {
            self.0.is_empty()
        }
        fn end(self, _: bool) -> Vec<Collected> {
            self.0
        }
    }

    /// A replay's marks, each handed over by the poll at or after its time.
    struct Recorded(Vec<Marker>);

    impl Input for Recorded {
        fn drain(&mut self, pipeline: &mut Pipeline, until_us: Option<i64>) {
            let Some(t) = until_us else { return };
            let due = self.0.iter().take_while(|m| m.t_us <= t).count();
            if due > 0 {
                pipeline.marks(self.0.drain(..due));
            }
        }
    }

    fn polled(t_us: i64) -> Collected {
        Ok(Poll { host: gpulse_model::HostSample { timestamp_us: t_us, ..Default::default() }, ..Poll::default() })
    }

    fn until() -> Until<impl FnMut() -> Option<String>> {
        Until { stop: || None, needs_recording: false, closing_poll: false }
    }

    #[test]
    fn a_replays_marks_go_before_their_poll_and_its_end_ends_a_view() {
        let log = Log::default();
        let mut pipeline = Pipeline::new(Some(Box::new(log.clone())), None);
        let feed = Listed(vec![polled(1), polled(2)]);
        let mark = Marker::one(1, 1, MarkerKind::Phase, Some("eval".into()), Some(1));
        let mut marks = Recorded(vec![mark; 2]);
        let end = drive(feed, &mut pipeline, &mut until(), &mut [&mut marks]);
        assert!(matches!(end, Stopped::DurationReached), "{end:?}");
        assert_eq!(*log.0.lock().unwrap(), ["marks 2", "poll 1", "poll 2"]);
    }

    #[test]
    fn a_failed_feed_ends_a_view_with_its_failure() {
        let mut pipeline = Pipeline::new(None, None);
        let feed = Listed(vec![polled(1), Err(SampleError::Nvml("gone".into())), polled(3)]);
        let end = drive(feed, &mut pipeline, &mut until(), &mut []);
        assert!(matches!(end, Stopped::SamplingFailed(SampleError::Nvml(_))), "{end:?}");
        assert_eq!(pipeline.polls(), 1, "nothing after the failure");
    }
}
