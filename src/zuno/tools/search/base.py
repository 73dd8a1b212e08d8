"""What glob and grep share: finding rg, validating roots, running it, and reading its failures."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zuno import limits
from zuno.declarations import BlockKind
from zuno.process.execve import (
    ARG_MAX_FLOOR,
    GUARD_RESERVE_BYTES,
    MAX_ARG_STRLEN,
    POINTER_BYTES,
    exec_problem,
)
from zuno.tool import Refused, ToolContext, ToolOutput
from zuno.tools.quote import QUOTE_MAX_CHARS, quote
from zuno.tools.search.confine import confinement_for
from zuno.tools.search.rg import (
    OutputTooLarge,
    RgResult,
    norm_root,
    pattern_error,
    run_rg,
    unreadable_roots,
)
from zuno.tools.search.rg_discovery import Rg, RgLocator, shared_rg_env
from zuno.tools.search.rules import RuleScope, check_root, root_forms, scope_for
from zuno.workspace import Workspace

# Never searched unless named as the search path: git's object store and Zuno's own state folder.
EXCLUDED_DIRS = (".git", ".zuno")
NO_FILES = "No files found"
# rg's hint (exit 2) when filters left no file to search: an empty result, not a failure.
_NOTHING_SEARCHED = re.compile(r"^(rg: )?No files were searched|^Running with --debug will show")


async def find_rg(ctx: ToolContext) -> Rg | ToolOutput:
    locator = ctx.services.get(RgLocator, RgLocator)
    found = await locator.get(ctx.config.search.rg_path)
    if isinstance(found, Rg):
        return found
    return found.output(ctx.tool_name or "search")


@dataclass(slots=True)
class Plan:
    """How rg is pointed at the roots: its working directory, its path arguments, the prefix that
    turns one of its output paths into the path the model sees, and what rg calls each root."""

    cwd: str
    args: list[str]
    prefix: str
    strip_dot: bool
    root_names: set[str]
    shown_roots: list[str]

    def display(self, rel: str) -> str:
        if os.name == "nt":  # pragma: no cover - rg's separators are reported as /, which Windows accepts
            rel = rel.replace("\\", "/")
        if self.strip_dot:
            while rel.startswith("./"):
                rel = rel[2:]
        return self.prefix + rel

    def display_all(self, rels: list[str]) -> list[str]:
        """display() of every path, as string work over the joined list (a path holds no NUL)."""
        if os.name == "nt" or not rels:  # pragma: no cover - the per-path way keeps Windows' rule
            return [self.display(r) for r in rels]
        return self.display_joined("\0".join(rels)).split("\0")

    def display_joined(self, joined: str) -> str:
        """display_all() of paths given joined by NUL (at least one path), joined the same way."""
        if os.name == "nt":  # pragma: no cover - the per-path way keeps Windows' rule
            return "\0".join(self.display(r) for r in joined.split("\0"))
        if not (self.prefix or (self.strip_dot and "./" in joined)):
            return joined  # the common case: rg printed the paths as they are shown
        text = "\0" + joined
        if self.strip_dot:
            while "\0./" in text:
                text = text.replace("\0./", "\0")
        if self.prefix:
            text = text.replace("\0", "\0" + self.prefix)
        return text[1:]


def check_text(field: str, value: str, *, regex: bool = False) -> None:
    """An argument rg will see must be passable: a NUL byte cannot be (every argument ends at its
    first NUL), and a lone surrogate (from a JSON \\ud800 escape) names nothing and matches nothing."""
    at = value.find("\0")
    if at >= 0:
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {quote(value)} contains a NUL byte (at character {at}); the operating system ends "
            "every argument at its first NUL, so rg cannot be given it. Remove it"
            + (" (a regex matches a NUL byte with \\x00)." if regex else "."),
            field=field,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {quote(value)} contains a lone surrogate, which is not text; send valid Unicode.",
            field=field,
        ) from None


def check_glob(field: str, value: str, path_field: str = "path") -> None:
    """A glob rg will match against the paths it lists beneath the search path: passable text, and
    no '..' segment, which no listed path has (the glob would match nothing, and the call would
    read as "no files" where it could never have found any)."""
    check_text(field, value)
    if ".." in value.removeprefix("!").split("/"):
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {quote(value)} has a '..' segment, and a glob is matched against the paths beneath "
            f"the search path, none of which has one, so it can match nothing. To search another directory, give it "
            f"as '{path_field}' (outside the workspace it must be granted: workspace.granted_dirs) and a glob "
            "relative to it.",
            field=field,
        )


def anchor_glob(ctx: ToolContext, field: str, value: str, roots: list[Path]) -> str:
    """The glob rg is given for ``value``, matched against the paths beneath the search path: a
    leading "./" means the search path itself, so it is anchored there ("/x"; "./*.py" would
    otherwise match nothing), and an absolute path to the one search directory is made relative to
    it. An absolute path to anywhere else in the workspace or its granted directories can match
    nothing: refused."""
    neg = "!" if value.startswith("!") else ""
    body = value[len(neg) :]
    if body.startswith("./"):
        while body.startswith("./"):
            body = body[2:]
        body = "/" + body.lstrip("/")
    if "/./" in body:
        while "/./" in body:
            body = body.replace("/./", "/")
    # "/src/*.py" is anchored at the search path; read as an absolute path only when its first
    # component is not an entry of the search path.
    first = body[1:].split("/", 1)[0]
    if body.startswith("/") and first and not any(os.path.lexists(r / first) for r in roots if r.is_dir()):
        body = _real_prefix(body)
        if len(roots) == 1 and roots[0].is_dir():
            top = str(roots[0]).rstrip("/") + "/"
            if body.startswith(top) and len(body) > len(top):
                return neg + "/" + body[len(top) :]
        if any(body.startswith(str(r).rstrip("/") + "/") for r in ctx.workspace.roots()):
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument '{field}': {quote(value)} is an absolute path, and a glob is matched against the paths "
                f"beneath the search path ({', '.join(ctx.workspace.display(r) for r in roots)}), so it can match "
                "nothing. Give its directory as the path and a glob relative to it.",
                field=field,
            )
    return neg + body


_GLOB_META = re.compile(r"[*?\[\]{}\\]")


def _real_prefix(body: str) -> str:
    """An absolute glob with its leading literal directories resolved as the roots are (a link in
    it, such as macOS's /tmp -> /private/tmp, names the same directory)."""
    parts = body.split("/")
    n = 1
    while n < len(parts) - 1 and not _GLOB_META.search(parts[n]):
        n += 1
    prefix = "/".join(parts[:n])
    real = os.path.realpath(prefix) if prefix else ""
    return real.rstrip("/") + "/" + "/".join(parts[n:]) if real and real != prefix else body


def _surely_fits(argv: list[str], env: dict[str, str]) -> bool:
    """A bound that needs no encoding: at most 4 bytes per character (UTF-8; a surrogate escape is
    one), so when even that fits the smallest space execve ever gives (and every string its
    per-string limit), the exact check cannot fail. Anything near a limit takes the exact check."""
    return _fits(argv, _env_size(env))


def _env_size(env: dict[str, str]) -> tuple[int, int, int]:
    """An environment's part of _surely_fits: (characters with each '=', strings, longest string)."""
    keys, values = env.keys(), env.values()
    chars = sum(map(len, keys)) + sum(map(len, values)) + len(env)
    return chars, len(env), max(map(len, keys), default=0) + 1 + max(map(len, values), default=0)


def _fits(argv: list[str], env_size: tuple[int, int, int]) -> bool:
    env_chars, env_strings, env_longest = env_size
    chars = sum(map(len, argv)) + env_chars
    strings = len(argv) + env_strings
    longest = max(max(map(len, argv), default=0), env_longest)
    need = 4 * chars + strings * (1 + POINTER_BYTES) + GUARD_RESERVE_BYTES
    return 4 * longest + 1 <= MAX_ARG_STRLEN and need <= ARG_MAX_FLOOR


# The environment _env_size last measured (shared_rg_env's dict, the same object while the
# environment is unchanged) and its size.
_env_size_cache: tuple[dict[str, str], tuple[int, int, int]] | None = None


def check_exec(rg: Rg, argv: list[str], fields: dict[str, list[str]]) -> None:
    """Refuse a search whose rg command line execve would reject (E2BIG), naming the argument that
    made it too long; ``fields`` maps an argument name to the values it put on the command line."""
    global _env_size_cache
    env = shared_rg_env()
    cached = _env_size_cache
    if cached is None or cached[0] is not env:
        cached = _env_size_cache = (env, _env_size(env))
    if _fits([rg.path, *argv], cached[1]):
        return
    problem = exec_problem([rg.path, *argv], env)
    if problem is None:
        return
    value = argv[problem.index - 1] if problem.index else None
    blamed = next((f for f, values in fields.items() if value is not None and value in values), None)
    described = problem.describe("it" if problem.kind == "string" else None)
    if blamed is None and value is not None and value.startswith(_TYPE_PREFIX):
        # a file-name glob given to rg as a file type (filter_args): blamed, and sized, as given
        name = value[len(_TYPE_PREFIX) :]
        given = next(((f, v) for f, vs in fields.items() for v in vs if _name_glob(v) == name), None)
        if given is not None:
            blamed = given[0]
            size = len(given[1].encode("utf-8", "surrogateescape"))
            described = described.replace(
                f"it is {problem.size:,} bytes", f"it is {size:,} bytes ({problem.size:,} as rg's --type-add argument)"
            )
    if blamed is None:  # the whole line is too long: blame the argument that contributed most
        blamed = max(fields, key=lambda f: sum(len(v) for v in fields[f]))
    raise Refused(
        BlockKind.invalid_arguments,
        f"argument '{blamed}': {described}, so rg cannot be started with it. Shorten '{blamed}'.",
        field=blamed,
        bytes=problem.size,
        limit=problem.limit - 1 if problem.kind == "string" else problem.limit,
    )


def resolve_roots(ctx: ToolContext, raws: list[str], field: str, *, dirs_only: bool) -> list[Path]:
    roots: list[Path] = []
    if not raws:
        raise Refused(BlockKind.invalid_arguments, f"argument '{field}': give at least one path, or leave it out.")
    for raw in raws:
        check_text(field, raw)
        # "." (the default) is the root itself, as resolve() finds it (no component to walk)
        p = ctx.workspace.root if raw == "." else ctx.workspace.resolve(raw, field=field)
        ctx.check_location(p, raw, field)
        try:  # one stat says the usual answer: an existing directory (glob), an existing path (grep)
            usual = stat.S_ISDIR(os.stat(p).st_mode) if dirs_only else os.path.lexists(p)
        except OSError:
            usual = False
        if not usual:
            _check_root(p, raw, field, dirs_only=dirs_only)
        roots.append(p)
    if len(roots) == 1:
        return roots
    # Every path exactly once: a root inside another root adds nothing.
    roots = sorted(set(roots), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for r in roots:
        if not any(r == k or r.is_relative_to(k) for k in kept):
            kept.append(r)
    return sorted(kept, key=str)


def _check_root(p: Path, raw: str, field: str, *, dirs_only: bool) -> None:
    """Refuse a search path that does not exist, or (``dirs_only``) is not a directory."""
    if not os.path.lexists(p):
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {raw!r} does not exist. Give an existing directory"
            + ("" if dirs_only else " or file")
            + " inside the workspace.",
        )
    if dirs_only and not p.is_dir():
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{field}': {raw!r} is not a directory; glob searches a directory. "
            "Use its parent as the path and the file name as the pattern.",
        )


