"""A cache hit of the call path does no validation work: the first call of a signature validates, builds the
ConvProblem, parses the config and prepares the launch; the next calls only launch (counted here, on CPU
tensors "on device 0" with the launches recorded: tests/fake_gpu.py). Also: prepared filters follow the weight's
version counter, a new signature is a new miss, and the launches carry the call's own pointers and stream."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fake_gpu import install_fake_gpu  # noqa: E402

from convtune.ops import conv2d, resolver  # noqa: E402
from convtune.problem import ConvProblem  # noqa: E402

DIRECT = ("direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 thread_k=8 stages=2 vec=1 "
          "splits=1")
UNFUSED = "winograd_unfused.fwd m=4 tile_k=64 tile_t=128 chunk_c=8 thread_k=8 thread_t=8 stages=3"


@pytest.fixture
def rec(monkeypatch):
    recorder = install_fake_gpu(monkeypatch)
    yield recorder
    resolver.set_lookup(None)
    conv2d.clear_caches()


@pytest.fixture
def counts(monkeypatch):
    """Calls of the slow path's steps: validation, ConvProblem construction, config parsing, preparing."""
    seen = {"validate": 0, "problem": 0, "parse": 0, "prepare": 0, "geometry": 0}

    def counting(module, name, key):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            seen[key] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    from convtune.ops.torch import dense

    counting(conv2d, "_validate", "validate")
    counting(conv2d, "parse_config_key", "parse")
    counting(conv2d, "prepare_plan", "prepare")
    counting(dense, "conv2d_geometry", "geometry")
    real_post_init = ConvProblem.__post_init__

    def post_init(self):
        seen["problem"] += 1
        real_post_init(self)

    monkeypatch.setattr(ConvProblem, "__post_init__", post_init)
    return seen


def test_plain_conv2d_hits_do_no_validation_work(rec, counts) -> None:
    x = torch.randn(2, 16, 14, 13)
    w = torch.randn(24, 16, 3, 3)
    outs = [conv2d.conv2d(x, w, padding=1, config=DIRECT) for _ in range(10)]
    assert counts == {"validate": 1, "problem": 1, "parse": 1, "prepare": 1, "geometry": 0}
    launches = rec.launches()
    assert [c.name for c in launches] == ["direct_pack_weights"] + ["direct_fwd"] * 10  # filters packed once
    packed = launches[0].pointers[1]
    for call, y in zip(launches[1:], outs, strict=True):
        assert call.pointers == (x.data_ptr(), packed, y.data_ptr()) and call.stream == 0x5EED
        assert y.shape == (2, 24, 14, 13) and y.dtype == torch.float32
    conv2d.conv2d(torch.randn(2, 16, 14, 13), w, padding=1, config=DIRECT)   # same signature, other data: a hit
    assert counts["prepare"] == 1 and rec.launches()[-1].name == "direct_fwd"
    conv2d.conv2d(x[:1], w, padding=1, config=DIRECT)                          # a new shape: a new miss
    assert counts["prepare"] == 2 and counts["validate"] == 2


def test_filters_follow_the_weights_version(rec, counts) -> None:
    x, w = torch.randn(1, 8, 10, 10), torch.randn(8, 8, 3, 3)
    for _ in range(3):
        conv2d.conv2d(x, w, padding=1, config=UNFUSED)
    names = [c.name for c in rec.launches()]
    assert names.count("winograd_filter") == 1 and names.count("winograd_gemm") == 3
    w.mul_(2.0)                                         # in place: the version counter moves, U is made again
    conv2d.conv2d(x, w, padding=1, config=UNFUSED)
    assert [c.name for c in rec.launches()].count("winograd_filter") == 2
    assert counts["prepare"] == 1                       # the launch itself stays prepared
    del w
    import gc

    gc.collect()
    assert conv2d.filter_cache_size() == 0                 # a dead weight takes its filters with it


def test_the_unfused_path_reuses_its_streams_workspace_per_thread(rec, monkeypatch) -> None:
    """V and M live in a workspace kept per (device, stream, thread): calls of one thread on one stream reuse it
    (their kernels run in order), another thread or stream gets its own, a capture allocates a fresh one."""
    import threading

    x, w = torch.randn(1, 8, 10, 10), torch.randn(8, 8, 3, 3)

    def workspace_of_last_call() -> int:
        gemm = [c for c in rec.launches() if c.name == "winograd_gemm"][-1]
        inp = [c for c in rec.launches() if c.name == "winograd_input"][-1]
        assert gemm.pointers[1] == inp.pointers[1]      # V: where the input transform wrote it
        return inp.pointers[1]

    conv2d.conv2d(x, w, padding=1, config=UNFUSED)
    first = workspace_of_last_call()
    conv2d.conv2d(torch.randn(1, 8, 10, 10), w, padding=1, config=UNFUSED)
    assert workspace_of_last_call() == first            # the same thread and stream: reused, no allocation
    other: list[int] = []
    thread = threading.Thread(target=lambda: (conv2d.conv2d(x, w, padding=1, config=UNFUSED),
                                              other.append(workspace_of_last_call())))
    thread.start()
    thread.join()
    assert other and other[0] != first                  # another thread: its own
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    kept = conv2d._torch_workspaces.copy()
    conv2d.conv2d(x, w, padding=1, config=UNFUSED)
    assert conv2d._torch_workspaces == kept             # a capture allocates from the graph's pool, keeps nothing
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    conv2d.clear_caches()
    assert not conv2d._torch_workspaces


