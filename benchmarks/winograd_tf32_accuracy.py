"""Can Winograd meet the TF32 class's accuracy gate? A float64 numpy model, no GPU: relative L2 error against the
float64 convolution of

- direct TF32: x and w rounded to TF32 (what a TF32 implicit GEMM reaches: cuDNN TF32 measured 2.9e-4 on the H200);
- Winograd F(m×m, 3×3) with fp32 transforms and the α² GEMMs on TF32 operands (U from float64, V in fp32, both rounded
  to TF32 as ``winograd_unfused_tf32.cu`` rounds them), M accumulated exactly and stored in fp32;
- the same with U split into two TF32 words (hi + lo: two MMAs per product, V rounded once);
- the fp32 Winograd path (no TF32 rounding), for scale.

C = K = 64, 8 × 8 tiles of m × m outputs, 3 draws of normal inputs. The issue's gate is ≤ 2× cuDNN TF32's error.

    PYTHONPATH=. python benchmarks/winograd_tf32_accuracy.py > benchmarks/results/winograd_tf32_accuracy/errors.md
"""

from __future__ import annotations

import numpy as np

from convtune.kernels.winograd.transforms import matrices

CHANNELS = 64
TILES = 8
DRAWS = 3


def tf32(a: np.ndarray) -> np.ndarray:
    """float32 → TF32 as cvt.rna.tf32.f32 rounds (nearest, ties away; 10 mantissa bits), as float64."""
    bits = np.asarray(a, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def conv3x3(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Valid 3×3 convolution in float64: x (C, H, W), w (K, C, 3, 3) → (K, H − 2, W − 2)."""
    p, q = x.shape[1] - 2, x.shape[2] - 2
    return sum(np.einsum("kc,cpq->kpq", w[:, :, r, s], x[:, r:r + p, s:s + q]) for r in range(3) for s in range(3))


def winograd(x: np.ndarray, w: np.ndarray, m: int, gemm: str) -> np.ndarray:
    """F(m×m, 3×3) of float32 x and w: U in float64 then float32, V in float32, the α² products per ``gemm``
    ("fp32", "tf32", "tf32_u_split"), M stored in float32, the output transform in float64."""
    at, g, bt = matrices(m)
    alpha = m + 2
    u = np.einsum("ar,kcrs,bs->abkc", g, w.astype(np.float64), g).astype(np.float32)
    if gemm == "fp32":
        u_eff = u.astype(np.float64)
    elif gemm == "tf32":
        u_eff = tf32(u)
    else:
        hi = tf32(u)
        u_eff = hi + tf32(u - hi)
    out = np.zeros((w.shape[0], TILES * m, TILES * m))
    bt32 = bt.astype(np.float32)
    for ti in range(TILES):
        for tj in range(TILES):
            d = x[:, ti * m:ti * m + alpha, tj * m:tj * m + alpha]
            v = np.einsum("ai,cij,bj->abc", bt32, d, bt32).astype(np.float32)
            v_eff = v.astype(np.float64) if gemm == "fp32" else tf32(v)
            mm = np.einsum("abkc,abc->abk", u_eff, v_eff).astype(np.float32).astype(np.float64)
            out[:, ti * m:ti * m + m, tj * m:tj * m + m] = np.einsum("ia,abk,jb->kij", at, mm, at)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    print("| m | direct TF32 | Winograd TF32 | Winograd TF32, U split | Winograd fp32 | Winograd TF32 / direct TF32 |")
    print("|---|---|---|---|---|---|")
    for m in (2, 4):
        size = TILES * m + 2
        errors: dict[str, list[float]] = {"direct": [], "tf32": [], "tf32_u_split": [], "fp32": []}
        for _ in range(DRAWS):
            x = rng.standard_normal((CHANNELS, size, size)).astype(np.float32)
            w = rng.standard_normal((CHANNELS, CHANNELS, 3, 3)).astype(np.float32)
            ref = conv3x3(x.astype(np.float64), w.astype(np.float64))
            norm = np.linalg.norm(ref)
            errors["direct"].append(float(np.linalg.norm(conv3x3(tf32(x), tf32(w)) - ref) / norm))
            for gemm in ("tf32", "tf32_u_split", "fp32"):
                errors[gemm].append(float(np.linalg.norm(winograd(x, w, m, gemm) - ref) / norm))
        mean = {k: float(np.mean(v)) for k, v in errors.items()}
        print(f"| {m} | {mean['direct']:.2e} | {mean['tf32']:.2e} | {mean['tf32_u_split']:.2e} | {mean['fp32']:.2e} "
              f"| {mean['tf32'] / mean['direct']:.2f} |")


if __name__ == "__main__":
    main()
