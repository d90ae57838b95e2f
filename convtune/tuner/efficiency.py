"""How close a result is to the physical limit: the bound's floor times and efficiency per family.

Per variant of a family's algorithm (docs/bounds.md §11), on one ceiling set (compute peak, DRAM bandwidth):

- **compute** = FLOPs / the precision class's compute ceiling (:func:`compute_ceiling`: the fp32 peak for strict
  float32 problems; the TF32 tensor-core peak for ``math="tf32"`` problems, since any family may serve them).
  Direct FLOPs count only MACs that read real input (padding taps are free);
  Winograd FLOPs are its α² multiplications per tile and channel pair, per F(m);
- **memory (DRAM)** = the variant's I/O lower bound at S = the L2 capacity + every SM's fast memory (all that
  sits above DRAM), bytes / DRAM (copy) bandwidth;
- **memory (on-chip)** = the P-SM lower bound (P = ``sm_count`` SMs with S = one SM's shared memory + registers
  each: :mod:`convtune.bounds.parallel`), bytes / ``l2_bandwidth_bytes_per_s`` (an optimistic figure);
- **launch** = ``machine.launch_floor_s`` (0 where nothing was measured).

floor = max of the four; ``binding`` names the largest. The DRAM floor = max(compute, memory (DRAM)) (the floor
before the on-chip and launch terms), the on-chip floor = max(compute, memory (on-chip)). Every row carries the
floor on the machine's ceilings (measured where ``ceilings_source`` says so) and, separately, on the datasheet
peaks (``datasheet_*``); efficiency = floor / measured ≤ 1 for both.
"""

from __future__ import annotations

from typing import Any

from convtune.bounds.parallel import direct_partition_term_words
from convtune.kernels.registry import KernelSpec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

#: The terms a floor can be bound by, in tie-break order.
BINDINGS = ("compute", "memory (DRAM)", "memory (on-chip)", "launch")
#: Algorithms whose CDAG is the direct MAC CDAG: the P-SM partition term applies (§11.2).
PARTITION_ALGORITHMS = ("direct", "depthwise")


#: Dense TF32 tensor-core peak : fp32 FMA peak assumed where a machine knows neither its measured nor its datasheet
#: TF32 figure: 8 (A100 156 : 19.5 = 8.0, H100 SXM 494.7 : 66.9 = 7.4). A higher ceiling gives a lower floor, so
#: the larger ratio keeps the floor a floor.
TF32_PER_FP32_FALLBACK = 8.0
#: Dense BF16/FP16 : TF32 tensor-core peak where a machine has no measured bf16 figure (datasheets: 2).
BF16_PER_TF32 = 2.0


def compute_ceiling(machine: MachineModel, precision: str = "float32") -> float:
    """FLOP/s no kernel of ``precision``'s class beats on ``machine``: the fp32 peak for float32; for tf32 the TF32
    peak, else its datasheet figure, else :data:`TF32_PER_FP32_FALLBACK` × the fp32 peak; for bfloat16 and float16
    (tensor-core families run them) the measured bf16 peak, else twice the TF32 ceiling (the datasheets' dense
    ratio: H100/H200 989 : 495, A100 312 : 156). fp16's peak is bf16's on these GPUs; the larger keeps a floor."""
    fp32 = machine.peak_flops_per_s("fp32")
    if precision == "float32":
        return fp32
    tf32 = next((peak for peak in (machine.peak_flops_per_s("tf32"), machine.datasheet_tf32_flops_per_s) if peak > 0),
                TF32_PER_FP32_FALLBACK * fp32)
    if precision == "tf32":
        return tf32
    return machine.peak_flops_per_s("bf16") or BF16_PER_TF32 * tf32


def floor_terms(flops: float, dram_bytes: float, onchip_bytes: float, machine: MachineModel,
                precision: str = "float32") -> dict[str, Any]:
    """The four floor terms (seconds) on ``machine``'s ceilings (compute: ``precision``'s), their max and what binds."""
    terms = {"compute": flops / compute_ceiling(machine, precision),
             "memory (DRAM)": dram_bytes / machine.copy_bandwidth_bytes_per_s,
             "memory (on-chip)": onchip_bytes / machine.l2_bandwidth_bytes_per_s
             if machine.l2_bandwidth_bytes_per_s > 0 else 0.0,
             "launch": machine.launch_floor_s}
    binding = max(BINDINGS, key=lambda k: terms[k])   # max keeps the first of equal terms
    return {"floor_s": terms[binding], "binding": binding, "terms_s": terms,
            "dram_floor_s": max(terms["compute"], terms["memory (DRAM)"]),
            "onchip_floor_s": max(terms["compute"], terms["memory (on-chip)"])}


