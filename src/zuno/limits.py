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

# report_write: "content (complete UTF-8 text, at most 1 MiB)".
REPORT_MAX_BYTES = 1 << 20
# report_write: longest accepted name, in UTF-8 bytes (the host adds "-<16 hex>" and keeps the
# whole filename under the 255-byte limit common to supported filesystems).
REPORT_NAME_MAX_BYTES = 200

# view_image: "downscale when the long edge exceeds 2000 px".
IMAGE_MAX_EDGE_PX = 2000

# glob / grep ("glob and grep drive the official rg executable").
# Ripgrep 14 or newer must be available.
RG_MIN_VERSION = (14, 0, 0)
# How long `rg --version` may take during discovery before the candidate counts as unusable.
RG_VERSION_TIMEOUT_S = 10.0
# "A run whose output exceeds 64 MiB is refused": the stable order is decided after the walk.
RG_MAX_OUTPUT_BYTES = 64 * 1024 * 1024
# "Matching lines are capped at 2000 UTF-16 code units" (an astral-plane character counts two).
MATCH_LINE_MAX_UTF16 = 2_000
# "A single rg record over 1 MiB is skipped."
RG_RECORD_MAX_BYTES = 1024 * 1024
# How much of rg's stderr is kept to classify a failure (the rest is read and dropped).
RG_STDERR_KEEP_BYTES = 64 * 1024
# Result caps (the spec says "bounded output"; peers cap at 100 to 2000; see docs/spec-coverage.md).
GLOB_DEFAULT_MAX_RESULTS = 1_000
GREP_DEFAULT_MAX_HITS = 1_000
# chord grep: context_lines 0..20, default 0; larger values are clamped, with a notice.
CHORD_CONTEXT_DEFAULT = 0
CHORD_CONTEXT_MAX = 20
# chord grep: a context line over 256 bytes is shortened and ends with "...".
CHORD_CONTEXT_LINE_MAX_BYTES = 256
# chord grep: bytes/lines of the output budget kept back for the status lines around the body.
CHORD_BUDGET_RESERVE_BYTES = 1_024
CHORD_BUDGET_RESERVE_LINES = 8
