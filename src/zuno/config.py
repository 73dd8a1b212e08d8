"""The config model and where it is read from.

Read, later ones winning: ``$ZUNO_CONFIG_DIR/zuno.json`` (else ``~/.config/zuno/zuno.json``),
``<root>/zuno.json``, the file named by ``ZUNO_CONFIG`` or ``--config``, and the JSON text in
``ZUNO_CONFIG_CONTENT``. Objects merge key by key; any other value replaces. A bad config is a
``ConfigError`` naming the key, the value, the allowed range and the file it came from.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from zuno import limits


class ConfigError(Exception):
    """Unusable configuration: nothing runs, the CLI exits 2."""


class _Strict(BaseModel):
    # strict: "no" is not false and "8" is not 8 — a config value means what it says.
    model_config = ConfigDict(extra="forbid", strict=True)


def _bounded(default: int) -> Any:
    return Field(default, ge=limits.CONCURRENCY_MIN, le=limits.CONCURRENCY_MAX)


class ConcurrencyConfig(_Strict):
    tool_calls: int = _bounded(limits.DEFAULT_TOOL_CALLS)
    delegations: int = _bounded(limits.DEFAULT_DELEGATIONS)
    mcp_connections: int = _bounded(limits.DEFAULT_MCP_CONNECTIONS)
    lsp_requests: int = _bounded(limits.DEFAULT_LSP_REQUESTS)


class ToolOutputConfig(_Strict):
    max_bytes: int = Field(limits.DEFAULT_MAX_BYTES, ge=1, le=1 << 30)
    max_lines: int = Field(limits.DEFAULT_MAX_LINES, ge=1, le=1 << 24)


class PermissionRule(_Strict):
    tool: str = Field(min_length=1)
    pattern: str | None = None
    action: Literal["allow", "ask", "deny"]


class PermissionConfig(_Strict):
    rules: list[PermissionRule] = Field(default_factory=list)
    strict: bool = False


class HookConfig(_Strict):
    command: str | list[str]
    tools: list[str] = Field(default_factory=lambda: ["*"])
    timeout_ms: int = Field(int(limits.HOOK_TIMEOUT_S * 1000), ge=1, le=600_000)


class HooksConfig(_Strict):
    pre_dispatch: list[HookConfig] = Field(default_factory=list)


class AgentLimitsConfig(_Strict):
    # Each limit ends the turn with its typed stop reason (step_limit, token_limit, time_limit,
    # continuation_limit).
    steps_per_turn: int = Field(limits.AGENT_STEPS_PER_TURN, ge=1, le=100_000)
    tokens_per_turn: int = Field(limits.AGENT_TOKENS_PER_TURN, ge=1, le=10**12)
    seconds_per_turn: int = Field(limits.AGENT_SECONDS_PER_TURN, ge=1, le=7 * 24 * 3600)
    continuations: int = Field(limits.AGENT_GOAL_CONTINUATIONS, ge=0, le=10_000)


class CompactionConfig(_Strict):
    # Compact when the next request would pass this fraction of the model's context.
    at_fraction: float = Field(limits.COMPACT_AT_FRACTION, ge=0.05, le=1.0)
    keep_fraction: float = Field(limits.COMPACT_KEEP_FRACTION, ge=0.0, le=0.9)
    # "<provider id>/<model name>" of a (cheaper) model that writes the summaries; default the turn's own.
    model: str | None = None


class AgentConfig(_Strict):
    name: str | None = None
    # An exact allowlist: it replaces the profile's default surface (registered slots may be named).
    tools: list[str] | None = None
    limits: AgentLimitsConfig = Field(default_factory=AgentLimitsConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    # Extra instructions put before the dynamic context of every request.
    instructions: str | None = None


class HostedWebSearchConfig(_Strict):
    allowed_domains: list[str] = Field(default_factory=list)
    blocked_domains: list[str] = Field(default_factory=list)


class CompatConfig(_Strict):
    # Provider-hosted tools to offer when the active model's provider supports them (Chord's
    # web_search as the provider's hosted search).
    hosted_tools: list[Literal["web_search"]] = Field(default_factory=list)
    web_search: HostedWebSearchConfig = Field(default_factory=HostedWebSearchConfig)


class WorkspaceConfig(_Strict):
    granted_dirs: list[str] = Field(default_factory=list)


class SearchConfig(_Strict):
    # An explicit rg executable. When set it is the only candidate: a wrong path is an error,
    # never a silent fall back to another rg.
    rg_path: str | None = None
    # How many paths glob lists, and how many hit lines grep lists, before it says "truncated".
    glob_max_results: int = Field(limits.GLOB_DEFAULT_MAX_RESULTS, ge=1, le=1_000_000)
    grep_max_hits: int = Field(limits.GREP_DEFAULT_MAX_HITS, ge=1, le=1_000_000)
    # rg --threads (0: rg decides).
    threads: int = Field(0, ge=0, le=256)
    # rg runs confined to the workspace's roots (a mount namespace of its own where the process may
    # make one, else Landlock), so a directory swapped for a symlink to outside while it walks cannot
    # be read (tools/search/confine.py). false: rg runs unconfined.
    confine: bool = True


class ShellConfig(_Strict):
    # The interpreter a call runs under when it names none.
    interpreter: Literal["bash", "zsh", "ksh", "dash", "sh", "pwsh"] = "bash"
    # The foreground timeout of a call that gives no timeout_ms (default and maximum 600000).
    timeout_ms: int | None = Field(None, ge=1, le=limits.SHELL_TIMEOUT_MAX_MS)
    # The one budget the pre-flight's git reads of a git commit / git add share (30 s).
    preflight_budget_ms: int = Field(int(limits.PREFLIGHT_BUDGET_S * 1000), ge=1, le=600_000)
    # The host environment hook: values put (back) into every command's environment after the
    # ZUNO_* namespace was withheld. Nothing is put back unless it is named here.
    env: dict[str, str] = Field(default_factory=dict)


class EditingConfig(_Strict):
    # chord: the model sees only one of edit / apply_patch. "edit": edit (+ write, delete);
    # "patch": apply_patch, which then also creates and deletes files (write, delete, edit hidden).
    # An explicit agent.tools allowlist overrides it. Ignored by the zuno profile.
    style: Literal["edit", "patch"] = "edit"


class ProviderModelConfig(_Strict):
    # None: the provider's built-in default (zuno.agent.providers.registry), else a generic one.
    context: int | None = Field(None, ge=1, le=1 << 26)
    output: int | None = Field(None, ge=1, le=1 << 24)
    images: bool | None = None
    # openai-responses: a reasoning model (its encrypted reasoning items are asked for and echoed).
    reasoning: bool | None = None


class ProviderOptions(_Strict):
    baseURL: str | None = Field(None, min_length=1)  # the contract spells these in camelCase
    apiKey: SecretStr | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    # Retries of a transient failure after the first attempt (0: none), and the read and connect
    # timeouts in ms (see limits.PROVIDER_*).
    maxRetries: int = Field(
        limits.PROVIDER_MAX_RETRIES_DEFAULT, ge=0, le=limits.PROVIDER_MAX_RETRIES_CEILING
    )
    timeout: int = Field(limits.PROVIDER_TIMEOUT_DEFAULT_MS, ge=1, le=limits.PROVIDER_TIMEOUT_MAX_MS)
    connectTimeout: int = Field(
        limits.PROVIDER_CONNECT_TIMEOUT_DEFAULT_MS, ge=1, le=limits.PROVIDER_TIMEOUT_MAX_MS
    )


class ProviderConfig(_Strict):
    # Built-in ids (openai, anthropic) have a default api; any other id must name one.
    api: Literal["openai-chat", "openai-responses", "anthropic"] | None = None
    options: ProviderOptions = Field(default_factory=ProviderOptions)
    models: dict[str, ProviderModelConfig] = Field(default_factory=dict)


class WebfetchConfig(_Strict):
    # The timeout of a call that gives none (default 30 s; the per-call maximum is 120 s).
    timeout_ms: int = Field(limits.WEBFETCH_DEFAULT_TIMEOUT_MS, ge=1, le=limits.WEBFETCH_MAX_TIMEOUT_MS)
    # The body cap, counted after decompression.
    max_bytes: int = Field(limits.WEBFETCH_DEFAULT_MAX_BYTES, ge=1, le=limits.WEBFETCH_MAX_BYTES_CEILING)
    # CIDRs and hostnames that may be fetched although their addresses are not public. Exactly
    # these are widened; every use is named in the result's metadata.
    allow_private: list[str] = Field(default_factory=list)

    @field_validator("allow_private")
    @classmethod
    def _entries_can_match(cls, entries: list[str]) -> list[str]:
        if entries:
            from zuno.tools.web.addresses import allow_private_problem

            for entry in entries:
                if (why := allow_private_problem(entry)) is not None:
                    raise PydanticCustomError("allow_private", why)
        return entries


class WebSearchProviderConfig(_Strict):
    # brave: the Brave Search API; searxng: a (self-hosted) SearXNG JSON API; tavily: Tavily's API.
    type: Literal["brave", "searxng", "tavily"]
    # Where the provider's API lives (each type has its public default; searxng needs one).
    base_url: str | None = None
    # The key: "{env:NAME}" reads it from the environment when a search runs; api_key_env names
    # the variable directly. A literal key also works but then lives in the file.
    api_key: str | None = None
    api_key_env: str | None = None
    timeout_ms: int = Field(limits.WEBFETCH_DEFAULT_TIMEOUT_MS, ge=1, le=limits.WEBFETCH_MAX_TIMEOUT_MS)


class WebSearchConfig(_Strict):
    # Which of the providers answers (default: the only one configured).
    provider: str | None = None
    providers: dict[str, WebSearchProviderConfig] = Field(default_factory=dict)
    max_results: int = Field(limits.WEB_SEARCH_DEFAULT_RESULTS, ge=1, le=limits.WEB_SEARCH_MAX_RESULTS)
    # Results outside allowed_domains (when set) or inside blocked_domains are dropped (subdomains too).
    allowed_domains: list[str] = Field(default_factory=list)
    blocked_domains: list[str] = Field(default_factory=list)


class ContinuityConfig(_Strict):
    # The optional continuity tools, history and notes (registered slots of the zuno profile),
    # appear only when this is on (and the tool and permission filters keep them).
    enabled: bool = False


class MemoryConfig(_Strict):
    # memory_read / memory_update appear only when memory is enabled.
    enabled: bool = False
    # "auto": updates apply at once; "review": an update is a proposal that waits for an
    # explicit accept (zuno.tools.state.memory.accept_proposal).
    review_policy: Literal["auto", "review"] = "auto"


class McpToolDeclarations(_Strict):
    """A per-tool override of a connected MCP tool's declarations; it wins over annotations and trust."""

    effect: Literal["ReadOnly", "UserMediated", "Delegating", "SideEffecting"] | None = None
    replay: Literal["Never", "Safe"] | None = None
    concurrency: Literal["Exclusive", "ParallelSafe", "IsolatedBackground"] | None = None


