"""Request and response models of the API (pydantic v2), with the examples the OpenAPI schema shows.

A problem in a request is a JSON object, either ``{"key": "N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1"}`` or the
fields of ``benchmarks/suites/public.json`` (``{"N": 1, "C": 64, ..., "pad": 1}``, or ``{"B": .., "C": ..,
"L": .., "K": ..}`` for a causal 1-D depthwise problem). Its schema is declared here; the validation is
ConvProblem's own (:func:`convtune.api.problems.to_problem`), so a bad field is a 422 naming it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from convtune.problem import ITEMSIZE_BYTES, LAYOUTS, MATH_MODES, PRECISION_CLASSES
from convtune.vocabulary import BACKENDS, BATCH_STATUSES, JOB_STATUSES

Dtype = Literal["float32", "float16", "bfloat16"]
Math = Literal["ieee", "tf32"]
_REQUEST_MATH = ("arithmetic of float32 problems: ieee (strict) or tf32 (TF32 tensor cores); overrides the "
                 "problem's default (ieee), conflicts with an explicit one; a preset's dense (groups = 1) layers take "
                 "it, its depthwise layers stay strict (convtune.torch runs them strict)")
if TYPE_CHECKING:  # the type checker sees the stored words as str; pydantic validates against the tuples
    Backend = str
    JobStatus = str
    BatchStatus = str
    Precision = str
else:
    Backend = Literal[BACKENDS]
    JobStatus = Literal[JOB_STATUSES]
    BatchStatus = Literal[BATCH_STATUSES]
    Precision = Literal[PRECISION_CLASSES]
WINDOW_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]):[0-5][0-9]$"
#: printable ASCII only: device names are compared in SQL (PostgreSQL rejects NUL in strings)
PRINTABLE = r"^[ -~]+$"
#: no control characters (NUL included) in free text stored in the database
NO_CONTROL = r"^[^\x00-\x1f\x7f]+$"
MAX_BUDGET_TRIALS = 100_000
MAX_BUDGET_S = 7 * 86_400.0
MAX_BATCH_PROBLEMS = 1_000

EXAMPLE_KEY = "N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1"

_DIM: dict[str, Any] = {"type": "integer", "minimum": 1}
_NONNEG: dict[str, Any] = {"type": "integer", "minimum": 0}
_DTYPE: dict[str, Any] = {"type": "string", "enum": sorted(ITEMSIZE_BYTES)}
_NAME: dict[str, Any] = {"type": "string", "maxLength": 128, "description": "ignored (a label, as in suite files)"}
_MATH: dict[str, Any] = {
    "type": "string", "enum": list(MATH_MODES), "default": "ieee",
    "description": "the arithmetic of a float32 problem: ieee (strict fp32 FMAs, the default; PyTorch's "
                   "allow_tf32=False) or tf32 (tensor-core products of operands rounded to TF32, fp32 accumulation; "
                   "PyTorch's default for convolutions). tf32 needs dtype float32; 16-bit problems take ieee only "
                   "(their precision class is their dtype)"}
PROBLEM_JSON_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "A convolution: its canonical key, the fields of a 2-D convolution (PyTorch conventions, "
                   "NCHW; `stride`, `pad`, `dilation` set both axes), or B, C, L, K of a causal 1-D depthwise "
                   "convolution. Its precision class (float32, tf32, bfloat16, float16) is `dtype` and `math`: "
                   "`\"math\": \"tf32\"` (or the token `math=tf32` in a key) asks for TF32 tensor-core arithmetic "
                   "of a float32 problem; without it a problem is strict (`ieee`). A tf32 problem is answered with "
                   "the fastest config measured for it or for its strict float32 twin (a strict config is valid for "
                   "tf32); a strict problem is never answered with a tf32 config.",
    "anyOf": [
        {"title": "ProblemKey", "type": "object", "additionalProperties": False, "required": ["key"],
         "properties": {"key": {"type": "string", "minLength": 1, "maxLength": 512, "examples": [EXAMPLE_KEY]}}},
        {"title": "Conv2dFields", "type": "object", "additionalProperties": False,
         "required": ["N", "C", "H", "W", "K", "R", "S"],
         "properties": {**{name: _DIM for name in ("N", "C", "H", "W", "K", "R", "S", "stride", "stride_h",
                                                   "stride_w", "dilation", "dil_h", "dil_w", "groups")},
                        **{name: _NONNEG for name in ("pad", "padding", "pad_h", "pad_w")},
                        "dtype": _DTYPE, "math": _MATH, "layout": {"type": "string", "enum": list(LAYOUTS)},
                        "causal": {"type": "boolean"}, "name": _NAME}},
        {"title": "Causal1dFields", "type": "object", "additionalProperties": False,
         "required": ["B", "C", "L", "K"],
         "properties": {**{name: _DIM for name in ("B", "C", "L", "K", "dilation")}, "dtype": _DTYPE,
                        "math": {"type": "string", "enum": ["ieee"], "description": "ieee only: no tensor-core "
                                                                                    "family runs depthwise problems"},
                        "causal": {"type": "boolean", "enum": [True]}, "name": _NAME}},
    ],
    "examples": [{"key": EXAMPLE_KEY},
                 {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "stride": 1, "pad": 1},
                 {"N": 32, "C": 256, "H": 14, "W": 14, "K": 256, "R": 3, "S": 3, "pad": 1, "math": "tf32"},
                 {"B": 16384, "C": 128, "L": 48, "K": 48}],
}
ProblemSpec = Annotated[dict[str, Any], WithJsonSchema(PROBLEM_JSON_SCHEMA)]


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of the representable range once converted to UTC") from None


# ---- requests --------------------------------------------------------------------------------------------
class TuneRequest(BaseModel):
    """POST /v1/tune: the best configuration of a problem, or a queued tuning job and a provisional answer."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"problem": {"key": EXAMPLE_KEY}, "device": "h200"},
        {"problem": {"N": 32, "C": 256, "H": 14, "W": 14, "K": 256, "R": 3, "S": 3, "pad": 1}, "dtype": "float32"},
    ]})

    problem: ProblemSpec
    dtype: Dtype | None = Field(None, description="element type; overrides the problem's (default float32)")
    math: Math | None = Field(None, description=_REQUEST_MATH)
    device: str | None = Field(None, min_length=1, max_length=64, pattern=PRINTABLE,
                               description="a machine preset (h200, h100, a100, v100, p100) or a stored device "
                                           "name; default: any device, predictions for the server's default")


