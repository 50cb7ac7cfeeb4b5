"""Charts drawn on the server as inline SVG: no JavaScript library, nothing to fetch, the same
picture in every browser (and in a screenshot)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f")


@dataclass(frozen=True)
class Line:
    """One series: its legend and its points (time, value), in time order."""

    label: str
    points: Sequence[tuple[float, float]]


def _ticks(top: float) -> list[float]:
    """Four or five round values from 0 to ``top``."""
    if top <= 0:
        return [0.0]
    step = 10 ** len(str(int(top))) / 10 if top >= 1 else 0.25
    for factor in (1, 2, 2.5, 5, 10):
        if top / (step * factor) <= 5:
            step *= factor
            break
    out, value = [], 0.0
    while value <= top + 1e-9:
        out.append(value)
        value += step
    return out


def line_chart(title: str, lines: Sequence[Line], start: float, end: float, top: float, unit: str,
               width: int = 640, height: int = 200) -> str:
    """An SVG line chart of ``lines`` from ``start`` to ``end`` (epoch seconds) and 0 to ``top``."""
    left, right, upper, lower = 56, 12, 22, 28
    plot_w, plot_h = width - left - right, height - upper - lower
    span = max(end - start, 1.0)
    top = max(top, 1e-9)

    def x(t: float) -> float:
        return left + (t - start) / span * plot_w

    def y(v: float) -> float:
        return upper + plot_h - min(max(v, 0.0), top) / top * plot_h

    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left}" y="14" class="chart-title">{escape(title)}</text>']
    for value in _ticks(top):
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" class="grid"/>'
                     f'<text x="{left - 6}" y="{y(value) + 4:.1f}" class="tick" text-anchor="end">'
                     f'{value:g}{escape(unit)}</text>')
    for t, anchor in ((start, "start"), ((start + end) / 2, "middle"), (end, "end")):
        label = time.strftime("%H:%M:%S", time.localtime(t))
        parts.append(f'<text x="{x(t):.1f}" y="{height - 8}" class="tick" text-anchor="{anchor}">{label}</text>')
    for i, line in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        if len(line.points) == 1:  # one sample: a dot, not an invisible line
            t, v = line.points[0]
            parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
        elif line.points:
            path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in line.points)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        parts.append(f'<text x="{left + 8 + 110 * i}" y="{upper + 12}" class="legend" fill="{colour}">'
                     f'{escape(line.label)}</text>')
    if not any(line.points for line in lines):
        parts.append(f'<text x="{left + plot_w / 2}" y="{upper + plot_h / 2}" class="tick" text-anchor="middle">'
                     "no samples in this period</text>")
    parts.append("</svg>")
    return "".join(parts)
