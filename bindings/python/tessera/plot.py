"""matplotlib helpers: the shard map of a sharded convolution with its halos, a simulated (or
traced) timeline, and memory bars per rank. Each takes an optional ``ax`` and returns it.

They only draw what core and the simulator computed (halo plans, trace events, memory peaks).
"""

from __future__ import annotations

from typing import Optional, Sequence

_CATEGORIES = ("parameter", "gradient", "optimizer_state", "activation", "halo_buffer", "workspace")


def _axes(ax, figsize):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize)
    return ax


def _sharded_dim(plans) -> int:
    for d in (3, 2, 0):
        if len({tuple(p["own"][d]) for p in plans}) > 1:
            return d
    return 3


def shard_map(plans: Sequence[dict], dim: Optional[int] = None, ax=None, title: Optional[str] = None):
    """Draws every rank's piece of the input along the sharded dimension (solid), the halo it
    receives on each side (hatched, labelled with the sending rank and width) and the outputs it
    computes (thin bar below). ``plans``: ``tessera.halo_plan(spec, layout)``."""
    import matplotlib.patches as mpatches

    plans = list(plans)
    d = _sharded_dim(plans) if dim is None else dim
    size = plans[0]["input_shape"][d]
    ax = _axes(ax, (10, 0.8 + 0.7 * len(plans)))
    colors = [f"C{i % 10}" for i in range(len(plans))]
    for p in plans:
        r = p["rank"]
        y = len(plans) - 1 - r
        o0, o1 = p["own"][d]
        ax.add_patch(mpatches.Rectangle((o0, y + 0.35), o1 - o0, 0.5, color=colors[r], alpha=0.85))
        ax.text((o0 + o1) / 2, y + 0.6, f"rank {r}: [{o0},{o1})", ha="center", va="center", fontsize=8,
                color="white")
        for piece in p["recvs"]:
            b0, b1 = piece["box"][d]
            if b1 <= b0:
                continue
            peer = piece["peer"]
            ax.add_patch(mpatches.Rectangle((b0, y + 0.35), b1 - b0, 0.5, facecolor=colors[peer], alpha=0.35,
                                            hatch="///", edgecolor="black", linewidth=0.5))
            ax.text((b0 + b1) / 2, y + 0.95, f"{b1 - b0} from r{peer}", ha="center", va="bottom", fontsize=7)
        n0, n1 = p["need"][d]
        ax.plot([n0, n1], [y + 0.3, y + 0.3], color="black", linewidth=0.8)
        # Outputs, in output indices (a different axis when strided): drawn as a label.
        q0, q1 = p["out"][d]
        ax.text(n1 + 0.5, y + 0.6, f"out [{q0},{q1})", fontsize=7, va="center")
    ax.set_xlim(-1, size * 1.12 + 2)
    ax.set_ylim(0, len(plans) + 0.3)
    ax.set_yticks([])
    ax.set_xlabel(f"input index along dimension {d} ({'NCHW'[d]})")
    ax.set_title(title or "input per rank (solid), halos received (hatched), input read (line)")
    return ax


def timeline(events, ranks: Optional[Sequence[int]] = None, ax=None, max_events: int = 20000):
    """A Gantt chart of trace events: one row per (rank, lane), bars coloured by category
    (compute, comm, halo). ``events``: a SimResult (simulated with ``trace=True``) or a list of
    dicts with pid, tid, ts_us, dur_us, cat."""
    if hasattr(events, "trace_events"):
        events = events.trace_events()
    events = [e for e in events if ranks is None or e["pid"] in ranks][:max_events]
    lanes = sorted({(e["pid"], 0 if e["tid"] == 0 else (1 if e["tid"] == 1 else 2)) for e in events})
    row = {lane: i for i, lane in enumerate(lanes)}
    ax = _axes(ax, (12, 0.6 + 0.35 * len(lanes)))
    cats = {"compute": "C0", "comm": "C3", "halo": "C2"}
    by_row_cat: dict = {}
    for e in events:
        lane = (e["pid"], 0 if e["tid"] == 0 else (1 if e["tid"] == 1 else 2))
        by_row_cat.setdefault((row[lane], e["cat"]), []).append((e["ts_us"] / 1e3, max(e["dur_us"] / 1e3, 1e-6)))
    for (y, cat), bars in by_row_cat.items():
        color = cats.get(cat, "C7")
        # An edge in the bar's colour keeps microsecond transfers visible on a millisecond axis.
        ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=color, edgecolors=color, linewidth=0.6)
    names = {0: "compute", 1: "collectives", 2: "halo"}
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {p} {names[k]}" for p, k in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    import matplotlib.patches as mpatches

    ax.legend(handles=[mpatches.Patch(color=c, label=k) for k, c in cats.items()], loc="upper right", fontsize=7)
    return ax


def memory_bars(memory, ax=None, capacity_bytes: Optional[float] = None, title: Optional[str] = None):
    """Stacked bars of peak memory per rank by category (GB = 1e9 bytes). ``memory``: a
    SimResult, a list of its device dicts, a training step's record (its ``ranks``, each with
    ``peak_bytes``; docs/records.md), or a list (per rank) of {category: bytes} dicts."""
    if hasattr(memory, "devices"):
        memory = memory.devices
    if isinstance(memory, dict) and "ranks" in memory:
        memory = memory["ranks"]
    rows = [m.get("memory_bytes", m.get("peak_bytes", m)) for m in memory]
    if capacity_bytes is None and memory and "capacity_bytes" in memory[0]:
        capacity_bytes = memory[0]["capacity_bytes"]
    ax = _axes(ax, (max(4, 0.5 * len(rows) + 2), 3.5))
    bottom = [0.0] * len(rows)
    for i, c in enumerate(_CATEGORIES):
        vals = [r.get(c, 0) / 1e9 for r in rows]
        ax.bar(range(len(rows)), vals, bottom=bottom, label=c, color=f"C{i}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    if capacity_bytes:
        ax.axhline(capacity_bytes / 1e9, color="red", linestyle="--", linewidth=1, label="capacity")
    ax.set_xticks(range(len(rows)))
    ax.set_xlabel("rank")
    ax.set_ylabel("peak GB (per category)")
    ax.set_title(title or "peak memory per rank by category")
    ax.legend(fontsize=7)
    return ax
