"""OpenTelemetry for tests: the SDK's in-memory span exporter and metric reader, set as
the process's global providers for one test.

Registered from ``tests/conftest.py`` (``pytest_plugins``):

- ``spans``: an ``InMemorySpanExporter`` behind a global ``TracerProvider``;
- ``metrics``: an ``InMemoryMetricReader`` behind a global ``MeterProvider``.

The API lets a process set each global provider once; like the SDK's own test
utilities, the fixtures reset that guard, and put the previous provider back after the
test (toolfold looks the provider up on every call, so nothing of ours is cached past it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A real SDK tracer provider, global for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved
        provider.shutdown()


@pytest.fixture
def metrics() -> Iterator[InMemoryMetricReader]:
    """A real SDK meter provider read by an in-memory reader, global for this test only."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    saved = metrics_internal._METER_PROVIDER, metrics_internal._METER_PROVIDER_SET_ONCE
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal.set_meter_provider(provider)
    try:
        yield reader
    finally:
        metrics_internal._METER_PROVIDER, metrics_internal._METER_PROVIDER_SET_ONCE = saved
        provider.shutdown()


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """The data points of metric ``name`` the reader collects now (``[]`` if none)."""
    data = reader.get_metrics_data()
    found: list[Any] = []
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.extend(metric.data.data_points)
    return found
