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
# What of a pre-dispatch hook's stdout / stderr is kept (the decision, the reason); the rest is read
# away and counted. And how long, once the hook exited and what it left behind was stopped, its
# pipes may take to reach their end.
HOOK_OUTPUT_MAX_BYTES = 64 * 1024
HOOK_PIPE_GRACE_S = 1.0
HOOK_EXIT_POLL_MAX_S = 0.01  # the longest pause between looks at whether a hook has exited

# Process layer (issue 4/5): "A running command retains its most recent 2 MiB in memory while its
# complete output stays on disk."
PROCESS_MEMORY_TAIL = 2 * 1024 * 1024
# How much the capture reads per system call, and the capture pipe's size (Linux's maximum default).
PROCESS_READ_CHUNK = 1024 * 1024
PROCESS_PIPE_SIZE = 1024 * 1024
# At most this much is read from the capture pipe before the guard's status pipe is looked at again.
PROCESS_DRAIN_BUDGET = 4 * PROCESS_READ_CHUNK
# A stop: SIGTERM, this long for the group to exit, then SIGKILL and this long to see it gone.
PROCESS_STOP_GRACE_S = 2.0
PROCESS_KILL_WAIT_S = 5.0
# When the guard itself is gone, how often group membership is re-read from /proc.
PROCESS_GUARD_LOST_POLL_S = 0.2

# shell (issue 4) ------------------------------------------------------------------------------
# The chord digest: a foreground shell's timeout_ms defaults to 600000 and is at most 600000.
SHELL_TIMEOUT_DEFAULT_MS = 600_000
SHELL_TIMEOUT_MAX_MS = 600_000
# "The pre-flight repository read budget": up to four git reads share one 30 s budget for the
# whole phase, racing a deadline that is the budget minus a small reserve (the reserve is the time
# kept back to stop a read that never answered: its group is killed and reaped inside the budget).
PREFLIGHT_BUDGET_S = 30.0
PREFLIGHT_MAX_READS = 4
PREFLIGHT_RESERVE_S = 2.0  # at most this much ...
PREFLIGHT_RESERVE_FRACTION = 0.1  # ... and never more than this share of a small budget
# writtenPaths: how many literal paths one command may have examined before and after (a lower
# bound; a command naming more is reported for the first ones only).
SHELL_WRITTEN_MAX_CANDIDATES = 512
# How many simple commands of one shell command permission patterns see besides its whole text (not
# a spec limit: a bound on the reading).
SHELL_PERMISSION_FORMS_MAX = 256
# Output a command wrote that is read back into memory for the result; larger output is left in
# its capture log and withheld from there (never read whole into memory).
SHELL_INLINE_READ_MAX_BYTES = 8 << 20

# Background execution (issue 5; the chord digest's "Execution").
# "background at most 21600000 (6 h) and no deadline when not given; 0 means no deadline"
BACKGROUND_TIMEOUT_MAX_MS = 21_600_000
BACKGROUND_MAX_S = BACKGROUND_TIMEOUT_MAX_MS / 1000
# "A foreground command that runs past yield_time_ms (default 90000) becomes a background job"
YIELD_TIME_DEFAULT_MS = 90_000
# "Shell and background output over 16 KiB: the result shows a short preview and where the log file is"
BACKGROUND_PREVIEW_LIMIT = 16 * 1024
BACKGROUND_PREVIEW_BYTES = 2 * 1024
# "bg wait ... each call is capped at 60 seconds"
BG_WAIT_MAX_S = 60.0
# job_output: "each wait is capped at 30 s by the runtime"
JOB_OUTPUT_WAIT_MAX_S = 30.0
# job_output: repeated non-blocking reads with no new output are first flagged as polling, then refused.
JOB_POLL_FLAG_AFTER = 2
JOB_POLL_REFUSE_AFTER = 4
# After a job's group exited: how long the capture may take to reach end-of-file (an escapee that
# left the group may hold the pipe forever).
BACKGROUND_CAPTURE_DRAIN_S = 1.0
# The session's end: SIGTERM, this long, then SIGKILL.
BACKGROUND_SESSION_END_GRACE_S = 1.0

# Ended jobs whose 2 MiB tail stays in memory (older ended jobs are read from their log file).
BACKGROUND_ENDED_TAILS_KEPT = 8

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

