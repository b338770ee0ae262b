"""What `toolfold run` prints never carries terminal control characters, C1 included."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import toolfold


def test_c1_controls_and_8bit_csi_are_cleaned_from_what_run_prints(tmp_path: Path) -> None:
    # U+009B is CSI and U+009D is OSC for terminals that honour C1 controls even in
    # UTF-8; U+0085 (NEL) moves the cursor. None of them may reach the terminal, but
    # the spill-free window keeps every visible character, U+00A0 included.
    command = r"printf 'a\302\23331mred\302\205b\302\235c\302\240d\n'"
    done = toolfold("run", "--store", f"sqlite:{tmp_path}/s.db", "--", command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "aredbc\u00a0d\n"
    assert not any(0x80 <= ord(ch) <= 0x9F for ch in done.stdout + done.stderr)
