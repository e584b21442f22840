//! The classification of samples, mechanism by mechanism.

use gpulse_model::KernelState;

use super::*;

fn frame(file: &str, function: &str, code: &str) -> PyFrame {
    PyFrame { file: file.into(), line: 10, function: function.into(), code: Some(code.into()) }
}

fn sample(state: char, syscall: Option<u32>, wchan: Option<&str>, gil: Gil) -> ThreadSample {
    ThreadSample {
        clock: None,
        t_us: 0,
        pid: 1,
        stack: 0,
        kernel: KernelState { state, syscall, wchan: wchan.map(Into::into), across: false },
        gil,
    }
}

fn state(frames: &[PyFrame], s: ThreadSample) -> ThreadState {
    classify_frames(&frames.iter().collect::<Vec<_>>(), &s).state
}

#[test]
fn each_mechanism_as_the_kernel_and_the_interpreter_show_it() {
    let train = frame("/w/train.py", "main", "loss = step(batch)");
    let sleep = [train.clone(), frame("/w/train.py", "step", "time.sleep(0.05)")];
    assert_eq!(state(&sleep, sample('S', Some(230), Some("hrtimer_nanosleep"), Gil::Free)), ThreadState::Sleep);
    // Woken from the sleep, waiting for a core before it takes the GIL back: the sleep's
    // time; holding the GIL on that line, it runs Python.
    assert_eq!(state(&sleep, sample('R', None, None, Gil::Free)), ThreadState::Sleep);
    assert_eq!(state(&sleep, sample('R', None, None, Gil::Held)), ThreadState::Python);
    let recv = [train.clone(), frame("/w/fetch.py", "fetch", "data = sock.recv(65536)")];
    assert_eq!(state(&recv, sample('S', Some(45), Some("wait_woken"), Gil::Free)), ThreadState::Network);
    let queue = [
        train.clone(),
        frame("/usr/lib/python3.11/multiprocessing/queues.py", "get", "res = self._recv_bytes()"),
        frame("/usr/lib/python3.11/multiprocessing/connection.py", "_recv", "chunk = read(handle, remaining)"),
    ];
    assert_eq!(state(&queue, sample('S', Some(0), Some("anon_pipe_read"), Gil::Free)), ThreadState::Ipc);
    assert_eq!(state(&queue, sample('S', Some(7), Some("do_sys_poll"), Gil::Free)), ThreadState::Ipc);
    let read = [train.clone(), frame("/w/data.py", "load", "buf = f.read()")];
    assert_eq!(state(&read, sample('D', Some(0), Some("folio_wait_bit_common"), Gil::Free)), ThreadState::Disk);
    // Copying cached pages: running, the GIL released by the read.
    assert_eq!(state(&read, sample('R', None, None, Gil::Free)), ThreadState::Disk);
    assert_eq!(state(&read, sample('R', None, None, Gil::Held)), ThreadState::Python, "parsing what it read");
    let sync = [train.clone(), frame("/w/train.py", "step", "total += loss.item()")];
    assert_eq!(state(&sync, sample('R', None, None, Gil::Free)), ThreadState::GpuSync);
    assert_eq!(state(&sync, sample('S', Some(16), None, Gil::Free)), ThreadState::GpuSync);
    let compute = [train.clone(), frame("/w/metrics.py", "score", "s += x * x")];
    assert_eq!(state(&compute, sample('R', None, None, Gil::Held)), ThreadState::Python);
    // Futex: the GIL when another thread holds it, a lock when the frame is one.
    assert_eq!(
        state(&compute, sample('S', Some(202), Some("futex_wait_queue"), Gil::Other { stack: 3 })),
        ThreadState::GilWait
    );
    let lock = [train.clone(), frame("/usr/lib/python3.11/threading.py", "acquire", "")];
    assert_eq!(state(&lock, sample('S', Some(202), None, Gil::Other { stack: 3 })), ThreadState::Lock);
    let mine = [train.clone(), frame("/w/train.py", "step", "with self.lock.acquire():")];
    assert_eq!(state(&mine, sample('S', Some(202), None, Gil::Free)), ThreadState::Lock);
    // Woken from a future's wait, runnable without the GIL: the wait's end, not Python (a thread
    // pool scoring in Python read a fifth of its wait as the main thread's own Python); with
    // another thread on the GIL, a wait for it.
    let future = [
        train,
        frame("/usr/lib/python3.11/concurrent/futures/_base.py", "result", "self._condition.wait(timeout)"),
        frame("/usr/lib/python3.11/threading.py", "wait", "waiter.acquire()"),
    ];
    assert_eq!(state(&future, sample('R', None, None, Gil::Free)), ThreadState::Lock);
    assert_eq!(state(&future, sample('R', None, None, Gil::Other { stack: 3 })), ThreadState::GilWait);
    assert_eq!(state(&future, sample('R', None, None, Gil::Held)), ThreadState::Python);
    // A line that waits on something other than a thread lock stays what it was.
    let child = [frame("/w/train.py", "reap", "pid, status = os.wait()")];
    assert_eq!(state(&child, sample('R', None, None, Gil::Free)), ThreadState::Python);
    let collective = [frame("/w/train.py", "step", "handle.wait()")];
    assert_eq!(state(&collective, sample('R', None, None, Gil::Free)), ThreadState::Python);
    // A pool's wait is for its processes: never a lock of the job's own threads.
    let pool = [
        frame("/usr/lib/python3.11/multiprocessing/pool.py", "wait", "self._event.wait(timeout)"),
        frame("/usr/lib/python3.11/threading.py", "wait", "waiter.acquire()"),
    ];
    assert_ne!(state(&pool, sample('R', None, None, Gil::Free)), ThreadState::Lock);
}

