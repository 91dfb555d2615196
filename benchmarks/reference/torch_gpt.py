#!/usr/bin/python3
# PyTorch side of the training-throughput comparisons: the same GPT-2 as braid, fp32, AdamW, on
# the CPU (benchmarks/cpu_vs_torch.sh) or a CUDA device (tests/gpu/run_device_checks.sh).
#
# Times full training steps (zero_grad, forward, backward, grad-norm clip, AdamW step) on
# pre-generated random token batches and writes the same JSON keys as braid's gpt_step_bench.
# Launch with OMP_WAIT_POLICY=PASSIVE (benchmarks/cpu_vs_torch.sh does): spinning OpenMP
# workers fight torch's own threads and cost 15-25% on this machine.
import argparse
import json
import os
import statistics
import sys
import time

import torch

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_REPO, "tests", "reference"))
from torch_gpt_model import GPT, CausalSelfAttention, GPTConfig, num_params  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description="Times PyTorch GPT training steps.")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None, help="write results here")
    ap.add_argument("--seed", type=int, default=0)
    # cuda: fp32 with TF32 off (braid's fp32 path does not use TF32 either), timed with
    # device synchronisation around each step.
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    # foreach was the faster AdamW on the CPU with torch 1.13; fused (CUDA only) is torch's
    # fastest on a GPU. Default: foreach on the CPU, fused on cuda.
    ap.add_argument("--adamw", choices=["foreach", "single", "fused"], default=None)
    # sdpa: torch's fused scaled_dot_product_attention (torch 2.x). Default: manual on the CPU
    # (the formulation the fixtures use), sdpa on cuda.
    ap.add_argument("--attention", choices=["manual", "sdpa"], default=None)
    # Both heads give the same loss. "padded" multiplies by all Vp rows of wte and slices the
    # logits (a [B*T, V] copy each way); "vocab" multiplies by the V real rows only, so the
    # backward instead scatters a [Vp, C] gradient. auto picks whichever copy is smaller.
    ap.add_argument("--head", choices=["auto", "padded", "vocab"], default="auto")
    return ap.parse_args()


def main():
    args = parse_args()
    if args.steps < 1:
        sys.exit("torch_gpt.py: --steps must be at least 1")
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("torch_gpt.py: --device cuda, but torch sees no CUDA device")
    if args.adamw is None:
        args.adamw = "fused" if cuda else "foreach"
    if args.attention is None:
        args.attention = "sdpa" if cuda else "manual"
    if args.adamw == "fused" and not cuda:
        sys.exit("torch_gpt.py: --adamw fused runs on CUDA only; use foreach or single")
    if args.attention == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        sys.exit(f"torch_gpt.py: --attention sdpa needs torch 2.x, this is {torch.__version__}")
    CausalSelfAttention.use_sdpa = args.attention == "sdpa"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if not cuda and os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        print("torch_gpt.py: note: OMP_WAIT_POLICY is not PASSIVE; torch runs 15-25% slower so here",
              file=sys.stderr)
    # torch picks one thread on this machine by default; the comparison is thread for thread.
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    cfg = GPTConfig(args.vocab, args.layers, args.heads, args.width, block_size=args.seq)
    model = GPT(cfg)
    model.init_weights(std=0.02)
    model.to(args.device)
    model.train()
    decay, no_decay = model.decay_and_no_decay()
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kind = {"fused": {"fused": True}, "foreach": {"foreach": True}, "single": {"foreach": False}}
    opt = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **kind[args.adamw])
    params = list(model.parameters())
    head = args.head
    if head == "auto":
        head = "vocab" if args.batch * args.seq > args.width else "padded"
    padded = head == "padded"

    # Data is made up front: the benchmark measures training steps, not loading.
    n_batches = 4
    tokens = torch.randint(0, args.vocab, (n_batches, args.batch, args.seq + 1))
    batches = [(tokens[i, :, :-1].contiguous().to(args.device),
                tokens[i, :, 1:].contiguous().to(args.device)) for i in range(n_batches)]

    def sync():
        if cuda:
            torch.cuda.synchronize()

    times_ms, losses = [], []
    for step in range(args.warmup + args.steps):
        x, y = batches[step % n_batches]
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y, padded_logits=padded)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sync()
        t1 = time.perf_counter()
        losses.append(loss.item())
        if step >= args.warmup:
            times_ms.append((t1 - t0) * 1e3)

    median_ms = statistics.median(times_ms)
    tokens_per_s = args.batch * args.seq / (median_ms / 1e3)
    n = num_params(model)
    result = {
        "impl": "pytorch",
        "config": {
            "layers": args.layers, "heads": args.heads, "width": args.width,
            "vocab": args.vocab, "padded_vocab": cfg.padded_vocab_size,
            "batch": args.batch, "seq": args.seq, "steps": args.steps,
            "warmup": args.warmup, "threads": args.threads, "device": args.device,
        },
        "ms_per_step": times_ms,
        "median_ms": median_ms,
        "tokens_per_s": tokens_per_s,
        "params": n,
        "losses": losses,
        "torch_version": torch.__version__,
        "adamw": args.adamw,
        "attention": args.attention,
        "tf32": False if cuda else None,
        "head": head,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
    }
    print(f"pytorch {args.device} L={args.layers} H={args.heads} C={args.width} V={args.vocab} "
          f"B={args.batch} T={args.seq} threads={args.threads}: params {n}, "
          f"median {median_ms:.1f} ms/step, {tokens_per_s:.1f} tokens/s "
          f"(loss {losses[0]:.3f} -> {losses[-1]:.3f})")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