class McpServerConfig(_Strict):
    """One MCP server Zuno connects to: a stdio ``command`` (with args/env/cwd) or a streamable HTTP
    ``url`` (with headers / bearer). "{env:NAME}" in env, headers and bearer reads the environment."""

    command: str | None = Field(None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(None, min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    bearer: str | None = None
    # Only these remote tool names are registered (all when absent).
    allowed_tools: list[str] | None = None
    # Annotations of an untrusted server never loosen a declaration.
    trusted: bool = False
    enabled: bool = True
    timeout_ms: int = Field(limits.MCP_TIMEOUT_DEFAULT_MS, ge=1, le=limits.MCP_TIMEOUT_MAX_MS)
    declarations: dict[str, McpToolDeclarations] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError('give exactly one of "command" (a stdio server) or "url" (a streamable HTTP server)')
        return self


class ToolSearchConfig(_Strict):
    # When connected MCP tools' schemas are withheld behind tool_search: "always", "never", or when
    # they would take more than this many prompt tokens (estimated at 4 bytes a token).
    defer: Literal["always", "never"] | int = "always"


class Config(_Strict):
    # "<provider id>/<model name>"; checked when a provider is built (zuno.agent.providers).
    model: str | None = Field(None, min_length=1)
    provider: dict[str, ProviderConfig] = Field(default_factory=dict)
    profile: Literal["zuno", "chord"] = "zuno"
    tools: dict[str, bool] = Field(default_factory=dict)
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
    tool_output: ToolOutputConfig = Field(default_factory=ToolOutputConfig)
    permission: PermissionConfig = Field(default_factory=PermissionConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    extensions: list[str] = Field(default_factory=list)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    shell: ShellConfig = Field(default_factory=ShellConfig)
    editing: EditingConfig = Field(default_factory=EditingConfig)
    compat: CompatConfig = Field(default_factory=CompatConfig)
    webfetch: WebfetchConfig = Field(default_factory=WebfetchConfig)
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    continuity: ContinuityConfig = Field(default_factory=ContinuityConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    mcp: dict[str, McpServerConfig] = Field(default_factory=dict)
    tool_search: ToolSearchConfig = Field(default_factory=ToolSearchConfig)


def _merge(base: dict[str, Any], top: Mapping[str, Any], origin: dict[str, str], src: str, prefix: str) -> None:
    for k, v in top.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _merge(base[k], v, origin, src, key + ".")
        else:
            base[k] = json.loads(json.dumps(v)) if isinstance(v, Mapping | list) else v
            origin[key] = src
            if isinstance(v, Mapping):
                for sub in _walk_keys(v, key + "."):
                    origin[sub] = src


def _walk_keys(m: Mapping[str, Any], prefix: str) -> list[str]:
    out = []
    for k, v in m.items():
        out.append(prefix + k)
        if isinstance(v, Mapping):
            out.extend(_walk_keys(v, prefix + k + "."))
    return out


_JSON_TYPE_NAMES = {
    "dict": "an object",
    "list": "an array",
    "str": "a string",
    "int": "a number",
    "float": "a number",
    "bool": "a boolean",
    "NoneType": "null",
}


def json_type_name(value: Any) -> str:
    """The JSON name of a parsed value's type ("an array", "null"), never the Python one."""
    return _JSON_TYPE_NAMES.get(type(value).__name__, type(value).__name__)


def json_repr(value: Any, limit: int = 200) -> str:
    """A value as JSON text, shortened: how a message quotes what the user or model sent."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_config_text(path: Path, src: str) -> str:
    """The text of a config file, or a ConfigError naming the file, the problem and the fix."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise ConfigError(f"config {src} is a directory, not a file. Name a JSON file.") from None
    except OSError as e:
        raise ConfigError(f"config {src} cannot be read ({e.strerror}). Check its permissions, or remove it.") from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")  # a byte order mark some editors write
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config {src} is not UTF-8 text (byte {e.start} is not valid UTF-8). Save it as UTF-8 JSON."
        ) from None


def _json_hint(text: str, pos: int) -> str:
    """What a config that JSON cannot read most likely holds at ``pos``, and the fix: the file is
    empty, a comment or a trailing comma (JSONC, as other harnesses' configs allow)."""
    if not text.strip():
        return ": it is empty; write a JSON object ({} for no settings)"
    at = text[pos:]
    if at.startswith(("//", "/*", "#")):
        return ": a comment; a config is plain JSON, remove the comments"
    if at[:1] in "}]" and text[:pos].rstrip().endswith(","):
        return ": a trailing comma; remove the comma before it"
    return ""


def _parse(text: str, src: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"config {src}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}){_json_hint(text, e.pos)}."
        ) from e
    except RecursionError:
        raise ConfigError(f"config {src}: nested too deeply to read. A config is a few levels deep.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config {src}: the top level must be a JSON object, not {json_type_name(data)}.")
    return data


def _field_range(loc: tuple[Any, ...]) -> tuple[Any, Any] | None:
    model: Any = Config
    info = None
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        info = fields[part]
        model = info.annotation
    if info is None:
        return None
    lo = hi = None
    for m in info.metadata:
        lo = getattr(m, "ge", lo)
        hi = getattr(m, "le", hi)
    return lo, hi


def _unwrap(annotation: Any) -> Any:
    """``X`` of ``X | None`` (and of ``Optional[X]``); the annotation itself otherwise."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the config takes at ``loc`` (a model's fields, by their JSON names), for the
    "did you mean" of an unknown key; [] where that is not a model (a free-form map)."""
    annotation: Any = Config
    for part in loc:
        annotation = _unwrap(annotation)
        if typing.get_origin(annotation) is dict:  # a map (provider.<id>): its values' type
            annotation = typing.get_args(annotation)[1]
            continue
        fields = getattr(annotation, "model_fields", None)
        if fields is None:
            return []
        info = fields.get(part) or next((f for f in fields.values() if f.alias == part), None)
        if info is None:
            return []
        annotation = info.annotation
    fields = getattr(_unwrap(annotation), "model_fields", None)
    return [f.alias or name for name, f in fields.items()] if fields else []


_ENV_REF = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand_env(node: Any, env: Mapping[str, str], key: str, refs: dict[str, str]) -> Any:
    """Replace every "{env:NAME}" in string values (anywhere in the config) by the variable's
    value. A reference to an unset variable stays as written: the part that needs the value
    raises ``unset_env_error`` for it then (a provider, an MCP server, a search key), so an unset
    key of one feature does not stop every command. ``refs`` keeps the original text of each
    expanded key, so that an error about that key shows the reference and never the value
    (which is often a secret)."""
    if isinstance(node, dict):
        return {k: _expand_env(v, env, f"{key}.{k}" if key else str(k), refs) for k, v in node.items()}
    if isinstance(node, list):
        return [_expand_env(v, env, f"{key}.{i}", refs) for i, v in enumerate(node)]
    if not isinstance(node, str) or "{env:" not in node:
        return node
    refs[key] = node
    return _ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), node)


def unset_env_error(key: str, value: str | None) -> ConfigError | None:
    """The ConfigError for a config value still holding an "{env:NAME}" reference (its variable
    was unset when the config was loaded), naming the key and the variable; None otherwise."""
    m = _ENV_REF.search(value or "")
    if m is None:
        return None
    return ConfigError(
        f"config key {key} reads the environment variable {m.group(1)} ({m.group(0)}), which is not set. "
        f"Set {m.group(1)}, or change {key}."
    )


_BOUND_WORDS = {
    "greater_than_equal": ("at least", "ge"),
    "less_than_equal": ("at most", "le"),
    "greater_than": ("more than", "gt"),
    "less_than": ("less than", "lt"),
}


def _describe(err: Mapping[str, Any], origin: Mapping[str, str], refs: Mapping[str, str] | None = None) -> str:
    loc = tuple(err["loc"])
    key = ".".join(str(p) for p in loc)
    src = origin.get(key) or next((origin[k] for k in origin if key.startswith(k + ".")), "defaults")
    value = err.get("input")
    if refs and (key in refs or any(r.startswith(key + ".") for r in refs)):
        value = refs.get(key, "(a value read from the environment)")
    kind = err["type"]
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        rng = _field_range(loc)
        lo, hi = rng if rng else (None, None)
        word, ctx_key = _BOUND_WORDS[kind]
        bound = (err.get("ctx") or {}).get(ctx_key)
        if lo is not None and hi is not None:
            allowed = f"{lo}..={hi}"
        elif bound is not None:  # a field under a map (provider.<id>...): pydantic's bound, in words
            allowed = f"{word} {bound}"
        else:
            allowed = err["msg"]
        return f"config key {key} = {json_repr(value)} is out of range: allowed {allowed} (from {src})."
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        near = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.7) if known else []
        if loc[:-1] == ("permission",) and value in ("allow", "ask", "deny"):  # another harness's shape
            rule = json.dumps({"rules": [{"tool": str(loc[-1]), "action": value}]})
            return f"config key {key} is not a known key (from {src}). Permissions are rules: \"permission\": {rule}."
        if near:
            meant = ".".join([*map(str, loc[:-1]), near[0]])
            return f"config key {key} is not a known key (from {src}). Did you mean {meant}? Otherwise remove it."
        return f"config key {key} is not a known key (from {src}). Remove it or check its spelling."
    if kind == "missing":
        return f"config key {key} is required (from {src}). Add it."
    return f"config key {key} = {json_repr(value)}: {_english(err)} (from {src})."


