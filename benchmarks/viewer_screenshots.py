"""Regenerate the screenshots of docs/viewer.md from a real run.

    .venv/bin/python benchmarks/viewer_screenshots.py [--out docs/images]

Runs ``toolfold run`` three times into a fresh store (a long output that is cut, a
failing command, a short one), starts ``toolfold serve`` on it, starts a command in
lane ``main`` that is still running while the pictures are taken, and photographs the
viewer with headless Chromium (/usr/bin/chromium, through playwright): the landing
view, a session, the full-output panel deep in a spill file, and the landing view at
phone width in dark mode. Run it again whenever the page changes.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]
ROOT = Path(__file__).resolve().parents[1]

RUNS = [
    ("build", ["sh", "-c", 'for i in $(seq 1 6000); do echo "compiling unit $i of 6000"; done']),
    (
        "tests",
        [
            "sh",
            "-c",
            "echo '== 41 passed, 2 failed =='; echo 'FAILED test_io.py::test_eof'; exit 1",
        ],
    ),
    ("docs", ["sh", "-c", "echo 'built 14 pages in 0.8 s'"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLFOLD_STORE", "TOOLFOLD_TOKEN")}
    with tempfile.TemporaryDirectory(prefix="viewer-shots-") as name:
        cwd = Path(name)
        store = f"sqlite:{cwd / 'toolfold.db'}"
        for session, command in RUNS:
            subprocess.run(
                [*TOOLFOLD, "run", "--store", store, "--session", session, "--", *command],
                cwd=cwd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token = secrets.token_urlsafe(32)
        proc = subprocess.Popen(
            [*TOOLFOLD, "serve", "--port", str(port), "--store", store, "--token", token],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"})
        try:
            for _ in range(300):
                try:
                    if client.get("/v1/lanes", timeout=2).is_success:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            client.post(
                "/v1/lanes/main/commands",
                json={"command": 'for i in $(seq 1 600); do echo "step $i"; sleep 0.1; done'},
            ).raise_for_status()
            shoot(base, token, out)
        finally:
            client.close()
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    for png in sorted(out.glob("viewer-*.png")):
        print(f"{png.relative_to(ROOT)}: {png.stat().st_size // 1024} KiB")


def shoot(base: str, token: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
        )
        context = browser.new_context(viewport={"width": 1280, "height": 760}, color_scheme="light")
        page = context.new_page()
        page.goto(f"{base}/?token={token}")
        page.wait_for_selector("#overview-list li[data-name='main']")
        page.wait_for_timeout(1500)  # let the running call's counters move
        page.screenshot(path=str(out / "viewer-landing.png"))
        page.goto(f"{base}/#/session/build")
        page.wait_for_selector("#stored article.status-ok")
        page.screenshot(path=str(out / "viewer-session.png"))
        page.click("#stored article .tool-bar button:has-text('show full output')")
        page.wait_for_function("() => window.toolfoldViewer.full.lines > 0")
        page.fill("#full-line", "4200")
        page.press("#full-line", "Enter")
        page.wait_for_function(
            "() => window.toolfoldViewer.full.line === 4200 && window.toolfoldViewer.full.lines > 0"
        )
        page.fill("#full-find", "unit 4242")
        page.press("#full-find", "Enter")
        page.screenshot(path=str(out / "viewer-full-output.png"))
        page.goto(f"{base}/#/session/tests")
        page.wait_for_selector("#stored article.status-error")
        page.screenshot(path=str(out / "viewer-error.png"))
        phone = browser.new_context(
            viewport={"width": 390, "height": 800}, color_scheme="dark", device_scale_factor=1
        )
        p2 = phone.new_page()
        p2.goto(f"{base}/?token={token}")
        p2.wait_for_selector("#overview-list li[data-name='build']")
        p2.screenshot(path=str(out / "viewer-phone-dark.png"))
        browser.close()


if __name__ == "__main__":
    main()
