"""The operator API ``convtune.conv2d(..., algorithm=...)`` on the GPU: every algorithm against float64,
the Winograd filter cache (hit, and invalidated by an in-place weight update), and algorithm errors."""

from __future__ import annotations

import pytest

from convtune.errors import InvalidInput

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("algorithm", ["auto", "direct", "winograd"])
def test_conv2d_algorithms_match_float64(algorithm: str) -> None:
    import cupy as cp

    import convtune
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    rng = cp.random.default_rng(5)
    x = rng.standard_normal((3, 21, 27, 25), dtype=cp.float32)
    w = rng.standard_normal((35, 21, 3, 3), dtype=cp.float32)
    ref = conv2d_reference_gpu(x, w, padding=(1, 1))
    y = convtune.conv2d(x, w, padding=1, algorithm=algorithm)
    assert relative_error(y, ref) <= 1e-4


def test_winograd_filter_cache_follows_torch_in_place_updates() -> None:
    import cupy as cp

    torch = pytest.importorskip("torch")
    import convtune
    from convtune.kernels.reference import relative_error
    from convtune.ops import conv2d

    conv2d.clear_filter_cache()
    x = torch.randn(2, 16, 20, 20, device="cuda")
    w = torch.randn(24, 16, 3, 3, device="cuda")
    first = convtune.conv2d(x, w, padding=1, algorithm="winograd")
    assert conv2d.filter_cache_size() == 1
    cached = next(iter(conv2d._torch_filters.values()))[3]
    again = convtune.conv2d(x, w, padding=1, algorithm="winograd")
    assert conv2d.filter_cache_size() == 1                      # a hit: U was not recomputed
    assert next(iter(conv2d._torch_filters.values()))[3] is cached
    assert torch.equal(first, again)
    w.mul_(-2.0)                                           # in place: the version counter moves
    changed = convtune.conv2d(x, w, padding=1, algorithm="winograd")
    expected = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    assert relative_error(cp.from_dlpack(changed.double().contiguous()), cp.from_dlpack(expected)) <= 1e-4
    assert next(iter(conv2d._torch_filters.values()))[3] is not cached


def test_winograd_rejects_a_strided_problem() -> None:
    import cupy as cp

    import convtune

    x = cp.ones((1, 4, 9, 9), dtype=cp.float32)
    w = cp.ones((4, 4, 3, 3), dtype=cp.float32)
    with pytest.raises(InvalidInput, match="algorithm"):
        convtune.conv2d(x, w, stride=2, algorithm="winograd")
    with pytest.raises(InvalidInput, match="algorithm"):
        convtune.conv2d(x, w, algorithm="fft")
