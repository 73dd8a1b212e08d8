"""The grep collector's bulk path (a file's run of hit records matched at once, kept as bytes and
read in finish()) against a plain record-by-record reading of the same rg output, and its edge
cases: text that is not UTF-8, NUL and CR in a line, long lines, colons and newlines in paths, the
hit cap crossed inside a run and across chunks."""

from __future__ import annotations

import random

import pytest

from zuno import limits
from zuno.tools.search.collect import WHOLE_OUTPUT_BYTES, GrepCollector, cap_utf16

CAP_UNITS = limits.MATCH_LINE_MAX_UTF16


def _collect(
    data: bytes, cap: int, step: int, whole: int = 0
) -> tuple[list[tuple[str, list[tuple[int, str, bool]]]], GrepCollector]:
    """The collector's files; ``whole`` is its whole_bytes (0: read as a stream from the start)."""
    col = GrepCollector(cap=cap, whole_bytes=whole)
    for i in range(0, len(data), step):
        col.feed(data[i : i + step])
    files = col.finish()
    assert all(ln.hit for f in files for ln in f.lines)
    return [(f.path, [(ln.number, ln.text, ln.capped) for ln in f.lines]) for f in files], col


def _rows(data: bytes, cap: int, step: int, *, plain: bool, whole: int = 0) -> list[str]:
    """The grep tool's rows (``path:number:text``) from the collector, with or without plain files."""
    col = GrepCollector(cap=cap, whole_bytes=whole)
    for i in range(0, len(data), step):
        col.feed(data[i : i + step])
    rows = []
    for f in col.finish(plain=plain):
        if f.plain:
            rows += [f"{f.path}:{body}" for body in f.plain.split("\n")]
        rows += [f"{f.path}:{ln.number}:{ln.text}" for ln in f.lines]
    return rows


def _oracle(records: list[tuple[bytes, int, bytes]], cap: int) -> tuple[list, int, int]:
    """Record by record: group by path, path order, line order, the first ``cap`` hits; each text
    decoded (not UTF-8: replaced), CR of CRLF dropped, cut at 2000 UTF-16 units."""
    by_path: dict[bytes, list[tuple[int, bytes]]] = {}
    for path, number, text in records:
        by_path.setdefault(path, []).append((number, text))
    out = []
    left = cap
    unnameable = 0
    for path in sorted(by_path):
        try:
            name = path.decode("utf-8")
        except UnicodeDecodeError:
            unnameable += len(by_path[path])
            continue
        if left <= 0:
            continue
        lines = []
        for number, raw in sorted(by_path[path])[:left]:
            text = raw[:8192].decode("utf-8", "replace")
            if text.endswith("\r") and len(raw) <= 8192:
                text = text[:-1]
            lines.append((number, *cap_utf16(text)))
        left -= len(lines)
        out.append((name, lines))
    return out, len(records), unnameable


def _stream(records: list[tuple[bytes, int, bytes]]) -> bytes:
    return b"".join(p + b"\0" + str(n).encode() + b":" + t + b"\n" for p, n, t in records)


