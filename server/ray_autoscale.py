"""Autoscaling a WhisperWire deployment on its live speakers.

Serve's default policy counts ongoing requests, and to Serve every open WebSocket is one, so a
channel with fifty viewers would look like fifty streams. Each replica reports its live speakers
instead (``record_autoscaling_stats`` in :mod:`.ray_serve`), and this policy wants enough
replicas for them, reading ``target_ongoing_requests`` as *speakers per replica*. Serve applies
the config's bounds, delays and factors around it. It runs in Serve's controller, so this module
imports nothing heavy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["streams_policy"]


def streams_policy(ctx: Any) -> tuple[float, dict]:
    """Replicas wanted for the live speakers the replicas reported (averaged over Serve's
    look-back window)."""
    if ctx.current_num_replicas == 0:
        return ctx.target_num_replicas, {}
    streams = (ctx.aggregated_metrics or {}).get("streams", {})
    if not streams:  # nothing reported yet (replicas starting): stay where we are
        return ctx.current_num_replicas, {}
    per_replica = max(ctx.config.get_target_ongoing_requests(), 1e-9)
    return sum(streams.values()) / per_replica, {}
