"""S4ConvD end to end: the same training run with PyTorch's FFT convolution and with convtune.ops.torch's kernels.

The model (MilanShao/S4ConvD, ``S4ConvD_1percent.py``; shared/reference/depthwise.md §1): Linear(4 → H),
4 × S4ConvBlock, Linear(H → 1) on the last time step. An S4ConvBlock generates its S4D kernel
k[h, l] = 2·Re Σ_n C'[h, n]·exp(dtA[h, n]·l) (diagonal, ZOH, state N → N/2 complex modes, K = L) from
learnable log_dt, A, C every step, applies it as a causal depthwise convolution of (B, H, L), adds D·x, then
GELU, dropout, Conv1d(H → 2H, 1) + GLU and a residual. The convolution is either the model's own FFT path
(irfft(rfft(x, 2L)·rfft(k, 2L))[..., :L], the baseline) or ``convtune.ops.torch.depthwise_conv1d`` (forward,
dgrad and deterministic wgrad kernels). Data are synthetic (B, 48, 4) windows with positive targets; loss
RMSLE on softplus(prediction); SGD with momentum 0.9.

Both runs start from the same seed (same weights, same batches, same dropout masks) in fp32 with TF32 off;
the script checks that the loss curves agree (max relative difference ≤ ``--rtol``, default 1e-4), and
reports the median step time of each, the speedup, the convolution's measured share of the FFT step
(4 layers × forward + backward of the FFT convolution, timed alone with CUDA events) and the Amdahl bound
1 / (1 − share) that a zero-cost convolution would give.

Usage (GPU): ``python benchmarks/s4convd_train.py`` (paper shape: batch 16384, 100 steps) or, for a quick
check, ``python benchmarks/s4convd_train.py --steps 5 --batch 256``. ``--device cpu`` runs both paths on
the CPU (convtune.ops.torch uses its reference formulas there): a smoke test of the script, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class S4Kernel(nn.Module):
    """S4D kernel generator (diagonal A, ZOH): k (H, L) in lag order (k[:, 0] multiplies the current sample)."""

    def __init__(self, H: int, N: int = 64, dt_min: float = 1e-3, dt_max: float = 1e-1) -> None:
        super().__init__()
        log_dt = torch.rand(H) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        self.log_dt = nn.Parameter(log_dt)
        self.C = nn.Parameter(torch.view_as_real(torch.randn(H, N // 2, dtype=torch.cfloat)))
        self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(H, N // 2)))
        self.A_imag = nn.Parameter(math.pi * torch.arange(N // 2).float().repeat(H, 1))

    def forward(self, L: int) -> torch.Tensor:
        dt = torch.exp(self.log_dt)
        C = torch.view_as_complex(self.C)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag
        dtA = A * dt[:, None]
        powers = dtA[:, :, None] * torch.arange(L, device=A.device)
        C = C * (torch.exp(dtA) - 1.0) / A
        return 2 * torch.einsum("hn,hnl->hl", C, torch.exp(powers)).real


def fft_conv(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Causal convolution by FFT (the S4ConvD path): x (B, H, L), k (H, L) lag order."""
    L = x.shape[-1]
    return torch.fft.irfft(torch.fft.rfft(x, n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L)[..., :L]


def convtune_conv(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The same convolution on convtune's kernels (PyTorch's weight order is the lag order flipped)."""
    import convtune.ops.torch as ct

    return ct.depthwise_conv1d(x, k.flip(-1))


class S4ConvBlock(nn.Module):
    def __init__(self, H: int, N: int, dropout: float, conv) -> None:
        super().__init__()
        self.kernel = S4Kernel(H, N)
        self.D = nn.Parameter(torch.randn(H))
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Conv1d(H, 2 * H, 1)
        self.conv = conv

    def forward(self, u: torch.Tensor) -> torch.Tensor:   # u (B, L, H)
        x = u.transpose(1, 2).contiguous()
        L = x.shape[-1]
        y = self.conv(x, self.kernel(L)) + self.D[:, None] * x
        y = self.dropout(F.gelu(y))
        y = F.glu(self.out(y), dim=1)
        return y.transpose(1, 2) + u


class S4ConvD(nn.Module):
    def __init__(self, conv, H: int = 128, N: int = 64, blocks: int = 4, features: int = 4,
                 dropout: float = 0.01) -> None:
        super().__init__()
        self.encoder = nn.Linear(features, H)
        self.blocks = nn.ModuleList(S4ConvBlock(H, N, dropout, conv) for _ in range(blocks))
        self.decoder = nn.Linear(H, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # x (B, L, F)
        h = self.encoder(x)
        for block in self.blocks:
            h = block(h)
        return self.decoder(h[:, -1, :]).squeeze(-1)


def rmsle(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(torch.mean((torch.log1p(F.softplus(pred)) - torch.log1p(target)) ** 2))


def synthetic_batches(n: int, batch: int, L: int, device: str, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` (x (batch, L, 4), y (batch,)) pairs: z-normalised features, a positive target that depends on them."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(batch, L, 4, generator=g)
        y = torch.exp(0.5 * x[:, -8:, 0].mean(1) + 0.2 * x[:, :, 1].mean(1)) + 0.1 * torch.rand(batch, generator=g)
        out.append((x.to(device), y.to(device)))
    return out


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train(conv, args: argparse.Namespace, batches) -> tuple[list[float], list[float]]:
    """Losses and per-step milliseconds of ``args.steps`` SGD steps from seed ``args.seed``."""
    torch.manual_seed(args.seed)
    model = S4ConvD(conv).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    losses, times = [], []
    for step in range(args.steps):
        x, y = batches[step % len(batches)]
        _sync(args.device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = rmsle(model(x), y)
        loss.backward()
        opt.step()
        _sync(args.device)
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss.detach()))  # a host sync per step, after the timed region
    return losses, times


def conv_ms(conv, args: argparse.Namespace, reps: int = 20) -> float:
    """Forward + backward of one layer's convolution alone (CUDA events; wall clock on the CPU), in ms."""
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    x = torch.randn(args.batch, 128, 48, generator=g).to(args.device).requires_grad_()
    k = (torch.randn(128, 48, generator=g) / 48).to(args.device).requires_grad_()
    dy = torch.randn(args.batch, 128, 48, generator=g).to(args.device)

    def once() -> None:
        x.grad = k.grad = None
        conv(x, k).backward(dy)

    for _ in range(3):
        once()
    samples = []
    for _ in range(reps):
        if args.device == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            once()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
        else:
            t0 = time.perf_counter()
            once()
            samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=16384)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rtol", type=float, default=1e-4, help="largest allowed relative loss difference")
    parser.add_argument("--warmup", type=int, default=3, help="steps left out of the median step time")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", default=None, help="write the report (JSON) to this file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch < 1:
        parser.error("--steps and --batch must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("s4convd_train: error: device: no CUDA device (use --device cpu for a smoke test)", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    batches = synthetic_batches(min(args.steps, 8), args.batch, 48, args.device, args.seed + 1)

    fft_losses, fft_times = train(fft_conv, args, batches)
    ct_losses, ct_times = train(convtune_conv, args, batches)
    rel = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(fft_losses, ct_losses, strict=True))
    timed = slice(min(args.warmup, args.steps - 1), None)
    fft_step, ct_step = statistics.median(fft_times[timed]), statistics.median(ct_times[timed])
    conv_fft, conv_ct = conv_ms(fft_conv, args), conv_ms(convtune_conv, args)
    share = min(0.999, 4 * conv_fft / fft_step)
    report = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "torch": torch.__version__,
        "batch": args.batch, "steps": args.steps, "lr": args.lr,
        "loss_first": [fft_losses[0], ct_losses[0]], "loss_last": [fft_losses[-1], ct_losses[-1]],
        "max_rel_loss_diff": rel, "losses_agree": rel <= args.rtol,
        "step_ms_fft": fft_step, "step_ms_convtune": ct_step, "speedup": fft_step / ct_step,
        "conv_fwd_bwd_ms_fft": conv_fft, "conv_fwd_bwd_ms_convtune": conv_ct,
        "conv_share_of_fft_step": share, "amdahl_bound": 1 / (1 - share),
        "predicted_speedup": fft_step / (fft_step - 4 * conv_fft + 4 * conv_ct),
    }
    print(f"S4ConvD, batch {args.batch}, {args.steps} steps on {report['device']}")
    print(f"loss: FFT {fft_losses[0]:.6f} -> {fft_losses[-1]:.6f}, convtune {ct_losses[0]:.6f} -> "
          f"{ct_losses[-1]:.6f}; max relative difference {rel:.2e} ({'ok' if rel <= args.rtol else 'MISMATCH'} "
          f"at {args.rtol:g})")
    print(f"step: FFT {fft_step:.3f} ms, convtune {ct_step:.3f} ms, speedup {report['speedup']:.3f}x")
    print(f"conv fwd+bwd per layer: FFT {conv_fft:.3f} ms, convtune {conv_ct:.3f} ms; 4 layers are "
          f"{100 * share:.1f}% of the FFT step -> Amdahl bound {report['amdahl_bound']:.3f}x, "
          f"predicted {report['predicted_speedup']:.3f}x")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0 if rel <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
