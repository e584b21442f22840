# gpulse run --instrument: loaded by Python at start through PYTHONPATH.
# It hooks PyTorch's DataLoader and optimizers, then hands over to any sitecustomize it shadows.
import os as _os
import sys as _sys


def _gpulse_instrument():
    here = _os.path.dirname(_os.path.abspath(__file__))
    try:
        from gpulse import _instrument

        _instrument.install()
    except Exception as e:  # never break the script over instrumentation
        _sys.stderr.write(f"gpulse: instrumentation off: {e}\n")
    # The sitecustomize this one shadows, if any, still runs.
    entries = [p for p in _sys.path if p and _os.path.abspath(p) != here]
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", entries)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        _sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_gpulse_instrument()
del _gpulse_instrument
