//! Where the polls come from: the live collector, or a recording played back at a chosen speed
//! as the polls it was made of, with its marks and stack samples as the loop's input, so a
//! replay goes through the same pipeline, and the same door for side data, as live data.

use std::time::{Duration, Instant};

use gpulse_live::{Collector, Input, Pipeline};
use gpulse_model::{Marker, Poll, RunData, StackBatch};

/// A recording as the polls it was taken as, and what it kept beside them.
pub struct Replay {
    polls: Vec<Poll>,
    /// The marks and stack samples, handed to the loop as its input (boxed, as the steps).
    recorded: Box<Recorded>,
    next: usize,
    speed: f64,
    /// Wall clock and recording time of the latest poll played.
    anchor: Option<(Instant, i64)>,
    /// The analysis of the whole recording, as `gpulse diagnose` makes it: what the view shows
    /// once the replay has played to its end.
    final_findings: Vec<gpulse_diagnose::Finding>,
    /// The whole recording's steps: the pace and data wait shown with that analysis (boxed: a
    /// feed is moved whole between threads).
    final_steps: Option<Box<gpulse_diagnose::Steps>>,
}

/// A recording's marks and main-thread stack samples, each handed to the pipeline by the first
/// poll played at or after its time, as the live loop would have sent them by then.
#[derive(Default)]
pub struct Recorded {
    /// In the recording's order: a mark waits for those before it.
    marks: Vec<Marker>,
    marks_sent: usize,
    /// Sorted by time.
    stacks: gpulse_model::Stacks,
    stacks_sent: usize,
}

impl Replay {
    /// Rebuilds the polls: each snapshot with the host and tree readings nearest to it.
    /// `whole` is the whole recording's analysis and `steps` its steps, made once by the caller
    /// as `gpulse diagnose` makes them: what the view shows once the replay has played to its end.
    pub fn new(
        run: &RunData,
        speed: f64,
        whole: &gpulse_diagnose::Diagnosis,
        steps: Option<&gpulse_diagnose::Steps>,
    ) -> Self {
        let nearest = |list: &[i64], t: i64| -> Option<usize> {
            let i = list.partition_point(|&x| x < t);
            [i.checked_sub(1), (i < list.len()).then_some(i)].into_iter().flatten().min_by_key(|&j| (list[j] - t).abs())
        };
        let host_t: Vec<i64> = run.host.iter().map(|h| h.timestamp_us).collect();
        let tree_t: Vec<i64> = run.trees.iter().map(|h| h.timestamp_us).collect();
        let polls = run
            .snapshots
            .iter()
            .map(|snap| {
                let t = snap.timestamp_us;
                let host = nearest(&host_t, t).map(|i| run.host[i].clone()).unwrap_or_default();
                let tree = nearest(&tree_t, t).map(|i| run.trees[i].clone());
                let host = gpulse_model::HostSample { timestamp_us: t, ..host };
                Poll { snapshot: Some(snap.clone()), host, tree, ..Poll::default() }
            })
            .collect();
        let mut stacks = run.stacks.clone();
        stacks.samples.sort_by_key(|x| x.t_us);
        let recorded = Box::new(Recorded { marks: run.markers.clone(), marks_sent: 0, stacks, stacks_sent: 0 });
        let final_findings = whole.findings.clone();
        let final_steps = steps.cloned().map(Box::new);
        Self { polls, recorded, next: 0, speed, anchor: None, final_findings, final_steps }
    }

    /// As [`Replay::new`], with the analysis made here.
    #[cfg(test)]
    pub(crate) fn analysed(run: &RunData, speed: f64) -> Self {
        let whole = gpulse_diagnose::Run::from_recording(run);
        Self::new(run, speed, &gpulse_diagnose::Diagnosis::of(&whole), whole.steps.as_ref())
    }

    pub fn len(&self) -> usize {
        self.polls.len()
    }

    /// Hands over the whole recording's findings (in `gpulse diagnose`'s order) and steps, once:
    /// the view keeps them for the replay's end.
    pub(crate) fn take_final(&mut self) -> (Vec<gpulse_diagnose::Finding>, Option<gpulse_diagnose::Steps>) {
        (std::mem::take(&mut self.final_findings), self.final_steps.take().map(|s| *s))
    }

    /// Hands over the marks and stack samples, once: the loop drains them as its input while
    /// the replay feeds the polls.
    pub(crate) fn take_recorded(&mut self) -> Recorded {
        *std::mem::take(&mut self.recorded)
    }

    pub fn is_empty(&self) -> bool {
        self.polls.is_empty()
    }

    pub fn played(&self) -> usize {
        self.next
    }

    pub fn finished(&self) -> bool {
        self.next >= self.polls.len()
    }

    /// The next poll if its time has come at this speed (or `now` is forced, a step).
    pub fn due(&mut self, now: Instant, force: bool) -> Option<Poll> {
        let poll = self.polls.get(self.next)?;
        let t = poll.host.timestamp_us;
        if !force && let Some((wall, at)) = self.anchor {
            let wait = Duration::from_secs_f64(((t - at) as f64 / 1e6 / self.speed).max(0.0));
            if now < wall + wait {
                return None;
            }
        }
        self.anchor = Some((now, t));
        self.next += 1;
        Some(self.polls[self.next - 1].clone())
    }

    /// After a pause, the clock restarts from the poll shown.
    pub fn resume(&mut self, now: Instant) {
        if let Some((_, t)) = self.anchor {
            self.anchor = Some((now, t));
        }
    }
}