def plan(ctx: ToolContext, roots: list[Path], *, dirs: bool = False) -> Plan:
    """``dirs``: every root was just found to be a directory (resolve_roots with dirs_only)."""
    ws = ctx.workspace
    shown = [ws.display(r) for r in roots]
    if len(roots) == 1:
        r = roots[0]
        if dirs or r.is_dir():
            d = ws.display(r)
            # "." explicitly, never no path at all (rg could then read stdin); "./" is stripped back off
            return Plan(str(r), ["."], "" if d == "." else d.rstrip("/") + "/", True, {"."}, shown)
        parent = r.parent
        d = ws.display(parent)
        return Plan(str(parent), [r.name], "" if d == "." else d.rstrip("/") + "/", False, {norm_root(r.name)}, shown)
    args = [ws.display(r) for r in roots]
    return Plan(str(ws.root), args, "", True, {norm_root(a) for a in args}, shown)


_NAME_TYPE = "zunoglob"
_TYPE_PREFIX = _NAME_TYPE + ":"


def _name_glob(g: str) -> str | None:
    """The file-name glob ``g`` is (``*.py``, ``**/*.{ts,tsx}``, ``*``), or None when it names a path
    (a ``/`` after any leading ``**/``), is a negation, or is not a plain name glob."""
    while g.startswith("**/"):
        g = g[3:]
    if g == "**":  # every file, at any depth
        g = "*"
    if not g or g.startswith("!") or "/" in g or "**" in g or ":" in g:
        return None
    return g


