from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})

    def step(self, closure=None):
        return None