TEXTS = [
    b"def get_x(self): return 1",
    b"caf\xc3\xa9 \xe2\x82 cut \xff not utf-8",
    b"crlf line\r",
    b"a NUL\x00inside 12:34 of a line",
    b"colons a:b:c and 3-4- dashes",
    b"",
    b"\r",
    b"x" * (CAP_UNITS // 2),
    b"x" * (CAP_UNITS // 2 + 1),
    b"y" * CAP_UNITS + b"\r",
    b"z" * (CAP_UNITS + 1),
    "\U0001f600".encode() * (CAP_UNITS // 2 + 1),  # astral: two units each
    "é".encode() * 5000 + b"\r",  # over 8192 bytes
    b"w" * 9000 + b"\r",
    b"\xe2\x82\xac" * 3000,
]
PATHS = [b"src/f.py", b"src/co:lon 1:2.py", b"src/x\r", b"caf\xc3\xa9/\xc3\xa9.py", b"src/-5-x.py", b"bad\xff.py"]


# Read as a stream from the start; kept whole (read at once) when short; kept, then read as a stream
# once past a small bound.
WHOLE_MODES = (0, WHOLE_OUTPUT_BYTES, 700)


@pytest.mark.parametrize("whole", WHOLE_MODES)
@pytest.mark.parametrize("seed", range(12))
def test_bulk_reading_equals_record_by_record(seed: int, whole: int) -> None:
    rnd = random.Random(seed)
    records: list[tuple[bytes, int, bytes]] = []
    paths = [p + b"%d" % i for i in range(rnd.randint(1, 40)) for p in [rnd.choice(PATHS)]]
    for path in dict.fromkeys(paths):
        numbers = sorted(rnd.sample(range(1, 3000), rnd.choice([1, 2, 7, 40, 300])))
        cut = rnd.randint(0, len(numbers)) if rnd.random() < 0.2 else len(numbers)
        for part in (numbers[:cut], numbers[cut:]):  # rg may print one file in two pieces
            records.append((path, -1, b""))
            records += [(path, n, rnd.choice(TEXTS)) for n in part]
    # pieces of files in walk order (not path order); a piece's records stay together
    pieces: list[list[tuple[bytes, int, bytes]]] = []
    for r in records:
        if r[1] == -1:
            pieces.append([])
        else:
            pieces[-1].append(r)
    pieces = [piece for piece in pieces if piece]
    walk = list(range(len(pieces)))
    rnd.shuffle(walk)
    # a file's pieces still come in line order, wherever the walk puts them
    for path in {piece[0][0] for piece in pieces}:
        mine = [i for i in range(len(pieces)) if pieces[i][0][0] == path]
        at = sorted(walk.index(i) for i in mine)
        for pos, i in zip(at, mine, strict=True):
            walk[pos] = i
    records = [r for i in walk for r in pieces[i]]
    data = _stream(records)
    cap = rnd.choice([1, 5, 100, 1000, 100_000])
    want, total, unnameable = _oracle(records, cap)
    for step in (rnd.choice([61, 333, 1021]), rnd.choice([4096, 65536]), max(1, len(data))):
        got, col = _collect(data, cap, step, whole)
        assert got == want, (seed, cap, step)
        assert col.total_hits == total and col.drops.unnameable == unnameable
        assert col.shown_hits == sum(len(lines) for _, lines in want)
        assert col.drops.over_cap == total - col.shown_hits - unnameable
        rows = [f"{path}:{n}:{text}" for path, lines in want for n, text, _ in lines]
        assert _rows(data, cap, step, plain=True, whole=whole) == rows


@pytest.mark.parametrize("whole", WHOLE_MODES)
def test_the_cap_crossed_inside_one_run_and_across_chunks(whole: int) -> None:
    records = [(b"a.py", n, b"hit %d" % n) for n in range(1, 2001)] + [(b"b.py", 1, b"one")]
    data = _stream(records)
    for step in (len(data), 1000, 7):
        got, col = _collect(data, 1000, step, whole)
        assert [p for p, _ in got] == ["a.py"]
        assert [n for n, _, _ in got[0][1]] == list(range(1, 1001))
        assert (col.total_hits, col.shown_hits, col.drops.over_cap) == (2001, 1000, 1001)
    # the file that fills the cap last shares it: 600 + 400 of b's 1000
    records = [(b"b.py", n, b"b") for n in range(1, 1001)] + [(b"a.py", n, b"a") for n in range(1, 601)]
    got, col = _collect(_stream(records), 1000, 4096, whole)
    assert [(p, len(lines)) for p, lines in got] == [("a.py", 600), ("b.py", 400)]
    assert got[1][1][-1][0] == 400 and col.drops.over_cap == 600


@pytest.mark.parametrize("whole", WHOLE_MODES)
def test_paths_with_newlines_and_binary_notices_between_runs(whole: int) -> None:
    data = (
        b"a\nb\x001:first\n"
        b"a\nb\x002:second\r\n"
        b'some.bin: binary file matches (found "\\0" byte around offset 3)\n'
        b"c:d\x003:with colon\n"
        b"c:d\x004:\xff\n"
    )
    for step in (1, 5, len(data)):
        got, col = _collect(data, 10, step, whole)
        assert got == [
            ("a\nb", [(1, "first", False), (2, "second", False)]),
            ("c:d", [(3, "with colon", False), (4, "\ufffd", False)]),
        ]
        assert col.drops.binary == 1 and col.total_hits == 4


@pytest.mark.parametrize("whole", WHOLE_MODES)
def test_long_lines_are_cut_like_short_ones(whole: int) -> None:
    crlf_long = b"q" * (CAP_UNITS + 5) + b"\r"
    astral = "\U0001f600".encode() * CAP_UNITS
    data = _stream([(b"f", 1, crlf_long), (b"f", 2, astral), (b"f", 3, b"ok\r")])
    got, _ = _collect(data, 10, len(data), whole)
    [(path, lines)] = got
    assert path == "f"
    assert lines[0] == (1, "q" * CAP_UNITS, True)
    assert lines[1] == (2, "\U0001f600" * (CAP_UNITS // 2), True)
    assert lines[2] == (3, "ok", False)


@pytest.mark.parametrize("whole", WHOLE_MODES)
def test_plain_files_read_back_the_same_rows(whole: int) -> None:
    data = _stream(
        [
            (b"a.py", 7, b"x"),  # plain
            (b"a.py", 9, b"y:z"),
            (b"b.py", 1, b"crlf\r"),  # a CR: lines
            (b"b.py", 2, b"ok"),
            (b"c.py", 3, b"w" * (CAP_UNITS // 2 + 1)),  # may be cut: lines
            (b"d.py", 1, b"caf\xe9"),  # not UTF-8: lines
        ]
    )
    data += b"e.py\x00007:leading zero\n"  # not a number as rg writes it: read record by record
    col = GrepCollector(cap=100, whole_bytes=whole)
    col.feed(data)
    files = col.finish(plain=True)
    assert [(f.path, f.plain) for f in files if f.plain] == [("a.py", "7:x\n9:y:z")]
    assert [f.path for f in files if f.lines] == ["b.py", "c.py", "d.py", "e.py"]
    assert _rows(data, 100, len(data), plain=True, whole=whole) == _rows(data, 100, len(data), plain=False, whole=whole)
    assert _rows(data, 100, 3, plain=True, whole=whole)[-1] == "e.py:7:leading zero"
    # the file cut at the cap keeps lines, the files before it may be plain
    col = GrepCollector(cap=3, whole_bytes=whole)
    col.feed(_stream([(b"a", 1, b"1"), (b"a", 2, b"2"), (b"b", 1, b"1"), (b"b", 2, b"2")]))
    files = col.finish(plain=True)
    assert [(f.path, f.plain, [ln.number for ln in f.lines]) for f in files] == [
        ("a", "1:1\n2:2", []),
        ("b", None, [1]),
    ]


@pytest.mark.parametrize("whole", WHOLE_MODES)
def test_a_long_counted_run_is_taken_at_once_and_its_first_records_still_size_checked(whole: int) -> None:
    """Past the cap, a file whose head run is full (64 records) has the rest of its run counted by
    C scans at once; among its next 64 records one over 1 MiB is still skipped, as record by record."""
    head = [(b"b.py", n, b"hit") for n in range(1, 65)]
    huge = (b"b.py", 70, b"h" * limits.RG_RECORD_MAX_BYTES)
    tail = [(b"b.py", n, b"hit") for n in range(100, 5100)]
    kept = [(b"a.py", n, b"kept") for n in range(1, 101)]
    records = kept + head + [huge] + tail
    data = _stream(records)
    for step in (len(data), 65536, 4096):
        got, col = _collect(data, 100, step, whole)
        assert got == [("a.py", [(n, "kept", False) for n in range(1, 101)])]
        assert col.drops.oversized == 1, step
        assert col.total_hits == len(records) - 1 and col.drops.over_cap == len(records) - 1 - 100
    # without a record that large the same run counts every record
    data = _stream(kept + head + tail)
    for step in (len(data), 997):
        got, col = _collect(data, 100, step, whole)
        assert col.total_hits == 100 + len(head) + len(tail) and col.drops.oversized == 0
    # the regex that takes the rest of the run is ready as soon as the head is full
    col = GrepCollector(cap=100, whole_bytes=0)  # the stream's own state
    col.feed(_stream(kept + head))
    assert col._fast_rx is not None and col._fast == b"b.py\0"


def _files(col: GrepCollector, data: bytes, step: int, plain: bool) -> list[tuple]:
    """What the grep tool shows of each file (its rows, as it renders plain files and lines) and its
    hits. Which files are plain may differ with how the output came in; the rows may not."""
    for i in range(0, len(data), step):
        col.feed(data[i : i + step])
    out = []
    for f in col.finish(plain=plain):
        assert plain or f.plain is None
        rows = [f"{f.path}:{body}" for body in f.plain.split("\n")] if f.plain is not None else []
        rows += [f"{f.path}:{ln.number}:{ln.text}" for ln in f.lines]
        out.append((f.key, f.hits, rows, [ln.capped for ln in f.lines if ln.capped]))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_a_short_output_read_at_once_is_what_the_stream_reads(seed: int) -> None:
    """The common output (UTF-8 hit records, no CR, short lines, each file's records together) is
    read at once when short: the same files, lines, plain rows and counts as the stream gives, the
    cap crossed in the middle of a file or at its end; anything else is read as the stream is."""
    rnd = random.Random(seed)
    texts = ["def get_x(self):", "", "a:b:c", "caf\u00e9 \U0001f600", "x" * (CAP_UNITS // 2 - 6), "NUL\x00in"]
    records = []
    for i in rnd.sample(range(500), rnd.randint(1, 60)):  # walk order, not path order
        path = rnd.choice(["src/", "tests/", "é/", "a b/", "c:d/"]) + f"f{i}.py"
        for n in sorted(rnd.sample(range(1, 9999), rnd.choice([1, 2, 5, 30]))):
            records.append((path.encode(), n, rnd.choice(texts).encode()))
    data = _stream(records)
    for cap in (1, 7, len(records) - 1, len(records), 1000):
        for plain in (True, False):
            stream = GrepCollector(cap=max(cap, 1), whole_bytes=0)
            at_once = GrepCollector(cap=max(cap, 1))
            step = rnd.choice([13, 4096, len(data)])
            assert _files(at_once, data, step, plain) == _files(stream, data, step, plain), (cap, plain)
            assert at_once.read_at_once and not stream.read_at_once
            assert at_once.read_as_it_came  # its lines were read as they came, whatever the pieces
            a, b = at_once, stream
            assert (a.total_hits, a.shown_hits, a.drops.facts()) == (b.total_hits, b.shown_hits, b.drops.facts())
    # not the common form: read as the stream reads it, with the same result
    for extra in (
        b"z.py\x001:crlf\r\n",
        b"z.py\x001:\xff\n",
        b"z.py\x00007:leading zero\n",
        b'z.bin: binary file matches (found "\\0" byte around offset 3)\n',
        b"z\ny.py\x001:a newline in the name\n",
        b"z.py\x001:" + b"w" * (CAP_UNITS // 2 + 1) + b"\n",
        data.split(b"\0", 1)[0] + b"\x0099999:later\n",  # its first file printed again, in a second piece
        b"z.py\x001:no newline at the end",
    ):
        stream, at_once = GrepCollector(cap=1000, whole_bytes=0), GrepCollector(cap=1000)
        assert _files(at_once, data + extra, 4096, True) == _files(stream, data + extra, 4096, True), extra
        assert not at_once.read_at_once and at_once.total_hits == stream.total_hits
    # past the bound, what was kept is read as the stream, then the rest as it comes
    small = GrepCollector(cap=1000, whole_bytes=len(data) // 2)
    assert _files(small, data, 64, True) == _files(GrepCollector(cap=1000, whole_bytes=0), data, 64, True)
    assert not small.read_at_once


def test_an_output_that_outgrows_the_bound_at_its_second_piece_is_read_once() -> None:
    """rg writing fast (a dense search) fills the pipe at once: its first piece fits the bound
    (kept, not read yet), its second does not, and the kept piece is read once, as the stream."""
    data = _stream([(f"d{i:03d}.txt".encode(), n, b"hit") for i in range(40) for n in range(1, 2001)])
    first, second = data[:WHOLE_OUTPUT_BYTES], data[WHOLE_OUTPUT_BYTES : 2 * WHOLE_OUTPUT_BYTES]
    read_early: list[int] = []
    col = GrepCollector(cap=1000)
    col._read_lines = lambda chunk: read_early.append(len(chunk))  # type: ignore[method-assign]
    col.feed(first)
    col.feed(second)
    col.feed(data[2 * WHOLE_OUTPUT_BYTES :])
    assert read_early == []  # never read into runs, to be read again as the stream
    stream = GrepCollector(cap=1000, whole_bytes=0)
    stream.feed(data)
    assert _files(col, b"", 1, True) == _files(stream, b"", 1, True)
    assert col.total_hits == stream.total_hits == 80_000 and not col.read_at_once
