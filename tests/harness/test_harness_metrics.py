"""OpenTelemetry metrics of tool calls (docs/observability.md), read back with the SDK's
in-memory metric reader: calls by outcome (the duration histogram's count), output seen
against kept, spill size, time to first output, checkpoint latency."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import BaseModel

from otel_fixture import (
    assert_a_call_imports_no_opentelemetry,
    otlp_receiver,
    points,
    run_bounded_bash_call,
)
from toolfold import _otel
from toolfold.durability import Durability
from toolfold.execenv import LocalExecEnv
from toolfold.harness import DurableHooks, Harness, ToolCall, ToolContext, tool
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import MemoryRepository
from toolfold.tools import bash_tool


class NoParams(BaseModel):
    pass


@tool(params=NoParams)
async def broken(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes, then raises."""
    out.write("half done\n")
    raise ValueError("the disk is on fire")


@tool(params=NoParams)
async def silent(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes nothing."""


def by_attrs(reader: InMemoryMetricReader, name: str) -> dict[frozenset[tuple[str, object]], int]:
    return {frozenset((p.attributes or {}).items()): p.value for p in points(reader, name)}


async def test_a_bounded_bash_call_counts_its_outcome_bytes_spill_and_first_output(
    metrics: InMemoryMetricReader, tmp_path: Path
) -> None:
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    tools = [bash_tool(output=OutputPolicy(max_lines=5)), broken, silent]
    harness = Harness(tools, context=context)
    results = await harness.run(
        [
            ToolCall("c1", "bash", {"command": "seq 1 100"}),
            ToolCall("c2", "broken", {}),
            ToolCall("c3", "silent", {}),
        ]
    )
    assert [r.outcome for r in results] == ["ok", "error", "ok"]
    # The convention's tool duration: its count per attribute set is the calls by
    # outcome; a failed call carries its outcome as error.type.
    calls = {
        frozenset((p.attributes or {}).items()): p.count
        for p in points(metrics, "gen_ai.execute_tool.duration")
    }
    function = ("gen_ai.tool.type", "function")
    assert calls == {
        frozenset({("gen_ai.tool.name", "bash"), ("toolfold.outcome", "ok"), function}): 1,
        frozenset(
            {
                ("gen_ai.tool.name", "broken"),
                ("toolfold.outcome", "error"),
                ("error.type", "error"),
                function,
            }
        ): 1,
        frozenset({("gen_ai.tool.name", "silent"), ("toolfold.outcome", "ok"), function}): 1,
    }
    assert all(p.min >= 0 for p in points(metrics, "gen_ai.execute_tool.duration"))
    total = len("".join(f"{i}\n" for i in range(1, 101)))
    bash = frozenset({("gen_ai.tool.name", "bash")})
    assert by_attrs(metrics, "toolfold.tool.output.seen")[bash] == total
    assert by_attrs(metrics, "toolfold.tool.output.kept")[bash] == len("96\n97\n98\n99\n100\n")
    # The spill file holds the whole output.
    [spill] = points(metrics, "toolfold.exec.spill.size")
    assert (spill.count, spill.sum) == (1, total)
    # A first output for each call that wrote; none for the silent one.
    first = {
        (p.attributes or {})["gen_ai.tool.name"]: p.count
        for p in points(metrics, "toolfold.tool.time_to_first_output")
    }
    assert first == {"bash": 1, "broken": 1}


async def test_a_durable_call_records_its_checkpoint_latency(
    metrics: InMemoryMetricReader,
) -> None:
    session = await MemoryRepository().open_session("s", create=True)
    durability = Durability(session, interval=0.0)
    [result] = await Harness([broken], hooks=DurableHooks(durability)).run(
        [ToolCall("c1", "broken", {})], run_id="r1"
    )
    assert result.outcome == "error"
    recorded = points(metrics, "toolfold.checkpoint.duration")
    # At least the batch of its output; each point says paced or forced, and none is
    # a negative time.
    assert sum(p.count for p in recorded) >= 1
    assert {type((p.attributes or {})["toolfold.checkpoint.forced"]) for p in recorded} == {bool}
    assert all(p.min >= 0 for p in recorded)


def test_off_means_no_meters_and_no_import() -> None:
    assert _otel.meters() is None
    assert_a_call_imports_no_opentelemetry("assert _otel.meters() is None")


def test_metrics_export_over_otlp_http_to_a_receiver_on_loopback(tmp_path: Path) -> None:
    """The SDK's OTLP/HTTP metric exporter posts protobuf to a receiver on loopback,
    which decodes the call's metrics from it."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
        ExportMetricsServiceResponse,
    )
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.util._once import Once

    reply = ExportMetricsServiceResponse().SerializeToString()
    with otlp_receiver(reply) as (url, received):
        # Exported when flushed below, never by the timer within the test.
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=f"{url}/v1/metrics"), export_interval_millis=3_600_000
        )
        provider = MeterProvider(metric_readers=[reader])
        saved = metrics_internal._METER_PROVIDER, metrics_internal._METER_PROVIDER_SET_ONCE
        metrics_internal._METER_PROVIDER_SET_ONCE = Once()
        metrics_internal.set_meter_provider(provider)
        try:
            run_bounded_bash_call(tmp_path)
            provider.force_flush()
        finally:
            metrics_internal._METER_PROVIDER, metrics_internal._METER_PROVIDER_SET_ONCE = saved
            provider.shutdown()
    exported: dict[str, Any] = {}
    for path, content_type, body in received:
        assert path == "/v1/metrics" and content_type == "application/x-protobuf"
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                assert scope_metrics.scope.name == "toolfold"
                for metric in scope_metrics.metrics:
                    exported[metric.name] = metric
    duration = exported["gen_ai.execute_tool.duration"]
    assert duration.unit == "s"
    [point] = duration.histogram.data_points
    attrs = {kv.key: kv.value.string_value for kv in point.attributes}
    assert attrs["gen_ai.tool.name"] == "bash" and attrs["toolfold.outcome"] == "ok"
    assert point.count == 1
    seen = exported["toolfold.tool.output.seen"]
    assert seen.unit == "By"
    assert seen.sum.data_points[0].as_int == len("".join(f"{i}\n" for i in range(1, 101)))
    assert exported["toolfold.tool.output.kept"].sum.data_points[0].as_int == len(
        "96\n97\n98\n99\n100\n"
    )


async def test_a_call_the_harness_cannot_settle_is_recorded_with_the_exception_class(
    metrics: InMemoryMetricReader, spans: Any
) -> None:
    from toolfold.harness import ExecutionHooks

    class BrokenStore(ExecutionHooks):
        async def before_settle(self, call: Any, sink: Any, result: Any) -> None:
            raise OSError("the store's disk went away")

    # Harness.run runs its calls in a task group: the failure comes out in its group.
    with pytest.raises(ExceptionGroup) as raised:
        await Harness([silent], hooks=BrokenStore()).run([ToolCall("c1", "silent", {})])
    assert raised.group_contains(OSError, match="disk went away")
    [point] = points(metrics, "gen_ai.execute_tool.duration")
    assert dict(point.attributes or {}) == {
        "gen_ai.tool.name": "silent",
        "gen_ai.tool.type": "function",
        "error.type": "OSError",
    }
    # The same error.type as the call's span.
    [span] = [s for s in spans.get_finished_spans() if s.name == "execute_tool silent"]
    assert dict(span.attributes or {})["error.type"] == "OSError"
