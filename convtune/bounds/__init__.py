"""I/O lower bounds, dataflow floors and tiled-traffic models for convolutions (pure math).

Imports nothing of convtune but the value objects (:mod:`convtune.problem`, :mod:`convtune.machine`,
:mod:`convtune.errors`) and needs only the standard library and NumPy. All traffic is in words
(loads + stores between slow memory and a fast memory of S words, S an argument); ``.bytes``
multiplies by the problem's word size. Formulas, assumptions and provenance (Hong–Kung 1981, COSMA SC'19,
Chen et al. HPCA'20, Zhang et al. PPoPP'21; [R] marks what is derived here): each module's docstring.

Modules: :mod:`~convtune.bounds.result` (BoundResult), :mod:`~convtune.bounds.pebble` (X-partition),
:mod:`~convtune.bounds.matmul`, :mod:`~convtune.bounds.direct`, :mod:`~convtune.bounds.winograd`,
:mod:`~convtune.bounds.depthwise`, :mod:`~convtune.bounds.roofline`, :mod:`~convtune.bounds.tiles`,
:mod:`~convtune.bounds.tiled` (exact traffic of tiled loop nests).
"""

from __future__ import annotations

from convtune.bounds.depthwise import depthwise_lower_bound, depthwise_tile_footprint_words, depthwise_tiled_traffic
from convtune.bounds.direct import (
    compulsory_words,
    direct_literature_bound,
    direct_lower_bound,
    direct_safe_bound,
    longest_reduction_chain,
    used_reduction_length,
    window_reuse,
)
from convtune.bounds.matmul import (
    REDUCTION_FACTOR,
    cosma_bound,
    hong_kung_bound,
    matmul_compulsory_words,
    matmul_lower_bound,
    matmul_safe_bound,
)
from convtune.bounds.pebble import reuse_term_words
from convtune.bounds.result import Assumption, BoundResult, NotApplicable
from convtune.bounds.roofline import RooflineResult, efficiency, floor_time
from convtune.bounds.tiled import LOOPS, TiledTraffic, tiled_traffic
from convtune.bounds.tiles import Tile, direct_tile, winograd_tile
from convtune.bounds.winograd import (
    WinogradBounds,
    WinogradShape,
    winograd_bounds,
    winograd_cdag_bound,
    winograd_fused_floor,
    winograd_shape,
    winograd_unfused_floor,
)

__all__ = [
    "LOOPS",
    "REDUCTION_FACTOR",
    "Assumption",
    "BoundResult",
    "NotApplicable",
    "RooflineResult",
    "Tile",
    "TiledTraffic",
    "WinogradBounds",
    "WinogradShape",
    "compulsory_words",
    "cosma_bound",
    "depthwise_lower_bound",
    "depthwise_tile_footprint_words",
    "depthwise_tiled_traffic",
    "direct_literature_bound",
    "direct_lower_bound",
    "direct_safe_bound",
    "direct_tile",
    "efficiency",
    "floor_time",
    "hong_kung_bound",
    "longest_reduction_chain",
    "matmul_compulsory_words",
    "matmul_lower_bound",
    "matmul_safe_bound",
    "reuse_term_words",
    "tiled_traffic",
    "used_reduction_length",
    "window_reuse",
    "winograd_bounds",
    "winograd_cdag_bound",
    "winograd_fused_floor",
    "winograd_shape",
    "winograd_tile",
    "winograd_unfused_floor",
]
