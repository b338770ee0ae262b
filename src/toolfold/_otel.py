"""OpenTelemetry spans and metrics that cost nothing when nobody listens.

Every layer that traces (the harness's ``execute_tool`` span, the exec env's command
span) or measures (``Meters``) goes through here, so the "off" check is one rule in one
place:

- ``opentelemetry`` is never imported by toolfold. If ``opentelemetry.trace`` is not in
  ``sys.modules``, nobody can have configured a tracer provider, and tracing is off at
  the cost of one dict lookup.
- If it is imported (an application, or a framework such as pydantic-ai, did) but the
  global provider is still the API's proxy or no-op one, tracing is off too: no span
  object, no attribute dict, nothing per call beyond the check.
- Metrics follow the same rule with ``opentelemetry.metrics`` and the global meter
  provider (``meters()``).

Only the API is used (the ``otel`` extra); the SDK and its exporters are the
application's choice. Imports nothing else from toolfold (an import-linter contract),
so the exec env may use it without learning about the harness.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "AttrValue",
    "Counted",
    "Meters",
    "counted",
    "fail",
    "meters",
    "recording_span",
    "span",
    "tracer",
]

AttrValue = str | bool | int | float
"""An attribute value toolfold sets (OpenTelemetry also takes sequences of these)."""

SCOPE = "toolfold"
"""The instrumentation scope name of every toolfold span."""

_cached: tuple[object, Tracer | None] | None = None
_UNKNOWN = object()
# A provider named by this variable is made by the API's getter on first use.
_ENV_PROVIDER = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def _trace_module() -> Any:
    return sys.modules.get("opentelemetry.trace")


def tracer() -> Tracer | None:
    """The tracer for toolfold's spans, or ``None`` when tracing is off (see the module
    docstring). The provider is looked up on every call, so one set after toolfold was
    imported (or replaced) takes effect at the next call."""
    global _cached
    trace = _trace_module()
    if trace is None:
        return None
    # The API's own getter reads os.environ on every call while no provider is set
    # (several µs); the global it returns is read directly when it exists, and the
    # getter is the fallback for an API that no longer has it.
    provider: Any = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None and not _ENV_PROVIDER:
        return None
    if provider is None or provider is _UNKNOWN:
        provider = trace.get_tracer_provider()
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    made: Tracer | None = None
    if not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        made = provider.get_tracer(SCOPE, _version())
    _cached = (provider, made)
    return made


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolfold")
    except PackageNotFoundError:
        return None


def recording_span() -> Span | None:
    """The current span when it records (a toolfold span is open in this context), else
    ``None``: what a layer uses to add attributes to the span it runs inside."""
    if tracer() is None:  # cheaper than looking the current span up
        return None
    current: Span = _trace_module().get_current_span()
    return current if current.is_recording() else None


@contextmanager
def span(
    used: Tracer, name: str, attributes: Mapping[str, AttrValue], *, internal: bool = True
) -> Iterator[Span]:
    """Start ``name`` as the current span (a child of whatever span is current in the
    calling task) and end it on exit. An ``Exception`` escaping the block is recorded
    with ``error.type`` = its class name; ``BaseException``s (a task's cancellation) are
    the caller's to describe before they propagate."""
    trace = _trace_module()
    kind = trace.SpanKind.INTERNAL if internal else trace.SpanKind.CLIENT
    with used.start_as_current_span(
        name,
        kind=kind,
        attributes=dict(attributes),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except Exception as exc:
            current.record_exception(exc)
            fail(current, type(exc).__qualname__, f"{type(exc).__name__}: {exc}")
            raise
        except BaseException as exc:  # the task was cancelled where the caller did not see it
            fail(current, type(exc).__qualname__)
            raise


def fail(current: Span, error_type: str, description: str | None = None) -> None:
    """Mark ``current`` as failed: ``error.type`` and an ERROR status."""
    trace = _trace_module()
    current.set_attribute("error.type", error_type)
    current.set_status(trace.Status(trace.StatusCode.ERROR, description))


# -- metrics --------------------------------------------------------------------------

# Bucket boundaries the GenAI and MCP conventions advise for their histograms.
_DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
_GENAI_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
_AGENT_BUCKETS = tuple(0.1 * 2**n for n in range(13))  # 0.1 s .. 409.6 s
_TOKEN_BUCKETS = tuple(4.0**n for n in range(14))
# Sub-second latencies (a checkpoint commit, a follower's catch-up, a first output).
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_SIZE_BUCKETS = tuple(float(16**n) for n in range(1, 9))  # 16 B .. 4 GiB


class Counted(Protocol):
    """Something that holds lanes and subscribers (``toolfold.harness.Lanes``)."""

    def otel_counts(self) -> tuple[int, int]:
        """How many lanes and subscribers it holds right now."""
        ...


_counted: weakref.WeakSet[Counted] = weakref.WeakSet()
_counted_lock = threading.Lock()  # the metric reader's callbacks run on its own thread


def counted(source: Counted) -> None:
    """Report ``source``'s lanes and subscribers in the ``toolfold.lane.*`` metrics for
    as long as it lives (a weak reference: nothing to unregister)."""
    with _counted_lock:
        _counted.add(source)


def _observe(index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        with _counted_lock:
            sources = list(_counted)
        return [Observation(sum(source.otel_counts()[index] for source in sources))]

    return observe


class Meters:
    """toolfold's instruments on one meter provider (docs/observability.md lists them).

    Names and units follow the semantic conventions where one exists (the GenAI
    ``gen_ai.client.*`` and MCP ``mcp.*.operation.duration`` histograms); the rest are
    ``toolfold.*``."""

    def __init__(self, meter: Meter) -> None:
        self.tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            "s",
            "The duration of a single tool execution (its count: calls by outcome).",
            explicit_bucket_boundaries_advisory=_GENAI_DURATION_BUCKETS,
        )
        self.output_seen = meter.create_counter(
            "toolfold.tool.output.seen",
            "By",
            "Output bytes tool calls wrote (counted at the source).",
        )
        self.output_kept = meter.create_counter(
            "toolfold.tool.output.kept", "By", "Output bytes the calls' results kept (the window)."
        )
        self.first_output = meter.create_histogram(
            "toolfold.tool.time_to_first_output",
            "s",
            "From a call's start to its first output.",
            explicit_bucket_boundaries_advisory=_FAST_BUCKETS,
        )
        self.spill_size = meter.create_histogram(
            "toolfold.exec.spill.size",
            "By",
            "Size of a command's spill file (the full output), per spilled local command.",
            explicit_bucket_boundaries_advisory=_SIZE_BUCKETS,
        )
        self.checkpoint_duration = meter.create_histogram(
            "toolfold.checkpoint.duration",
            "s",
            "Time to commit one durable output batch to the session store.",
            explicit_bucket_boundaries_advisory=_FAST_BUCKETS,
        )
        self.follower_lag = meter.create_histogram(
            "toolfold.follower.lag",
            "s",
            "From a followed session's change signal to its events being in the lane.",
            explicit_bucket_boundaries_advisory=_FAST_BUCKETS,
        )
        self.mcp_server_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            "s",
            "MCP request duration as observed on the receiver.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.mcp_client_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            "s",
            "MCP request duration as observed on the sender.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.genai_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            "s",
            "GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_GENAI_DURATION_BUCKETS,
        )
        self.genai_first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            "s",
            "Time to receive the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=_GENAI_DURATION_BUCKETS,
        )
        self.agent_duration = meter.create_histogram(
            "gen_ai.invoke_agent.duration",
            "s",
            "The end-to-end duration of a single agent invocation.",
            explicit_bucket_boundaries_advisory=_AGENT_BUCKETS,
        )
        self.genai_tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            "{token}",
            "Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        meter.create_observable_up_down_counter(
            "toolfold.lane.count", [_observe(0)], "{lane}", "Live lanes (toolfold serve's)."
        )
        meter.create_observable_up_down_counter(
            "toolfold.lane.subscriber.count",
            [_observe(1)],
            "{subscriber}",
            "Subscribers attached to the live lanes (viewers, SSE clients).",
        )


_meters_cached: tuple[object, Meters | None] | None = None
_ENV_METER_PROVIDER = "OTEL_PYTHON_METER_PROVIDER" in os.environ


def meters() -> Meters | None:
    """toolfold's instruments, or ``None`` when no meter provider is configured: the
    same rule, and cost, as ``tracer()``."""
    global _meters_cached
    internal: Any = sys.modules.get("opentelemetry.metrics._internal")
    if internal is None:
        return None
    provider: Any = getattr(internal, "_METER_PROVIDER", _UNKNOWN)
    if provider is None and not _ENV_METER_PROVIDER:
        return None
    if provider is None or provider is _UNKNOWN:
        provider = internal.get_meter_provider()
    cached = _meters_cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    made: Meters | None = None
    off = tuple(
        kind
        for kind in (
            getattr(internal, "_ProxyMeterProvider", None),
            getattr(internal, "NoOpMeterProvider", None),
        )
        if isinstance(kind, type)
    )
    if not isinstance(provider, off):
        made = Meters(provider.get_meter(SCOPE, _version()))
    _meters_cached = (provider, made)
    return made
