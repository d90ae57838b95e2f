"""Can the unfused Winograd paths keep strict fp32 accuracy with their GEMMs on TF32 tensor cores (3xTF32)? A float64
numpy model, no GPU: relative L2 error against the float64 convolution of

- Winograd F(m×m, r×r) as ``winograd_unfused`` (3×3) and ``winograd_unfused_large`` (5×5, 7×7) run it: U from float64
  stored in fp32, V in fp32, the α² GEMMs on fp32 operands, M stored in fp32 (the "fp32" column; the large family
  measured 1.1–2.9e-6 on the H200);
- the same with each GEMM operand split into two TF32 words (hi = tf32(v), lo = tf32(v − hi)) and three products
  per term, hi·hi + hi·lo + lo·hi (the lo·lo term dropped): what ``winograd_unfused_3xtf32`` computes;
- the same with one TF32 product (hi·hi), for scale: what the TF32 class would accept.

The GEMMs accumulate exactly here (float64): the model prices operand rounding and M's storage, not the order of
fp32 sums, for every column alike. C = K = 64, 8 × 8 tiles of m × m outputs, 3 draws of normal inputs.

    PYTHONPATH=. python benchmarks/winograd_3xtf32_accuracy.py \
        > benchmarks/results/winograd_tf32_accuracy/unfused_3xtf32.md
"""

from __future__ import annotations

import numpy as np
from winograd_tf32_accuracy import tf32

from convtune.kernels.winograd.transforms import matrices

CHANNELS = 64
TILES = 8
DRAWS = 3
POINTS = ((2, 3), (4, 3), (2, 5), (4, 5), (2, 7))   # (m, r): the 3×3 unfused points and the large family's
GEMMS = ("fp32", "3xtf32", "tf32")


def conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Valid r×r convolution in float64: x (C, H, W), w (K, C, r, r) → (K, H − r + 1, W − r + 1)."""
    r = w.shape[2]
    p, q = x.shape[1] - r + 1, x.shape[2] - r + 1
    return sum(np.einsum("kc,cpq->kpq", w[:, :, i, j], x[:, i:i + p, j:j + q]) for i in range(r) for j in range(r))


def operand(a: np.ndarray, gemm: str) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) as float64: fp32 exact in hi; TF32 rounding in hi, nothing in lo; 3xTF32 two TF32 words."""
    if gemm == "fp32":
        return a.astype(np.float64), np.zeros(a.shape)
    hi = tf32(a)
    return hi, (tf32(a.astype(np.float64) - hi) if gemm == "3xtf32" else np.zeros(a.shape))


def winograd(x: np.ndarray, w: np.ndarray, m: int, r: int, gemm: str) -> np.ndarray:
    """F(m×m, r×r) of float32 x and w with the α² products per ``gemm`` (module docstring)."""
    at, g, bt = matrices(m, r)
    alpha = m + r - 1
    u = np.einsum("ar,kcrs,bs->abkc", g, w.astype(np.float64), g).astype(np.float32)
    u_hi, u_lo = operand(u, gemm)
    out = np.zeros((w.shape[0], TILES * m, TILES * m))
    bt32 = bt.astype(np.float32)
    for ti in range(TILES):
        for tj in range(TILES):
            d = x[:, ti * m:ti * m + alpha, tj * m:tj * m + alpha]
            v = np.einsum("ai,cij,bj->abc", bt32, d, bt32).astype(np.float32)
            v_hi, v_lo = operand(v, gemm)
            mm = (np.einsum("abkc,abc->abk", u_hi, v_hi) + np.einsum("abkc,abc->abk", u_hi, v_lo)
                  + np.einsum("abkc,abc->abk", u_lo, v_hi)).astype(np.float32).astype(np.float64)
            out[:, ti * m:ti * m + m, tj * m:tj * m + m] = np.einsum("ia,abk,jb->kij", at, mm, at)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    print("| F(m×m, r×r) | fp32 GEMM | 3xTF32 GEMM | 3xTF32 / fp32 | one TF32 product |")
    print("|---|---|---|---|---|")
    for m, r in POINTS:
        size = TILES * m + r - 1
        errors: dict[str, list[float]] = {g: [] for g in GEMMS}
        for _ in range(DRAWS):
            x = rng.standard_normal((CHANNELS, size, size)).astype(np.float32)
            w = rng.standard_normal((CHANNELS, CHANNELS, r, r)).astype(np.float32)
            ref = conv(x.astype(np.float64), w.astype(np.float64))
            for gemm in GEMMS:
                errors[gemm].append(float(np.linalg.norm(winograd(x, w, m, r, gemm) - ref) / np.linalg.norm(ref)))
        mean = {k: float(np.mean(v)) for k, v in errors.items()}
        print(f"| F({m}×{m}, {r}×{r}) | {mean['fp32']:.2e} | {mean['3xtf32']:.2e} | "
              f"{mean['3xtf32'] / mean['fp32']:.2f} | {mean['tf32']:.2e} |")


if __name__ == "__main__":
    main()
