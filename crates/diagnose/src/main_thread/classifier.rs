//! The run's one classifier: each stack and kernel state classified once (`classify`), each
//! stack's library and place in the job's code once, kept in the run's memo, or across runs by a
//! caller whose stacks only grow (the live window's).

use gpulse_model::{Gil, PyFrame, Stacks, ThreadSample};

use super::classify::{Class, Domain, domain, own_code, site_frame, state_of, torch_source};

/// A value per stack id. Ids are dense (the sampler's and the recording's count up from 0), so
/// a vector is their map, without a hash per sample; an id past any real run's (a damaged
/// recording's) goes to a map instead of growing the vector to it.
#[derive(Debug, Clone)]
struct ByStack<T> {
    dense: Vec<T>,
    sparse: std::collections::HashMap<u32, T>,
}

impl<T> Default for ByStack<T> {
    fn default() -> Self {
        Self { dense: Vec::new(), sparse: std::collections::HashMap::new() }
    }
}

/// Stack ids below this are kept in the vector: 2^20 stacks is past any real run's.
const DENSE_STACKS: u32 = 1 << 20;

impl<T: Default> ByStack<T> {
    fn entry(&mut self, stack: u32) -> &mut T {
        if stack >= DENSE_STACKS {
            return self.sparse.entry(stack).or_default();
        }
        let i = stack as usize;
        if self.dense.len() <= i {
            self.dense.resize_with(i + 1, T::default);
        }
        &mut self.dense[i]
    }
}

/// The memo's key of the run's one [`Classifier`].
const CLASSIFIER_KEY: u64 = 0;

/// The run's one classifier (stacks are the run's, not a process's).
pub(crate) fn shared(run: &crate::Run) -> std::sync::Arc<std::sync::Mutex<Classifier>> {
    run.memo.get(&run.stacks, CLASSIFIER_KEY, || std::sync::Mutex::new(Classifier::default()))
}

/// Has `run` classify with `classifier`, kept by the caller across runs whose stacks only grow
/// (a stack's id means the same frames in each: the stacks of one sampler, which never reuses
/// an id): each stack and state is classified once.
pub(crate) fn share(run: &crate::Run, classifier: &std::sync::Arc<std::sync::Mutex<Classifier>>) {
    run.memo.seed(CLASSIFIER_KEY, classifier.clone());
}

/// `classify` once per distinct stack and kernel state, and a stack's library once: a day's
/// samples repeat a few thousand of them.
#[derive(Debug, Default, Clone)]
pub struct Classifier {
    /// By stack: its library, once known, and the kernel states and GIL kinds seen on it, each
    /// with its class.
    seen: ByStack<Seen>,
    /// By stack: where in the job's code it is, once known.
    places: ByStack<Option<Place>>,
}

/// Where a stack is in the job's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// [`site_frame`].
    pub site: Option<u32>,
    /// [`caller_frame`] of the site.
    pub caller: Option<u32>,
    /// Whether any of its frames is PyTorch's own Python.
    pub in_torch: bool,
    /// [`call_frame`] of the site.
    pub call: Option<u32>,
}

type Seen = (Option<Option<Domain>>, Vec<(gpulse_model::KernelState, std::mem::Discriminant<Gil>, Class)>);

impl Classifier {
    pub fn classify(&mut self, stacks: &Stacks, sample: &ThreadSample) -> Class {
        let gil = std::mem::discriminant(&sample.gil);
        let (domain_of, seen) = self.seen.entry(sample.stack);
        if let Some((_, _, c)) = seen.iter().find(|(k, g, _)| *g == gil && *k == sample.kernel) {
            return *c;
        }
        let frames: Vec<&PyFrame> = stacks.frames_of(sample.stack).collect();
        let domain = *domain_of.get_or_insert_with(|| domain(&frames));
        let (state, basis) = state_of(&frames, sample);
        let class = Class { state, domain, basis };
        seen.push((sample.kernel.clone(), gil, class));
        class
    }

    /// Where `stack` is in the job's code, worked out once.
    pub(crate) fn place(&mut self, stacks: &Stacks, stack: u32) -> Place {
        *self.places.entry(stack).get_or_insert_with(|| {
            let site = site_frame(stacks, stack);
            Place {
                site,
                caller: caller_frame(stacks, stack, site),
                in_torch: stacks.frames_of(stack).any(|f| torch_source(&f.file)),
                call: call_frame(stacks, stack, site),
            }
        })
    }

    /// The library of `stack` ([`domain`]), worked out once.
    pub fn domain(&mut self, stacks: &Stacks, stack: u32) -> Option<Domain> {
        *self.seen.entry(stack).0.get_or_insert_with(|| domain(&stacks.frames_of(stack).collect::<Vec<_>>()))
    }
}

/// The frame that called the site's function: the next frame out of the job's own code, else the
/// next frame out.
fn caller_frame(st: &Stacks, stack: u32, site: Option<u32>) -> Option<u32> {
    let ids = st.stacks.get(stack as usize)?;
    let at = ids.iter().rposition(|id| Some(*id) == site)?;
    let outer = &ids[..at];
    outer
        .iter()
        .rev()
        .find(|id| st.frames.get(**id as usize).is_some_and(|f| own_code(&f.file)))
        .or(outer.last())
        .copied()
}

/// The function of another library that the site calls (transformers' `generate`, a metric's
/// `update`), past torch's and the standard library's decorators around it: what runs under the
/// job's line is that library's, not torch's forward, backward or optimizer step.
fn call_frame(st: &Stacks, stack: u32, site: Option<u32>) -> Option<u32> {
    let ids = st.stacks.get(stack as usize)?;
    let at = ids.iter().rposition(|id| Some(*id) == site)?;
    let wrapper = |f: &PyFrame| {
        f.file.ends_with("/torch/utils/_contextlib.py")
            || f.file.ends_with("/functools.py")
            || f.file.ends_with("/contextlib.py")
    };
    let id = *ids[at + 1..].iter().find(|id| st.frames.get(**id as usize).is_some_and(|f| !wrapper(f)))?;
    let f = st.frames.get(id as usize)?;
    (!own_code(&f.file) && !torch_source(&f.file)).then_some(id)
}
