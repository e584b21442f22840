//! A call of the job's own function beside the training step, not inside it: an `evaluate()`
//! that a loop's body calls next to its `train()`, which launches GPU work of its own and waits
//! for it. Its lines are the job's, so no library call names it; the stack's shape does.
//!
//! The step's path is every frame of the job's own code on a stack that runs a backward pass or
//! an optimizer step. A sample leaves that path at its first own frame not on it. Where that
//! frame calls further into the job's code, and its function is on the step's path but holds
//! none of the step's own lines (the body calls `train()` and `evaluate()`; it does not run the
//! backward itself), the call is a phase of its own. A forward helper called from the function
//! that runs the backward stays the step's, and so does a `training_step` that a library's loop
//! calls apart from the backward it runs itself (its function is on no step stack).

use std::collections::{HashMap, HashSet};

use gpulse_model::Stacks;

use super::own::own_code;

/// The share of a phase's samples that must wait on the GPU: a phase that reads its results back
/// (an accuracy's `.item()`) runs its GPU work apart from the step's; one that never waits only
/// queues work the step's own sync drains, and stays with the step.
const MIN_WAIT_SHARE: f64 = 0.1;
/// The share that must launch GPU work of its own (in torch's code): a function that only reads
/// a value back (a logger's `loss.item()`) waits for the step's work, and is no phase. Low: an
/// evaluation of large batches launches for a few samples and waits for the rest.
const MIN_LAUNCH_SHARE: f64 = 0.05;

/// Where a phase is: the job's line that calls it, the first frame it calls in the job's code, and
/// the job's frame that called the line's function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Call {
    pub line: u32,
    pub callee: u32,
    pub caller: Option<u32>,
}

/// The step's path, and the phases found on other stacks.
#[derive(Debug, Default)]
pub(super) struct Phases {
    path: HashSet<u32>,
    path_functions: HashSet<(String, String)>,
    step_functions: HashSet<(String, String)>,
    /// The step's stacks already walked: each once, however many samples it has.
    walked: HashSet<u32>,
    calls: HashMap<u32, Option<Call>>,
    /// Per call line: all its samples, those waiting on the GPU, and those launching.
    seen: HashMap<u32, [usize; 3]>,
}

impl Phases {
    /// Adds one of the step's stacks, whose line in the job's code is `site`.
    pub(super) fn step(&mut self, stacks: &Stacks, stack: u32, site: Option<u32>) {
        if !self.walked.insert(stack) {
            return;
        }
        let Some(ids) = stacks.stacks.get(stack as usize) else { return };
        for &id in ids {
            if let Some(f) = stacks.frames.get(id as usize).filter(|f| own_code(&f.file)) {
                self.path.insert(id);
                self.path_functions.insert((f.file.clone(), f.function.clone()));
            }
        }
        if let Some(f) = site.and_then(|s| stacks.frames.get(s as usize)) {
            self.step_functions.insert((f.file.clone(), f.function.clone()));
        }
    }

    /// The call line that takes `stack` off the step's path; `None` on the step's path, or where
    /// no step was seen.
    pub(super) fn call(&mut self, stacks: &Stacks, stack: u32) -> Option<Call> {
        if self.path.is_empty() {
            return None;
        }
        let (path, on_path, functions) = (&self.path, &self.path_functions, &self.step_functions);
        *self.calls.entry(stack).or_insert_with(|| {
            let ids = stacks.stacks.get(stack as usize)?;
            let own: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|id| stacks.frames.get(*id as usize).is_some_and(|f| own_code(&f.file)))
                .collect();
            let at = own.iter().position(|id| !path.contains(id))?;
            let (line, callee) = (own[at], *own.get(at + 1)?);
            let caller = at.checked_sub(1).map(|i| own[i]);
            let f = stacks.frames.get(line as usize)?;
            let function = (f.file.clone(), f.function.clone());
            (on_path.contains(&function) && !functions.contains(&function)).then_some(Call { line, callee, caller })
        })
    }

    /// Counts one sample of `stack`: waiting on the GPU, launching its work, or neither.
    pub(super) fn count(&mut self, stacks: &Stacks, stack: u32, waits: bool, launches: bool) {
        if let Some(c) = self.call(stacks, stack) {
            let n = self.seen.entry(c.line).or_default();
            n[0] += 1;
            n[1] += usize::from(waits);
            n[2] += usize::from(launches && !waits);
        }
    }

    /// The phase `stack` is in, where its call waits on the GPU for its own work.
    pub(super) fn of(&mut self, stacks: &Stacks, stack: u32) -> Option<Call> {
        let c = self.call(stacks, stack)?;
        self.is_call(c.line).then_some(c)
    }

    /// Whether `line` calls a phase: a wait there drains the phase's own work.
    pub(super) fn is_call(&self, line: u32) -> bool {
        self.seen.get(&line).is_some_and(|&[all, waits, launches]| {
            waits > 0 && waits as f64 >= MIN_WAIT_SHARE * all as f64 && launches as f64 >= MIN_LAUNCH_SHARE * all as f64
        })
    }
}
