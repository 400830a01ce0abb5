"""Prometheus metrics, one registry per app (so several apps in one process never collide).

Counters that already exist as plain numbers (the engine's stage timings) are read at scrape
time; events (batches, finals, errors) are observed as they happen. ``labels`` (set by a cluster
deployment: replica, deployment, application) go on every sample, so the series of many replicas
stay apart and Prometheus can ``sum`` them.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric

from .engine import Engine
from .pool import WorkerPool

__all__ = ["Metrics"]


class _EngineCollector:
    def __init__(self, engine: Engine | WorkerPool) -> None:
        self.engine = engine

    def collect(self) -> Iterator[CounterMetricFamily]:
        st = self.engine.stats
        fam = CounterMetricFamily("whisperwire_decode_stage_seconds",
                                  "Decode-thread wall time by stage", labels=["stage"])
        for stage in ("features", "encode", "generate", "align"):
            fam.add_metric([stage], getattr(st, f"{stage}_seconds"))
        yield fam
        yield CounterMetricFamily("whisperwire_decoded_audio_seconds",
                                  "Seconds of audio passed through the decoder (windows overlap)",
                                  value=st.audio_seconds)
        yield CounterMetricFamily("whisperwire_decode_fallbacks",
                                  "Temperature fallbacks", value=st.fallbacks)
        yield CounterMetricFamily("whisperwire_decode_calls",
                                  "Model calls: a batch makes one per window shape",
                                  value=st.calls)


class Metrics:
    def __init__(self, engine: Engine | WorkerPool, sessions: Callable[[], int], viewers: Callable[[], int]) -> None:
        self.registry = r = CollectorRegistry()
        Gauge("whisperwire_sessions", "Live speaking sessions", registry=r).set_function(sessions)
        Gauge("whisperwire_viewers", "Connected viewers", registry=r).set_function(viewers)
        self.audio_in = Counter("whisperwire_audio_in_seconds", "Seconds of audio received",
                                registry=r)
        self.batches = Histogram("whisperwire_decode_batch_size", "Windows per decode batch",
                                 buckets=(1, 2, 3, 4, 6, 8, 12, 16, 32), registry=r)
        self.decode_time = Histogram(
            "whisperwire_decode_batch_seconds", "Wall time of one decode batch",
            buckets=(0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5), registry=r)
        self.final_lag = Histogram(
            "whisperwire_final_lag_seconds",
            "Audio received minus the end of a final, when the final is sent",
            buckets=(0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30), registry=r)
        self.partial_lag = Histogram(
            "whisperwire_partial_lag_seconds",
            "Audio received minus the end of a partial, when the partial is sent",
            buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10), registry=r)
        self.lag = Histogram(
            "whisperwire_session_lag_seconds",
            "Speech received but not yet final, sampled per session every status interval",
            buckets=(0.5, 1, 2, 3, 5, 10, 20, 30, 60), registry=r)
        self.errors = Counter("whisperwire_errors", "Error events sent, by code", ["code"],
                              registry=r)
        self.rejoins = Counter(
            "whisperwire_rejoins", "Dropped speakers' streams held for them: back in time, or "
            "not (their last words then made final)", ["outcome"], registry=r)
        r.register(_EngineCollector(engine))  # type: ignore[arg-type]
        engine.observers.append(self._batch)
        self.labels: dict[str, str] = {}

    def _batch(self, size: int, seconds: float) -> None:
        self.batches.observe(size)
        self.decode_time.observe(seconds)

    def render(self) -> bytes:
        if not self.labels:
            return generate_latest(self.registry)
        return generate_latest(_Labelled(self.registry, self.labels))  # type: ignore[arg-type]


class _Labelled:
    """A registry's samples with constant labels added (prometheus_client has no registry-wide
    constant labels)."""

    def __init__(self, registry: CollectorRegistry, labels: dict[str, str]) -> None:
        self.registry, self.labels = registry, labels

    def collect(self) -> Iterator[Metric]:
        for fam in self.registry.collect():  # fresh families on every collect
            fam.samples = [s._replace(labels={**self.labels, **s.labels}) for s in fam.samples]
            yield fam