/// Inside a collective the rank waits for its peers, whatever the backend does meanwhile:
/// gloo blocks on a socket, NCCL's barrier waits on the device (a futex), a spin runs.
#[test]
fn a_collective_is_a_wait_for_the_other_ranks() {
    let c10d = "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py";
    let barrier = [
        frame("/w/train.py", "main", "dist.barrier()"),
        frame(
            "/venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py",
            "wrapper",
            "return func(*args, **kwargs)",
        ),
        frame(c10d, "barrier", "work.wait()"),
    ];
    assert_eq!(state(&barrier, sample('S', Some(45), Some("wait_woken"), Gil::Free)), ThreadState::PeerWait);
    assert_eq!(state(&barrier, sample('S', Some(202), Some("futex_wait_queue"), Gil::Free)), ThreadState::PeerWait);
    assert_eq!(state(&barrier, sample('R', None, None, Gil::Free)), ThreadState::PeerWait);
    // The line alone says it where the collective's own frame was not read yet.
    let line = [frame("/w/train.py", "main", "dist.all_reduce(loss)")];
    assert_eq!(state(&line, sample('S', Some(202), None, Gil::Free)), ThreadState::PeerWait);
    // A state_dict gathered for a checkpoint is no collective: a file's D state stays I/O.
    let write = [frame("/w/train.py", "save", "f.write(buf)")];
    assert_eq!(state(&write, sample('D', Some(1), None, Gil::Free)), ThreadState::Disk);
    // PyTorch from a source checkout is the library, not the job's line.
    assert!(!own_code("/home/me/pytorch/torch/distributed/distributed_c10d.py"));
    assert!(own_code("/home/me/src/torch/train.py"), "a project's own directory named torch");
}

