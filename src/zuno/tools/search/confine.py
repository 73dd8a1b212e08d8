"""rg confined by the kernel to what a search may read: a view of its own (``mountview.py``), or
where the process may not make one, a Landlock domain (Linux 5.13+).

rg walks by path: a directory it has checked (the search root, or any directory below it) that
another process swaps for a symlink to outside the workspace would be followed, and a search would
list and read files outside it. Zuno's own file tools open every component without following links
(``safefs``); rg cannot be made to, so it is started confined to reading only
beneath the workspace's roots (the root and the granted directories) — plus what its start and its
ignore rules need: its own executable's directory, the system's shared libraries and loader cache,
the ignore files of the directories above a root, and the user's global git ignore file and
configuration. Whatever a swapped-in link points at, it is not there (the view) or the kernel refuses
to open it (Landlock).

A view and a Landlock domain are a thread's (and pass to the processes it starts), never the
process's: rg is started from a spawner thread that confined itself once, one per set of roots. The
event loop waits for the spawn without blocking. Where neither way works, rg starts as before,
unconfined, and ``confined`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from zuno.tools.search import mountview

ACCESS_FS_EXECUTE = 1 << 0
ACCESS_FS_READ_FILE = 1 << 2
ACCESS_FS_READ_DIR = 1 << 3
HANDLED = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR
READ = ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
# The three Landlock system calls (the same numbers on x86_64 and aarch64, the unified table).
_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1

log = logging.getLogger("zuno.search")

# Where the system's shared objects and the loader's cache are (those that exist are allowed).
SYSTEM_LIBRARY_DIRS = ("/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib")
LOADER_FILES = ("/etc/ld.so.cache", "/etc/ld.so.preload")
IGNORE_NAMES = (".gitignore", ".ignore", ".rgignore")
# Confinements remembered (one per set of roots; a process rarely searches more than one workspace),
# and how long a spawner thread waits for work before it ends (the next search starts another).
MAX_CONFINEMENTS = 64
SPAWNER_IDLE_S = 60.0
# How long rg --version may take when a domain is made (it runs once per set of roots).
PROBE_TIMEOUT_S = 10.0


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (not Linux, not built, disabled)."""
    numbers = _SYSCALLS.get(os.uname().machine) if sys.platform.startswith("linux") else None
    if numbers is None:
        return 0
    try:
        version = _libc().syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):  # pragma: no cover - no syscall() in this libc
        return 0
    return int(version) if version > 0 else 0


def _excludes_files(config_text: str, home: Path) -> list[Path]:
    """The ``core.excludesFile`` values of a git configuration's text (``~`` expanded)."""
    out = []
    section = ""
    for line in config_text.splitlines():
        line = line.strip()
        m = re.match(r"\[\s*([A-Za-z0-9.-]+)", line)
        if m:
            section = m.group(1).lower()
            continue
        m = re.match(r"excludesfile\s*=\s*(.+)$", line, re.IGNORECASE)
        if m and section == "core":
            value = m.group(1).strip().strip('"')
            out.append(home / value[2:] if value.startswith("~/") else Path(value))
    return out


def readable_files(roots: list[Path], environ: dict[str, str] | None = None) -> list[Path]:
    """The files outside the roots that rg reads to apply its ignore rules: each ignore file of the
    directories above a root (and its repository's ``info/exclude``), and the user's global git
    configuration and ignore file. Those that exist now."""
    env = os.environ if environ is None else environ
    found: list[Path] = []
    for root in roots:
        for d in root.parents:
            found.extend(d / name for name in IGNORE_NAMES)
            found.append(d / ".git" / "info" / "exclude")
        found.append(root / ".git" / "info" / "exclude")
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    configs = [home / ".gitconfig", xdg / "git" / "config"]
    found.extend(configs)
    found.append(xdg / "git" / "ignore")
    for c in configs:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found.extend(_excludes_files(c.read_text("utf-8"), home))
    return [p for p in dict.fromkeys(found) if p.is_file()]


