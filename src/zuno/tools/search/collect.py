"""Streaming collectors for rg's output: bounded memory, a stable order decided after the walk.
This module holds grep's collector and what both tools share; glob's is in ``glob_collect``.

rg prints each path as raw bytes terminated by NUL (``--null``), so a path is checked as bytes:
a name that is not valid UTF-8 cannot be named and is left out (counted, and the result says it
was truncated). Only the first N results in path order are kept while the walk streams in; the
rest are counted. A record over ``limits.RG_RECORD_MAX_BYTES`` is skipped without buffering it.
"""

from __future__ import annotations

import bisect
import itertools
import json
import operator
import re
from dataclasses import dataclass, field

from zuno import limits
from zuno.tools.control_pictures import CONTROLS, to_shown

# rg prints this on stdout, without a NUL, for an explicitly named binary file that matched.
_BINARY_NOTICE = re.compile(rb': binary file matches \(found "\\0" byte around offset \d+\)$')
_LINE_NO = re.compile(rb"(\d+)([:-])")
# How many raw bytes of a line are decoded: enough for 2000 UTF-16 units whatever the encoding.
_DECODE_BYTES = 8_192
# After this many counted-only records of one file (a head run that long, or that many more read one
# by one), the rest of its run is matched by one regex.
_FAST_RUN_REGEX_AFTER = 64
_NUMBER = operator.attrgetter("number")
# The fields of each line of a run of hit records (validated by the run's regex): line number, text.
_HIT_FIELDS = re.compile(r"^[^\x00\n]*\x00([0-9]+):(.*)$", re.M)
# Hit records are kept as raw bytes until finish() only while they average at most this many bytes
# (so the kept bytes stay bounded like the decoded lines); a run of longer ones is read at once.
_RAW_BYTES_PER_HIT = 512
# A hit line of at most this many characters is at most 2000 UTF-16 units: never capped.
_NEVER_CAPPED_CHARS = limits.MATCH_LINE_MAX_UTF16 // 2
# Without context, rg's output is kept whole while it is at most this long: a search that prints
# little is read in bulk, each piece's complete lines at once as it comes (a decode and a few splits,
# GrepCollector._read_lines), not record by record; after rg only the files are sorted and built. An
# output not of the common form is read from what was kept once rg ended (_read_whole), or as the
# stream. Past this length, what was kept is read as the stream is, and the rest as it comes: memory
# stays bounded, and the reading serial after rg stays short.
WHOLE_OUTPUT_BYTES = 256 * 1024
_PATH = operator.itemgetter(0)
_SEP = operator.itemgetter(1)
_BODY = operator.itemgetter(2)


def _hit_run_regex(cap: int) -> re.Pattern[bytes]:
    """A run of one file's hit records: the first one, then up to ``cap - 1`` more lines that start
    with the same path and a NUL (``path NUL number : text LF`` each, the number as rg writes it:
    no leading zero, so it reads back the same)."""
    return re.compile(rb"([^\x00\n]*)\x00[1-9][0-9]*:[^\n]*\n(?:\1\x00[1-9][0-9]*:[^\n]*\n){0,%d}" % (cap - 1))


def _counted_run_regex(prefix: bytes) -> re.Pattern[bytes]:
    """A run of records that all start with ``prefix`` (a path and its NUL)."""
    p = re.escape(prefix)
    return re.compile(p + rb"[^\n]*\n(?:" + p + rb"[^\n]*\n)*")


def _line(number: int, hit: bool, body: bytes, at: int) -> Line:
    """One record's line, its text from ``body[at:]``: a hit cut at 2000 UTF-16 units, context
    shortened to 256 bytes, the CR of a CRLF line dropped, bytes that are not UTF-8 replaced. A
    context line's controls are shown as pictures before it is shortened (a picture is three
    bytes); a hit line's where it is printed (``chord_format.hit_line``: one UTF-16 unit each)."""
    text = body[at : at + _DECODE_BYTES].decode("utf-8", "replace")
    if text.endswith("\r") and len(body) - at <= _DECODE_BYTES:
        text = text[:-1]
    if hit:
        text, capped = cap_utf16(text)
    else:
        text, capped = shorten_bytes(shown_controls(text))
    return Line(number, hit, text, capped)


