"""Runs a Python program with an OpenTelemetry SDK tracer provider that appends every
finished span, as one JSON line, to a file, and a meter provider whose metrics are
written to ``SPANS.jsonl.metrics.json`` when the program exits: what
``opentelemetry-instrument`` sets up with exporters, without taking stdout (the MCP
servers it runs talk on stdio).

    python traced_main.py SPANS.jsonl -m toolfold.cli mcp ...
    python traced_main.py SPANS.jsonl some_server.py ...
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class JsonLinesExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.file = open(path, "a", buffering=1)  # noqa: SIM115  # open for the process

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            context = span.get_span_context()
            assert context is not None
            scope = span.instrumentation_scope
            record = {
                "name": span.name,
                "kind": span.kind.name,
                "scope": scope.name if scope is not None else None,
                "trace_id": f"{context.trace_id:032x}",
                "span_id": f"{context.span_id:016x}",
                "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
                "status": span.status.status_code.name,
                "attributes": dict(span.attributes or {}),
            }
            self.file.write(json.dumps(record) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.file.close()


def dump_metrics(reader: InMemoryMetricReader, path: str) -> None:
    """Every data point by metric name: its attributes and its value (or count)."""
    found: dict[str, list[dict[str, Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    found.setdefault(metric.name, []).append(
                        {
                            "attributes": dict(point.attributes or {}),
                            "value": value if value is not None else point.count,
                        }
                    )
    Path(path).write_text(json.dumps(found))


def main() -> None:
    out, target, *args = sys.argv[1:]
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(out)))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    atexit.register(dump_metrics, reader, f"{out}.metrics.json")
    if target == "-m":
        module, *args = args
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [target, *args]
        sys.path.insert(0, str(Path(target).parent))
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
