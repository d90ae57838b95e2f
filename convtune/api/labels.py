"""Text labels of the hand-written SVG plots placed so that they do not overlap (boxes in SVG pixels).

A label's box is estimated from its text: ``CHAR_EM`` em per character (a sans-serif digit or lower-case
letter is ~0.55 em wide; 0.6 overestimates, so a box is never narrower than the drawn text), the ascent above
the baseline and the descent below it. :func:`place` tries each label's candidate positions in order and
keeps the first whose box lies inside the plot area and clear of everything placed before (and of the
obstacles: legend, markers); when none is clear it keeps the candidate that overlaps least, or leaves an
optional label out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: width of one character in em (font-size units), an overestimate for sans-serif text
CHAR_EM = 0.6
ASCENT_EM = 0.8
DESCENT_EM = 0.25


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned rectangle in SVG pixels (y grows downwards)."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: Box) -> float:
        """The area shared with ``other`` (px²; 0 when they only touch)."""
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.y1, other.y1) - max(self.y0, other.y0)
        return w * h if w > 0 and h > 0 else 0.0

    def inside(self, outer: Box) -> bool:
        return self.x0 >= outer.x0 and self.y0 >= outer.y0 and self.x1 <= outer.x1 and self.y1 <= outer.y1

    def grown(self, margin: float) -> Box:
        return Box(self.x0 - margin, self.y0 - margin, self.x1 + margin, self.y1 + margin)


@dataclass(frozen=True, slots=True)
class Spot:
    """Where a label could go: the text's anchor point (``x``, baseline ``y``) and ``anchor`` (start, middle, end)."""

    x: float
    y: float
    anchor: str = "start"


@dataclass(frozen=True, slots=True)
class Label:
    """A placed label: its text, size (px), spot and box."""

    id: str
    text: str
    size: float
    spot: Spot
    box: Box


def text_box(text: str, size: float, spot: Spot) -> Box:
    """The box of ``text`` at font size ``size`` (px) drawn at ``spot``."""
    width = CHAR_EM * size * len(text)
    x0 = {"start": spot.x, "middle": spot.x - width / 2, "end": spot.x - width}[spot.anchor]
    return Box(x0, spot.y - ASCENT_EM * size, x0 + width, spot.y + DESCENT_EM * size)


@dataclass(frozen=True, slots=True)
class Request:
    """A label to place: its candidate ``spots`` in order of preference; an ``optional`` one is left out when
    no spot is clear (a required one takes the spot that overlaps least)."""

    id: str
    text: str
    size: float
    spots: Sequence[Spot]
    optional: bool = False


def place(requests: Sequence[Request], area: Box, obstacles: Sequence[Box] = (), margin: float = 2.0) -> list[Label]:
    """Place ``requests`` in order inside ``area``, clear of ``obstacles`` and of one another by ``margin`` px
    where a candidate allows it."""
    placed: list[Label] = []
    for request in requests:
        taken = [*obstacles, *(p.box for p in placed)]
        best: tuple[float, Spot, Box] | None = None
        for spot in request.spots:
            box = text_box(request.text, request.size, spot)
            grown = box.grown(margin)
            cost = sum(grown.overlap(t) for t in taken) + (0.0 if box.inside(area) else 1e6)
            if best is None or cost < best[0]:
                best = (cost, spot, box)
            if cost == 0:
                break
        if best is None or (request.optional and best[0] > 0):
            continue
        placed.append(Label(request.id, request.text, request.size, best[1], best[2]))
    return placed