# -- the agent loop (issue 13) -------------------------------------------------------------------
# Named, configurable limits of one turn (config agent.limits); each has a typed stop reason.
AGENT_STEPS_PER_TURN = 50  # tool steps in one turn -> step_limit
AGENT_TOKENS_PER_TURN = 2_000_000  # provider tokens (in + out) in one turn -> token_limit
AGENT_SECONDS_PER_TURN = 3_600  # wall time of one turn -> time_limit
AGENT_GOAL_CONTINUATIONS = 25  # automatic Goal continuations in one turn -> continuation_limit
# "three consecutive identical observations pause with typed no_progress".
GOAL_NO_PROGRESS_OBSERVATIONS = 3
# "Three unchanged, consecutive, single-read steps stop with stagnant_tool_loop".
STAGNANT_READ_STEPS = 3
# Compaction: when the next request would pass this fraction of the model's context.
COMPACT_AT_FRACTION = 0.8
# After a compaction the kept recent history is at most this fraction of the context.
COMPACT_KEEP_FRACTION = 0.3
# Compactions tried before one request (a window that cannot shrink further is sent as it is).
COMPACT_MAX_PASSES = 3
# An answer the provider paused (Anthropic's pause_turn: a long hosted search) is sent back to go on
# at most this many times in one turn; then the turn ends with the answer so far.
PAUSED_ANSWER_CONTINUATIONS = 8
# The user's own messages rebuilt into every request: each text and all of them together.
USER_SOURCE_TEXT_MAX_CHARS = 4_000
USER_SOURCES_MAX_CHARS = 16_000
# A tool result shown to the summariser is cut to this many characters: its head and its last
# COMPACT_RESULT_TAIL_CHARS (a shell result ends with its status and its [verification rcp_…]
# receipt, which a later step cites), plus any receipt in the part left out.
COMPACT_RESULT_MAX_CHARS = 2_000
COMPACT_RESULT_TAIL_CHARS = 600
# A tool call's arguments shown to the summariser are cut to this many characters.
COMPACT_CALL_ARGS_MAX_CHARS = 500
# How long a run waits for background jobs it started before it stops waiting (wake on completion).
BACKGROUND_WAKE_MAX_S = 6 * 3600

# Admission (issue 10): how deep and how large one call may be before it is refused as
# invalid_arguments, unread (a call nested ~1,000 deep used to raise RecursionError and leave the
# step open). JSON nesting levels, counting the call object itself as level 1; and the UTF-8 size of
# its strings plus a few bytes per value.
CALL_MAX_DEPTH = 64
CALL_MAX_BYTES = 32 << 20

# webfetch / web_search (issue 12): "The default timeout is 30 seconds and the per-call maximum is
# 120 seconds"; "at most five redirects".
WEBFETCH_DEFAULT_TIMEOUT_MS = 30_000
WEBFETCH_MAX_TIMEOUT_MS = 120_000
WEBFETCH_MAX_REDIRECTS = 5
# The body cap, counted after decompression (a gzip bomb is refused while it streams).
WEBFETCH_DEFAULT_MAX_BYTES = 10 * 1024 * 1024
WEBFETCH_MAX_BYTES_CEILING = 1 << 30
# web_search: queries in one batch call, and results asked per query.
WEB_SEARCH_MAX_QUERIES = 8
WEB_SEARCH_DEFAULT_RESULTS = 8
WEB_SEARCH_MAX_RESULTS = 20
# A provider's JSON answer larger than this is refused (no provider sends that much for 20 hits).
WEB_SEARCH_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# Durable work state (zuno.tools.state). Notes: "A scope may contain at most 100 documents,
# 256 KiB per document, and 1 MiB in total."
NOTES_MAX_DOCUMENTS = 100
NOTES_MAX_DOCUMENT_BYTES = 256 * 1024
NOTES_MAX_TOTAL_BYTES = 1 << 20
# A note's logical name (never a host path): at most this many UTF-8 bytes.
NOTES_MAX_NAME_BYTES = 200
# How many matching lines notes / history search_contents return before saying "truncated".
STATE_SEARCH_MAX_HITS = 200
# history list_items: the default and largest page; the preview of one item in a listing.
HISTORY_PAGE_DEFAULT = 50
HISTORY_PAGE_MAX = 500
HISTORY_PREVIEW_CHARS = 200
# Bounded memory (memory_read / memory_update), per workspace and agent. The spec says "bounded";
# these are Zuno's numbers.
MEMORY_MAX_ENTRIES = 100
MEMORY_MAX_ENTRY_BYTES = 4 * 1024
# 32 KiB, not 64: with 100 entries' JSON around it, memory_read of a full memory still fits the
# default tool_output.max_bytes (51200) and is seen inline (zuno.tools.state.fits checks the rest).
MEMORY_MAX_TOTAL_BYTES = 32 * 1024
MEMORY_MAX_PENDING_PROPOSALS = 50
# -- Issue 10: safe paths and bounded reads ----------------------------------------------------
# A path component holds at most 255 bytes (NAME_MAX of Linux, macOS and Windows filesystems);
# a longer one is invalid arguments naming the field, not an I/O failure inside the tool.
PATH_NAME_MAX_BYTES = 255
# A whole model-given path holds at most 4095 bytes (PATH_MAX less the terminating NUL).
PATH_MAX_BYTES = 4_095
# Files are read in chunks of this size: a read streams, hashing as it goes, and holds only the
# window it returns.
FILE_READ_CHUNK = 1024 * 1024
# read scans a regular file up to this size on the event loop (a few syscalls and one chunk); a
# larger one, a directory listing and every mutation's I/O run in a worker thread.
READ_INLINE_MAX_BYTES = 256 * 1024
# read holds at most this much of one line of the window; a longer line is shown up to it and
# says how long it really is (the rest stays in the file, reachable with grep or shell).
READ_LINE_HOLD_BYTES = 1024 * 1024
# view_image decodes a source file of at most this many bytes (it holds the file to decode it).
IMAGE_MAX_SOURCE_BYTES = 64 * 1024 * 1024

