"""The README's Python example runs as written, and again: a second run is not a ReadRequired."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import zuno_env

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_python_example_runs_twice(workspace: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has a Python example"
    assert "config_overrides" not in blocks[0]  # the tool is passed the public way
    (workspace / "README.md").write_text("# demo\nline 2\n")
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", blocks[0]],
            cwd=workspace,
            env=zuno_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        runs.append(proc.stdout.splitlines())
    assert runs[0] == ["read ok 1\t# demo", "count_lines ok 2", "write ok Created notes/todo.md (7 bytes)."]
    assert runs[1] == ["read ok 1\t# demo", "count_lines ok 2", "write ok Replaced notes/todo.md (7 bytes)."]
    assert (workspace / "notes" / "todo.md").read_text() == "- ship\n"