def _hit_lines(raw: bytes) -> list[Line]:
    """The lines of complete hit records ``path NUL number : text LF`` (as ``_hit_run`` keeps
    them): decoded at once and split by one findall when the bytes are UTF-8, else record by record
    (the bytes that are not UTF-8 replaced, as ``_line`` does)."""
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        out = []
        for rec in raw.split(b"\n")[:-1]:
            body = rec.partition(b"\0")[2]
            m = _LINE_NO.match(body)
            assert m is not None
            out.append(_line(int(m.group(1)), True, body, m.end()))
        return out
    pairs = _HIT_FIELDS.findall(s)
    if "\r" in s:
        return [_hit_line(int(num), text) for num, text in pairs]
    wide = _NEVER_CAPPED_CHARS
    return [
        Line(int(num), True, text, False) if len(text) <= wide else _hit_line(int(num), text) for num, text in pairs
    ]


def _hit_line(number: int, text: str) -> Line:
    """A hit line from its whole decoded text: the CR of a CRLF line dropped, then cut at 2000 units."""
    if text.endswith("\r"):
        text = text[:-1]
    text, capped = cap_utf16(text)
    return Line(number, True, text, capped)


def _run_end(data: bytes, pos: int, prefix: bytes | None) -> tuple[int, int]:
    """Where the run of complete lines starting with ``prefix`` that begins at ``pos`` ends, and how
    many lines it holds, when every complete line from ``pos`` up to the last one with that prefix
    has it (found with C scans, not line by line); (-1, 0) when another line is among them (the
    caller matches the run)."""
    if prefix is None or not data.startswith(prefix, pos):
        return pos, 0
    last = data.rfind(b"\n" + prefix, pos)
    start = last + 1 if last >= 0 else pos
    nl = data.find(b"\n", start + len(prefix))
    end = nl + 1 if nl >= 0 else start
    if end <= pos:
        return pos, 0
    lines = data.count(b"\n", pos, end)
    if lines == 1 + data.count(b"\n" + prefix, pos, end - 1):
        return end, lines
    return -1, 0


def shown_controls(text: str) -> str:
    """A line's C0 controls but TAB (a lone CR, an ESC sequence, a backspace) as their Unicode
    control pictures, as read shows them, never acting on a terminal or log showing the line. Each
    picture is one UTF-16 unit, as its control is, so a hit line's cap is unchanged."""
    return to_shown(text) if CONTROLS.search(text) else text


def utf16_units(s: str) -> int:
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def cap_utf16(s: str, cap: int = limits.MATCH_LINE_MAX_UTF16) -> tuple[str, bool]:
    """Cut ``s`` to at most ``cap`` UTF-16 code units, never inside a surrogate pair."""
    if len(s) * 2 <= cap or utf16_units(s) <= cap:
        return s, False
    units = 0
    for i, c in enumerate(s):
        units += 2 if ord(c) > 0xFFFF else 1
        if units > cap:
            return s[:i], True
    return s, False  # pragma: no cover


def shorten_bytes(s: str, cap: int = limits.CHORD_CONTEXT_LINE_MAX_BYTES) -> tuple[str, bool]:
    """Shorten ``s`` so that its UTF-8 form, ending in "...", is at most ``cap`` bytes."""
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= cap:
        return s, False
    return b[: cap - 3].decode("utf-8", "ignore") + "...", True


_NEEDS_QUOTE_ANY = re.compile(r'[\x00-\x1f\x7f"]')
_NEEDS_QUOTE_GREP = re.compile(r'[\s\x00-\x1f\x7f"]|:|-\d+-|^\| ')