class _JobOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dtype: Dtype | None = None
    math: Math | None = Field(None, description=_REQUEST_MATH)
    backend: Backend | None = Field(None, description="default: the server's backend")
    families: list[Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z0-9_]+$")]] | None = Field(
        None, min_length=1, max_length=8, description="kernel families to search (default: all that apply)")
    budget_trials: int | None = Field(None, ge=1, le=MAX_BUDGET_TRIALS)
    budget_s: float | None = Field(None, gt=0, le=MAX_BUDGET_S)
    not_before: AwareDatetime | None = Field(None, description="do not start before this time (ISO 8601 with "
                                                               "offset)")
    window: str | None = Field(None, pattern=WINDOW_PATTERN, examples=["22:00-06:00"],
                               description="run only between these times of day (in `timezone`); may wrap midnight")
    timezone: str | None = Field(None, min_length=1, max_length=64, examples=["Europe/Berlin"],
                                 description="IANA time zone the window is read in; default: the server's "
                                             "(GET /healthz names it)")

    @field_validator("not_before")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    @field_validator("timezone")
    @classmethod
    def _iana(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC')") from None
        return value


class JobCreate(_JobOptions):
    """POST /v1/jobs: queue one tuning job."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"problem": {"key": EXAMPLE_KEY}, "budget_trials": 100, "budget_s": 120},
        {"problem": {"key": EXAMPLE_KEY}, "window": "22:00-06:00", "not_before": "2026-12-01T20:00:00+00:00"},
    ]})

    problem: ProblemSpec
    device: str | None = Field(None, min_length=1, max_length=64, pattern=PRINTABLE,
                               description="run on devices of this name only (a preset or a stored device name); "
                                           "default: any device")


class BatchCreate(_JobOptions):
    """POST /v1/batches: one job per problem (or per layer of a preset network)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"preset": "resnet18", "window": "22:00-06:00", "budget_trials": 200},
        {"problems": [{"key": EXAMPLE_KEY}, {"B": 16384, "C": 128, "L": 48, "K": 48}], "name": "mixed"},
    ]})

    problems: list[ProblemSpec] | None = Field(None, min_length=1, max_length=MAX_BATCH_PROBLEMS)
    device: str | None = Field(None, min_length=1, max_length=64, pattern=PRINTABLE,
                               description="run every job on devices of this name only (a preset or a stored "
                                           "device name); default: any device")
    preset: str | None = Field(None, min_length=1, max_length=64, pattern=PRINTABLE, examples=["resnet18"],
                               description="resnet18, resnet50, vgg16, mobilenet_v2, convnext_tiny or s4convd")
    batch_size: int | None = Field(None, ge=1, le=4096,
                                   description="batch size N of a preset's layers (default 1; s4convd: B=16384)")
    name: str | None = Field(None, min_length=1, max_length=128, pattern=NO_CONTROL)

    @field_validator("name")
    @classmethod
    def _utf8(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("is not valid Unicode text (a lone surrogate)") from None
        return value


# ---- responses -------------------------------------------------------------------------------------------
_PRECISION_DESCRIPTION = ("the precision class: float32 (strict fp32), tf32 (TF32 tensor cores, fp32 accumulation), "
                          "bfloat16 or float16 (16-bit storage, fp32 accumulation); null for a key that no longer "
                          "parses")


class ProblemRef(BaseModel):
    id: int
    key: str
    precision: Precision | None = Field(None, description=_PRECISION_DESCRIPTION)


class ConfigOut(BaseModel):
    key: str = Field(examples=["direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 thread_k=8 "
                               "stages=2 vec=1 splits=1"])
    kind: str = Field(examples=["direct.fwd"])
    params: dict[str, Any]


class OtherBestOut(BaseModel):
    """A best row shown beside the answer of GET /v1/configs/best (another backend or device)."""

    device: str
    scope: str
    config: str = Field(description="the config key")
    time_ms: float
    floor_ms: float
    efficiency: float
    provisional: bool
    backend: str
    measured: bool
    run_id: int | None


class BestConfigOut(BaseModel):
    """A stored best configuration, with the figures docs/design.md asks for."""

    problem: ProblemRef
    device: str
    compute_capability: str
    scope: str = Field(description="a family name, or '*' for the overall best")
    config: ConfigOut
    time_ms: float
    tflops: float | None
    gbps: float | None = Field(description="compulsory bytes / time, in GB/s")
    floor_ms: float = Field(description="the I/O lower bound's floor time on this device")
    efficiency: float = Field(description="floor_ms / time_ms")
    provisional: bool = Field(description="model-predicted, not measured")
    backend: str = Field("gpu", description="what measured it: gpu (a GPU of this device name), replay (a "
                                            "recorded timing table), model (the analytic model)")
    measured: bool = Field(False, description="true only for a row measured on a GPU of this device name (backend "
                                              "gpu, not provisional); replayed and predicted rows are false")
    run_id: int | None
    measurement_id: int | None
    updated_at: datetime
    others: list[OtherBestOut] = Field(default_factory=list, description=(
        "the other backends' best rows of the same problem and scope (a replay or a model row beside a measured "
        "one), flagged by backend and measured; never the answer while a GPU row exists"))


class JobOut(BaseModel):
    """A tuning job and its progress."""

    id: int
    problem: ProblemRef
    device_name: str | None
    backend: str
    families: list[str] | None
    budget_trials: int
    budget_s: float
    status: JobStatus
    cancel_requested: bool
    batch_id: int | None
    not_before: datetime | None
    window: str | None
    timezone: str | None
    eligible: bool = Field(False, description="a queued job a worker may start now (past not_before, inside "
                                              "its window)")
    worker_id: str | None
    attempts: int
    trials_done: int
    best_time_ms: float | None
    floor_ms: float | None = Field(description="the bound's floor time (the job's device, else the default "
                                               "machine)")
    efficiency: float | None = Field(description="floor_ms / best_time_ms")
    tuning_run_id: int | None
    error: str | None
    stop_reason: str | None = Field(None, description="why an ended job stopped: budget_s (search time, after "
                                                      "pruning), budget_trials, exhausted, patience, floor, target, "
                                                      "no_survivors, stored, cancelled or error")
    created_at: datetime
    updated_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None


class FloorOut(BaseModel):
    algorithm: str = Field(description="direct or winograd")
    variant: str = Field(description="direct, or the Winograd tile F(m×m,3×3)")
    flops: float = Field(description="FLOPs the algorithm must execute (direct: non-padding MACs ×2; Winograd: "
                                     "α² multiplications per tile and channel pair ×2)")
    bound_bytes: float = Field(description="the algorithm's I/O lower bound at S = L2 + every SM's fast memory, bytes")
    floor_ms: float = Field(description="max(FLOPs / fp32 peak, bound bytes / copy bandwidth, on-chip bound bytes / "
                                        "L2→SM bandwidth, launch floor) on the device's ceilings (docs/bounds.md §11)")
    binding: str = Field(description="compute, memory (DRAM), memory (on-chip) or launch")
    launch_bound: bool = Field(False, description="the launch floor binds: no kernel finishes faster than a launch")
    onchip_bound_bytes: float | None = Field(None, description="the P-SM lower bound at one SM's fast memory, bytes")
    dram_floor_ms: float | None = Field(None, description="max(compute, DRAM) on the device's ceilings")
    onchip_floor_ms: float | None = Field(None, description="max(compute, on-chip) on the device's ceilings")
    launch_floor_ms: float | None = Field(None, description="the device's launch floor (0: none known)")
    datasheet_floor_ms: float | None = Field(None, description="the floor on the datasheet peaks (≤ floor_ms)")
    datasheet_binding: str | None = Field(None, description="what binds on the datasheet peaks")


class FamilyChoiceOut(BaseModel):
    """Which algorithm the I/O bound favours for the shape, with every floor side by side."""

    favoured: str | None
    variant: str | None
    reason: str
    floors: list[FloorOut]


class TuneResponse(BaseModel):
    """The answer of POST /v1/tune: measured (200), or provisional with a job (202)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "problem": {"id": 1, "key": EXAMPLE_KEY + " dtype=float32", "precision": "float32"}, "provisional": False,
        "predicted": False,
        "device": "NVIDIA H200",
        "config": {"key": "direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 thread_k=8 "
                          "stages=2 vec=1 splits=1", "kind": "direct.fwd", "params": {"tile_h": 4}},
        "time_ms": 0.031, "tflops": 7.46, "gbps": 105.2, "floor_ms": 0.0105, "efficiency": 0.34, "run_id": 3,
        "job_id": None, "job": None, "note": None}]})

    problem: ProblemRef
    provisional: bool = Field(description="true: nothing is measured yet; `config` is the model's prediction")
    predicted: bool = Field(description="true: the figures come from the analytic model, not a GPU")
    device: str | None
    config: ConfigOut | None
    time_ms: float | None
    tflops: float | None
    gbps: float | None
    floor_ms: float | None
    efficiency: float | None
    run_id: int | None
    job_id: int | None
    job: JobOut | None
    backend: str | None = Field(None, description="what the figures come from: gpu (measured on a GPU of this "
                                                  "device name), replay (a recorded table), model (the analytic "
                                                  "model)")
    measured: bool = Field(False, description="true only when the figures were measured on a GPU of this device "
                                              "name (backend gpu, not provisional)")
    prediction_complete: bool | None = Field(None, description="provisional answers: whether the model ranked "
                                                               "every configuration within the request's budget")
    note: str | None = None
    family_choice: FamilyChoiceOut | None = Field(
        None, description="the algorithm the bound favours and why; `config.kind` says which family won")


class ProblemOut(BaseModel):
    id: int
    key: str
    precision: Precision | None = Field(None, description=_PRECISION_DESCRIPTION)
    spec: dict[str, Any]
    flops: int
    compulsory_bytes: int
    created_at: datetime


class RunOut(BaseModel):
    id: int
    device: str
    backend: str
    families: list[str]
    sampler: str
    status: str
    stop_reason: str | None
    trials_done: int
    budget_trials: int | None
    budget_s: float | None = Field(description="seconds of search after pruning")
    pruning_s: float | None = Field(None, description="seconds pruning took (not charged to budget_s)")
    space_size: int | None
    stage_survivors: dict[str, Any]
    best_measurement_id: int | None
    started_at: datetime
    finished_at: datetime | None


class ProblemDetail(ProblemOut):
    best_configs: list[BestConfigOut]
    runs: list[RunOut]
    jobs: list[JobOut]
    measurements: int = Field(description="stored measurements of this problem (all devices and backends)")
    pruning_decisions: int = Field(description="stored pruning decisions of this problem")


class MeasurementOut(BaseModel):
    id: int
    device: str
    run_id: int | None
    backend: str
    predicted: bool
    status: str
    config: ConfigOut
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    min_ms: float | None
    tflops: float | None
    gbps: float | None
    rel_error: float | None
    num_regs: int | None
    smem_bytes: int | None
    local_bytes: int | None
    compile_s: float | None
    error: str | None
    created_at: datetime


class PruningDecisionOut(BaseModel):
    id: int
    run_id: int
    device: str
    config_key: str
    stage: str
    reason: str
    numbers: dict[str, Any]
    created_at: datetime


class TrialsPage(BaseModel):
    """One page of a problem's history: measurements and pruning decisions, oldest first."""

    problem: ProblemRef
    limit: int
    offset: int
    total_measurements: int
    total_pruning_decisions: int
    measurements: list[MeasurementOut]
    pruning_decisions: list[PruningDecisionOut]


class SkippedProblem(BaseModel):
    key: str
    reason: str


class BatchOut(BaseModel):
    """A batch and the status of each of its jobs."""

    id: int
    name: str | None
    preset: str | None
    status: BatchStatus
    not_before: datetime | None
    window: str | None
    timezone: str | None
    backend: str
    families: list[str] | None
    budget_trials: int
    budget_s: float
    created_at: datetime
    counts: dict[str, int] = Field(description="jobs by status")
    jobs: list[JobOut]
    skipped: list[SkippedProblem] = Field(default_factory=list,
                                          description="problems no kernel family can run (no job created); only "
                                                      "in the answer to POST")


class HealthOut(BaseModel):
    """GET /healthz (liveness: the process answers; the database is not asked) and GET /readyz (readiness:
    the database answered)."""

    status: Literal["ok"]
    database: Literal["ok", "not checked"]
    revision: str | None
    backend: str
    worker_in_process: bool
    version: str
    timezone: str = Field(description="the time zone windows are read in when a request names none")
    in_flight: int = Field(0, description="requests working on the database now")
    waiting: int = Field(0, description="requests waiting for a turn at the database")
