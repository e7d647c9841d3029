"""Plot learning curves of training runs as an SVG (no matplotlib needed).

Reads ``<run>/logs/scalars/episode/<metric>.csv`` (written by ``python -m torchrl_dreamer.train``,
one row per finished episode: ``policy_step,value``), smooths it with a moving average over
``--window`` episodes and draws one line per run::

    python examples/plot_learning_curve.py runs/maze runs/maze_seed1 --metric success \\
        --out docs/_static/maze_success.svg
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def read_curve(run: Path, metric: str, window: int) -> list[tuple[float, float]]:
    """``(policy_step, moving average)`` points of one run's episode metric."""
    path = run / "logs" / "scalars" / "episode" / f"{metric}.csv"
    rows = [(float(s), float(v)) for s, v in csv.reader(path.open())]
    out = []
    for i in range(len(rows)):
        chunk = rows[max(0, i - window + 1): i + 1]
        out.append((rows[i][0], sum(v for _, v in chunk) / len(chunk)))
    return out


def svg_plot(curves: dict[str, list[tuple[float, float]]], title: str, ylabel: str,
             hline: float | None = None, w: int = 640, h: int = 360) -> str:
    """A line chart as SVG text."""
    pad_l, pad_r, pad_t, pad_b = 60, 20, 30, 45
    pts = [p for c in curves.values() for p in c] or [(0.0, 0.0)]
    x_max = max(p[0] for p in pts) or 1.0
    y_lo = min(0.0, min(p[1] for p in pts))
    y_hi = max([p[1] for p in pts] + ([hline] if hline is not None else [])) or 1.0
    y_hi = y_lo + (y_hi - y_lo) * 1.05 or 1.0

    def sx(x: float) -> float:
        return pad_l + (w - pad_l - pad_r) * x / x_max

    def sy(y: float) -> float:
        return h - pad_b - (h - pad_t - pad_b) * (y - y_lo) / (y_hi - y_lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14">{title}</text>',
             f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - pad_r}" y2="{h - pad_b}" '
             'stroke="black"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}" stroke="black"/>']
    for k in range(6):
        xv, yv = x_max * k / 5, y_lo + (y_hi - y_lo) * k / 5
        parts.append(f'<text x="{sx(xv):.1f}" y="{h - pad_b + 16}" text-anchor="middle">'
                     f'{xv:,.0f}</text>')
        parts.append(f'<text x="{pad_l - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">'
                     f'{yv:.2f}</text>')
    parts.append(f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">policy steps</text>')
    parts.append(f'<text x="14" y="{h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {h / 2})">{ylabel}</text>')
    if hline is not None:
        parts.append(f'<line x1="{pad_l}" y1="{sy(hline):.1f}" x2="{w - pad_r}" '
                     f'y2="{sy(hline):.1f}" stroke="grey" stroke-dasharray="4 4"/>')
    for i, (name, c) in enumerate(curves.items()):
        col = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in c)
        parts.append(f'<polyline fill="none" stroke="{col}" stroke-width="1.5" points="{path}"/>')
        parts.append(f'<text x="{pad_l + 10}" y="{pad_t + 16 * (i + 1)}" fill="{col}">'
                     f'{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories (--log-dir of the runs)")
    parser.add_argument("--metric", default="success", help="success | return | length")
    parser.add_argument("--window", type=int, default=32, help="moving average, in episodes")
    parser.add_argument("--hline", type=float, default=None, help="reference line (e.g. random)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    curves = {Path(r).name: read_curve(Path(r), args.metric, args.window) for r in args.runs}
    title = args.title or f"episode {args.metric} ({args.window}-episode moving average)"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(svg_plot(curves, title, args.metric, args.hline))
    print(args.out)


if __name__ == "__main__":
    main()
