"""The README's install recipes, executed as printed from the parent of a clean clone, and
the MCP client configuration of docs/mcp.md started by the official SDK client with the
absolute path of the toolfold those recipes installed: none of them may need the package
index to hold toolfold."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = "/home/me/toolfold/.venv/bin/toolfold"


def install_recipes() -> list[str]:
    """The commands of the README's "Install" code block, comments stripped."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Install", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "README.md has no sh block under '## Install'"
    return [
        line.split("#", 1)[0].strip()
        for line in block.group(1).splitlines()
        if line.split("#", 1)[0].strip()
    ]


@pytest.fixture(scope="module")
def workplace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A clean clone at ``<dir>/toolfold`` and an environment whose ``python3`` is a fresh
    virtualenv (with pipx in it), so the recipes install nowhere else."""
    top = tmp_path_factory.mktemp("install")
    subprocess.run(
        ["git", "clone", "--quiet", "--no-local", str(ROOT), str(top / "toolfold")],
        check=True,
        capture_output=True,
    )
    venv = top / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIPX_HOME"] = str(top / "pipx-home")
    env["PIPX_BIN_DIR"] = str(top / "pipx-bin")
    env["PIPX_MAN_DIR"] = str(top / "pipx-man")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pipx"],
        check=True,
        env=env,
        capture_output=True,
    )
    return top, env


def _run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, (command, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.mark.slow
def test_every_install_recipe_works_from_a_clone(workplace: tuple[Path, dict[str, str]]) -> None:
    top, env = workplace
    recipes = install_recipes()
    assert [r.split()[0] for r in recipes] == ["python3", "pipx", "python3"], recipes
    for recipe in recipes:
        _run(recipe, top, env)
    # The path install put a working toolfold with the mcp extra into the virtualenv.
    installed = top / "venv" / "bin" / "toolfold"
    assert "Usage: toolfold" in _run(f"{installed} --help", top, env).stdout
    # pipx made its own virtualenv and put `toolfold` in its bin directory.
    assert "Usage: toolfold" in _run(f"{top / 'pipx-bin' / 'toolfold'} --help", top, env).stdout
    # The wheel is where the README's comment says, and installs with an extra.
    wheels = sorted(p.name for p in (top / "dist").iterdir())
    assert wheels == ["toolfold-0.1.0-py3-none-any.whl"], wheels
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"dist/{wheels[0]}" in readme


def _client_configs() -> list[dict[str, object]]:
    """Every JSON server entry of docs/mcp.md that starts ``toolfold mcp`` itself."""
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        data = json.loads(block)
        entries = data.get("mcpServers", {"": data}).values()
        for entry in entries:
            args = list(entry.get("args", []))
            if args[:1] == ["mcp"] and "proxy" not in args:
                found.append(entry)
    return found


@pytest.mark.slow
async def test_the_client_config_starts_the_installed_toolfold(
    workplace: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    top, env = workplace
    installed = top / "venv" / "bin" / "toolfold"
    if not installed.exists():  # the recipes' test installs it; alone, install it here
        _run("python3 -m pip install -q './toolfold[mcp]'", top, env)
    configs = _client_configs()
    assert configs, "docs/mcp.md shows no client configuration for `toolfold mcp`"
    for config in configs:
        assert config["command"] == PLACEHOLDER, config  # an absolute path, never PATH's
        args = [str(a) for a in config["args"]]  # type: ignore[attr-defined]
        args = [a.replace("/home/me/.toolfold/", f"{tmp_path}/") for a in args]
        # A client starts servers with a PATH of its own: the virtualenv is not on it.
        params = StdioServerParameters(
            command=str(installed), args=args, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path)
        )
        with open(tmp_path / "server.err", "a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (r, w),
                ClientSession(r, w) as client,
            ):
                await client.initialize()
                names = {t.name for t in (await client.list_tools()).tools}
        assert {"bash", "read"} <= names, names


INSTALLERS = re.compile(
    r"\b(?:pip3? install|pipx install|uv pip install|uv tool install|uv add|uvx)\b(.*)"
)


def test_no_doc_installs_toolfold_from_the_package_index() -> None:
    # toolfold is not on the package index: `pip install 'toolfold[otel]'`, `pipx install
    # toolfold`, `uvx --from toolfold ...` fail as written. Docs install from the clone
    # (`pip install -e '.[extra]'`), a path (`./toolfold[mcp]`) or a built wheel.
    offenders = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            found = INSTALLERS.search(line)
            if found is None:
                continue
            # The command's own words: up to a comment or the end of its inline code.
            for word in re.split(r"[`#;|)]", found.group(1), maxsplit=1)[0].split():
                word = word.strip("`'\",;()")
                if re.match(r"toolfold(?:$|\[|==|>=|<|~=|@)", word):
                    offenders.append(f"{doc.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == [], "\n".join(offenders)
