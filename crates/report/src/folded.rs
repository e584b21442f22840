//! The job's sampled Python stacks as folded lines, `frame;frame;frame COUNT`, outermost frame
//! first: what flamegraph.pl, inferno and speedscope read (`gpulse export --format folded`).

use std::collections::BTreeMap;

use gpulse_model::{ProcessRole, PyFrame, Stacks};

/// What a sample whose stack has no Python frame is written as.
pub const NO_FRAMES: &str = "[no Python frames]";

/// A frame as py-spy writes it: `function (file:LINE)`, or `function (file)` where the
/// interpreter gave no line. `;` separates frames and a line ends in a space and a count, so
/// neither may appear inside one: a `;` reads `:`, and line breaks read as spaces.
pub fn frame_name(f: &PyFrame) -> String {
    let name = match f.line {
        0 => format!("{} ({})", f.function, f.file),
        line => format!("{} ({}:{line})", f.function, f.file),
    };
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// The processes whose samples a folded file holds: the main processes (each rank), in the
/// order first sampled, with any sampled process the sampler did not describe; where none of
/// those has a sample (only DataLoader workers were sampled), every sampled process.
pub fn chosen_pids(stacks: &Stacks) -> Vec<u32> {
    let sampled = stacks.sampled_pids();
    let main: Vec<u32> = sampled
        .iter()
        .copied()
        .filter(|pid| stacks.process(*pid).is_none_or(|p| p.role == ProcessRole::Main))
        .collect();
    if main.is_empty() { sampled } else { main }
}

/// One line per distinct stack of the chosen processes' main threads, sorted, each with its
/// count of samples. Each stack begins with `process PID` when more than one process is written.
pub fn folded(stacks: &Stacks) -> String {
    let pids = chosen_pids(stacks);
    let prefix = pids.len() > 1;
    // Each stack id's line, made once.
    let mut names: Vec<Option<String>> = vec![None; stacks.stacks.len()];
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for s in stacks.samples.iter().filter(|s| pids.contains(&s.pid)) {
        let own = match names.get_mut(s.stack as usize) {
            Some(slot) => slot.get_or_insert_with(|| stack_line(stacks, s.stack)).clone(),
            None => NO_FRAMES.to_owned(),
        };
        let line = if prefix { format!("process {};{own}", s.pid) } else { own };
        *counts.entry(line).or_default() += 1;
    }
    let mut out = String::new();
    for (line, n) in counts {
        out.push_str(&line);
        out.push(' ');
        out.push_str(&n.to_string());
        out.push('\n');
    }
    out
}

fn stack_line(stacks: &Stacks, stack: u32) -> String {
    let frames: Vec<String> = stacks.frames_of(stack).map(frame_name).collect();
    if frames.is_empty() { NO_FRAMES.to_owned() } else { frames.join(";") }
}

#[cfg(test)]
mod tests {
    use gpulse_model::{Gil, KernelState, SampledProcess, StackBatch, ThreadSample};

    use super::*;

    fn frame(function: &str, line: u32) -> PyFrame {
        PyFrame { file: "/w/train.py".into(), line, function: function.into(), code: None }
    }

    fn sample(t_us: i64, pid: u32, stack: u32) -> ThreadSample {
        ThreadSample {
            clock: None,
            t_us,
            pid,
            stack,
            kernel: KernelState { state: 'R', syscall: None, wchan: None, across: false },
            gil: Gil::Held,
        }
    }

    fn process(pid: u32, role: ProcessRole) -> SampledProcess {
        SampledProcess {
            gil_read: None,
            pid,
            role,
            python: "3.11".into(),
            command: "python train.py".into(),
            rank: None,
        }
    }

    fn stacks(processes: Vec<SampledProcess>, samples: Vec<ThreadSample>) -> Stacks {
        let mut s = Stacks::default();
        s.add(StackBatch {
            frames: vec![(0, frame("<module>", 3)), (1, frame("step", 41)), (2, frame("odd;name", 0))],
            stacks: vec![(0, vec![0, 1]), (1, vec![0, 2]), (2, vec![])],
            processes,
            samples,
            ..Default::default()
        });
        s
    }

    #[test]
    fn one_line_per_stack_of_the_main_process() {
        let s = stacks(
            vec![process(10, ProcessRole::Main), process(11, ProcessRole::Worker)],
            vec![sample(1, 10, 0), sample(2, 10, 0), sample(3, 11, 0), sample(4, 10, 1), sample(5, 10, 2)],
        );
        assert_eq!(
            folded(&s),
            "<module> (/w/train.py:3);odd:name (/w/train.py) 1\n\
             <module> (/w/train.py:3);step (/w/train.py:41) 2\n\
             [no Python frames] 1\n"
        );
    }

    #[test]
    fn several_main_processes_are_told_apart() {
        let s = stacks(
            vec![process(20, ProcessRole::Main), process(10, ProcessRole::Main)],
            vec![sample(1, 10, 0), sample(2, 20, 0), sample(3, 20, 0)],
        );
        assert_eq!(chosen_pids(&s), [20, 10]);
        assert_eq!(
            folded(&s),
            "process 10;<module> (/w/train.py:3);step (/w/train.py:41) 1\n\
             process 20;<module> (/w/train.py:3);step (/w/train.py:41) 2\n"
        );
    }

    #[test]
    fn only_workers_sampled_writes_the_workers() {
        let s = stacks(vec![process(11, ProcessRole::Worker)], vec![sample(1, 11, 1)]);
        assert_eq!(folded(&s), "<module> (/w/train.py:3);odd:name (/w/train.py) 1\n");
    }
}
