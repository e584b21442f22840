"""The `gpulse` Python package outside `gpulse run` and against a socket standing in for the
recorder. Run with the package on PYTHONPATH: `PYTHONPATH=python python3 tests/python/test_package.py`.
"""

import os
import socket
import sys
import tempfile
import unittest

import gpulse
from gpulse import _events


def listen(dirname):
    path = os.path.join(dirname, "events.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    return s, path


class OutsideRun(unittest.TestCase):
    def setUp(self):
        os.environ.pop(_events.ENV, None)
        _events._open()

    def test_every_call_is_a_no_op(self):
        self.assertFalse(gpulse.enabled())
        self.assertIsNone(gpulse.step())
        with gpulse.phase("eval") as p:
            self.assertEqual(p.start_ns, 0)
        self.assertIsNone(gpulse.mark("checkpoint", epoch=1))
        self.assertEqual(gpulse.stats(), (0, 0))

    def test_callbacks_import_their_library_only_when_asked(self):
        self.assertNotIn("transformers", sys.modules)
        self.assertNotIn("lightning", sys.modules)
        for name, lib in (("LightningCallback", "lightning"), ("HFCallback", "transformers")):
            try:
                __import__(lib)
                continue  # installed here: nothing to check
            except ImportError:
                pass
            with self.assertRaises(ImportError):
                getattr(gpulse, name)
        with self.assertRaises(AttributeError):
            gpulse.NoSuchThing


class InsideRun(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.sock, path = listen(self.dir)
        os.environ[_events.ENV] = path
        _events._open()

    def tearDown(self):
        os.environ.pop(_events.ENV, None)
        _events._open()
        self.sock.close()

    def recv_lines(self):
        """Every line sent so far, across datagrams."""
        self.sock.settimeout(1)
        lines = self.sock.recv(65536).decode().splitlines()
        self.sock.settimeout(0.05)
        try:
            while True:
                lines += self.sock.recv(65536).decode().splitlines()
        except OSError:
            return lines

    def test_marks_are_batched_lines(self):
        self.assertTrue(gpulse.enabled())
        gpulse.step()
        with gpulse.phase("data loading"):
            pass
        gpulse.mark("checkpoint", epoch=3, path="a b.pt")  # a mark sends the batch at once
        lines = self.recv_lines()
        pid = str(os.getpid())
        self.assertEqual([l.split()[0] for l in lines], ["step", "phase", "mark"])
        self.assertEqual(lines[0].split()[1], pid)
        self.assertEqual(lines[1].split()[4], "data_loading")
        self.assertTrue(lines[2].endswith('checkpoint {"epoch":3,"path":"a b.pt"}'), lines[2])
        self.assertEqual(gpulse.stats(), (3, 0))

    def test_a_recorder_that_falls_behind_costs_marks_never_time(self):
        # The socket is never read: the kernel queue fills and further batches are refused.
        n = 20000
        for _ in range(n):
            gpulse.step()
        _events.sender.flush()
        sent, dropped = gpulse.stats()
        self.assertEqual(sent + dropped, n)
        self.assertGreater(dropped, 0)
        # Later steps carry the count so far, for the recording.
        self.assertLess(len(_events.sender.lines), 64)

    def test_the_trainer_callbacks_mark_steps(self):
        # Stand-ins with the base classes the real libraries export; CI has neither library.
        import types

        fakes = {
            "transformers": types.SimpleNamespace(TrainerCallback=object),
            "lightning": types.ModuleType("lightning"),
            "lightning.pytorch": types.SimpleNamespace(Callback=object),
        }
        saved = {k: sys.modules.get(k) for k in fakes}
        sys.modules.update(fakes)
        try:
            hf = gpulse.HFCallback()
            hf.on_step_end(None, None, None)
            hf.on_save(None, types.SimpleNamespace(global_step=7), None)
            pl = gpulse.LightningCallback()
            pl.on_train_batch_end(None, None, None, None, 0)
            pl.on_validation_start(None, None)
            pl.on_validation_end(None, None)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
            for m in ("gpulse.huggingface", "gpulse.lightning"):
                sys.modules.pop(m, None)
        _events.sender.flush()
        lines = self.recv_lines()
        kinds = [l.split()[0] for l in lines]
        self.assertEqual(kinds, ["step", "mark", "step", "phase"], lines)
        self.assertIn('checkpoint {"global_step":7}', lines[1])
        self.assertTrue(lines[3].endswith(" eval"), lines[3])

    def test_a_forked_child_starts_afresh(self):
        gpulse.step()
        pid = os.fork()
        if pid == 0:
            ok = _events.sender is not None and _events.sender.pid == os.getpid() and not _events.sender.lines
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)


class Load(unittest.TestCase):
    def test_a_recording_loads_into_dataframes(self):
        path = os.environ.get("GPULSE_TEST_RECORDING")
        if not path:
            self.skipTest("GPULSE_TEST_RECORDING not set")
        try:
            import pandas  # noqa: F401
        except ImportError:
            if os.environ.get("GPULSE_REQUIRE_PANDAS") == "1":
                raise
            self.skipTest("pandas is not installed")
        tables = gpulse.load(path)
        gpu = tables["gpu_samples"]
        self.assertGreater(len(gpu), 10)
        self.assertIn("t_ms", gpu.columns)
        self.assertIn("gpu", gpu.columns)
        self.assertEqual(str(gpu["time"].dtype), "datetime64[ns, UTC]")
        self.assertGreater(len(tables["tree_samples"]), 0)
        with self.assertRaises(Exception):
            gpulse.load(os.devnull)


if __name__ == "__main__":
    unittest.main(verbosity=2)