def _english(err: Mapping[str, Any]) -> str:
    """pydantic's message in JSON words: "a valid dictionary" is "an object", and so on."""
    kind = err["type"]
    words = {
        "dict_type": "must be a JSON object",
        "model_type": "must be a JSON object",
        "list_type": "must be a JSON array",
        "string_type": "must be a string",
        "int_type": "must be an integer",
        "bool_type": "must be true or false",
        "float_type": "must be a number",
    }
    if kind in words:
        return words[kind]
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected")
        return f"must be one of {expected}" if expected else str(err["msg"])
    msg = re.sub(
        r"\b(dictionary|None|list)\b",
        lambda m: {"dictionary": "object", "None": "null", "list": "array"}[m[1]],
        str(err["msg"]),
    )
    return msg[:1].lower() + msg[1:]


def load_config(
    root: Path,
    config_file: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    env = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    user_dir = Path(env["ZUNO_CONFIG_DIR"]) if env.get("ZUNO_CONFIG_DIR") else Path.home() / ".config" / "zuno"
    sources: list[tuple[str, Path | None, str | None]] = [
        (str(user_dir / "zuno.json"), user_dir / "zuno.json", None),
        (str(root / "zuno.json"), root / "zuno.json", None),
    ]
    named = config_file or env.get("ZUNO_CONFIG")
    if named:
        p = Path(named)
        via = "--config" if config_file else "ZUNO_CONFIG"
        if p.is_dir():
            raise ConfigError(f"config file {p} (from {via}) is a directory, not a file. Name a JSON file.")
        if not p.exists():
            raise ConfigError(f"config file {p} (from {via}) does not exist. Check the path.")
        sources.append((str(p), p, None))
    if env.get("ZUNO_CONFIG_CONTENT"):
        sources.append(("ZUNO_CONFIG_CONTENT", None, env["ZUNO_CONFIG_CONTENT"]))
    for name, path, text in sources:
        if path is not None:
            if not path.exists() and not path.is_symlink():
                continue
            text = read_config_text(path, name)
        assert text is not None
        _merge(merged, _parse(text, name), origin, name, "")
    if overrides:
        _merge(merged, overrides, origin, "arguments", "")
    refs: dict[str, str] = {}
    merged = _expand_env(merged, env, "", refs)
    try:
        return Config.model_validate(merged)
    except ValidationError as e:
        lines = [_describe(err, origin, refs) for err in e.errors()]
        raise ConfigError("\n".join(lines)) from None
