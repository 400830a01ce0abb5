"""WhisperWire as a Ray Serve application: ``serve deploy`` with
``import_path: whisperwire.server.ray_serve:app``.

Each replica of the ``WhisperWire`` deployment runs the same Starlette app as ``whisperwire
serve`` (:func:`~.app.create_app`, through ``@serve.ingress``), with its own engine. What must
be shared between replicas (session ids, channels, transcripts) lives in the cluster's
:class:`~.cluster_hub.Directory` actor; a speaker's socket stays on the replica that took it.

Settings come from the environment (a Serve config sets them with ``runtime_env.env_vars``), the
replica counts and resources from the Serve config itself; see deploy/ray/serve.yaml.

Serve waits for a replica's open requests before it runs the app's shutdown, and a speaker's
socket is open until the speaker stops: so a draining replica is noticed here (Serve has no hook
for it) and its sessions are finalised at once, each speaker getting its last finals and
``closed(server_shutdown)``, as ``whisperwire serve`` does on SIGTERM.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from typing import Any

import ray
from ray import serve

from .app import ServerConfig, create_app
from .auth import AuthConfig, load_token_file
from .cluster_hub import ClusterHub, directory
from .engine import EngineOptions
from .logs import event_lines_to_stderr

__all__ = ["WhisperWire", "app", "config_from_env", "replica_cpus"]

log = logging.getLogger("whisperwire.server")


def _env(name: str, default: str) -> str:
    return os.environ.get(f"WHISPERWIRE_{name}", default)


def replica_cpus() -> int:
    """The CPUs Ray reserved for this replica (its ``num_cpus``, at least 1), or 0 outside a
    Ray worker."""
    if not ray.is_initialized():
        return 0  # (asking the runtime context would start a local Ray instance)
    try:
        cpus = float(ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0))
    except Exception:  # noqa: BLE001 - not in a Ray worker
        return 0
    return max(1, int(cpus)) if cpus > 0 else 0


def config_from_env() -> ServerConfig:
    """The replica's settings: ``WHISPERWIRE_MODEL`` (embedded tiny.en), ``_DEVICE`` (auto),
    ``_COMPUTE_TYPE`` (auto), ``_CPU_THREADS`` and ``_DECODE_WORKERS`` (0: the engine's rule
    for the replica's ``num_cpus``, one single-threaded decode per CPU; four on a GPU),
    ``_MAX_SESSIONS`` (per replica), ``_TOKEN_FILE`` (as ``serve --token-file``), ``_RETENTION_MINUTES``."""
    token_file = _env("TOKEN_FILE", "")
    return ServerConfig(
        engine=EngineOptions(model=_env("MODEL", "embedded"), device=_env("DEVICE", "auto"),
                             compute_type=_env("COMPUTE_TYPE", "auto"),
                             cpu_threads=int(_env("CPU_THREADS", "0")),
                             workers=int(_env("DECODE_WORKERS", "0")), cores=replica_cpus()),
        auth=load_token_file(token_file) if token_file else AuthConfig(),
        max_sessions=int(_env("MAX_SESSIONS", "64")),
        transcript_retention_s=60.0 * float(_env("RETENTION_MINUTES", "60")),
    )


def _replica_impl() -> Any:
    """Serve's own object for this replica (it knows when the replica drains), or None."""
    try:
        from ray.serve._private.replica import Replica
    except ImportError:
        return None
    found = [o for o in gc.get_objects() if isinstance(o, Replica)]
    return found[0] if len(found) == 1 else None


@serve.deployment(name="WhisperWire", max_ongoing_requests=200,
                  graceful_shutdown_timeout_s=60, graceful_shutdown_wait_loop_s=1,
                  health_check_period_s=5, ray_actor_options={"num_cpus": 1})
@serve.ingress()
class WhisperWire:
    """One replica: the app, its engine, and its hub on the cluster's directory."""

    async def __init__(self) -> None:
        event_lines_to_stderr()  # the replica's log (worker-*.err) gets our event lines
        self.config = config_from_env()
        ctx = serve.get_replica_context()
        name = ray.get_runtime_context().get_actor_name() or ctx.replica_tag
        self.labels = {"replica": ctx.replica_tag, "deployment": ctx.deployment,
                       "application": ctx.app_name}
        actor = directory(self.config.transcript_retention_s,
                          float(_env("LEASE_S", "10")))
        self.hub = ClusterHub(actor, name, self.config.transcript_retention_s,
                              self.config.max_viewers, pid=os.getpid())
        self._tasks = [asyncio.create_task(self.hub.renew_forever()),
                       asyncio.create_task(self._drain_when_serve_does()),
                       asyncio.create_task(self._export_to_ray())]

    def __serve_build_asgi_app__(self) -> Any:
        self.starlette = create_app(self.config, hub=self.hub)
        self.starlette.state.metrics.labels = self.labels
        return self.starlette

    async def _drain_when_serve_does(self) -> None:
        impl = _replica_impl()
        if impl is None or not hasattr(impl, "_shutting_down"):
            log.warning("event=no_drain_hook (sessions end when Serve's grace period does)")
            return
        while not impl._shutting_down:
            await asyncio.sleep(0.25)
        log.info("event=replica_draining sessions=%d", self.hub.live_count)
        await self.starlette.state.drain(timeout=45.0)

    async def _export_to_ray(self, every_s: float = 2.0) -> None:
        """The replica's load through Ray's own metrics (each node's Prometheus endpoint, with
        the deployment, replica and application tags), where one scrape config sees every
        replica: ``sum(ray_whisperwire_sessions)`` is the cluster's live streams."""
        from ray.serve import metrics

        sessions = metrics.Gauge("whisperwire_sessions", "Live speaking sessions")
        viewers = metrics.Gauge("whisperwire_viewers", "Connected viewers")
        audio = metrics.Counter("whisperwire_audio_in_seconds", "Seconds of audio received")
        sent = 0.0
        while True:
            await asyncio.sleep(every_s)
            app = getattr(self, "starlette", None)
            if app is None:
                continue
            sessions.set(self.hub.live_count)
            viewers.set(self.hub.viewer_count)
            heard = app.state.metrics.registry.get_sample_value(
                "whisperwire_audio_in_seconds_total") or 0.0
            if heard > sent:
                audio.inc(heard - sent)
                sent = heard

    async def record_autoscaling_stats(self) -> dict[str, float]:
        """Live speakers here, for :func:`.ray_autoscale.streams_policy` (viewers are open
        sockets too, but cost next to nothing)."""
        return {"streams": float(self.hub.live_count)}

    def check_health(self) -> None:
        """Serve restarts a replica whose engine stopped working."""
        problem = self.starlette.state.server.unready()
        if problem is not None and not self.starlette.state.server.draining.is_set() \
                and self.starlette.state.engine.loaded:
            raise RuntimeError(problem)


app = WhisperWire.bind()
