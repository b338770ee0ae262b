"""One trace across MCP: the SDK client injects its span's W3C trace context into the
request's ``params._meta`` (``traceparent``), ``toolfold mcp`` continues it (the request
span, then toolfold's ``execute_tool`` and ``toolfold.exec`` spans inside), and ``toolfold
mcp proxy`` continues it and injects its own toward the upstream, which continues that.

The servers run as real subprocesses under ``traced_main.py`` (an SDK provider writing
their spans to a file, as ``opentelemetry-instrument`` would set one up); the test's own
spans come from the in-memory exporter."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters
from mcp_helpers import clean_env, session_on, store_url, text_of
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = Path(__file__).parent
TRACED = str(HERE / "traced_main.py")


def traced(out: Path, *program: str, tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[TRACED, str(out), *program],
        env=clean_env(),
        cwd=str(tmp_path),
    )


def read_spans(path: Path) -> dict[str, dict[str, Any]]:
    """A subprocess's spans by span id."""
    spans = [json.loads(line) for line in path.read_text().splitlines()]
    return {s["span_id"]: s for s in spans}


def one(spans: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    [found] = [s for s in spans.values() if s["name"] == name]
    return found


def ids(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def client_send(exporter: InMemorySpanExporter, tool: str) -> tuple[str, str]:
    """The trace and span id of the test client's request span for ``tools/call tool``,
    checked to be a child of the test's ``agent step`` span."""
    finished = exporter.get_finished_spans()
    [step] = [s for s in finished if s.name == "agent step"]
    [send] = [s for s in finished if s.name == f"MCP send tools/call {tool}"]
    assert send.parent is not None and send.parent.span_id == step.context.span_id
    return ids(send)


async def test_toolfold_mcp_continues_the_clients_trace(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    out = tmp_path / "server-spans.jsonl"
    server = traced(
        out,
        *("-m", "toolfold.cli", "mcp", "--store", store_url(tmp_path), "--session", "s1"),
        tmp_path=tmp_path,
    )
    async with session_on(server, tmp_path / "server.err") as client:
        with trace.get_tracer("an agent").start_as_current_span("agent step"):
            result = await client.call_tool("bash", {"command": "seq 1 3"})
    assert text_of(result).startswith("1\n2\n3\n")
    trace_id, send_id = client_send(spans, "bash")
    remote = read_spans(out)
    # The server's request span (the SDK's, kind SERVER) has the client's span as its
    # remote parent: the traceparent the client put in params._meta.
    request = one(remote, "tools/call bash")
    assert (request["kind"], request["scope"]) == ("SERVER", "mcp-python-sdk")
    assert request["attributes"]["mcp.method.name"] == "tools/call"
    assert request["attributes"]["gen_ai.tool.name"] == "bash"
    assert request["attributes"]["network.transport"] == "pipe"  # toolfold's, on stdio
    assert (request["trace_id"], request["parent_id"]) == (trace_id, send_id)
    # toolfold's spans nest inside it, in the same trace.
    call = one(remote, "execute_tool bash")
    assert call["scope"] == "toolfold"
    assert call["parent_id"] == request["span_id"]
    assert call["attributes"]["toolfold.output.total_lines"] == 3
    command = one(remote, "toolfold.exec")
    assert command["parent_id"] == call["span_id"]
    assert {call["trace_id"], command["trace_id"]} == {trace_id}
    # The server's request durations, by method (the convention's metric).
    durations = json.loads(Path(f"{out}.metrics.json").read_text())
    requests = {
        (p["attributes"]["mcp.method.name"], p["attributes"].get("gen_ai.tool.name")): p["value"]
        for p in durations["mcp.server.operation.duration"]
    }
    assert requests[("tools/call", "bash")] == 1
    assert {
        p["attributes"]["network.transport"] for p in durations["mcp.server.operation.duration"]
    } == {"pipe"}
    assert ("initialize", None) in requests


async def test_toolfold_mcp_proxy_continues_the_trace_and_passes_it_upstream(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    proxy_out, upstream_out = tmp_path / "proxy-spans.jsonl", tmp_path / "upstream-spans.jsonl"
    upstream = [sys.executable, TRACED, str(upstream_out), str(HERE / "structured_upstream.py")]
    proxy = traced(
        proxy_out,
        *("-m", "toolfold.cli", "mcp", "proxy", "--store", store_url(tmp_path)),
        *("--session", "p1", "--", *upstream),
        tmp_path=tmp_path,
    )
    async with session_on(proxy, tmp_path / "proxy.err") as client:
        with trace.get_tracer("an agent").start_as_current_span("agent step"):
            result = await client.call_tool("table", {})
    assert not result.is_error, text_of(result)
    trace_id, send_id = client_send(spans, "table")
    at_proxy = read_spans(proxy_out)
    request = one(at_proxy, "tools/call table")
    assert request["kind"] == "SERVER"
    assert (request["trace_id"], request["parent_id"]) == (trace_id, send_id)
    call = one(at_proxy, "execute_tool table")
    assert call["scope"] == "toolfold" and call["parent_id"] == request["span_id"]
    # The proxy's own request to the upstream is a child of its call ...
    onward = one(at_proxy, "MCP send tools/call table")
    assert onward["kind"] == "CLIENT" and onward["parent_id"] == call["span_id"]
    # ... and the upstream continued the trace from the traceparent the proxy injected.
    at_upstream = read_spans(upstream_out)
    served = one(at_upstream, "tools/call table")
    assert served["kind"] == "SERVER"
    assert (served["trace_id"], served["parent_id"]) == (trace_id, onward["span_id"])
    # The proxy's forwarded call is in the client-side duration metric.
    durations = json.loads(Path(f"{proxy_out}.metrics.json").read_text())
    [forwarded] = durations["mcp.client.operation.duration"]
    assert forwarded == {
        "attributes": {"mcp.method.name": "tools/call", "gen_ai.tool.name": "table"},
        "value": 1,
    }


async def test_toolfold_mcp_over_http_continues_the_trace_and_names_its_session(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp_helpers import HTTP_TOKEN, http_server

    out = tmp_path / "server-spans.jsonl"
    launcher = [sys.executable, TRACED, str(out), "-m", "toolfold.cli"]
    with http_server(tmp_path, launcher=launcher) as (url, _):
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {HTTP_TOKEN}"}) as http,
            streamable_http_client(url, http_client=http) as (r, w),
            ClientSession(r, w) as client,
        ):
            await client.initialize()
            with trace.get_tracer("an agent").start_as_current_span("agent step"):
                result = await client.call_tool("bash", {"command": "echo over http"})
        assert text_of(result).startswith("over http")
        trace_id, send_id = client_send(spans, "bash")
        # Each span is written as it ends: the request span before its answer was sent.
        remote = read_spans(out)
    request = one(remote, "tools/call bash")
    assert (request["trace_id"], request["parent_id"]) == (trace_id, send_id)
    assert request["attributes"]["network.transport"] == "tcp"
    assert request["attributes"]["mcp.session.id"]  # the Mcp-Session-Id the server issued
    call = one(remote, "execute_tool bash")
    assert call["parent_id"] == request["span_id"]
