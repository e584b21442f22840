"""Optimizers as PyTorch 2 runs them: every subclass's `step` calls the global post hooks."""

import functools

_global_post_hooks = []


def register_optimizer_step_post_hook(hook):
    _global_post_hooks.append(hook)


class Optimizer:
    def __init__(self, params, defaults):
        self.param_groups = [dict(defaults, params=list(params))]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        inner = cls.step

        @functools.wraps(inner)
        def step(self, *args, **kw):
            out = inner(self, *args, **kw)
            for hook in list(_global_post_hooks):
                hook(self, args, kw)
            return out

        cls.step = step