def filter_args(globs: list[str]) -> list[str]:
    """rg's arguments that keep only the files ``globs`` match (any of them), ignore rules respected.

    A ``--glob`` that matches is an override: it lists the file even when .gitignore / .ignore
    ignore it, and ``*`` or ``**`` opens every ignored directory. When every positive glob is a
    file-name glob they are a file type instead (``--type-add``), which only filters what the
    ignore rules left; a path glob (``src/**/*.ts``) stays an override: it names where to look."""
    names = [_name_glob(g) for g in globs if not g.startswith("!")]
    if names and all(n is not None for n in names):
        out: list[str] = []
        for n in names:
            out += ["--type-add", f"{_NAME_TYPE}:{n}"]
        out += ["--type", _NAME_TYPE]
        for g in globs:
            if g.startswith("!"):
                out += ["--glob", g]
        return out
    out = []
    for g in globs:
        out += ["--glob", g]
    return out


def exclusion_globs() -> list[str]:
    out: list[str] = []
    for d in EXCLUDED_DIRS:
        out += ["--glob", f"!{d}"]
    return out


def rule_scope(ctx: ToolContext, roots: list[Path], the_plan: Plan, field: str) -> RuleScope | None:
    """The permission rules over what this search finds (``rules``), or None without any; a search
    path a rule covers as a whole (a rule over what lies below a directory) is refused here."""
    if not ctx.config.permission.rules:
        return None
    for r in roots:
        check_root(ctx, r, field)
    return scope_for(ctx, roots, the_plan.cwd, the_plan.prefix, the_plan.display)


