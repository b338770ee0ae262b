"""OpenTelemetry for tests: the SDK's in-memory span exporter and metric reader, set as
the process's global providers for one test.

Registered from ``tests/conftest.py`` (``pytest_plugins``):

- ``spans``: an ``InMemorySpanExporter`` behind a global ``TracerProvider``;
- ``metrics``: an ``InMemoryMetricReader`` behind a global ``MeterProvider``.

The API lets a process set each global provider once; like the SDK's own test
utilities, the fixtures reset that guard, and put the previous provider (none) back
after the test: toolfold looks the provider up on every call, so it is off again.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


class _CurrentTest(SpanExporter):
    """Hands each span to the running test's exporter; drops it between tests."""

    def __init__(self) -> None:
        self.target: InMemorySpanExporter | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        target = self.target
        return target.export(spans) if target is not None else SpanExportResult.SUCCESS


_current = _CurrentTest()
_PROVIDER = TracerProvider(shutdown_on_exit=False)
_PROVIDER.add_span_processor(SimpleSpanProcessor(_current))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A real SDK tracer provider, global for this test only.

    One provider serves every test: a library's ``ProxyTracer`` (the MCP SDK makes one
    at import) binds to the first provider it sees and keeps it, so a provider per test
    would leave such a library tracing into an earlier test's exporter."""
    exporter = InMemorySpanExporter()
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(_PROVIDER)
    _current.target = exporter
    try:
        yield exporter
    finally:
        _current.target = None
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


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


@contextlib.contextmanager
def otlp_receiver(reply: bytes) -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """A small OTLP/HTTP receiver on loopback (no collector installs from the package
    index): yields its base URL and the list of ``(path, content type, body)`` posted to
    it, answering each post with ``reply`` (the serialised export response)."""
    received: list[tuple[str, str, bytes]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def run_bounded_bash_call(tmp_path: Path) -> None:
    """One ``bash`` call, ``seq 1 100`` kept to its last 5 lines, through a ``Harness``."""
    from toolfold.execenv import LocalExecEnv
    from toolfold.harness import Harness, ToolCall, ToolContext
    from toolfold.output import OutputPolicy
    from toolfold.tools import bash_tool

    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    harness = Harness([bash_tool(output=OutputPolicy(max_lines=5))], context=context)
    asyncio.run(harness.run([ToolCall("c1", "bash", {"command": "seq 1 100"})]))


def assert_a_call_imports_no_opentelemetry(check: str) -> None:
    """In a fresh process, a ``bash`` call runs with no provider configured, ``check``
    (a Python statement) holds after it, and no ``opentelemetry`` module was loaded."""
    code = (
        "import asyncio, sys\n"
        "from toolfold import _otel\n"
        "from toolfold.harness import Harness, ToolCall\n"
        "from toolfold.tools import BASH\n"
        "asyncio.run(Harness([BASH]).run([ToolCall('c1', 'bash', {'command': 'true'})]))\n"
        f"{check}\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