impl Recorded {
    /// The marks recorded by `until_us`, in the recording's order.
    pub(crate) fn marks_due(&mut self, until_us: i64) -> Vec<Marker> {
        let due = self.marks[self.marks_sent..].iter().take_while(|m| m.t_us <= until_us).count();
        self.marks_sent += due;
        self.marks[self.marks_sent - due..self.marks_sent].to_vec()
    }

    /// The stack samples recorded by `until_us`, the poll played (with every frame and stack
    /// the first time), as a live sampler would have sent them by then; none between polls.
    fn stacks_due(&mut self, until_us: Option<i64>) -> StackBatch {
        let Some(until) = until_us else { return StackBatch::default() };
        let end = self.stacks_sent + self.stacks.samples[self.stacks_sent..].partition_point(|x| x.t_us <= until);
        let first = self.stacks_sent == 0 && end > 0;
        let st = &self.stacks;
        let batch = StackBatch {
            frames: if first {
                st.frames.iter().cloned().enumerate().map(|(i, f)| (i as u32, f)).collect()
            } else {
                Vec::new()
            },
            stacks: if first {
                st.stacks.iter().cloned().enumerate().map(|(i, s)| (i as u32, s)).collect()
            } else {
                Vec::new()
            },
            processes: if first { st.processes.clone() } else { Vec::new() },
            samples: st.samples[self.stacks_sent..end].to_vec(),
            rate_hz: if first { st.rate_hz.clone() } else { Vec::new() },
            refusals: if first { st.refusals.clone() } else { Vec::new() },
        };
        self.stacks_sent = end;
        batch
    }
}

impl Input for Recorded {
    /// Before each poll played, the stack samples and then the marks recorded by its time;
    /// nothing between polls (the marks after the last poll are never played). The end shows
    /// the whole recording's analysis instead of a last drain.
    fn drain(&mut self, pipeline: &mut Pipeline, until_us: Option<i64>) {
        let Some(t) = until_us else { return };
        pipeline.stacks(self.stacks_due(Some(t)));
        let marks = self.marks_due(t);
        if !marks.is_empty() {
            pipeline.marks(marks);
        }
    }
}

/// The polls a view is fed: the live collector, or a recording played back (held while
/// paused, one poll a step).
pub enum Origin {
    Live(Collector),
    Replay(Replay),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> RunData {
        let p = gpulse_fixtures::path("h200-gpulse-run").join(name);
        gpulse_record::read(&p).unwrap()
    }

    #[test]
    fn a_recording_replays_as_its_polls_with_their_marks() {
        let run = fixture("dl_bound.db");
        let mut r = Replay::analysed(&run, 1000.0);
        let mut recorded = r.take_recorded();
        assert_eq!(r.len(), run.snapshots.len());
        let t0 = Instant::now();
        let first = r.due(t0, false).expect("the first poll is due at once");
        assert!(first.tree.is_some() && first.host.memory_total_bytes.is_some());
        assert!(r.due(t0, false).is_none(), "the next waits for its time");
        assert!(r.due(t0, true).is_some(), "a step takes it anyway");
        let mut marks = 0;
        // The first two polls' marks, as the loop drains them before each.
        for t in [first.host.timestamp_us, run.snapshots[1].timestamp_us] {
            marks += recorded.marks_due(t).len();
        }
        let mut late = t0;
        loop {
            late += Duration::from_secs(3600);
            let Some(p) = r.due(late, false) else { break };
            marks += recorded.marks_due(p.host.timestamp_us).len();
        }
        assert!(r.finished());
        let before_last = run.markers.iter().filter(|m| m.t_us <= run.snapshots.last().unwrap().timestamp_us).count();
        assert!(marks > 0 && marks <= before_last, "{marks} marks of {before_last}");
    }

    /// A replay hands the main thread's samples over up to each poll played, the frames with the
    /// first, so the view's diagnosis shows the main thread as the recording saw it.
    #[test]
    fn a_replay_hands_the_stacks_over_as_it_plays() {
        use gpulse_model::{Gil, KernelState, PyFrame, Snapshot, ThreadSample};
        let mut run = RunData::default();
        for s in 0..3i64 {
            run.snapshots.push(Snapshot { timestamp_us: 1_000_000 * (s + 1), gpus: Vec::new() });
        }
        run.stacks.frames = vec![PyFrame { file: "/w/t.py".into(), line: 3, function: "f".into(), code: None }];
        run.stacks.stacks = vec![vec![0]];
        let sample = |t_us: i64| ThreadSample {
            clock: None,
            t_us,
            pid: 7,
            stack: 0,
            kernel: KernelState { state: 'R', syscall: None, wchan: None, across: false },
            gil: Gil::Held,
        };
        // Out of order, as a recording of two processes may read back.
        run.stacks.samples = [2_500_000, 900_000, 1_000_000, 1_500_000].into_iter().map(sample).collect();
        let mut r = Replay::analysed(&run, 1e6);
        let mut recorded = r.take_recorded();
        assert_eq!(recorded.stacks_due(None), gpulse_model::StackBatch::default(), "nothing played yet");
        let t0 = Instant::now();
        let mut play = || Some(r.due(t0, true).unwrap().host.timestamp_us);
        let first = recorded.stacks_due(play());
        assert_eq!(first.frames.len(), 1);
        assert_eq!(first.samples.iter().map(|x| x.t_us).collect::<Vec<_>>(), [900_000, 1_000_000]);
        let second = recorded.stacks_due(play());
        assert!(second.frames.is_empty(), "frames are sent once");
        assert_eq!(second.samples.iter().map(|x| x.t_us).collect::<Vec<_>>(), [1_500_000]);
        let third = play();
        assert_eq!(recorded.stacks_due(third).samples.len(), 1);
        assert_eq!(recorded.stacks_due(third), gpulse_model::StackBatch::default());
    }
}