def floors(problem: ConvProblem, machine: MachineModel, spec: KernelSpec) -> list[dict[str, Any]]:
    """Per variant of ``spec``'s algorithm: FLOPs, the bound bytes of both levels and every floor.

    Keys: ``variant``, ``flops``, ``bound_bytes`` (DRAM level, S = L2 + every SM's fast memory),
    ``onchip_bound_bytes``, ``floor_s``
    (max of the four terms on the machine's ceilings), ``binding`` (one of :data:`BINDINGS`), ``launch_bound``,
    ``compute_s``, ``dram_memory_s``, ``onchip_memory_s``, ``dram_floor_s``, ``onchip_floor_s``, ``launch_floor_s``,
    ``ceilings_source``; and on the datasheet peaks ``datasheet_floor_s``, ``datasheet_binding``,
    ``datasheet_dram_floor_s``, ``datasheet_source`` (the datasheet keys equal the measured ones' when the machine
    has no datasheet figures).
    """
    word = problem.itemsize_bytes
    s_sm = machine.fast_memory_words("sm", word_bytes=word)
    processors = max(1, machine.sm_count)
    # DRAM level: everything above DRAM together — L2 plus every SM's registers and shared memory — is at most this
    # many words, so one fast memory of that size can replay any schedule (§11.2): the bound there is sound
    s_l2 = machine.fast_memory_words("l2", word_bytes=word) + processors * s_sm
    # simulation form: P SMs with S words each are simulated by one fast memory of P·S words (§11.2)
    onchip = {v: w for v, _, w in spec.floor_work(problem, s_sm * processors)}
    partition = direct_partition_term_words(problem, s_sm, processors) \
        if spec.algorithm in PARTITION_ALGORITHMS else 0.0
    sheet = machine.datasheet()
    out: list[dict[str, Any]] = []
    for variant, flops, words in spec.floor_work(problem, s_l2):
        dram_bytes = words * word
        onchip_bytes = max(onchip.get(variant, 0.0), partition) * word
        m = floor_terms(flops, dram_bytes, onchip_bytes, machine, problem.precision)
        d = floor_terms(flops, dram_bytes, onchip_bytes, sheet, problem.precision)
        out.append({"variant": variant, "flops": flops, "bound_bytes": dram_bytes, "onchip_bound_bytes": onchip_bytes,
                    "floor_s": m["floor_s"], "binding": m["binding"], "launch_bound": m["binding"] == "launch",
                    "compute_s": m["terms_s"]["compute"], "dram_memory_s": m["terms_s"]["memory (DRAM)"],
                    "onchip_memory_s": m["terms_s"]["memory (on-chip)"], "dram_floor_s": m["dram_floor_s"],
                    "onchip_floor_s": m["onchip_floor_s"], "launch_floor_s": machine.launch_floor_s,
                    "ceilings_source": machine.ceilings_source,
                    "datasheet_floor_s": d["floor_s"], "datasheet_binding": d["binding"],
                    "datasheet_dram_floor_s": d["dram_floor_s"], "datasheet_source": sheet.ceilings_source})
    return out


def best_floor(problem: ConvProblem, machine: MachineModel, spec: KernelSpec) -> dict[str, Any]:
    """The :func:`floors` row of ``spec``'s best variant (lowest ``floor_s``)."""
    return min(floors(problem, machine, spec), key=lambda f: f["floor_s"])


def floor_time_s(problem: ConvProblem, machine: MachineModel, spec: KernelSpec) -> float:
    """The floor of ``spec``'s algorithm for ``problem`` on ``machine``'s ceilings (its best variant; the max of the
    compute, DRAM, on-chip and launch terms), in seconds."""
    return float(best_floor(problem, machine, spec)["floor_s"])


def efficiency(floor_s: float, measured_s: float) -> float:
    return floor_s / measured_s if measured_s > 0 else 0.0


def family_choice(problem: ConvProblem, machine: MachineModel) -> dict[str, Any]:
    """Which algorithm the bound favours for ``problem`` and why: every variant's floor side by side.

    Returns ``{"favoured": algorithm, "variant": its best variant, "reason": text, "floors": [{"algorithm",
    "variant", "flops", "bound_bytes", "onchip_bound_bytes", "floor_ms", "binding", "launch_bound", "dram_floor_ms",
    "onchip_floor_ms", "launch_floor_ms", "datasheet_floor_ms", "datasheet_binding"}, ...]}`` with the floors
    fastest first; each algorithm (direct, winograd) appears once per variant even when several kernel families
    implement it.
    """
    from convtune.kernels.registry import specs_for

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for spec in specs_for(problem):
        for f in floors(problem, machine, spec):
            rows.setdefault((spec.algorithm, str(f["variant"])), {
                "algorithm": spec.algorithm, "variant": f["variant"], "flops": f["flops"],
                "bound_bytes": f["bound_bytes"], "onchip_bound_bytes": f["onchip_bound_bytes"],
                "floor_ms": float(f["floor_s"]) * 1e3, "binding": f["binding"], "launch_bound": f["launch_bound"],
                "dram_floor_ms": f["dram_floor_s"] * 1e3, "onchip_floor_ms": f["onchip_floor_s"] * 1e3,
                "launch_floor_ms": f["launch_floor_s"] * 1e3, "datasheet_floor_ms": f["datasheet_floor_s"] * 1e3,
                "datasheet_binding": f["datasheet_binding"]})
    # equal floors (launch-bound shapes): the lower floor without the launch term first
    ranked = sorted(rows.values(), key=lambda r: (r["floor_ms"], max(r["dram_floor_ms"], r["onchip_floor_ms"]),
                                                  r["algorithm"], r["variant"]))
    if not ranked:
        return {"favoured": None, "variant": None, "reason": "no registered family can run this problem", "floors": []}
    best = ranked[0]
    others = [r for r in ranked if r["algorithm"] != best["algorithm"]]
    reason = f"{best['variant']} floor {_describe(best)}"
    if others:
        reason += f" < {others[0]['variant']} floor {_describe(others[0])}"
    return {"favoured": best["algorithm"], "variant": best["variant"], "reason": reason, "floors": ranked}


def _describe(row: dict[str, Any]) -> str:
    binding = row["binding"]
    if binding == "compute":
        what = f"{row['flops'] / 1e9:.3g} GFLOP"
    elif binding == "memory (DRAM)":
        what = f"{row['bound_bytes'] / 1e6:.3g} MB"
    elif binding == "memory (on-chip)":
        what = f"{row['onchip_bound_bytes'] / 1e6:.3g} MB"
    else:
        what = "no kernel finishes faster than a launch"
    return f"{row['floor_ms'] * 1e3:.1f} µs ({binding}-bound: {what})"