def quote_path(p: str, *, grep: bool) -> str:
    """How a path is printed. A glob line is one path, so only control characters (a newline in a
    name, say) or a quote force quoting; a grep line ``path:line:text`` also quotes paths with
    whitespace or an ambiguous separator. Quoted paths are JSON strings (backslashes escaped
    inside the quotes); an unquoted path is verbatim, backslashes included."""
    rx = _NEEDS_QUOTE_GREP if grep else _NEEDS_QUOTE_ANY
    if rx.search(p) or (not grep and p != p.strip()):
        return json.dumps(p, ensure_ascii=False)
    return p


# What makes some grep path quoted (_NEEDS_QUOTE_GREP), found over many paths joined by "/" at once
# (quote_paths): its characters (one charset, scanned fast; a "| " at its start holds a space), or a
# "-<digits>-" (never across the "/" between two paths).
_GREP_QUOTE_CHARS = re.compile(r'[\s\x00-\x1f\x7f":]')
_DASH_NUMBER = re.compile(r"-\d+-")


def quote_paths(paths: list[str]) -> list[str]:
    """quote_path(p, grep=True) of each path, decided once over all of them when none needs quoting
    (the common case: the paths themselves), path by path otherwise."""
    joined = "/".join(paths)
    if not (_GREP_QUOTE_CHARS.search(joined) or ("-" in joined and _DASH_NUMBER.search(joined))):
        return paths
    return [quote_path(p, grep=True) for p in paths]


