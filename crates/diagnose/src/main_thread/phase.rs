//! A call of the job's own function beside the training step, not inside it: an `evaluate()`
//! that a loop's body calls next to its `train()`, which launches GPU work of its own and waits
//! for it. Its lines are the job's, so no library call names it; the stack's shape does.
//!
//! The step's path is every frame of the job's own code on a stack that runs a backward pass or
//! an optimizer step. A sample leaves that path at its first own frame not on it. Where that
//! frame calls further into the job's code, and its function holds none of the step's own lines
//! (the body calls `train()` and `evaluate()`; it does not run the backward itself), the call is
//! a phase of its own: a forward helper called from the function that runs the backward stays
//! the step's.

use std::collections::{HashMap, HashSet};

use gpulse_model::Stacks;

use super::own::own_code;

/// The share of a phase's samples that must wait on the GPU: a phase that reads its results back
/// (an accuracy's `.item()`) runs its GPU work apart from the step's; one that never waits only
/// queues work the step's own sync drains, and stays with the step.
const MIN_WAIT_SHARE: f64 = 0.1;

/// The step's path, and the phases found on other stacks.
#[derive(Debug, Default)]
pub(super) struct Phases {
    path: HashSet<u32>,
    step_functions: HashSet<(String, String)>,
    calls: HashMap<u32, Option<(u32, u32)>>,
    /// Per call line: all its samples, and those waiting on the GPU.
    seen: HashMap<u32, [usize; 2]>,
}

impl Phases {
    /// Adds one of the step's stacks, whose line in the job's code is `site`.
    pub(super) fn step(&mut self, stacks: &Stacks, stack: u32, site: Option<u32>) {
        let Some(ids) = stacks.stacks.get(stack as usize) else { return };
        for &id in ids {
            if stacks.frames.get(id as usize).is_some_and(|f| own_code(&f.file)) {
                self.path.insert(id);
            }
        }
        if let Some(f) = site.and_then(|s| stacks.frames.get(s as usize)) {
            self.step_functions.insert((f.file.clone(), f.function.clone()));
        }
    }

    /// The call line that takes `stack` off the step's path, and the first frame it calls in the
    /// job's code; `None` on the step's path, or where no step was seen.
    pub(super) fn call(&mut self, stacks: &Stacks, stack: u32) -> Option<(u32, u32)> {
        if self.path.is_empty() {
            return None;
        }
        let (path, functions) = (&self.path, &self.step_functions);
        *self.calls.entry(stack).or_insert_with(|| {
            let ids = stacks.stacks.get(stack as usize)?;
            let own: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|id| stacks.frames.get(*id as usize).is_some_and(|f| own_code(&f.file)))
                .collect();
            let at = own.iter().position(|id| !path.contains(id))?;
            let (line, callee) = (own[at], *own.get(at + 1)?);
            let f = stacks.frames.get(line as usize)?;
            (!functions.contains(&(f.file.clone(), f.function.clone()))).then_some((line, callee))
        })
    }

    /// Counts one sample of `stack`, waiting on the GPU or not.
    pub(super) fn count(&mut self, stacks: &Stacks, stack: u32, waits: bool) {
        if let Some((line, _)) = self.call(stacks, stack) {
            let n = self.seen.entry(line).or_default();
            n[0] += 1;
            n[1] += usize::from(waits);
        }
    }

    /// The phase `stack` is in, where its call waits on the GPU for its own work: the call line
    /// and the job's function it calls.
    pub(super) fn of(&mut self, stacks: &Stacks, stack: u32) -> Option<(u32, u32)> {
        let (line, callee) = self.call(stacks, stack)?;
        let [all, waits] = *self.seen.get(&line)?;
        (waits as f64 >= MIN_WAIT_SHARE * all as f64 && waits > 0).then_some((line, callee))
    }
}
