"""The README's Python example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import zuno_env

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_python_example_runs(workspace: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has a Python example"
    (workspace / "README.md").write_text("# demo\nline 2\n")
    proc = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=workspace, env=zuno_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "read ok 1\t# demo",
        "write ok Created notes/todo.md (7 bytes).",
    ]
    assert (workspace / "notes" / "todo.md").read_text() == "- ship\n"