/// The graphs `torch.compile` writes run as Python files of their own; the line that called the
/// compiled model is the user's (a CPU run of tools/device/unseen_four.py's compile_mlp named
/// Inductor's `Runner.call` as its site).
#[test]
fn code_torch_compile_wrote_is_not_the_users_line() {
    assert!(!own_code("/tmp/torchinductor_root/yz/cyzwutq36hbrjkrd6fx53pkdkcisovupghqi5xlptro6ttluebun.py"));
    assert!(!own_code("/scratch/cache/yz/cyzwutq36hbrjkrd6fx53pkdkcisovupghqi5xlptro6ttluebun.py"));
    // The user's own files, whatever their folder or name is like.
    assert!(own_code("/home/me/torchinductor_experiments/train.py"));
    assert!(own_code("/home/me/src/yz/cyzwutq36hbrjkrd6fx53pkdkcisovupghqi5xlptro6ttluebun_notes.py"));
    assert!(own_code("/home/me/src/ab/compile.py"));
    assert!(own_code("/home/me/src/yz/cyzwutq36hbrjkrd6fx53pkdkcisovupghqi5xlptro6ttluebuN.py"));
    // Not the hash's folder, or a letter base 32 has not (0, 1, 8, 9).
    assert!(own_code("/home/me/src/ab/cyzwutq36hbrjkrd6fx53pkdkcisovupghqi5xlptro6ttluebun.py"));
    assert!(own_code("/home/me/src/yz/cyzwutq36hbrjkrd6fx53pkdkcisovupghqi5xlptro6ttluebu9.py"));
}

/// A virtual environment in a directory named torch (`/opt/torch/.venv`, as on a real GPU host)
/// holds numpy too: only torch's own files are torch's, or numpy's sort reads as launching kernels.
#[test]
fn a_venv_named_torch_is_not_torch() {
    let venv = "/opt/torch/.venv/lib/python3.12/site-packages";
    assert!(!super::torch_source(&format!("{venv}/numpy/_core/fromnumeric.py")));
    assert!(!super::torch_source(&format!("{venv}/transformers/models/gpt2/modeling_gpt2.py")));
    assert!(super::torch_source(&format!("{venv}/torch/nn/modules/module.py")));
    assert!(super::torch_source(&format!("{venv}/torch/_tensor.py")));
}

/// `--instrument`'s wrapper runs under the user's `next(it)`: the site is the user's line, and
/// the wait is one gpulse timed.
#[test]
fn gpulse_frames_are_never_the_users_line() {
    for file in [
        "/tmp/gpulse-4242-1733400000/python/gpulse/_instrument.py",
        "/tmp/gpulse-4242-1733400000/python/gpulse/_events.py",
        "/tmp/gpulse-4242-1733400000/python/sitecustomize.py",
        "/venv/lib/python3.12/site-packages/gpulse/_events.py",
    ] {
        assert!(!own_code(file), "{file}");
    }
    assert!(own_code("/home/me/gpulse/train.py"), "a project of that name is the user's");
    assert!(own_code("/home/me/sitecustomize.py"));
    let stacks = Stacks {
        frames: vec![
            frame("/w/train.py", "main", "batch = next(it)"),
            frame(
                "/tmp/gpulse-1-2/python/gpulse/_instrument.py",
                "_patch_dataloader.<locals>.__next__",
                "return inner(self)",
            ),
            frame("/v/site-packages/torch/utils/data/dataloader.py", "__next__", "data = self._next_data()"),
        ],
        stacks: vec![vec![0, 1, 2]],
        ..Stacks::default()
    };
    assert_eq!(site_frame(&stacks, 0), Some(0));
    assert!(timed_by_gpulse(&stacks.frames[1]) && !timed_by_gpulse(&stacks.frames[0]));
    let hook =
        frame("/tmp/gpulse-1-2/python/gpulse/_instrument.py", "_patch_optimizer.<locals>.step", "out = inner(self)");
    assert!(!timed_by_gpulse(&hook), "the optimizer's step runs under it: not a wait");
}

