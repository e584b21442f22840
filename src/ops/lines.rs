//! What `watch`, `demo` and `query -l` share: a GPU source's samples through the one loop of
//! every view (`gpulse_live::drive`), each rendered as text by a sink that only writes it.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use gpulse_live::{Frame, GpusOnly, Inline, Pipeline, Sink, Stopped, Until};
use gpulse_model::Snapshot;
use gpulse_sample::{SampleError, Source};

use crate::output::Output;

/// Samples `source` every `pace` (of wall time, the first at once) and writes what `render` makes
/// of each snapshot to `out`, until `count` samples (the last ends it at once, not an interval
/// later), the source's end (a replay's), or the reader gone. A source that fails is an error,
/// said once. Returns `out`, for what follows the lines.
pub fn print<S: Source + Send + 'static>(
    source: S,
    pace: Duration,
    count: Option<u64>,
    out: Output,
    render: impl FnMut(&Snapshot) -> String + 'static,
) -> anyhow::Result<Output> {
    let printer = Rc::new(RefCell::new(Printer { out, render: Box::new(render), failed: None }));
    let mut pipeline = Pipeline::new(None, None);
    pipeline.add_sink(Box::new(LineSink(printer.clone())));
    // Nothing to do between polls: sampled on this thread, with no hand-over from another.
    let feed = Inline::new(GpusOnly(source), pace, count);
    let stop = || printer.borrow().failed.as_ref().map(ToString::to_string);
    let mut until = Until { stop, needs_recording: false, closing_poll: false };
    let end = gpulse_live::drive(feed, &mut pipeline, &mut until, &mut []);
    drop(pipeline);
    let Printer { out, failed, .. } = Rc::into_inner(printer).expect("the pipeline is gone").into_inner();
    if let Some(e) = failed {
        return Err(e.into());
    }
    match end {
        Stopped::SamplingFailed(SampleError::Ended) => Ok(out),
        Stopped::SamplingFailed(e) => Err(e.into()),
        Stopped::Asked(_) | Stopped::DurationReached | Stopped::RootGone => Ok(out),
        // No store here, so never; said as any failure would be.
        Stopped::WriteFailed(l) => anyhow::bail!("{}", l.error),
    }
}

/// The text of each snapshot, written as it comes; the first failed write (a closed pipe) stops
/// the writing and, through the loop's control, the loop.
struct Printer {
    out: Output,
    render: Box<dyn FnMut(&Snapshot) -> String>,
    failed: Option<io::Error>,
}

/// The sink: shared with [`print`], which looks for a failed write between polls and takes the
/// output back at the end.
struct LineSink(Rc<RefCell<Printer>>);

impl Sink for LineSink {
    fn frame(&mut self, frame: &Frame) {
        let mut p = self.0.borrow_mut();
        let Some(snap) = frame.poll.snapshot.as_ref().filter(|_| p.failed.is_none()) else { return };
        let text = (p.render)(snap);
        if let Err(e) = p.out.emit(&text) {
            p.failed = Some(e);
        }
    }
}

/// `watch`'s lines: one per GPU per sample of `source`, every `pace` (of wall time), a header
/// every 20 samples, until `count` samples or the source ends. Returns `out`, for what follows the lines.
pub fn gpu_lines<S: Source + Send + 'static>(
    source: S,
    pace: Duration,
    count: Option<u64>,
    out: Output,
) -> anyhow::Result<Output> {
    let mut k: u64 = 0;
    print(source, pace, count, out, move |snap| {
        let mut text = if k.is_multiple_of(20) { gpulse_report::watch::header() } else { String::new() };
        for g in &snap.gpus {
            text += &gpulse_report::watch::line(snap.timestamp_us, g);
        }
        k += 1;
        text
    })
}

#[cfg(test)]
mod tests {
    use gpulse_model::{DeviceInfo, Snapshot};
    use gpulse_sample::{SampleError, Source};

    /// Two samples, then `then`.
    struct Two(u32, fn() -> SampleError);

    impl Source for Two {
        fn devices(&self) -> &[DeviceInfo] {
            &[]
        }
        fn sample(&mut self) -> Result<Snapshot, SampleError> {
            self.0 += 1;
            if self.0 > 2 { Err((self.1)()) } else { Ok(Snapshot::default()) }
        }
    }

    #[test]
    fn a_replays_end_ends_the_stream_and_a_failure_is_an_error() {
        let pace = std::time::Duration::ZERO;
        let out = crate::output::Output::open(None).unwrap();
        let out = super::gpu_lines(Two(0, || SampleError::Ended), pace, None, out);
        assert!(out.is_ok());
        let failing = super::gpu_lines(Two(0, || SampleError::Nvml("gone".into())), pace, None, out.unwrap());
        assert_eq!(failing.err().map(|e| e.to_string()).as_deref(), Some("NVML failed: gone"));
    }
}
