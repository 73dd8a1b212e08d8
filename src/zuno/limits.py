"""Every limit the spec names, in one place, with the spec's number.

Each constant has a test that crosses it. Tool families add their own limits here.
"""

from __future__ import annotations

# "Concurrency": every field accepts 1..=64.
CONCURRENCY_MIN = 1
CONCURRENCY_MAX = 64
DEFAULT_TOOL_CALLS = 8
DEFAULT_DELEGATIONS = 8
DEFAULT_MCP_CONNECTIONS = 8
DEFAULT_LSP_REQUESTS = 4

# "Output limits": defaults of tool_output.
DEFAULT_MAX_BYTES = 51_200
DEFAULT_MAX_LINES = 2_000

# "Reading output in windows": bg artifact / output windows.
WINDOW_DEFAULT_LIMIT = 16_384
WINDOW_MAX_LIMIT = 51_200

# At-most-once: Safe calls may be retried after a transient failure, a bounded number of times.
SAFE_RETRY_ATTEMPTS = 3
SAFE_RETRY_BACKOFF_S = (0.05, 0.2, 0.5)

# read: default page size in lines when no limit is given.
READ_DEFAULT_LIMIT_LINES = 2_000
# read: how much of a file is sniffed for NUL bytes to call it binary.
READ_BINARY_SNIFF_BYTES = 8_192

# Pre-dispatch hooks: how long a hook may take before the call is refused (fail closed).
HOOK_TIMEOUT_S = 30.0

# Process layer (issue 4/5): "A running command retains its most recent 2 MiB in memory while its
# complete output stays on disk."
PROCESS_MEMORY_TAIL = 2 * 1024 * 1024
# How much the capture reads per system call, and the capture pipe's size (Linux's maximum default).
PROCESS_READ_CHUNK = 1024 * 1024
PROCESS_PIPE_SIZE = 1024 * 1024
# A stop: SIGTERM, this long for the group to exit, then SIGKILL and this long to see it gone.
PROCESS_STOP_GRACE_S = 2.0
PROCESS_KILL_WAIT_S = 5.0
# When the guard itself is gone, how often group membership is re-read from /proc.
PROCESS_GUARD_LOST_POLL_S = 0.2
