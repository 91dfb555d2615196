# The reference GPT-2 in plain PyTorch, shared by the fixture generator and the CPU benchmark.
#
# Parameter names here are the contract with braid's nn::GPT state_dict (wte.weight,
# blocks.{i}.attn.qkv.weight, ...); change them only together with the C++ model.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def padded_vocab_size(vocab_size, multiple=64):
    """Rounds the vocabulary up so the tied LM-head GEMM gets a friendly width."""
    return (vocab_size + multiple - 1) // multiple * multiple


class GPTConfig:
    def __init__(self, vocab_size, n_layer, n_head, n_embd, block_size):
        if n_embd % n_head != 0:
            raise ValueError(f"n_embd={n_embd} must be divisible by n_head={n_head}")
        self.vocab_size = vocab_size
        self.padded_vocab_size = padded_vocab_size(vocab_size)
        self.n_layer = n_layer
        self.n_head = n_head
        self.n_embd = n_embd
        self.block_size = block_size


class CausalSelfAttention(nn.Module):
    # True: torch's fused scaled_dot_product_attention (torch 2.x) instead of the explicit
    # softmax(q k^T) v below; the benchmarks set it to time PyTorch's fastest fp32 path.
    use_sdpa = False

    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        # [q | k | v] along the last dim, each C wide; heads are contiguous D-wide slices.
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd, eps=1e-5)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.padded_vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=1e-5)

    def init_weights(self, std=0.02, nontrivial=False):
        """normal(0, std) weights, zero padding rows of wte.

        nontrivial=True also gives biases and LayerNorm parameters small random values, so a
        gradient check exercises every parameter (zero biases and unit LN weights hide
        transposition and broadcasting bugs)."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                is_ln = ".ln" in name or name.startswith("ln_f.")
                base = 1.0 if is_ln and name.endswith(".weight") else 0.0
                if p.dim() >= 2:
                    p.normal_(0.0, std)
                elif not nontrivial:
                    p.fill_(base)
                elif is_ln:
                    p.copy_(base + 0.1 * torch.randn_like(p))
                else:
                    p.normal_(0.0, std)
            self.wte.weight[self.cfg.vocab_size:].zero_()

    def decay_and_no_decay(self):
        """Weight decay applies to matrices (embeddings, Linear weights), not biases or LN."""
        decay = [p for _, p in self.named_parameters() if p.dim() >= 2]
        no_decay = [p for _, p in self.named_parameters() if p.dim() < 2]
        return decay, no_decay

    def forward(self, idx, targets=None, padded_logits=True):
        """Returns (logits, loss); loss is None without targets.

        padded_logits=False computes only the vocab_size real columns (same loss, no slice
        copy of the [B, T, V] logits): the fastest form when only the loss is needed."""
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.cfg.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        V = self.cfg.vocab_size
        if not padded_logits:
            logits = F.linear(x, self.wte.weight[:V])  # tied head, real rows only: [B, T, V]
            real = logits
        else:
            logits = F.linear(x, self.wte.weight)  # tied head: [B, T, Vp]
            # Padding columns are not real tokens: keep them out of the softmax entirely.
            real = logits[..., :V]
        if targets is None:
            return logits, None
        loss = F.cross_entropy(real.reshape(-1, V), targets.reshape(-1), ignore_index=-1)
        return logits, loss


def num_params(model):
    """All parameters; the tied embedding is one tensor, so it is counted once."""
    return sum(p.numel() for p in model.parameters())
