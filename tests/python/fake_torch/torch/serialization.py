"""``torch.save``'s stand-in, at real torch's module path (``torch/serialization.py``)."""

import pickle
import time


def save(obj, f, *args, **kwargs):
    """Pickles ``obj`` into ``f`` and syncs it, as a state_dict is written; a dict with
    ``save_s`` stands for a state_dict that takes that many seconds to write instead."""
    if isinstance(obj, dict) and "save_s" in obj:
        time.sleep(obj["save_s"])
        obj = b"\0"
    with open(f, "wb") as out:
        pickle.dump(obj, out, protocol=pickle.HIGHEST_PROTOCOL)
