"""What the unseen trainings share (unseen_trainings.py, unseen_more.py): the parts each times
itself by, and its line of truth."""
import json
import time

parts = {}


class part:
    """Adds the block's wall time to parts[name]."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t = time.perf_counter()

    def __exit__(self, *a):
        parts[self.name] = parts.get(self.name, 0.0) + time.perf_counter() - self.t


def write_truth(path, scenario, t0, steps, loop_s, without):
    """Appends one JSON line {"scenario", "wall_s", "loop_s", "steps", "parts", "without"}."""
    with open(path, "a") as f:
        f.write(json.dumps({"scenario": scenario, "wall_s": time.perf_counter() - t0, "loop_s": loop_s,
                            "steps": steps, "parts": parts, "without": without}) + "\n")
