"""OpenTelemetry spans that cost nothing when nobody listens.

Every layer that traces (the harness's ``execute_tool`` span, the exec env's command
span) goes through here, so the "off" check is one rule in one place:

- ``opentelemetry`` is never imported by toolfold. If ``opentelemetry.trace`` is not in
  ``sys.modules``, nobody can have configured a tracer provider, and tracing is off at
  the cost of one dict lookup.
- If it is imported (an application, or a framework such as pydantic-ai, did) but the
  global provider is still the API's proxy or no-op one, tracing is off too: no span
  object, no attribute dict, nothing per call beyond the check.

Only the API is used (the ``otel`` extra); the SDK and its exporters are the
application's choice. Imports nothing else from toolfold (an import-linter contract),
so the exec env may use it without learning about the harness.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = ["AttrValue", "fail", "recording_span", "span", "tracer"]

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