def search_subject_forms(forms: tuple[str, ...], workspace: Workspace, raws: tuple[str, ...]) -> tuple[str, ...]:
    """A search's subject forms (``Tool.subject_forms``), the forms of the directory searched when no
    path is given (the root: what an approval of the call covers), and for each directory searched
    its ``dir/`` forms (``rules.root_forms``): a rule over ``secret/**`` matches a search of ``secret``."""
    more: list[str] = []
    for raw in raws:
        if not forms:
            more += workspace.subject_forms(raw)
        more += root_forms(workspace, raw)
    return tuple(dict.fromkeys((*forms, *more))) if more else forms


def common_flags(ctx: ToolContext) -> list[str]:
    flags = ["--no-config", "--null", "--hidden", "--color", "never"]
    if ctx.config.search.threads:
        flags += ["--threads", str(ctx.config.search.threads)]
    return flags


async def execute(
    ctx: ToolContext,
    rg: Rg,
    argv: list[str],
    the_plan: Plan,
    feed: Callable[[bytes], None],
) -> RgResult | ToolOutput:
    locator = ctx.services.get(RgLocator, RgLocator)
    # rg may read only beneath the workspace's roots (and what its start needs): a directory
    # swapped for a symlink to outside while it walks is refused by the kernel (confine.py).
    confinement = confinement_for(ctx.workspace.roots(), rg.path) if ctx.config.search.confine else None
    try:
        return await run_rg(rg, argv, the_plan.cwd, feed, locator=locator, confinement=confinement)
    except OutputTooLarge as e:
        raise Refused(
            BlockKind.invalid_arguments,
            f"rg wrote more than {limits.RG_MAX_OUTPUT_BYTES // (1024 * 1024)} MiB of output "
            f"({e.seen} bytes before it was stopped). A stable order cannot be decided from part of a parallel "
            "walk, so nothing is shown. Narrow the pattern, the path or the include glob.",
            rgOutputBytes=e.seen,
            limit=limits.RG_MAX_OUTPUT_BYTES,
        ) from None
    except (FileNotFoundError, NotADirectoryError) as e:
        if e.filename == the_plan.cwd:  # the search path was removed or replaced since it was checked
            raise Refused(
                BlockKind.invalid_arguments,
                f"the search path {', '.join(the_plan.shown_roots)} was removed or replaced while the search "
                "started; nothing was searched. Search it again.",
            ) from None
        # rg vanished after discovery: forget it, so the next call looks again, and say so.
        locator.forget()
        return ToolOutput.failure(
            f"[error: rg unavailable] {rg.path} (found at the start of this session) no longer exists. "
            "Nothing was searched. Reinstall ripgrep 14+ or fix search.rg_path; the next call looks again.",
            error="RgUnavailable",
            found=[{**rg.facts(), "problem": "no longer exists"}],
        )
    except PermissionError as e:
        raise Refused(
            BlockKind.invalid_arguments,
            f"the search path {', '.join(the_plan.shown_roots)} cannot be read ({e.strerror}); "
            "nothing was searched, so this is not a 'no matches' answer.",
        ) from None