#[test]
fn the_library_is_the_deepest_known_frame() {
    let frames = [
        frame("/w/train.py", "main", "opt.step()"),
        frame("/v/site-packages/torch/optim/optimizer.py", "wrapper", "out = func(*args)"),
        frame("/v/site-packages/torch/optim/adam.py", "_single_tensor_adam", "param.addcdiv_(a, b)"),
    ];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), Some(Domain::Optimizer));
    let frames = [frame("/w/train.py", "main", "print(f\"loss {l}\")")];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), Some(Domain::Logging));
    // A CUDA tensor in a print's f-string: its `__format__` reads it back (the GPU's queue
    // drains there), and a tensor's repr formats it in torch's own code: printing, both.
    let print = frame("/w/train.py", "main", "print(f\"step {i} loss {loss} logits {out[0, :6]}\")");
    let scalar = [
        print.clone(),
        frame("/v/site-packages/torch/_tensor.py", "__format__", "return self.item().__format__(format_spec)"),
    ];
    assert_eq!(domain(&scalar.iter().collect::<Vec<_>>()), Some(Domain::Logging));
    assert_eq!(state(&scalar, sample('S', Some(16), Some("nvidia"), Gil::Free)), ThreadState::GpuSync);
    assert!(torch_sync(&scalar[1]) && !torch_sync(&print));
    let repr = [
        print.clone(),
        frame(
            "/v/site-packages/torch/_tensor.py",
            "__repr__",
            "return torch._tensor_str._str(self, tensor_contents=tensor_contents)",
        ),
        frame(
            "/v/site-packages/torch/_tensor_str.py",
            "_tensor_str",
            "formatter = _Formatter(get_summarized_data(self))",
        ),
    ];
    assert_eq!(domain(&repr.iter().collect::<Vec<_>>()), Some(Domain::Logging));
    let values = frame(
        "/v/site-packages/torch/_tensor_str.py",
        "_vector_str",
        "data = [_val_formatter(val) for val in self.tolist()]",
    );
    let bounds = frame(
        "/v/site-packages/torch/_tensor_str.py",
        "__init__",
        "nonzero_finite_abs = tensor_totype(nonzero_finite_vals.abs())",
    );
    assert!(torch_sync(&values) && !torch_sync(&bounds), "the repr reads the values back at its `.tolist()`");
    let frames = [frame("/w/train.py", "main", "gc.collect()")];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), Some(Domain::Gc));
    let frames = [
        frame("/w/train.py", "step", "from metrics import score"),
        frame("<frozen importlib._bootstrap>", "_find_and_load", ""),
        frame("/v/site-packages/numpy/__init__.py", "<module>", "from . import core"),
    ];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), Some(Domain::Import), "numpy's import is the import's");
    let frames = [
        frame("/w/train.py", "main", "json.dump(history, f)"),
        frame("/usr/lib/python3.11/json/__init__.py", "dump", "for chunk in iterable:"),
        frame("/usr/lib/python3.11/json/encoder.py", "_iterencode_list", "yield from chunks"),
    ];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), Some(Domain::Serialize));
    let frames = [
        frame("/w/train.py", "main", "torch.save(model.state_dict(), p)"),
        frame("/v/site-packages/torch/serialization.py", "save", "_save(obj, f)"),
        frame("/usr/lib/python3.11/pickle.py", "dump", "self.save(obj)"),
    ];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), Some(Domain::Checkpoint), "torch.save pickles");
    let frames = [frame("/w/train.py", "main", "pickle.dump(stats, f)")];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), Some(Domain::Serialize));
    let frames = [frame("/w/train.py", "main", "x = items()")];
    assert_eq!(domain(&frames.iter().collect::<Vec<_>>()), None);
    assert!(!syncs(&frames[0]), "items() is no .item()");
}

