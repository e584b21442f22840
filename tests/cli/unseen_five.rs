//! A fifth set of real H100 trainings written as a user would write them
//! (`tests/fixtures/h100-unseen5/`, `tools/device/unseen_five.py`), each timing its own parts:
//! the first finding, its mechanism and advice, and its share of the loop against the loop's
//! own timing.

use std::path::PathBuf;

use super::support::fixture;
use super::unseen_more::{advice, leads, own, scenario};

fn dir() -> PathBuf {
    fixture("h100-unseen5")
}

/// A CNN whose loop body calls `train()` each step and `evaluate()` every 10, over 10 batches,
/// counting correct answers with `.item()`: the evaluation is a call of the job's own beside the
/// step, named by its function at the body's line that calls it, its GPU work and its waits
/// included, within 5 points of the loop's own timing of it (37.2 %; `ab.jsonl`: 1.98× the
/// steps a second without it). Its advice is an evaluation's, not a launch overhead's.
#[test]
fn an_evaluation_beside_the_step_is_named_by_its_function() {
    let (d, t) = scenario(&dir(), "eval_fn");
    let first = leads(&d, "main_thread_native", "unseen_five.py:80 ", own(&t, "eval"));
    assert_eq!(first["evidence"]["call"], "evaluate()", "{first:#}");
    assert!(first["title"].as_str().unwrap().contains("in evaluate(), beside the training step"), "{first:#}");
    let a = advice(first);
    assert!(a.contains("every N steps") && a.contains("read them back once"), "{a}");
    assert!(!a.contains("CUDA graphs") && !a.contains("gradient accumulation"), "{a}");
    // Called from the loop that calls the body, not from its own line.
    assert_eq!(first["evidence"]["called_from"], "device/unseen_parts.py:60 loop", "{first:#}");
    // The evaluation's `.item()` drains its own work: no other finding is told to move it.
    for f in d["findings"].as_array().unwrap().iter().skip(1) {
        assert!(!advice(f).contains("queue drains at device/unseen_five.py:80"), "{f:#}");
    }
}

/// An MLP under `torch.compile` whose batch grows every 4 steps with automatic dynamic shapes
/// off: every new size recompiles the forward and, at its first `loss.backward()`, the backward
/// on the autograd engine's thread, while the main thread waits in the engine. The loop's own
/// clock reads 99.7 % of it in steps with a new shape. The first step's build is start-up; each
/// later one is the loop's recompiling, at the backward's line, not "launching": no finding may
/// say the backward launches while the compile runs, and recompiling is three quarters of the
/// loop as gpulse reads it or more.
#[test]
fn a_backward_compiled_at_each_new_shape_is_recompiling_not_launching() {
    let (d, t) = scenario(&dir(), "recompile_shapes");
    assert!(own(&t, "new_shape") > 0.99, "{t}");
    let first = &d["findings"][0];
    assert!(first["title"].as_str().unwrap().contains("recompiling (torch.compile)"), "{first:#}");
    assert_eq!(first["evidence"]["domain"], "compile", "{first:#}");
    let share = first["cost"]["loop_share"].as_f64().unwrap();
    assert!(share >= 0.7, "{share:.3} of the loop: {first:#}");
    assert!(advice(first).contains("mark_dynamic"), "{first:#}");
    for f in d["findings"].as_array().unwrap() {
        let title = f["title"].as_str().unwrap();
        assert!(!(title.contains("launching") && title.contains("loss.backward()")), "{f:#}");
    }
}
