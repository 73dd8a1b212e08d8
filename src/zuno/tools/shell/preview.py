"""The chord profile's rule for a foreground command's output: "Shell and background output over
16 KiB: the result shows a short preview and where the log file is; read or search the log
instead of re-running" (the same preview a background job's output gets). The zuno profile
withholds over ``tool_output`` instead, and does not come here.
"""

from __future__ import annotations

from pathlib import Path

from zuno import limits
from zuno.windows import _skip_continuations


def wants_preview(profile: str, total: int) -> bool:
    return profile == "chord" and total > limits.BACKGROUND_PREVIEW_LIMIT


def preview(log_path: Path, total: int, shown: str) -> tuple[str, dict[str, object]]:
    """The preview text (the output's last bytes, from a character on) and its facts."""
    with open(log_path, "rb") as f:
        f.seek(max(0, total - limits.BACKGROUND_PREVIEW_BYTES))
        data = f.read(limits.BACKGROUND_PREVIEW_BYTES)
    data = data[_skip_continuations(data) :]
    cut = data.find(b"\n", 0, 256)
    if total > len(data) and 0 <= cut < len(data) - 1:
        data = data[cut + 1 :]  # from the start of a nearby line, not inside one
    text = (
        f"[output is {total} bytes, over {limits.BACKGROUND_PREVIEW_LIMIT}: showing the last {len(data)} bytes; "
        f"the whole log is {shown} — read or search it instead of re-running]\n"
        + data.decode("utf-8", "backslashreplace").removesuffix("\n")
    )
    return text, {"bytes": len(data), "of": total, "logPath": shown}
