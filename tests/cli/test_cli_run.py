"""``toolfold run`` as a real subprocess: bounded result, byte-exact spill, exit status."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_helpers import toolfold

LINES = 750_000
"""``seq -f 'line %08g'`` lines: 14 bytes each, 10.5 MB in all."""


def expected_bytes(n: int) -> bytes:
    return b"".join(b"line %08d\n" % i for i in range(1, n + 1))


def test_ten_megabytes_bounded_result_complete_spill_and_nonzero_status(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    store = f"sqlite:{tmp_path / 'store' / 'toolfold.db'}"
    command = f"seq -f 'line %08g' 1 {LINES}; exit 7"
    proc = toolfold("run", "--store", store, "--session", "big", "--", command, cwd=tmp_path)
    assert proc.returncode == 7, proc.stderr
    # What a model receives: the default tail window (50 KiB) plus the footer and the
    # error line, nowhere near 10 MB.
    out = proc.stdout
    assert len(out.encode()) < 51_200 + 1_000
    assert f"line {LINES:08d}\n" in out
    assert "line 00000001\n" not in out
    assert f"of {LINES:,}" in out and "Full output: " in out
    assert out.rstrip().endswith("Command exited with code 7")
    assert "`toolfold show big call-" in proc.stderr and f" --store {store}`" in proc.stderr
    spills = list((tmp_path / "store" / "spill" / "big").glob("*.log"))
    assert len(spills) == 1
    assert f"Full output: {spills[0]}]" in out
    data = spills[0].read_bytes()
    assert len(data) == 14 * LINES
    assert data == expected_bytes(LINES)
    # The settled call is in the store with the command's exit code in its details.
    shown = toolfold("show", "big", "1", "--store", store, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    message = json.loads(shown.stdout)
    assert message["details"]["exit_code"] == 7
    assert message["is_error"] is True
    # stdout is the model's text verbatim, plus one newline because it does not end in one.
    assert message["content"][0]["text"] + "\n" == out


def test_small_run_exit_zero_prints_exactly_the_model_text(tmp_path: Path) -> None:
    proc = toolfold("run", "--", "printf 'a\\nb\\nc\\n'", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "a\nb\nc\n"
    # The default store is .toolfold/toolfold.db in the current directory.
    assert (tmp_path / ".toolfold" / "toolfold.db").is_file()
    assert "ok, exit status 0" in proc.stderr
    # The hint to look at the call again works as typed: the default store needs no flag.
    hint = re.search(r"`toolfold show (\S+) (call-\w+)`", proc.stderr)
    assert hint is not None, proc.stderr
    again = toolfold("show", hint.group(1), hint.group(2), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == "a\nb\nc\n"


def test_head_retention_and_limits_shape_the_window(tmp_path: Path) -> None:
    proc = toolfold(
        "run",
        "--retain",
        "head",
        "--max-lines",
        "3",
        "--session",
        "h",
        "--",
        "seq 1 10",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("1\n2\n3\n")
    assert "\n10\n" not in proc.stdout
    spill = next((tmp_path / ".toolfold" / "spill" / "h").glob("*.log"))
    assert spill.read_text() == "".join(f"{i}\n" for i in range(1, 11))


def test_json_prints_the_settled_message_and_argv_is_quoted(tmp_path: Path) -> None:
    proc = toolfold("run", "--json", "--", "printf", "%s|", "two words", "x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    message = json.loads(proc.stdout)
    assert message["role"] == "tool_result" and message["tool_name"] == "bash"
    assert message["content"][0]["text"] == "two words|x|"
    assert message["outcome"] == "ok"


def test_env_var_selects_a_jsonl_store(tmp_path: Path) -> None:
    from cli_helpers import clean_env

    env = clean_env()
    env["TOOLFOLD_STORE"] = f"jsonl:{tmp_path / 'j'}"
    proc = toolfold("run", "--session", "viaenv", "--", "echo hi", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "j" / "viaenv.jsonl").is_file()
    listed = toolfold("sessions", cwd=tmp_path, env=env)
    assert listed.returncode == 0 and "viaenv" in listed.stdout


def test_head_tail_run_shows_the_start_and_the_end_and_where_to_read_on(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()  # an explicit store's directory must exist
    store = f"sqlite:{tmp_path / 'store' / 'toolfold.db'}"
    command = "echo 'error: the first one'; seq -f 'line %08g' 1 30000; echo 'summary: 1 error'"
    proc = toolfold(
        "run",
        "--store",
        store,
        "--session",
        "ht",
        "--retain",
        "head_tail",
        "--",
        command,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("error: the first one\nline 00000001\n")
    assert "summary: 1 error\n" in out
    [spill] = (tmp_path / "store" / "spill" / "ht").glob("*.log")
    # 20 % of the 2,000-line window for the head: the cut starts at line 401.
    assert "line 00000399\n[... " in out
    marker = out.split("[... ", 1)[1].split(" ...]", 1)[0]
    assert f"Full output: {spill}; read on from line 401 (offset=401)" in marker
    lines = spill.read_text().splitlines()
    assert lines[400] == "line 00000400" and "line 00000400\n" not in out
    # The stored call folds to the same text (its three text blocks joined).
    shown = toolfold("show", "ht", "1", "--store", store, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout == out


def test_head_share_gives_the_start_that_share_of_the_window(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()  # an explicit store's directory must exist
    store = f"sqlite:{tmp_path / 'store' / 'toolfold.db'}"
    args = ["--retain", "head_tail", "--max-lines", "100", "--head-share", "0.75"]
    proc = toolfold(
        "run", "--store", store, "--session", "hs", *args, "--", "seq 1 1000", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    head, rest = proc.stdout.split("[... ", 1)
    # 75 of the 100 lines for the start, so the cut starts at line 76; 25 for the end.
    assert head == "".join(f"{i}\n" for i in range(1, 76))
    assert "read on from line 76 (offset=76)" in rest.split(" ...]", 1)[0]
    assert rest.split(" ...]\n", 1)[1].startswith("".join(f"{i}\n" for i in range(976, 1001)))