# -- MCP (issue 11) ------------------------------------------------------------------------------
# A connected server's call (and its start) times out after timeout_ms: default 60 s, at most 1 h.
MCP_TIMEOUT_DEFAULT_MS = 60_000
MCP_TIMEOUT_MAX_MS = 3_600_000
# Starting a server (spawn + handshake) may take longer than a short call timeout: at least 30 s.
MCP_START_TIMEOUT_MIN_S = 30.0
# A connected server's tools/list is read page by page to its end, up to this many pages (beyond,
# or a cursor sent twice, the server is refused at start with a protocol error naming it).
MCP_TOOL_LIST_PAGES_MAX = 1000
# Tool names as providers take them: ^[A-Za-z0-9_-]{1,64}$ (an extension tool's name is held to it;
# a connected MCP server's tool is renamed to fit it).
TOOL_NAME_MAX = 64
MCP_TOOL_NAME_MAX = TOOL_NAME_MAX
# An unknown tool's name is echoed (in the refusal, the record, the event log) whole up to this many
# characters; a longer one (a client can send megabytes) is shown by its first MCP_TOOL_NAME_MAX
# characters and its length.
UNKNOWN_TOOL_NAME_SHOWN_MAX = 256
# A refusal that names the available tools names at most this many (every one of Zuno's own, then
# connected MCP tools as fit, then how many more there are): a server can offer thousands.
AVAILABLE_TOOLS_SHOWN_MAX = 64
# tool_search returns at most this many matches (default 5).
TOOL_SEARCH_DEFAULT_RESULTS = 5
TOOL_SEARCH_MAX_RESULTS = 20
# A stdio server's stderr is logged up to this much per run; the rest is counted and dropped.
MCP_STDERR_LOG_MAX_BYTES = 8 << 20

# -- provider requests (issue 13) -----------------------------------------------------------------
# A transient provider failure (429, 5xx, overloaded, a reset or a timeout) is tried again up to
# provider.<id>.options.maxRetries times (default 3, so 4 attempts; 0 turns retries off; at most 10).
PROVIDER_MAX_RETRIES_DEFAULT = 3
PROVIDER_MAX_RETRIES_CEILING = 10
# options.timeout: the longest wait for the server's next byte, the response head included
# (default 300 s); options.connectTimeout: the longest wait to connect (default 15 s). Both in ms,
# at most 1 h.
PROVIDER_TIMEOUT_DEFAULT_MS = 300_000
PROVIDER_CONNECT_TIMEOUT_DEFAULT_MS = 15_000
PROVIDER_TIMEOUT_MAX_MS = 3_600_000

# webfetch, ninth round: an HTTP error's body is read up to this many (decoded) bytes and shown in
# the error up to this many characters (an API's JSON error or a 404 page's hint is what the model
# needs to correct its call).
WEBFETCH_ERROR_BODY_BYTES = 64 * 1024
WEBFETCH_ERROR_BODY_CHARS = 2000
# ... and waited for at most this long (a stalled error body must not turn the status into a timeout).
WEBFETCH_ERROR_BODY_WAIT_S = 2.0
# Inline data (a data: URL in an image or link) kept in the Markdown: a longer one is shortened to
# its media type (a base64 image is noise to a model and can push the page text into an artifact).
WEBFETCH_INLINE_DATA_CHARS = 256

# zuno run's line editor: the history file ($ZUNO_CONFIG_DIR/history) keeps this many lines.
RUN_HISTORY_LINES = 1_000

# zuno run, thirteenth round: the text of a model's answer is saved while it streams (a row per
# request, agent_partials) at most this often, or once this many new UTF-8 bytes arrived, whichever
# comes first; an answer shorter than both costs no write of its own.
STREAM_SAVE_INTERVAL_S = 1.0
STREAM_SAVE_BYTES = 4096
