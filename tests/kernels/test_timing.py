"""The timing protocol on a recording stand-in for CuPy (no GPU): what is enqueued, in which order, and when the
operands rotate or L2 is flushed (docs/design.md, "Measurement protocol")."""

from __future__ import annotations

from typing import Any

import pytest

from convtune.kernels import timing
from convtune.kernels.timing import L2Flusher, Rotation, rotation, rotation_sets, time_launches

L2 = 60 << 20


class _Event:
    def __init__(self, log: list[str], clock: list[float]) -> None:
        self.log, self.clock, self.t = log, clock, 0.0

    def record(self) -> None:
        self.clock[0] += 1.0
        self.t = self.clock[0]
        self.log.append("event")

    def synchronize(self) -> None:
        pass


class _FakeCupy:
    """Enough of CuPy for :func:`time_launches` and :class:`L2Flusher`: events log their order and read a clock
    that each enqueued step advances; ``empty(...).fill`` logs a flush."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.clock = [0.0]
        log, clock = self.log, self.clock

        class cuda:
            @staticmethod
            def Event() -> _Event:
                return _Event(log, clock)

            @staticmethod
            def get_elapsed_time(a: _Event, b: _Event) -> float:
                return b.t - a.t

        self.cuda = cuda

    def int64(self, v: int) -> int:
        return v

    def empty(self, nbytes: int, dtype: str) -> Any:
        log = self.log

        class _Scratch:
            size = nbytes

            def fill(self, value: int) -> None:
                log.append(f"flush {nbytes}")

        return _Scratch()


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> _FakeCupy:
    fake = _FakeCupy()
    monkeypatch.setattr(timing, "cupy_module", lambda: fake)
    monkeypatch.setattr(timing, "_spin_kernel", lambda: (lambda grid, block, args: fake.log.append("spin")))
    return fake


def test_a_flush_runs_before_the_spin_of_every_timed_launch_never_inside_the_events(fake_cupy: _FakeCupy) -> None:
    flusher = L2Flusher(L2)
    sets_seen: list[int] = []

    def launch(i: int) -> None:
        sets_seen.append(i)
        fake_cupy.log.append(f"launch {i}")

    t = time_launches(launch, sets=3, warmup=2, reps=4, flush=flusher)
    timed = fake_cupy.log[2:]  # after the two warm-up launches
    assert fake_cupy.log[:2] == ["launch 0", "launch 1"]
    assert timed == [step for i in range(4) for step in (f"flush {2 * L2}", "spin", "event", f"launch {i % 3}",
                                                          "event")]
    assert sets_seen[2:] == [0, 1, 2, 0] and t.flushed and t.sets == 3 and t.reps == 4


def test_without_a_flush_nothing_but_spin_events_and_the_launch_is_enqueued(fake_cupy: _FakeCupy) -> None:
    t = time_launches(lambda i: fake_cupy.log.append("launch"), sets=1, warmup=0, reps=2)
    assert fake_cupy.log == ["spin", "event", "launch", "event"] * 2 and not t.flushed


def test_the_flusher_allocates_its_scratch_once(fake_cupy: _FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    allocations = []
    real_empty = fake_cupy.empty
    monkeypatch.setattr(fake_cupy, "empty", lambda nbytes, dtype: allocations.append(nbytes) or real_empty(nbytes,
                                                                                                             dtype))
    flusher = L2Flusher(L2)
    flusher()
    flusher()
    assert allocations == [2 * L2] and fake_cupy.log == [f"flush {2 * L2}"] * 2


@pytest.mark.parametrize(("bytes_per_set", "expected"), [
    (0, Rotation(sets=1, flush=False)),
    (1 << 20, Rotation(sets=16, flush=True)),             # 16 MiB in all < 120 MiB: rotation alone cannot do it
    (8 << 20, Rotation(sets=15, flush=False)),            # 15 × 8 MiB = 120 MiB = 2 × L2
    (7 << 20, Rotation(sets=16, flush=True)),             # 16 × 7 MiB = 112 MiB < 120 MiB
    (40 << 20, Rotation(sets=3, flush=False)),
    (1 << 30, Rotation(sets=1, flush=False)),             # one set is far larger than L2 already
])
def test_rotation_reaches_twice_the_l2_by_sets_or_by_a_flush(bytes_per_set: int, expected: Rotation) -> None:
    got = rotation(bytes_per_set, L2)
    assert got == expected and got.sets == rotation_sets(bytes_per_set, L2)
    if bytes_per_set:
        assert got.flush or got.sets * bytes_per_set >= 2 * L2