def decode_path(b: bytes) -> str | None:
    """The path rg printed, or None when its bytes are not UTF-8 (it cannot be named)."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(slots=True)
class Drops:
    unnameable: int = 0  # results whose path is not valid UTF-8
    oversized: int = 0  # rg records over 1 MiB, skipped
    over_cap: int = 0  # results past the result cap
    binary: int = 0  # explicitly named binary files rg reported instead of lines

    @property
    def any(self) -> bool:
        return bool(self.unnameable or self.oversized or self.over_cap)

    def facts(self) -> dict[str, int]:
        return {
            "unnameablePaths": self.unnameable,
            "oversizedRecords": self.oversized,
            "overCap": self.over_cap,
            "binaryFiles": self.binary,
        }


@dataclass(slots=True)
class Line:
    number: int
    hit: bool
    text: str
    capped: bool  # a hit line cut at 2000 UTF-16 units, or a context line shortened to 256 bytes


@dataclass(slots=True)
class FileHits:
    key: bytes
    path: str
    lines: list[Line] = field(default_factory=list)
    hits: int = 0  # hit lines stored (in ``lines`` or still in ``raw``)
    last_hit: int = 0
    raw: bytes = b""  # hit records kept as rg wrote them (``path NUL number : text LF``), read in finish()
    # finish(plain=True): the hit lines as ``number:text``, joined by newlines, when each is shown as
    # rg wrote it (UTF-8, no CR, never cut); ``lines`` then holds none of them.
    plain: str | None = None


def _make_plain(f: FileHits) -> bool:
    """Turn ``f.raw`` into ``f.plain`` when every record is UTF-8 without a CR and short enough
    never to be cut (each line's text is then exactly what rg wrote); False, untouched, if not."""
    try:
        s = f.raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if "\r" in s:
        return False
    prefix = f.path + "\0"
    bodies = s[len(prefix) : -1].split("\n" + prefix)
    if max(map(len, bodies)) > _NEVER_CAPPED_CHARS:
        return False
    f.plain = "\n".join(bodies)
    f.raw = b""
    return True


def _runs_of(s: str) -> list[tuple[str, list[str]]] | None:
    """Complete lines of rg's grep output (``s`` ends with a newline, or is empty) as runs of one
    file's records: (path, its ``number:text`` bodies), in the order printed. None when a line is
    not the common form read whole (see GrepCollector._read_whole)."""
    if "\r" in s:
        return None
    # Each line a hit record ``path NUL number:text`` (the path ends at the line's first NUL),
    # the number as rg writes it (digits, no leading zero).
    lines = s.split("\n")
    if lines.pop() != "":
        return None
    if not lines:
        return []
    records = [line.partition("\x00") for line in lines]
    if not all(map(_SEP, records)):
        return None
    bodies = list(map(_BODY, records))
    fields = [body.partition(":") for body in bodies]
    numbers = "\n".join(map(_PATH, fields))
    if not all(map(_SEP, fields)) or not numbers.replace("\n", "").isdigit() or not numbers.isascii():
        return None
    if "\n\n" in numbers or numbers.startswith(("0", "\n")) or "\n0" in numbers:
        return None
    if max(map(len, bodies)) > _NEVER_CAPPED_CHARS:
        return None
    return [(path, list(map(_BODY, run))) for path, run in itertools.groupby(records, _PATH)]


class GrepCollector:
    """``rg --null --line-number --with-filename --no-heading``: ``path NUL line(:|-)text LF``.

    rg writes each file's records together, in line order. The collector keeps the files that hold
    the first ``cap`` hits in path order and counts the rest, so memory stays bounded however many
    lines match."""

    def __init__(self, cap: int, context: int = 0, *, whole_bytes: int = WHOLE_OUTPUT_BYTES) -> None:
        self.cap = cap
        self.context = context
        # The output kept unread while it is short (see WHOLE_OUTPUT_BYTES), without context; None
        # once it is read as a stream.
        self._whole: list[bytes] | None = [] if not context and whole_bytes > 0 else None
        self._whole_room = whole_bytes
        # The kept output's complete lines, already read into runs as they came in (while rg's threads
        # run, not after them): None once a piece of it was not the common form (finish() then reads
        # what was kept as it always could, _read_whole).
        self._runs: list[tuple[str, list[str]]] | None = [] if self._whole is not None else None
        self._runs_carry = b""  # the kept output's last line, until its newline comes
        # The last piece kept, read into runs when the next one comes and still fits (or in finish()):
        # an output that outgrows the bound at its second piece (rg writing fast: a dense search's
        # first 256 KiB at once) is then never read twice.
        self._unread = b""
        self.read_at_once = False  # finish() read the output kept whole (facts for tests and benches)
        self.read_as_it_came = False  # ... from the runs read while it came in (no reading left to finish())
        self.drops = Drops()
        self.total_hits = 0
        self.shown_hits = 0
        self.held: list[FileHits] = []
        self._keys: list[bytes] = []
        self._held_hits = 0
        self._by_key: dict[bytes, FileHits] = {}
        self._cur_key: bytes | None = None
        self._cur: FileHits | None = None
        self._cur_mode = 0  # 0 store, 1 count only (past the cap), 2 unnameable
        self._pending = b""
        self._carry = b""
        self._skipping = False
        self._fast: bytes | None = None  # key + NUL of a current file whose records are only counted
        self._fast_run = 0  # records of that file counted so far
        self._fast_rx: re.Pattern[bytes] | None = None  # matches a run of its records, once the run is long
        # Without context: a run's first records (how most files' runs end), and a whole stored run.
        self._head_rx = None if context else _hit_run_regex(min(cap, _FAST_RUN_REGEX_AFTER))
        self._run_rx = None if context else _hit_run_regex(cap)

    # -- streaming ---------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        whole = self._whole
        if whole is not None:
            if len(chunk) <= self._whole_room:
                whole.append(chunk)
                self._whole_room -= len(chunk)
                if self._runs is not None:
                    if self._unread:
                        self._read_lines(self._unread)
                    self._unread = chunk
                return
            self._whole = self._runs = None  # too long to keep: read as a stream from here, what was kept first
            self._unread = b""
            for kept in whole:
                self._feed(kept)
        self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        if self._skipping:
            i = chunk.find(b"\n")
            if i < 0:
                return
            chunk = chunk[i + 1 :]
            self._skipping = False
        data = self._pending + chunk if self._pending else chunk
        maxrec = limits.RG_RECORD_MAX_BYTES
        counted = 0
        pos = 0
        while True:
            rx = self._fast_rx
            if rx is not None and not self._carry:
                # A long run of one counted-only file: consumed at once, counted by newlines. Its
                # first records after the head are size-checked one by one unless they fit in 1 MiB.
                end, lines = _run_end(data, pos, self._fast)
                if end < 0:
                    m = rx.match(data, pos)
                    end = m.end() if m is not None else pos
                    lines = data.count(b"\n", pos, end)
                if self._fast_run >= _FAST_RUN_REGEX_AFTER or end - pos <= maxrec:
                    counted += lines
                    self._fast_run += lines
                    pos = end
            head_rx = self._head_rx
            if head_rx is not None and not self._carry and not (self._fast and data.startswith(self._fast, pos)):
                # The next file's run of records, found by one regex (without context, every record
                # of rg's is a hit): a stored file keeps it, any other file only counts it.
                m = head_rx.match(data, pos)
                if m is not None and m.end() - pos <= maxrec:
                    if counted:
                        self._count_fast(counted)
                        counted = 0
                    key = m.group(1)
                    if key != self._cur_key:
                        self._start(key)
                    if self._cur_mode == 0:
                        end = self._hit_run(data, pos, m)
                        if end >= 0:
                            pos = end
                            continue
                    else:
                        n = data.count(b"\n", pos, m.end())
                        self._count_fast(n)
                        self._fast = key + b"\0"
                        if n == _FAST_RUN_REGEX_AFTER:  # a full head: the run is long, take the rest at once
                            self._fast_rx = _counted_run_regex(self._fast)
                        pos = m.end()
                        continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            piece = data[pos:nl]
            pos = nl + 1
            fast = self._fast
            if fast is not None and not self._carry and piece.startswith(fast):
                # Only counted (past the cap, or unnameable, without context): the hot path.
                if len(piece) > maxrec:
                    self.drops.oversized += 1
                    continue
                counted += 1
                self._fast_run += 1
                if self._fast_run == _FAST_RUN_REGEX_AFTER and self._fast_rx is None:
                    self._fast_rx = _counted_run_regex(fast)
                continue
            if counted:
                self._count_fast(counted)
                counted = 0
            if self._carry:
                piece = self._carry + b"\n" + piece
                self._carry = b""
            key, sep, body = piece.partition(b"\0")
            if not sep:
                if _BINARY_NOTICE.search(piece):
                    self.drops.binary += 1
                else:  # a file name with a newline in it: the record continues on the next piece
                    self._carry = piece
                continue
            if len(piece) > maxrec:
                self.drops.oversized += 1
                continue
            self._record(key, body)
        if counted:
            self._count_fast(counted)
        self._pending = data[pos:]
        if self._carry:
            self._pending = self._carry + b"\n" + self._pending
            self._carry = b""
        if len(self._pending) > maxrec:
            self._pending = b""
            self._skipping = True
            self.drops.oversized += 1

    def _hit_run(self, data: bytes, start: int, m: re.Match[bytes]) -> int:
        """The run of hit records of the current (stored) file that begins at ``start``, taken in
        bulk: one regex match finds it and its bytes are kept as they are, to be read in finish()
        (only for the files shown, all at once). Returns where the records it took end, or -1 when
        the run is not for the bulk path (a record too large, the file already full): the caller
        then reads the record alone. Records past the file's room are left to the caller, which
        counts them (``_fast``). A run of long lines is read at once, so what is kept stays small."""
        f = self._cur
        assert f is not None
        room = self.cap - f.hits
        if room <= 0:
            return -1
        end = m.end()
        run = data[start:end]
        n = run.count(b"\n")
        if n == _FAST_RUN_REGEX_AFTER and room > n:  # the run may go on: match all of it (up to the cap)
            assert self._run_rx is not None
            m = self._run_rx.match(data, start)
            assert m is not None
            end = m.end()
            if end - start > limits.RG_RECORD_MAX_BYTES:
                return -1
            run = data[start:end]
            n = run.count(b"\n")
        if n > room:
            rest = run.split(b"\n", room)[-1]
            run = run[: len(run) - len(rest)]
            end -= len(rest)
            n = room
        if len(run) > n * _RAW_BYTES_PER_HIT:
            f.lines += _hit_lines(run)
        elif f.raw:
            f.raw += run
        else:
            f.raw = run
        f.hits += n
        self.total_hits += n
        if n == room:  # the file is full: the rest of its records are only counted
            self._fast = m.group(1) + b"\0"
        return end

    def _count_fast(self, n: int) -> None:
        self.total_hits += n
        if self._cur_mode == 2:
            self.drops.unnameable += n

    def _record(self, key: bytes, body: bytes) -> None:
        if key != self._cur_key:
            self._start(key)
        m = _LINE_NO.match(body)
        if m is None:
            return
        hit = m.group(2) == b":"
        if hit:
            self.total_hits += 1
        mode = self._cur_mode
        if mode == 2:
            if hit:
                self.drops.unnameable += 1
            if not self.context:
                self._fast = key + b"\0"
            return
        if mode == 1:
            if not self.context:
                self._fast = key + b"\0"
            return
        f = self._cur
        assert f is not None
        number = int(m.group(1))
        if hit:
            if f.hits >= self.cap:
                if not self.context:
                    self._fast = key + b"\0"
                return
            f.hits += 1
            f.last_hit = number
        elif f.hits >= self.cap and number > f.last_hit + self.context:
            return
        f.lines.append(_line(number, hit, body, m.end()))

    def _start(self, key: bytes) -> None:
        self._fast = None
        self._fast_rx = None
        self._fast_run = 0
        self._close()
        self._cur_key = key
        held = self._by_key.get(key)
        if held is not None:  # rg printed this file in two pieces: continue it
            i = bisect.bisect_left(self._keys, key)
            del self._keys[i]
            del self.held[i]
            self._held_hits -= held.hits
            self._cur, self._cur_mode = held, 0
            return
        path = decode_path(key)
        if path is None:
            self._cur, self._cur_mode = None, 2
        elif self._held_hits >= self.cap and self._keys and key > self._keys[-1]:
            self._cur, self._cur_mode = None, 1
        else:
            self._cur, self._cur_mode = FileHits(key, path), 0

    def _close(self) -> None:
        f, self._cur = self._cur, None
        self._cur_key = None
        if f is None or f.hits == 0:
            if f is not None:
                self._by_key.pop(f.key, None)
            return
        i = bisect.bisect_left(self._keys, f.key)
        self._keys.insert(i, f.key)
        self.held.insert(i, f)
        self._by_key[f.key] = f
        self._held_hits += f.hits
        while len(self.held) > 1 and self._held_hits - self.held[-1].hits >= self.cap:
            gone = self.held.pop()
            self._keys.pop()
            self._by_key.pop(gone.key, None)
            self._held_hits -= gone.hits

    def finish(self, *, plain: bool = False) -> list[FileHits]:
        """The files that hold the first ``cap`` hits, in path order, their lines in line order.
        With ``plain``, a file whose kept records are all plain (see ``FileHits.plain``) keeps them
        as ``number:text`` strings instead of lines."""
        whole = self._whole
        if whole is not None:
            self._whole = None
            if self._runs is not None and self._unread:
                self._read_lines(self._unread)
            runs, self._runs, self._unread = self._runs, None, b""
            files = None
            if runs is not None and not self._runs_carry:  # read as it came in
                files = self._files_of(runs, plain) if runs else []
            if files is not None:
                self.read_as_it_came = True
                return files
            data = b"".join(whole)
            files = self._read_whole(data, plain)
            if files is not None:
                return files
            self._feed(data)  # not the common form: read as the stream would have been
        if self._pending:
            self._feed(b"\n")
        self._close()
        # The files shown read their kept raw records now, all of them with one decode and one findall.
        left = self.cap
        shown_files = []
        for f in self.held:
            if left <= 0:
                break
            shown_files.append(f)
            left -= f.hits
        raws = [f for f in shown_files if f.raw]
        if plain:
            cut = shown_files[-1] if left < 0 else None  # the file whose hits are cut keeps lines
            raws = [f for f in raws if f is cut or f.lines or not _make_plain(f)]
        if raws:
            lines = _hit_lines(b"".join(f.raw for f in raws))
            at = 0
            for f in raws:
                n = f.raw.count(b"\n")
                f.lines += lines[at : at + n]
                at += n
                f.raw = b""
        # Keep exactly the first `cap` hits in path order (and their context).
        out: list[FileHits] = []
        left = self.cap
        shown = 0
        for f in shown_files:
            if left <= 0:
                break
            f.lines.sort(key=_NUMBER)
            if f.hits > left:
                last_kept = 0
                kept_hits = 0
                cut: list[Line] = []
                for ln in f.lines:
                    if ln.hit:
                        if kept_hits == left:
                            break
                        kept_hits += 1
                        last_kept = ln.number
                    elif kept_hits == left and ln.number > last_kept + self.context:
                        break
                    cut.append(ln)
                # trailing context after the last kept hit stays; context before a dropped hit goes
                f.lines = [ln for ln in cut if ln.hit or ln.number <= last_kept + self.context or kept_hits < left]
                f.hits = kept_hits
            out.append(f)
            left -= f.hits
            shown += f.hits
        self.shown_hits = shown
        self.drops.over_cap = self.total_hits - shown - self.drops.unnameable
        return out

    def _read_lines(self, chunk: bytes) -> None:
        """Read the complete lines of a piece of the kept output into runs (``_runs``), as the
        whole of it would be read (``_runs_of``); a run cut by the piece's end goes on in the next."""
        data = self._runs_carry + chunk if self._runs_carry else chunk
        cut = data.rfind(b"\n") + 1
        self._runs_carry = data[cut:]
        if not cut:
            return
        try:
            runs = _runs_of(data[:cut].decode("utf-8"))  # (a newline is never inside a UTF-8 character)
        except UnicodeDecodeError:
            runs = None
        kept = self._runs
        if runs is None or kept is None:
            self._runs = None
            return
        if kept and runs and kept[-1][0] == runs[0][0]:
            kept[-1][1].extend(runs.pop(0)[1])
        kept.extend(runs)

    def _read_whole(self, data: bytes, plain: bool) -> list[FileHits] | None:
        """finish() of an output kept whole, read at once: the same files, hits and counts the
        stream gives, when every line is a hit record of a nameable path, in UTF-8, without a CR,
        short enough never to be cut, each file's records together. None when it
        is not so (the caller reads it as the stream): a binary notice, a name with a newline, text
        that is not UTF-8, a CR, a long line, a file printed in two pieces."""
        if not data:
            return []
        try:
            runs = _runs_of(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None
        return None if runs is None else self._files_of(runs, plain)

    def _files_of(self, runs: list[tuple[str, list[str]]], plain: bool) -> list[FileHits] | None:
        """The files of the runs of an output read whole (``_runs_of``), in path order; None when a
        file was printed in two pieces."""
        if len(runs) > 1:
            runs.sort(key=_PATH)  # by code point: the byte order of UTF-8, as the stream's keys
            if any(a[0] == b[0] for a, b in itertools.pairwise(runs)):
                return None
        out: list[FileHits] = []
        left = self.cap
        total = 0
        for path, run in runs:
            hits = len(run)
            total += hits
            if left <= 0:
                continue
            f = FileHits(path.encode("utf-8"), path)
            if hits > left or not plain:  # the file the cap cuts keeps lines, its first hits
                for body in run[:left]:
                    number, _, text = body.partition(":")
                    f.lines.append(Line(int(number), True, text, False))
                f.hits = len(f.lines)
                f.last_hit = f.lines[-1].number
            else:
                f.plain = "\n".join(run)
                f.hits = hits
                f.last_hit = int(run[-1].partition(":")[0])
            out.append(f)
            left -= f.hits
        self.total_hits = total
        self.shown_hits = sum(f.hits for f in out)
        self.drops.over_cap = self.total_hits - self.shown_hits
        self.read_at_once = True
        return out