def check_failure(
    res: RgResult,
    the_plan: Plan,
    *,
    found_anything: bool,
    pattern: str,
    pattern_field: str,
    globs: dict[str, list[str]],
) -> ToolOutput | None:
    """Turn rg's exit status into a refusal or an error, or None when the result stands.

    ``globs`` maps an argument name to the glob values it contributed, so a glob error is blamed
    on the argument that gave that glob."""
    if res.returncode in (0, 1):
        return None
    if res.returncode < 0:
        # Killed from outside mid-walk: what it printed is a part, never presented as the whole.
        return ToolOutput.failure(
            f"[error] rg was killed by signal {-res.returncode} before the walk finished; nothing is shown because "
            "a partial walk is not a result. Run the search again.",
            rgExit=res.returncode,
        )
    perr = pattern_error(res.stderr)
    if perr is not None:
        if perr.kind == "glob":
            blamed = pattern_field
            shown = perr.glob if perr.glob is not None else pattern
            # rg quotes the glob it was given: the value itself, or the file-name glob filter_args made of it
            given = [(f, v) for f, vs in globs.items() for v in vs if perr.glob in (v, _name_glob(v))]
            if perr.glob is not None and given:
                blamed, shown = given[0]
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument '{blamed}': rg cannot parse the glob {shown!r}: {perr.message}. Fix the glob in '{blamed}'.",
                field=blamed,
                rgError=perr.message,
            )
        if perr.kind == "size":
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument '{pattern_field}': the regex {quote(pattern)} is over ripgrep's compiled-size limit "
                f"({perr.message}). Use a simpler pattern (fewer or smaller repetitions).",
                field=pattern_field,
                rgError=perr.message,
            )
        if perr.kind == "newline":
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument '{pattern_field}': the regex {quote(pattern)} can match a line break (\\n), and grep "
                "matches one line at a time, so it could never match. Search for text within one line (for text "
                "that spans lines, search for one of its lines, then read around the hit).",
                field=pattern_field,
                rgError=perr.message,
            )
        diagram, error = regex_error(perr.message, pattern)
        raise Refused(
            BlockKind.invalid_arguments,
            f"argument '{pattern_field}': rg cannot parse the regex {quote(pattern)}: "
            + (f"\n{diagram}\n{error}\n" if diagram else f"{error}. ")
            + "Fix the pattern (escape regex metacharacters such as ( [ { . * + ? | \\ to match them literally).",
            field=pattern_field,
            rgError=error,
        )
    bad = unreadable_roots(res.stderr)
    if not found_anything and the_plan.root_names and the_plan.root_names <= bad:
        raise Refused(
            BlockKind.invalid_arguments,
            f"the search path {', '.join(the_plan.shown_roots)} could not be read by rg (permission denied or an "
            "I/O error); nothing was searched, so this is not a 'no matches' answer. Search a readable path.",
            unreadable=the_plan.shown_roots,
        )
    if bad or found_anything:
        # Per-path diagnostics (an unreadable directory elsewhere): suppressed, the result stands.
        return None
    msg = res.stderr.decode("utf-8", "replace").strip()
    if not [ln for ln in msg.splitlines() if not _NOTHING_SEARCHED.search(ln)]:
        return None  # every file was filtered out (by the include, say): nothing matched
    msg = msg[:2000]
    return ToolOutput.failure(f"[error] rg exited with status {res.returncode}: {msg}", rgExit=res.returncode)