def test_torch_conv2d_eager_hits_skip_the_dispatcher_and_validation(rec, counts, monkeypatch) -> None:
    import convtune.ops.torch as ct
    from convtune.ops.torch import dense

    def refuse(*args, **kwargs):
        raise AssertionError("the custom op was dispatched in plain eager mode")

    monkeypatch.setattr(dense, "_conv2d_op", refuse)
    x, w, b = torch.randn(2, 16, 14, 13), torch.randn(24, 16, 3, 3), torch.randn(24)
    ct.conv2d(x, w, b, padding=1)     # the first call prepares (the filters' transform or packing: its own launch)
    launches = sum(c.kind == "launch" for c in rec.calls)
    for _ in range(4):
        y = ct.conv2d(x, w, b, padding=1)
    assert counts["geometry"] == 1 and counts["validate"] == 1 and counts["prepare"] == 1
    assert counts["problem"] == 1 and y.shape == (2, 24, 14, 13)
    assert sum(c.kind == "launch" for c in rec.calls) == launches + 4     # a hit: the one kernel launch


def test_torch_conv2d_forgets_its_runners_when_the_caches_clear(rec, counts) -> None:
    """A resolver/ops clear (e.g. a newly tuned config) reaches convtune.ops.torch.conv2d's per-signature runners."""
    import convtune.ops.torch as ct

    x, w = torch.randn(1, 8, 9, 9), torch.randn(8, 8, 3, 3)
    ct.conv2d(x, w, None, padding=1)
    ct.conv2d(x, w, None, padding=1)
    assert counts["prepare"] == 1
    conv2d.clear_caches()
    ct.conv2d(x, w, None, padding=1)
    assert counts["prepare"] == 2 and counts["geometry"] == 2


def test_depthwise_hits_do_no_validation_work(rec, counts, monkeypatch) -> None:
    import convtune.ops.torch as ct
    from convtune.ops.torch import depthwise as dw

    def refuse(*args, **kwargs):
        raise AssertionError("the custom op was dispatched in plain eager mode")

    for op in ("_dw2d_fwd_op", "_dw1d_fwd_op"):
        monkeypatch.setattr(dw, op, refuse)
    x2, w2 = torch.randn(2, 8, 15, 17), torch.randn(8, 1, 3, 3)
    x1, w1 = torch.randn(4, 8, 48), torch.randn(8, 7)
    for _ in range(6):
        ct.depthwise_conv2d(x2, w2, padding=1)
        ct.depthwise_conv1d(x1, w1)
    assert counts["problem"] == 2   # one ConvProblem per signature, none on the hits
    launches = rec.launches()
    assert len(launches) == 12
    one_d = [c for c in launches if c.name.startswith("dw1d")]
    assert len({c.pointers[1] for c in one_d}) == 1      # w.flip(-1) made once for a weight without grad


def test_depthwise_2d_backward_is_one_chained_call(rec, counts) -> None:
    """Both gradients of a 2-D depthwise call: one chained launch of the input- and weight-gradient kernels on
    the saved x and w and the incoming dy, the gradients autograd hands back being the launches' outputs; hits
    build nothing."""
    import convtune.ops.torch as ct
    from convtune.ops.torch import depthwise as dw_ops

    x = torch.randn(2, 8, 15, 17, requires_grad=True)
    w = torch.randn(8, 1, 3, 3, requires_grad=True)
    for i in range(3):
        if i == 1:
            built = dict(counts)
        rec.calls.clear()
        y = ct.depthwise_conv2d(x, w, padding=1)
        dy = torch.randn_like(y)
        dx, dw = torch.autograd.grad(y, (x, w), dy)
        names = [c.name for c in rec.launches()]
        assert names[0].startswith("dw2d") and "dw2d_dgrad" in names and "dw2d_wgrad" in names
        dgrad = next(c for c in rec.launches() if c.name == "dw2d_dgrad")
        wgrad = next(c for c in rec.launches() if c.name == "dw2d_wgrad")
        assert dgrad.pointers == (dy.data_ptr(), w.data_ptr(), dx.data_ptr())
        assert wgrad.pointers[:2] == (x.data_ptr(), dy.data_ptr())
        writes_dw = [c for c in rec.calls if dw.data_ptr() in c.pointers]
        assert writes_dw and writes_dw[-1].pointers[-1] == dw.data_ptr()   # the last step writes dw
        assert dx.shape == x.shape and dw.shape == w.shape
    chained = [run for key, run in dw_ops._runners.items() if key[0] == "bwd2"]
    assert len(chained) == 1 and chained[0] is not None
    assert counts == built   # hits build nothing


def test_op_implementations_take_any_strides(rec) -> None:
    """A compiled graph may hand an op other strides than the wrapper's contiguous ones: the implementations
    launch on a contiguous copy, never on the strided memory."""
    from convtune.ops.torch import dense
    from convtune.ops.torch import depthwise as dw

    x = torch.randn(2, 16, 14, 13).to(memory_format=torch.channels_last)
    w = torch.randn(24, 16, 3, 3)
    y = dense._conv2d_impl(x, w, None, 1, 1, 1, 1, 1, 1)
    main = [c for c in rec.launches() if c.name != "direct_pack_weights"][-1]
    assert y.shape == (2, 24, 14, 13) and main.pointers[0] != x.data_ptr()
    x2 = torch.randn(2, 15, 17, 8).permute(0, 3, 1, 2)          # (2, 8, 15, 17), not contiguous
    dw._dw2d_fwd_impl(x2, torch.randn(8, 1, 3, 3), 1, 1, 1, 1)
    assert rec.launches()[-1].pointers[0] != x2.data_ptr()
