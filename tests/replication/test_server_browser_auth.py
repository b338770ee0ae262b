"""The token and cookie in real Chromium: the viewer opened with ``?token=`` works by its
cookie, and pages of other origins in the same browser cannot run a command.

The viewer's URL carries the token once; the server sets an HttpOnly, SameSite=Strict
cookie and the page removes the token from its address. Then two attacker pages —
one on another port of 127.0.0.1 (same *site*: the browser sends our cookie along)
and one on 127.0.0.2 (another site) — try what a page can: a ``no-cors`` text/plain
POST, a CORS JSON POST, a text/plain form POST and reading the stored history. The
server refuses each (the test sees the status of every request the browser made)
and the attack file is never created.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolfold.harness import Lanes
from toolfold.server import HarnessCommands, create_app

ATTACK_JS = """
async ([target, command]) => {
  const out = {};
  const body = JSON.stringify({command});
  try {
    await fetch(target + "/v1/lanes/main/commands", {method: "POST", mode: "no-cors",
      credentials: "include", headers: {"Content-Type": "text/plain"}, body});
    out.simple = "sent";
  } catch (e) { out.simple = "failed: " + e; }
  try {
    const r = await fetch(target + "/v1/lanes/main/commands", {method: "POST",
      credentials: "include", headers: {"Content-Type": "application/json"}, body});
    out.cors = "read " + r.status;
  } catch (e) { out.cors = "blocked"; }
  try {
    const r = await fetch(target + "/v1/sessions/main/calls", {credentials: "include"});
    out.read = "read " + (await r.text());
  } catch (e) { out.read = "blocked"; }
  // The JSON-in-a-form trick: a text/plain form whose one field spells JSON.
  const frame = document.createElement("iframe");
  frame.name = "sink";
  document.body.appendChild(frame);  // its about:blank loads now, before onload is set
  await new Promise((resolve) => {
    frame.onload = resolve;  // the form's answer
    const form = document.createElement("form");
    form.method = "POST";
    form.enctype = "text/plain";
    form.action = target + "/v1/lanes/main/commands";
    form.target = "sink";
    const field = document.createElement("input");
    field.name = body.slice(0, -2) + '", "x": "';
    field.value = '"}';
    form.appendChild(field);
    document.body.appendChild(form);
    form.submit();
  });
  return JSON.stringify(out);
}
"""


class Recorder:
    """Wraps the app: records each request the server answered (method, path, status,
    Origin, whether it carried the cookie) as the server saw it."""

    def __init__(self, app: Any, cookie_name: str) -> None:
        self.app = app
        self.state = app.state
        self.cookie_name = cookie_name
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        entry = {
            "method": scope["method"],
            "path": scope["path"],
            "origin": headers.get("origin"),
            "cookie": f"{self.cookie_name}=" in headers.get("cookie", ""),
        }

        async def recording_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
                self.seen.append(entry)
            await send(message)

        await self.app(scope, receive, recording_send)


async def attacker_page(scope: Any, receive: Any, send: Any) -> None:
    """Any web page: an empty document for the test's script to run in."""
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"].removeprefix("lifespan.")
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]}
    )
    await send({"type": "http.response.body", "body": b"<!doctype html><title>a page</title>"})


def test_token_is_traded_for_a_cookie_and_other_pages_cannot_use_it(
    browser_context: Any, serve: Any, tmp_path: Path
) -> None:
    lanes = Lanes(default_lane="main")
    commands = HarnessCommands(lanes, cwd=tmp_path)
    app = create_app(lanes=lanes, run_command=commands)
    recorder = Recorder(app, "toolfold-token-")
    server = serve(recorder)
    cookie_name = recorder.cookie_name = f"toolfold-token-{server.port}"
    page = browser_context.new_page()
    try:
        # 1. The printed URL: the page loads, drops the token, and works by its cookie.
        page.goto(server.viewer_url("lane=main"))
        page.wait_for_function("() => window.toolfoldViewer && window.toolfoldViewer.connected")
        assert page.evaluate("() => location.search") == "?lane=main"
        assert "token" not in page.url
        assert page.evaluate("() => document.cookie") == ""  # HttpOnly: scripts cannot read it
        [cookie] = [c for c in browser_context.cookies(server.url) if c["name"] == cookie_name]
        assert cookie["value"] == server.token
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert cookie["path"] == "/"
        page.fill("#command-input", "echo ran-by-the-viewer > viewer-ran; echo ok")
        page.click("button[type=submit]")
        page.wait_for_function("() => window.toolfoldViewer.lastToolCallId")
        call_id = page.evaluate("() => window.toolfoldViewer.lastToolCallId")
        page.wait_for_selector(f"article.status-ok[data-tool-call-id='{call_id}']")
        assert (tmp_path / "viewer-ran").read_text() == "ran-by-the-viewer\n"

        # 2. Back without the token: the cookie is enough.
        page.goto(f"{server.url}/?lane=main")
        page.wait_for_function("() => window.toolfoldViewer && window.toolfoldViewer.connected")

        # 3. Other pages in the same browser, holding our cookie, attack.
        pwned = tmp_path / "pwned"
        same_site = serve(attacker_page, token="not-used-by-this-app", host="127.0.0.1")
        other_site = serve(attacker_page, token="not-used-by-this-app", host="127.0.0.2")
        for attacker in (same_site, other_site):
            del recorder.seen[:]
            evil = browser_context.new_page()
            try:
                evil.goto(attacker.url + "/")
                out = json.loads(evil.evaluate(ATTACK_JS, [server.url, f"id > {pwned}"]))
            finally:
                evil.close()
            # Nothing came back to the page: no CORS permission is ever granted.
            assert out == {"simple": "sent", "cors": "blocked", "read": "blocked"}, out
            seen = recorder.seen
            # The simple POST and the form both reached the server, and the CORS
            # POST's preflight and the history read: all from the page's Origin.
            posts = [r for r in seen if r["method"] == "POST"]
            assert len(posts) == 2, seen
            assert {r["method"] for r in seen} == {"POST", "OPTIONS", "GET"}, seen
            assert all(r["origin"] == attacker.url for r in seen), seen
            assert all(r["status"] == 403 for r in seen), seen
            # SameSite=Strict: a page of another site never sends our cookie; a page
            # on another port of the same host does, and only the Origin check stops
            # it. (A preflight never carries cookies.)
            sends_cookie = attacker is same_site
            with_credentials = [r for r in seen if r["method"] != "OPTIONS"]
            assert all(r["cookie"] is sends_cookie for r in with_credentials), seen
        server.run(commands.wait())
        assert not pwned.exists()
        assert server.call(lambda: len(lanes.host("main").view["order"])) == 1

        # 4. Without the cookie, the viewer gets the 401 that says where the token is:
        # an open viewer that must subscribe again says so instead of retrying...
        browser_context.clear_cookies()
        page.evaluate(
            "() => window.toolfoldViewer.source.onmessage({lastEventId: '9', data: '[]'})"
        )
        page.wait_for_function("() => window.toolfoldViewer.authError")
        conn = page.inner_text("#conn")
        assert conn.startswith("refused: this server needs its token"), conn
        assert "printed at start (it carries ?token=)" in conn
        # ... and a page opened without it is the error itself.
        r = page.goto(f"{server.url}/?lane=main")  # not from a cache: it asks the server
        assert r is not None and r.status == 401
        assert "printed at start (it carries ?token=)" in page.inner_text("body")
        r = page.goto(f"{server.url}/?token={'x' * 43}")
        assert r is not None and r.status == 401 and "wrong token" in page.inner_text("body")
    finally:
        page.close()
        server.run(commands.aclose())
