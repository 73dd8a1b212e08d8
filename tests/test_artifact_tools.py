"""save_artifact / read_artifact (chord): both shapes, the modes, content-addressed results."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import zuno


async def _calls(root: Path, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async with zuno.Runtime(root=root, profile="chord") as rt, rt.session("ses_art") as s:
        res = await s.step(calls)
        return [r.to_json() for r in res.results]


def save(**a: Any) -> dict[str, Any]:
    return {"name": "save_artifact", "arguments": a}


def read(**a: Any) -> dict[str, Any]:
    return {"name": "read_artifact", "arguments": a}


async def test_modes_create_append_overwrite_and_read_back(workspace: Path) -> None:
    r = await _calls(
        workspace,
        [
            save(filename="notes/plan.md", content="one\n"),
            save(filename="notes/plan.md", content="again\n"),  # create: exists
            save(filename="notes/plan.md", content="two\n", mode="append"),
            read(path="notes/plan.md"),
            save(filename="notes/plan.md", content="fresh\n", mode="overwrite"),
            read(path="notes/plan.md"),
            save(filename="log.txt", content="a", mode="append"),  # append creates
        ],
    )
    assert [x["outcome"] for x in r] == ["ok", "error", "ok", "ok", "ok", "ok", "ok"]
    assert "already exists" in r[1]["text"]
    assert r[3]["text"].endswith("one\ntwo\n")
    assert r[5]["text"].endswith("fresh\n")
    d = workspace / ".zuno/artifacts/ses_art"
    assert (d / "notes/plan.md").read_text() == "fresh\n"
    assert r[4]["metadata"]["artifact"]["sha256"] == hashlib.sha256(b"fresh\n").hexdigest()


async def test_result_is_content_addressed_and_immutable(workspace: Path) -> None:
    result = {"findings": [{"file": "a.py", "line": 3}], "ok": False}
    r = await _calls(
        workspace,
        [
            save(result_type="review_findings", result=result),
            save(result_type="review_findings", result=dict(reversed(list(result.items())))),
            save(result_type="other", result=result),
        ],
    )
    ref1, ref2, ref3 = (x["metadata"]["resultRef"] for x in r)
    assert set(ref1) == {"id", "result_type", "rel_path", "sha256", "size_bytes"}
    assert ref1 == ref2  # same content, same address, key order irrelevant
    assert ref3["sha256"] != ref1["sha256"]
    path = workspace / ".zuno/artifacts/ses_art" / ref1["rel_path"]
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == ref1["sha256"] and len(data) == ref1["size_bytes"]
    assert json.loads(data) == {"result_type": "review_findings", "result": result}
    assert ref1["rel_path"] == f"results/{ref1['sha256']}.json"
    back = await _calls(workspace, [read(path=ref1["rel_path"])])
    assert json.loads(back[0]["text"].split("\n", 1)[1]) == {"result_type": "review_findings", "result": result}
    # results/ is not writable through the file shape.
    (w,) = await _calls(workspace, [save(filename=ref1["rel_path"], content="x", mode="overwrite")])
    assert (w["outcome"], w["block_kind"]) == ("blocked", "invalid_arguments")


@pytest.mark.parametrize(
    "arguments",
    [
        {"filename": "a", "content": "x", "result_type": "t", "result": {}},  # both shapes
        {"filename": "a"},
        {"result_type": "t"},
        {},
        {"result_type": "t", "result": [1, 2]},  # not an object
        {"filename": "../escape", "content": "x"},
        {"filename": "/abs", "content": "x"},
        {"filename": "a//b", "content": "x"},
        {"result_type": "bad type!", "result": {}},
    ],
)
async def test_shape_errors_are_invalid_arguments(workspace: Path, arguments: dict[str, Any]) -> None:
    (r,) = await _calls(workspace, [{"name": "save_artifact", "arguments": arguments}])
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), r["text"]


async def test_read_artifact_windows_and_missing(workspace: Path) -> None:
    big = "x" * 20000
    r = await _calls(
        workspace,
        [save(filename="big.txt", content=big), read(path="big.txt", limit=1000), read(path="nope.txt")],
    )
    assert r[1]["metadata"]["cursor"] == 1000 and r[1]["metadata"]["hasMore"] is True
    assert r[2]["outcome"] == "error" and "big.txt" in r[2]["text"]
    assert r[1]["declarations"]["effect"] == "ReadOnly"


async def test_runtime_saved_output_is_read_only(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, profile="chord") as rt, rt.session("ses_art") as s:
        from zuno.output import Artifacts

        saved = Artifacts(rt.workspace, rt.store).save("ses_art", 1, "call", b"kept", kind="withheld-output")
        rel = saved.path.split("ses_art/", 1)[1]
        res = await s.step([save(filename=rel, content="x", mode="overwrite"), read(path=rel)])
        w, rd = (x.to_json() for x in res.results)
    assert (w["outcome"], w["block_kind"]) == ("blocked", "denied")
    assert rd["text"].endswith("kept")


async def test_workspace_relative_artifact_path_is_tolerated(workspace: Path) -> None:
    r = await _calls(workspace, [save(filename="a.txt", content="hi"), read(path=".zuno/artifacts/ses_art/a.txt")])
    assert r[1]["outcome"] == "ok" and r[1]["text"].endswith("hi")
