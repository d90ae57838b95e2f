"""Sample problems, configs and devices shared by the storage tests."""

from __future__ import annotations

from sqlalchemy.orm import Session

from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.problem import ConvProblem
from convtune.storage import queries
from convtune.storage.models import Device

PROBLEM = ConvProblem(N=1, C=64, H=56, W=56, K=64, R=3, S=3, pad_h=1, pad_w=1)
OTHER_PROBLEM = ConvProblem(N=8, C=32, H=28, W=28, K=64, R=1, S=1)
CONFIG = DirectFwdConfig()
OTHER_CONFIG = DirectFwdConfig(tile_h=8, tile_k=32)
SHA = "0" * 63 + "1"


def add_device(session: Session, name: str = "NVIDIA H200", driver_version: str | None = "580.65",
               **overrides: object) -> Device:
    fields: dict[str, object] = dict(name=name, compute_capability="9.0", sm_count=132,
                                     driver_version=driver_version, cuda_version="13.0",
                                     copy_bandwidth_bytes_per_s=4.19e12, fp32_peak_flops_per_s=50.9e12,
                                     ceilings_source="measured")
    fields.update(overrides)
    return queries.get_or_create_device(session, **fields)  # type: ignore[arg-type]
