"""OpenTelemetry: every call's ``execute_tool`` span and its attributes (docs/observability.md),
checked with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once
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
from toolfold.harness import (
    DurableHooks,
    EventBus,
    Harness,
    ToolCall,
    ToolContext,
    execute_tool_call,
    tool,
)
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import MemoryRepository, open_repository
from toolfold.tools import bash_tool

HERE = Path(__file__).parent


def tool_spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """The finished execute_tool spans by call id."""
    found: dict[str, ReadableSpan] = {}
    for span in exporter.get_finished_spans():
        attrs = span.attributes or {}
        if attrs.get("gen_ai.operation.name") == "execute_tool":
            found[str(attrs["gen_ai.tool.call.id"])] = span
    return found


class NoParams(BaseModel):
    pass


class Gate:
    def __init__(self) -> None:
        self.reached = asyncio.Event()


def waiting_tool(gate: Gate) -> Any:
    @tool(params=NoParams)
    async def wait(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Writes, then waits for its cancel event."""
        out.write("waiting\n")
        gate.reached.set()
        await cancel.wait()

    return wait


@tool(params=NoParams)
async def broken(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes, then raises."""
    out.write("half done\n")
    raise ValueError("the disk is on fire")


@tool(params=NoParams)
async def echo(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes one line."""
    out.write("hello\n")


async def test_a_bounded_bash_call_has_an_execute_tool_span_with_its_truncation(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    harness = Harness([bash_tool(output=OutputPolicy(max_lines=5))], context=context)
    [result] = await harness.run([ToolCall("c1", "bash", {"command": "seq 1 100"})])
    assert result.text.startswith("96\n97\n98\n99\n100\n[Showing lines 96-100 of 100")
    span = tool_spans(spans)["c1"]
    assert span.name == "execute_tool bash"
    assert span.kind is SpanKind.INTERNAL
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "bash"
    assert attrs["gen_ai.tool.type"] == "function"
    assert attrs["toolfold.outcome"] == "ok"
    assert attrs["toolfold.interrupted"] is False
    assert attrs["toolfold.output.retain"] == "tail"
    assert attrs["toolfold.output.total_lines"] == 100
    assert attrs["toolfold.output.total_bytes"] == len("".join(f"{i}\n" for i in range(1, 101)))
    assert attrs["toolfold.output.kept_lines"] == 5
    assert attrs["toolfold.output.kept_bytes"] == len("96\n97\n98\n99\n100\n")
    assert attrs["toolfold.output.truncated"] is True
    assert attrs["toolfold.output.truncated_by"] == "lines"
    assert attrs["toolfold.output.spilled"] is True
    assert "error.type" not in attrs
    assert span.status.status_code is StatusCode.UNSET
    # The command is a child span, with what the exec env saw at the source.
    [command] = [s for s in spans.get_finished_spans() if s.name == "toolfold.exec"]
    assert command.parent is not None and command.parent.span_id == span.context.span_id
    exec_attrs = dict(command.attributes or {})
    assert exec_attrs["process.exit.code"] == 0
    assert exec_attrs["toolfold.exec.env"] == "local"
    assert exec_attrs["toolfold.output.total_lines"] == 100
    assert exec_attrs["toolfold.exec.timed_out"] is False
    assert "seq" not in str(exec_attrs)  # the command line is not recorded
    spill = result.state["spill_path"] if result.state is not None else None
    assert spill is not None and exec_attrs["toolfold.output.spill_bytes"] == 292
    assert Path(spill).stat().st_size == 292  # every byte seq printed


async def test_a_command_that_times_out_has_its_exec_span_say_so(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    env = LocalExecEnv(tmp_path / "spill")
    result = await env.exec("echo started; exec sleep 60", timeout=0.2)
    assert result.timed_out
    [command] = spans.get_finished_spans()
    attrs = dict(command.attributes or {})
    assert attrs["toolfold.exec.timed_out"] is True and "process.exit.code" not in attrs
    assert attrs["toolfold.output.total_bytes"] == len("started\n")
    assert command.parent is None


async def test_an_error_sets_error_type_and_an_error_status(
    spans: InMemorySpanExporter,
) -> None:
    [bad, good] = await Harness([broken, echo]).run(
        [ToolCall("c1", "broken", {}), ToolCall("c2", "echo", {})]
    )
    assert bad.is_error and not good.is_error
    found = tool_spans(spans)
    attrs = dict(found["c1"].attributes or {})
    assert attrs["toolfold.outcome"] == "error" and attrs["error.type"] == "error"
    assert found["c1"].status.status_code is StatusCode.ERROR
    assert attrs["toolfold.output.total_bytes"] == len("half done\n")  # notice not counted
    assert found["c2"].status.status_code is StatusCode.UNSET
    # Calls of one run are siblings, not nested in one another.
    assert found["c1"].parent is None and found["c2"].parent is None


async def test_invalid_arguments_and_unknown_tools_have_spans_too(
    spans: InMemorySpanExporter,
) -> None:
    await Harness([echo]).run(
        [ToolCall("c1", "echo", {"x": 1}), ToolCall("c2", "nope", {})], run_id="r"
    )
    found = tool_spans(spans)
    assert dict(found["c2"].attributes or {})["error.type"] == "unknown_tool"
    assert found["c2"].name == "execute_tool nope"
    # NoParams ignores extra keys: the first call ran.
    assert dict(found["c1"].attributes or {})["toolfold.outcome"] == "ok"


async def test_a_cancelled_call_says_so(spans: InMemorySpanExporter) -> None:
    gate = Gate()
    cancel = asyncio.Event()
    task = asyncio.ensure_future(
        Harness([waiting_tool(gate)]).run([ToolCall("c1", "wait", {})], cancel=cancel)
    )
    await gate.reached.wait()
    cancel.set()
    [result] = await task
    assert result.outcome == "cancelled"
    span = tool_spans(spans)["c1"]
    attrs = dict(span.attributes or {})
    assert attrs["toolfold.outcome"] == "cancelled" and attrs["error.type"] == "cancelled"
    assert attrs["toolfold.interrupted"] is False
    assert span.status.status_code is StatusCode.ERROR


async def test_an_interrupted_call_ends_its_span_before_the_cancellation_propagates(
    spans: InMemorySpanExporter,
) -> None:
    gate = Gate()
    task = asyncio.ensure_future(
        execute_tool_call(waiting_tool(gate), "c1", {}, run_id="r", turn_id="t", bus=EventBus())
    )
    await gate.reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    attrs = dict(tool_spans(spans)["c1"].attributes or {})
    assert attrs["toolfold.outcome"] == "interrupted"
    assert attrs["toolfold.interrupted"] is True and attrs["error.type"] == "interrupted"
    assert attrs["toolfold.output.total_bytes"] >= len("waiting\n")


async def test_calls_are_children_of_the_current_span(spans: InMemorySpanExporter) -> None:
    outer_tracer = trace.get_tracer("a framework")
    with outer_tracer.start_as_current_span("agent step") as outer:
        await Harness([echo]).run([ToolCall("c1", "echo", {}), ToolCall("c2", "echo", {})])
        await execute_tool_call(echo, "c3", {}, run_id="r", turn_id="t", bus=EventBus())
    found = tool_spans(spans)
    for call_id in ("c1", "c2", "c3"):
        parent = found[call_id].parent
        assert parent is not None, call_id
        assert parent.span_id == outer.get_span_context().span_id
        assert found[call_id].context.trace_id == outer.get_span_context().trace_id


async def test_spans_a_tool_opens_are_children_of_its_call(
    spans: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("a tool")

    @tool(params=NoParams)
    async def traced(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Opens a span of its own."""
        with tracer.start_as_current_span("inner work"):
            out.write("done\n")

    await Harness([traced]).run([ToolCall("c1", "traced", {})])
    [inner] = [s for s in spans.get_finished_spans() if s.name == "inner work"]
    call = tool_spans(spans)["c1"]
    assert inner.parent is not None and inner.parent.span_id == call.context.span_id


async def test_durable_calls_report_checkpoints_and_the_lease_holder(
    spans: InMemorySpanExporter,
) -> None:
    session = await MemoryRepository().open_session("s", create=True)
    harness = Harness([echo], hooks=DurableHooks(Durability(session, interval=0.0, host="h1")))
    await harness.run([ToolCall("c1", "echo", {})], run_id="r1")
    attrs = dict(tool_spans(spans)["c1"].attributes or {})
    assert attrs["toolfold.resumed"] is False
    assert attrs["toolfold.lease.holder"] == "h1"
    assert attrs["toolfold.durable.checkpoints"] >= 1
    assert str(attrs["toolfold.operation.id"])


def test_off_means_no_tracer_and_no_import() -> None:
    # With the API's proxy provider (nobody configured one), there is no tracer.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert _otel.tracer() is None and _otel.recording_span() is None
    # And toolfold never imports opentelemetry itself: a process that does not use it
    # runs every call without loading it.
    assert_a_call_imports_no_opentelemetry("assert _otel.tracer() is None")


async def test_a_resume_after_kill_9_traces_the_replayed_and_the_interrupted_call(
    spans: InMemorySpanExporter, metrics: InMemoryMetricReader, tmp_path: Path
) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    child = subprocess.Popen(
        [sys.executable, str(HERE / "otel_crash_child.py"), url],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    sys.path.insert(0, str(HERE))
    try:
        from otel_crash_child import tools
    finally:
        sys.path.remove(str(HERE))
    repo = open_repository(url)
    try:
        session = await repo.open_session("s")
        harness = Harness(tools(), session=session)
        results = {r.tool_call_id: r for r in await harness.resume()}
    finally:
        await repo.close()
    assert results["c1"].text == "step one\nstep two\n"
    assert results["c2"].outcome == "interrupted"
    found = tool_spans(spans)
    replayed = dict(found["c1"].attributes or {})
    assert replayed["toolfold.resumed"] is True and replayed["toolfold.outcome"] == "ok"
    interrupted = dict(found["c2"].attributes or {})
    assert interrupted["toolfold.resumed"] is True
    assert interrupted["toolfold.interrupted"] is True
    assert interrupted["error.type"] == "interrupted"
    assert found["c2"].name == "execute_tool deploy"
    assert interrupted["toolfold.output.total_bytes"] == len("deploying\n")
    # The resume counts both calls (the killed process counted neither).
    outcomes = {
        (
            dict(p.attributes or {})["gen_ai.tool.name"],
            dict(p.attributes or {})["toolfold.outcome"],
        ): p.count
        for p in points(metrics, "gen_ai.execute_tool.duration")
    }
    assert outcomes == {(found["c1"].name.split()[1], "ok"): 1, ("deploy", "interrupted"): 1}


def test_spans_export_over_otlp_http_to_a_receiver_on_loopback(tmp_path: Path) -> None:
    """The whole path a user sets up: the SDK's OTLP/HTTP exporter posts protobuf to a
    receiver (a small one here: no collector installs from the package index), which
    decodes what arrived."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    with otlp_receiver(ExportTraceServiceResponse().SerializeToString()) as (url, received):
        provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
        trace._TRACER_PROVIDER_SET_ONCE = Once()
        trace.set_tracer_provider(provider)
        try:
            run_bounded_bash_call(tmp_path)
            provider.force_flush()
        finally:
            trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved
            provider.shutdown()
    exported: dict[str, Any] = {}
    for path, content_type, body in received:
        assert path == "/v1/traces" and content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    exported[span.name] = (scope_spans.scope.name, span)
    scope, call = exported["execute_tool bash"]
    assert scope == "toolfold"
    attrs = {kv.key: kv.value for kv in call.attributes}
    assert attrs["gen_ai.tool.call.id"].string_value == "c1"
    assert attrs["toolfold.outcome"].string_value == "ok"
    assert attrs["toolfold.output.total_lines"].int_value == 100
    assert attrs["toolfold.output.kept_lines"].int_value == 5
    assert attrs["toolfold.output.truncated"].bool_value is True
    _, command = exported["toolfold.exec"]
    assert command.parent_span_id == call.span_id and command.trace_id == call.trace_id
