"""A real start-up before a short loop, each part timed by the job itself: imports (torch,
torchvision, transformers), building a model on the CPU, the CUDA context and moving the model,
compiling a function, then LOOP_S seconds of steps. Writes its own timing to argv[1]."""

import json
import sys
import time

t0 = time.perf_counter()
own = {}
a = time.perf_counter()
import torch  # noqa: E402
import torchvision  # noqa: E402
import transformers  # noqa: E402, F401

own["imports_s"] = time.perf_counter() - a
a = time.perf_counter()
model = torchvision.models.resnet152()
own["build_model_s"] = time.perf_counter() - a
a = time.perf_counter()
torch.cuda.init()
torch.zeros(1, device="cuda")
own["cuda_context_s"] = time.perf_counter() - a
a = time.perf_counter()
model = model.cuda()
own["to_gpu_s"] = time.perf_counter() - a


@torch.compile
def head(x):
    return (x.relu() * 2).softmax(-1).sum()


a = time.perf_counter()
head(torch.randn(64, 1000, device="cuda"))
torch.cuda.synchronize()
own["compile_s"] = time.perf_counter() - a
import gpulse  # noqa: E402

own["start_s"] = time.perf_counter() - t0
x = torch.randn(32, 3, 224, 224, device="cuda")
while time.perf_counter() - t0 < own["start_s"] + float(sys.argv[2]):
    with torch.no_grad():
        head(model(x))
    torch.cuda.synchronize()
    gpulse.step()
json.dump(own, open(sys.argv[1], "w"))