_WRAP_OPEN, _WRAP_CLOSE = "(?:", ")"
_GROUP_ERRORS = ("unclosed group", "unopened group")


def regex_error(message: str, pattern: str) -> tuple[str, str]:
    """rg's regex parse error, told about the pattern as the user wrote it: (diagram, error).

    rg parses each pattern wrapped in ``(?:…)``, so its diagram quotes the wrapped text. The diagram
    is given back with the user's pattern and the caret moved by the wrapper's width, when the caret
    falls inside the pattern; an error about unbalanced groups involves the wrapper's own parentheses,
    and a multi-line pattern is drawn differently, so those keep only the error (``diagram`` empty)."""
    lines = message.splitlines()
    errors = [ln.removeprefix("error: ") for ln in lines if ln.startswith("error: ")]
    error = "; ".join(errors) or (lines[-1].strip() if lines else "unparseable")
    quoted = f"    {_WRAP_OPEN}{pattern}{_WRAP_CLOSE}"
    if "\n" in pattern or len(pattern) > QUOTE_MAX_CHARS or any(g in error for g in _GROUP_ERRORS):
        return "", error
    try:
        at = lines.index(quoted)
    except ValueError:
        return "", error
    caret = lines[at + 1] if at + 1 < len(lines) else ""
    col = len(caret) - len(caret.lstrip(" ")) - 4 - len(_WRAP_OPEN)
    width = len(caret.strip())
    if not caret.strip() or set(caret.strip()) != {"^"} or col < 0 or col + width > len(pattern):
        return "", error
    return f"    {pattern}\n    {' ' * col}{'^' * width}", error


def rg_facts(rg: Rg, res: RgResult) -> dict[str, Any]:
    facts = {"exit": res.returncode, "outputBytes": res.stdout_bytes}
    return {**rg.facts(), **facts, "confined": res.confined, "confinement": res.confinement}