def _restrict(read_dirs: list[str], exec_dirs: list[str], read_files: list[str]) -> None:
    """Restrict the calling thread (and what it starts) to reading beneath ``read_dirs``, reading and
    executing beneath ``exec_dirs``, and reading ``read_files``. Raises OSError when it cannot."""
    libc = _libc()
    create, add_rule, restrict_self = _SYSCALLS[os.uname().machine]

    def check(result: int) -> int:
        if result < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return result

    attr = _RulesetAttr(HANDLED)
    ruleset = check(libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)))
    try:
        rules = ((read_dirs, READ), (exec_dirs, READ | ACCESS_FS_EXECUTE), (read_files, ACCESS_FS_READ_FILE))
        for paths, access in rules:
            for p in paths:
                fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = _PathBeneathAttr(access, fd)
                    check(
                        libc.syscall(
                            add_rule,
                            ctypes.c_int(ruleset),
                            ctypes.c_int(RULE_PATH_BENEATH),
                            ctypes.byref(rule),
                            ctypes.c_uint32(0),
                        )
                    )
                finally:
                    os.close(fd)
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        check(libc.syscall(restrict_self, ctypes.c_int(ruleset), ctypes.c_uint32(0)))
    finally:
        os.close(ruleset)


Spawn = Callable[[int], "subprocess.Popen[bytes]"]  # given the stdin descriptor to start rg with
_Job = tuple[Spawn, asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class _Spawner(threading.Thread):
    """A thread that confined itself once, then starts the processes it is given, one at a time.
    It ends after ``SPAWNER_IDLE_S`` without work; ``submit`` says False once it has (the caller
    starts another): a job is never left in the queue of a thread that ended."""

    def __init__(self, confine_self: Callable[[], None], rg_path: str, first: _Job | None) -> None:
        super().__init__(name="zuno-rg-spawner", daemon=True)
        self._confine_self = confine_self  # run first, in this thread: the Landlock domain or the view
        self._rg_path = rg_path
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        if first is not None:  # run before the thread may end idle
            self._jobs.put(first)
        self._lock = threading.Lock()
        self._ended = False
        self.ready = threading.Event()
        self.problem: str | None = None  # why the thread could not confine itself
        self._devnull = -1

    @classmethod
    def failed(cls, problem: str, first: _Job | None) -> _Spawner:
        """A spawner that could not be made (never started): ``problem`` says why, and the job it
        was given first fails with it."""
        spawner = cls(lambda: None, "", None)
        spawner.problem = problem
        spawner._ended = True
        spawner.ready.set()
        if first is not None:
            _, loop, fut = first
            loop.call_soon_threadsafe(_settle, fut, None, OSError(f"rg cannot start confined: {problem}"))
        return spawner

    def submit(self, job: _Job) -> bool:
        with self._lock:
            if self._ended:
                return False
            self._jobs.put(job)
            return True

    def run(self) -> None:
        try:
            self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)  # opened before the domain
            self._confine_self()
            self.problem = self._probe()
        except OSError as e:
            self.problem = f"{e.strerror or e}"
        finally:
            if self.problem is not None:
                with self._lock:
                    self._ended = True
                while not self._jobs.empty():  # (the first job, given to a thread that could not confine)
                    _, loop, fut = self._jobs.get()
                    loop.call_soon_threadsafe(_settle, fut, None, OSError(f"rg cannot start confined: {self.problem}"))
            self.ready.set()
        try:
            while self.problem is None:
                try:
                    spawn, loop, fut = self._jobs.get(timeout=SPAWNER_IDLE_S)
                except queue.Empty:
                    with self._lock:
                        if self._jobs.empty():
                            self._ended = True
                            return
                    continue
                try:
                    proc = spawn(self._devnull)
                except BaseException as e:  # handed to the waiting call
                    loop.call_soon_threadsafe(_settle, fut, None, e)
                else:
                    loop.call_soon_threadsafe(_settle, fut, proc, None)
        finally:
            if self._devnull >= 0:
                os.close(self._devnull)

    def _probe(self) -> str | None:
        """Does rg start in the domain? (An rg whose loader or libraries live elsewhere, or a
        wrapper script, does not: that rg runs unconfined rather than not at all.)"""
        from zuno.tools.search.rg_discovery import shared_rg_env

        try:
            done = subprocess.run(
                [self._rg_path, "--version"],
                stdin=self._devnull,
                capture_output=True,
                env=shared_rg_env(),
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as e:
            return f"rg does not start in the domain ({e})"
        if done.returncode != 0 or b"ripgrep" not in done.stdout:
            first = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
            return f"rg does not start in the domain (exit {done.returncode}{': ' + first[0] if first else ''})"
        return None


def _settle(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if fut.done():  # pragma: no cover - nothing cancels it
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


# The ways rg can be confined, best first: a view of its own (mountview.py: no cost per open; needs
# the right to make a mount namespace, as root has) or a Landlock domain (any user, Linux 5.13+).
VIEW = "mount-namespace"
LANDLOCK = "landlock"
KINDS = (VIEW, LANDLOCK)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class Confinement:
    """What one set of roots may be searched under: ``start`` runs a spawn in the confined thread
    (started again, with the same rules, when the last one ended idle or a root is no longer the
    directory it was). ``kind`` says how it is confined: the first of ``kinds`` that works here."""

    def __init__(self, roots: list[Path], rg_path: str, kinds: tuple[str, ...] | None = None) -> None:
        self._roots, self._rg_path = roots, rg_path
        self.kind: str | None = None
        problems = []
        for kind in KINDS if kinds is None else kinds:
            if not _kind_available(kind):
                problems.append(f"{kind}: not available on this system")
                continue
            spawner = self._new_spawner(kind, None)
            if spawner.problem is None:
                self.kind, self._spawner = kind, spawner
                break
            problems.append(f"{kind}: {spawner.problem}")
        self.problem = None if self.kind is not None else "; ".join(problems) or "no way to confine rg here"

    def _new_spawner(self, kind: str, first: _Job | None) -> _Spawner:
        """A spawner with the rules as they stand now (an ignore file created above a root since the
        last one is read from the next spawner on)."""
        rg_dirs = [str(Path(os.path.realpath(self._rg_path)).parent), os.path.dirname(os.path.abspath(self._rg_path))]
        exec_dirs = list(dict.fromkeys(rg_dirs)) + [d for d in SYSTEM_LIBRARY_DIRS if os.path.isdir(d)]
        files = [f for f in LOADER_FILES if os.path.isfile(f)] + [str(p) for p in readable_files(self._roots)]
        roots = [str(r) for r in self._roots]
        self._identities = [_identity(r) for r in self._roots]
        stage = None
        if kind == VIEW:
            plan = mountview.ViewPlan(roots + exec_dirs, files, mountview.repo_markers(roots))
            try:
                stage = mountview.new_stage(plan.dirs)
            except OSError as e:
                return _Spawner.failed(str(e), first)
            confine_self: Callable[[], None] = lambda: mountview.enter(plan, stage)  # noqa: E731
        else:
            confine_self = lambda: _restrict(roots, exec_dirs, files)  # noqa: E731
        spawner = _Spawner(confine_self, self._rg_path, first)
        spawner.start()
        spawner.ready.wait()
        if stage is not None:
            mountview.remove_stage(stage)  # the view no longer hangs on it
        return spawner

    @property
    def confined(self) -> bool:
        return self.problem is None

    async def start(self, spawn: Spawn) -> subprocess.Popen[bytes]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[subprocess.Popen[bytes]] = loop.create_future()
        job = (spawn, loop, fut)
        assert self.kind is not None, "start() of a confinement that could not be made"
        if [_identity(r) for r in self._roots] != self._identities or not self._spawner.submit(job):
            # The last thread ended idle, or a root was replaced (the view would still show the
            # directory that was there): another, given this job first (a failure to confine it
            # again, a root gone meanwhile, fails the job with the reason).
            self._spawner = self._new_spawner(self.kind, job)
        return await fut

    async def start_whole(
        self, spawn: Spawn, discard: Callable[[subprocess.Popen[bytes]], Awaitable[None]]
    ) -> subprocess.Popen[bytes]:
        """start(), never cancelled half-way: a cancellation waits for the start to end, hands the
        process it started to ``discard``, then goes on."""
        started = asyncio.ensure_future(self.start(spawn))
        try:
            return await asyncio.shield(started)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await discard(await started)
            raise


_cache: dict[tuple[tuple[str, ...], str], Confinement] = {}
_cache_lock = threading.Lock()


def _kind_available(kind: str) -> bool:
    return mountview.available() if kind == VIEW else _ABI > 0


def confinement_for(roots: list[Path], rg_path: str) -> Confinement | None:
    """The confinement of these roots (made once, kept), or None where neither way works here (no
    right to make a mount namespace and no Landlock, or an rg that cannot start confined; ``log``
    says why, once): rg then runs unconfined, as before, and its facts say ``confined: false``."""
    if not any(_kind_available(k) for k in KINDS):
        return None
    key = (tuple(str(r) for r in roots), rg_path)
    with _cache_lock:
        found = _cache.get(key)
        if found is None:
            if len(_cache) >= MAX_CONFINEMENTS:
                del _cache[next(iter(_cache))]  # its thread ends idle; a holder may still use it
            found = _cache[key] = Confinement(roots, rg_path)
            if found.problem is not None:
                log.warning("rg runs unconfined for %s: %s", key[0], found.problem)
    return found if found.confined else None


_ABI = landlock_abi()
