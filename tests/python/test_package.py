"""The `gpulse` Python package outside `gpulse run` and against a socket standing in for the
recorder. Run with the package on PYTHONPATH: `PYTHONPATH=python python3 tests/python/test_package.py`.
"""

import os
import shutil
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
                print(f"skipped: gpulse.{name} without {lib} ({lib} is installed here)", file=sys.stderr)
                continue
            except ImportError:
                pass
            with self.assertRaises(ImportError):
                getattr(gpulse, name)
        with self.assertRaises(AttributeError):
            gpulse.NoSuchThing


class InsideRun(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
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
            hf.on_epoch_begin(None, types.SimpleNamespace(epoch=0), None)
            hf.on_step_begin(None, None, None)
            hf.on_step_end(None, None, None)
            hf.on_step_begin(None, None, None)
            hf.on_step_end(None, None, None)
            hf.on_save(None, types.SimpleNamespace(global_step=7), None)
            pl = gpulse.LightningCallback()
            trainer = types.SimpleNamespace(current_epoch=1, global_step=9)
            pl.on_train_epoch_start(trainer, None)
            pl.on_train_batch_start(trainer, None, None, 0)
            pl.on_train_batch_end(trainer, None, None, None, 0)
            pl.on_validation_start(trainer, None)
            pl.on_validation_end(trainer, None)
            pl.on_save_checkpoint(trainer, None, {})
            pl.on_train_batch_start(trainer, None, None, 1)
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
        # The wait for data is the gap from one step's end (or the epoch's start) to the next
        # step's start; evaluation and saving in that gap are phases, never waits.
        self.assertEqual(
            kinds,
            ["mark", "wait", "step", "wait", "step", "phase", "mark"]
            + ["mark", "wait", "step", "phase", "mark", "phase"],
            lines,
        )
        self.assertIn("epoch_start", lines[0])
        self.assertIn('checkpoint {"global_step":7}', lines[6])
        self.assertTrue(lines[5].endswith(" checkpoint"), lines[5])
        self.assertTrue(lines[10].endswith(" eval"), lines[10])
        self.assertTrue(lines[12].endswith(" checkpoint"), lines[12])
        for wait in (lines[1], lines[3], lines[8]):
            self.assertGreaterEqual(int(wait.split()[3]), 0, wait)

    def test_a_forked_child_starts_afresh(self):
        gpulse.step()
        pid = os.fork()
        if pid == 0:
            ok = _events.sender is not None and _events.sender.pid == os.getpid() and not _events.sender.lines
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)


def skip(test, why):
    """Skips `test` (a test or its class), saying so in one `skipped: …` line, which
    tests/cli/run.rs passes on to the terminal."""
    print(f"skipped: {why}", file=sys.stderr, flush=True)
    raise unittest.SkipTest(why)


def recordings():
    """The recordings named by GPULSE_TEST_RECORDING (separated by `:`), oldest schema first."""
    return [p for p in os.environ.get("GPULSE_TEST_RECORDING", "").split(os.pathsep) if p]


def with_schema(src, version, dirname):
    """A copy of the recording `src` that claims to be of schema `version`."""
    import shutil
    import sqlite3

    dst = os.path.join(dirname, f"schema{version}.db")
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    con.commit()
    con.close()
    return dst


class Schema(unittest.TestCase):
    """What gpulse.load() accepts, checked before pandas is imported (so without pandas)."""

    @classmethod
    def setUpClass(cls):
        if not recordings():
            skip(cls, "gpulse.load()'s schema check (GPULSE_TEST_RECORDING not set)")
        cls.recording = recordings()[0]

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_a_newer_schema_is_refused_as_the_cli_refuses_it(self):
        from gpulse import _load

        newest = _load.SCHEMA_VERSION
        for v in range(1, newest + 1):
            self.assertEqual(_load.schema_version(with_schema(self.recording, v, self.dir)), v)
        for v in (newest + 1, 99):
            path = with_schema(self.recording, v, self.dir)
            with self.assertRaises(gpulse.NewerSchemaError) as e:
                gpulse.load(path)
            self.assertEqual(
                str(e.exception), f"{path} was written by a newer gpulse (schema {v}, this one reads {newest})"
            )
            self.assertIsInstance(e.exception, ValueError)

    def test_a_file_that_is_not_a_recording_is_refused(self):
        for path in (os.devnull, os.path.join(self.dir, "missing.db"), __file__):
            with self.assertRaises(ValueError) as e:
                gpulse.load(path)
            self.assertNotIsInstance(e.exception, gpulse.NewerSchemaError)
            self.assertIn(path, str(e.exception))


class Load(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not recordings():
            skip(cls, "gpulse.load() into pandas (GPULSE_TEST_RECORDING not set)")
        cls.recording = recordings()[0]
        try:
            import pandas  # noqa: F401
        except ImportError:
            if os.environ.get("GPULSE_REQUIRE_PANDAS") == "1":
                raise
            skip(cls, "gpulse.load() into pandas (python3 has no pandas; CI installs it)")

    def test_a_recording_loads_into_dataframes(self):
        import pandas as pd

        for path in recordings():
            with self.subTest(path=path):
                tables = gpulse.load(path)
                gpu = tables["gpu_samples"]
                self.assertGreater(len(gpu), 10)
                self.assertIn("t_ms", gpu.columns)
                self.assertIn("gpu", gpu.columns)
                self.assertGreater(len(tables["tree_samples"]), 0)
                # The same time dtype with pandas 2 and 3, and the right instants.
                for name, df in tables.items():
                    if "time" in df.columns:
                        self.assertEqual(str(df["time"].dtype), "datetime64[ns, UTC]", f"{name}, pandas {pd.__version__}")
                first = int(gpu["t_ms"].iloc[0])
                self.assertEqual(gpu["time"].iloc[0], pd.Timestamp(first * 1_000_000, tz="UTC"))
                self.assertEqual(gpu["time"].iloc[0].year, 2026)
                if "markers" in tables:
                    m = tables["markers"]
                    self.assertEqual(m["time"].iloc[0], pd.Timestamp(int(m["t_us"].iloc[0]) * 1000, tz="UTC"))

    def test_each_schema_it_reads_loads(self):
        from gpulse import _load

        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        for v in range(1, _load.SCHEMA_VERSION + 1):
            tables = gpulse.load(with_schema(self.recording, v, d))
            self.assertEqual(tables["meta"].set_index("key")["value"]["schema_version"], str(v))
            self.assertGreater(len(tables["gpu_samples"]), 10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