/// `torch.compile` tracing, lowering, or waiting for its compile workers is compiling; the model
/// it built, run through Dynamo's wrapper, the generated graph and the kernels' launchers, is
/// not (it launches, as an uncompiled forward does).
#[test]
fn compiling_is_not_running_what_was_compiled() {
    let call = frame("/w/train.py", "train", "out = model(x)");
    let entry = frame("/v/site-packages/torch/_dynamo/eval_frame.py", "_fn", "return fn(*args, **kwargs)");
    let of = |more: &[PyFrame]| {
        let frames: Vec<PyFrame> = [call.clone(), entry.clone()].into_iter().chain(more.iter().cloned()).collect();
        domain(&frames.iter().collect::<Vec<_>>())
    };
    let trace = frame("/v/site-packages/torch/_dynamo/symbolic_convert.py", "step", "self.dispatch_table[inst.opcode]");
    assert_eq!(of(&[trace]), Some(Domain::Compile));
    let workers = [
        frame("/v/site-packages/torch/_inductor/codecache.py", "get_system", "out = subprocess.check_output(cmd)"),
        frame("/usr/lib/python3.12/subprocess.py", "_try_wait", "(pid, sts) = os.waitpid(self.pid, wait_flags)"),
    ];
    assert_eq!(of(&workers), Some(Domain::Compile), "a compile's child process is the compile's");
    let graph = frame("/tmp/torchinductor_root/yz/cyzwutq36hbrjkrd6fx53pkdkcisovupghqi5xlptro6ttluebun.py", "call", "");
    let launch =
        frame("/v/site-packages/torch/_inductor/runtime/triton_heuristics.py", "run", "return launcher(*args)");
    let wrapper = frame(
        "/v/site-packages/torch/_inductor/utils.py",
        "align_inputs_from_check_idxs.<locals>.run",
        "return model(inputs)",
    );
    assert_eq!(of(&[wrapper.clone(), graph.clone(), launch]), None);
    assert_eq!(of(&[wrapper.clone(), graph]), None);
    assert_eq!(of(&[wrapper]), None);
    assert_eq!(of(&[]), None, "inside the compiled model's C call");
    // The compiled backward, on the engine's thread under `loss.backward()`, is the backward.
    let backward = [
        frame("/w/train.py", "train", "loss.backward()"),
        frame("/v/site-packages/torch/autograd/graph.py", "_engine_run_backward", "return Variable._execution_engine"),
        frame("/v/site-packages/torch/_dynamo/external_utils.py", "inner", "return fn(*args, **kwargs)"),
    ];
    assert_eq!(domain(&backward.iter().collect::<Vec<_>>()), Some(Domain::Backward));
    // A subprocess the job starts itself stays its own.
    let smi =
        [call.clone(), frame("/usr/lib/python3.12/subprocess.py", "run", "stdout, stderr = process.communicate()")];
    assert_eq!(domain(&smi.iter().collect::<Vec<_>>()), Some(Domain::Subprocess));
}

/// A transform's `.numpy()` inside the DataLoader's fetch works on the host's tensors: the
/// thread runs, it does not wait for the GPU. The same call on the job's own line is a sync.
#[test]
fn a_copy_to_numpy_in_the_dataloaders_fetch_is_no_wait_on_the_gpu() {
    let fetch = [
        frame("/w/train.py", "main", "x, y = next(it)"),
        frame(
            "/v/site-packages/torch/utils/data/_utils/fetch.py",
            "fetch",
            "data = [self.dataset[idx] for idx in possibly_batched_index]",
        ),
        frame("/w/data.py", "__getitem__", "return self.transform(img)"),
        frame(
            "/v/site-packages/torchvision/transforms/functional.py",
            "to_tensor",
            "img = torch.from_numpy(np.array(pic).numpy())",
        ),
    ];
    assert_eq!(state(&fetch, sample('R', None, None, Gil::Held)), ThreadState::Python);
    let own = [frame("/w/train.py", "main", "preds = out.numpy()")];
    assert_eq!(state(&own, sample('R', None, None, Gil::Held)), ThreadState::GpuSync);
}
