#!/usr/bin/python3
# Regenerates tests/reference/gpt_tiny.safetensors: a tiny GPT-2's weights, one forward and
# backward, and a 10-step AdamW trajectory, computed in float64 by PyTorch for braid's tests.
#
# Usage: /usr/bin/python3 tests/reference/gen_gpt_fixture.py [out_path]
# (Debian's python3, which has torch; the safetensors pip package is not needed: the format is
# written by hand below, which also keeps the C++ reader honest against a second writer.)
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt_model import GPT, GPTConfig  # noqa: E402

SEED = 1234
VOCAB, N_LAYER, N_HEAD, N_EMBD, BLOCK = 97, 2, 4, 32, 16
BATCH, SEQ = 2, 16
INIT_STD = 0.02
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.95, 1e-8, 0.1
CLIP_NORM = 1.0
ADAMW_STEPS = 10
# (batch, position) of the targets set to ignore_index; one at a sequence start, one at an end.
IGNORED = [(0, 3), (1, 0), (1, 15)]

_ST_DTYPES = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}


def write_safetensors(path, tensors, metadata):
    """Writes the safetensors layout: u64 LE header length, JSON header, raw LE data."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, offset = [], 0
    for name, array in tensors:
        array = np.ascontiguousarray(array)
        if array.dtype not in _ST_DTYPES:
            raise TypeError(f"tensor {name}: dtype {array.dtype} is not stored by this fixture")
        blob = array.tobytes()
        header[name] = {"dtype": _ST_DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # 8-byte aligned data section, as braid's writer does
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def f32(t):
    return t.detach().to(torch.float32).cpu().numpy().astype("<f4")


def i32(t):
    return t.detach().to(torch.int32).cpu().numpy().astype("<i4")


def make_batch(gen):
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
    input_ids = tokens[:, :-1].clone()
    targets = tokens[:, 1:].clone()
    for b, t in IGNORED:
        targets[b, t] = -1
    return input_ids, targets


def make_optimizer(model):
    decay, no_decay = model.decay_and_no_decay()
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "gpt_tiny.safetensors")
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one summation order, so reruns are bit-identical

    cfg = GPTConfig(VOCAB, N_LAYER, N_HEAD, N_EMBD, BLOCK)
    model = GPT(cfg)
    model.init_weights(std=INIT_STD, nontrivial=True)
    # The stored weights are f32; rounding them first makes the f64 reference start from
    # exactly the values braid loads.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float32))
    model = model.double()
    names = [n for n, _ in model.named_parameters()]
    init_params = [(n, f32(p)) for n, p in model.named_parameters()]

    gen = torch.Generator().manual_seed(SEED + 1)
    input_ids, targets = make_batch(gen)

    # One forward and backward from the initial weights.
    logits, loss = model(input_ids, targets)
    loss.backward()
    grads = [("grad." + n, f32(p.grad)) for n, p in model.named_parameters()]
    logits32, loss32 = f32(logits), f32(loss.reshape(1))
    model.zero_grad(set_to_none=True)

    # AdamW trajectory on the same batch, clipping the global grad norm before every step.
    opt = make_optimizer(model)
    losses, norms = [], []
    for _ in range(ADAMW_STEPS):
        opt.zero_grad(set_to_none=True)
        _, step_loss = model(input_ids, targets)
        step_loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        losses.append(step_loss.item())
        norms.append(norm.item())
        opt.step()
    final = [("adamw_final." + n, f32(p)) for n, p in model.named_parameters()]

    if abs(losses[0] - loss.item()) > 1e-12:
        raise RuntimeError("trajectory step 0 must reproduce the single forward's loss")
    pad = model.wte.weight[VOCAB:]
    if pad.abs().max().item() != 0.0:
        raise RuntimeError("wte padding rows must stay zero through AdamW")

    metadata = {
        "format": "braid-gpt-fixture-v1",
        "generator": "tests/reference/gen_gpt_fixture.py",
        "torch_version": torch.__version__,
        "compute_dtype": "float64 (stored as f32)",
        "seed": SEED,
        "vocab_size": VOCAB,
        "padded_vocab_size": cfg.padded_vocab_size,
        "n_layer": N_LAYER,
        "n_head": N_HEAD,
        "n_embd": N_EMBD,
        "block_size": BLOCK,
        "batch_size": BATCH,
        "seq_len": SEQ,
        "layer_norm_eps": 1e-5,
        "gelu": "tanh",
        "tied_lm_head": "true",
        "loss": "cross_entropy over logits[..., :vocab_size], mean over targets != -1",
        "ignore_index": -1,
        "init": "weights normal(0, 0.02); biases normal(0, 0.02); LN weight 1+0.1*randn, "
                "LN bias 0.1*randn; wte rows >= vocab_size zero",
        "param_names": ",".join(names),
        "adamw_steps": ADAMW_STEPS,
        "adamw_lr": LR,
        "adamw_beta1": BETA1,
        "adamw_beta2": BETA2,
        "adamw_eps": EPS,
        "adamw_weight_decay": WEIGHT_DECAY,
        "adamw_weight_decay_on": "params with dim >= 2 (wte, wpe, Linear weights)",
        "adamw_formula": "torch.optim.AdamW: p *= 1 - lr*wd; m,v updated; "
                         "p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)",
        "grad_clip_norm": CLIP_NORM,
        "grad_clip_formula": "torch clip_grad_norm_: g *= min(1, max_norm / (norm + 1e-6))",
        "adamw_losses": "loss before step k's update, k = 0..9",
        "adamw_grad_norms": "global L2 grad norm before clipping, k = 0..9",
    }
    tensors = init_params + [
        ("input_ids", i32(input_ids)),
        ("targets", i32(targets)),
        ("logits", logits32),
        ("loss", loss32),
    ] + grads + [
        ("adamw_losses", np.array(losses, dtype="<f4")),
        ("adamw_grad_norms", np.array(norms, dtype="<f4")),
    ] + final
    write_safetensors(out_path, tensors, metadata)

    header = read_safetensors_header(out_path)
    print(f"wrote {out_path}: {len(header) - 1} tensors, {os.path.getsize(out_path)} bytes")
    print(f"loss {loss.item():.10f}")
    print("adamw losses " + " ".join(f"{x:.6f}" for x in losses))
    print("grad norms   " + " ".join(f"{x:.4f}" for x in norms))


if __name__ == "__main__":
    main()
