"""A fifth set of trainings written as a user would write them, each timing its own parts: written
after gpulse's rules for library calls and torch.compile stood, to check them on loops they were
never fitted to. Same protocol as unseen_trainings.py: one JSON line {"scenario", "wall_s",
"loop_s", "steps", "parts", "without"} appended to TRUTH.
Usage: python3 unseen_five.py SCENARIO SECONDS TRUTH

  recompile_shapes an MLP under torch.compile whose batch grows every 4 steps, with automatic
                   dynamic shapes off: each new size recompiles
  eval_fn          a CNN evaluated every 10 steps by an evaluate() function over 10 batches,
                   counting its correct answers with .item()
  vision_post      a CNN whose outputs go through torchvision's batched_nms for 8 images a step
  gen_each_step    a small GPT-2 (transformers) sampling 16 tokens for 8 prompts after every step

With UNSEEN_WITHOUT=1 each runs without its culprit: the steps a second without it.
"""
import os
import sys
import time

T0 = time.perf_counter()
import torch  # noqa: E402
import unseen_parts  # noqa: E402
from unseen_parts import part, parts, train, write_truth  # noqa: E402

scenario, seconds, truth_path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
WITHOUT = os.environ.get("UNSEEN_WITHOUT") == "1"
dev = os.environ.get("UNSEEN_DEV", "cuda")
S = 1 if dev == "cuda" else 8


def loop(body):
    return unseen_parts.loop(body, seconds)


def recompile_shapes():
    import torch._dynamo

    torch._dynamo.config.automatic_dynamic_shapes = False
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 4096)
    model = torch.compile(unseen_parts.mlp(dev, 1024 // S, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seen = set()

    def body(step):
        bs = 256 if WITHOUT else 256 + 8 * (step // 4)
        x, y = torch.randn(bs, 1024 // S, device=dev), torch.randint(0, 1024 // S, (bs,), device=dev)
        with part("new_shape" if bs not in seen else "seen_shape"):
            seen.add(bs)
            train(model, opt, x, y).item()

    return loop(body)


def evaluate(model, batches):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in batches:
            out = model(x)
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


def eval_fn():
    model = unseen_parts.cnn(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(128, 3, 64 // S, 64 // S, device=dev), torch.randint(0, 10, (128,), device=dev)
    val = [(torch.randn(256, 3, 64 // S, 64 // S, device=dev), torch.randint(0, 10, (256,), device=dev))
           for _ in range(10)]

    def body(step):
        with part("train_step"):
            loss = train(model, opt, x, y)
        if step % 10 == 0 and not WITHOUT:
            with part("eval"):
                acc = evaluate(model, val)
            print(f"step {step} loss {loss.item():.3f} acc {acc:.3f}", flush=True)

    return loop(body)


def vision_post():
    import torchvision

    model = unseen_parts.cnn(dev, classes=4 * 100)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 3, 128 // S, 128 // S, device=dev), torch.randint(0, 400, (8,), device=dev)
    kept = []

    def body(step):
        with part("train_step"):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if not WITHOUT:
            with part("postprocess"):
                for i in range(8):
                    xy = torch.rand(2000, 2, device=dev) * 512
                    boxes = torch.cat([xy, xy + 16 + out[i].detach().abs().mean() * 0], 1)
                    scores = torch.rand(2000, device=dev)
                    classes = torch.randint(0, 20, (2000,), device=dev)
                    keep = torchvision.ops.batched_nms(boxes, scores, classes, 0.5)
                    kept.append(keep.numel())
        else:
            loss.item()

    return loop(body)


def gen_each_step():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=4, n_embd=384, n_head=6, vocab_size=8192, n_positions=256)
    model = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, 8192, (32 // S, 128), device=dev)
    prompts = tokens[:8, :8]

    def body(step):
        with part("train_step"):
            loss = model(tokens, labels=tokens).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if not WITHOUT:
            with part("generate"):
                model.eval()
                out = model.generate(prompts, max_new_tokens=16, do_sample=True, top_k=20, pad_token_id=0)
                model.train()
        loss.item()

    return loop(body)


steps, loop_s = globals()[scenario]()
parts.setdefault("train_step", 0.0)
write_truth(truth_path, scenario, T0, steps, loop_s, WITHOUT)
os._exit(0)
