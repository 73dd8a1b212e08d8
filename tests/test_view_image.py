"""view_image (chord): formats, normalisation, downscaling, first frames, refusals, read permissions."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import zuno
from zuno import limits


async def view(root: Path, path: str, **cfg: Any) -> dict[str, Any]:
    async with zuno.Runtime(root=root, profile="chord", config_overrides=cfg or None) as rt, rt.session() as s:
        res = await s.step([{"name": "view_image", "arguments": {"path": path}}])
        return res.results[0].to_json()


def decoded(r: dict[str, Any]) -> Image.Image:
    img = r["metadata"]["image"]
    im = Image.open(io.BytesIO(base64.b64decode(img["base64"])))
    im.load()
    assert (im.width, im.height) == (img["width"], img["height"])
    assert im.format == {"image/png": "PNG", "image/jpeg": "JPEG"}[img["mime"]]
    return im


async def test_small_png_passes_through_byte_for_byte(workspace: Path) -> None:
    Image.new("RGB", (40, 30), (10, 200, 30)).save(workspace / "a.png")
    r = await view(workspace, "a.png")
    assert r["outcome"] == "ok", r["text"]
    img = r["metadata"]["image"]
    assert base64.b64decode(img["base64"]) == (workspace / "a.png").read_bytes()
    assert (img["mime"], img["width"], img["height"], img["sourcePath"]) == ("image/png", 40, 30, "a.png")
    assert r["declarations"]["effect"] == "ReadOnly"


async def test_long_edge_over_2000_is_scaled_down_keeping_aspect(workspace: Path) -> None:
    Image.new("RGB", (3000, 1500), (200, 10, 10)).save(workspace / "wide.jpg", quality=80)
    Image.new("RGB", (2000, 1000), (200, 10, 10)).save(workspace / "edge.jpg", quality=80)
    r = await view(workspace, "wide.jpg")
    im = decoded(r)
    assert (im.width, im.height) == (limits.IMAGE_MAX_EDGE_PX, 1000)
    assert r["metadata"]["image"]["mime"] == "image/jpeg" and r["metadata"]["image"]["downscaled"] is True
    assert "scaled down from 3000x1500" in r["text"]
    r = await view(workspace, "edge.jpg")  # exactly 2000: untouched
    assert r["metadata"]["image"]["passthrough"] is True and r["metadata"]["image"]["width"] == 2000


async def test_animated_gif_and_webp_give_their_first_frame(workspace: Path) -> None:
    frames = [Image.new("RGB", (20, 20), c) for c in ((255, 0, 0), (0, 0, 255), (0, 255, 0))]
    frames[0].save(workspace / "anim.gif", save_all=True, append_images=frames[1:], duration=50, loop=0)
    frames[0].save(workspace / "anim.webp", save_all=True, append_images=frames[1:], duration=50, lossless=True)
    for name in ("anim.gif", "anim.webp"):
        r = await view(workspace, name)
        assert r["outcome"] == "ok", r["text"]
        assert r["metadata"]["image"]["frames"] == 3 and "first frame of 3" in r["text"]
        px = decoded(r).convert("RGB").getpixel((10, 10))
        assert px[0] > 200 and px[2] < 50, (name, px)


async def test_formats_normalise_to_png_or_jpeg(workspace: Path) -> None:
    Image.new("RGBA", (16, 16), (0, 0, 255, 128)).save(workspace / "alpha.webp")
    Image.new("RGB", (16, 16), (1, 2, 3)).save(workspace / "photo.webp", quality=70)
    Image.new("RGB", (16, 16), (1, 2, 3)).save(workspace / "p.bmp")
    Image.new("RGB", (16, 16), (1, 2, 3)).save(workspace / "p.tiff")
    Image.new("CMYK", (16, 16), (1, 2, 3, 4)).save(workspace / "cmyk.jpg")
    expect = {
        "alpha.webp": "image/png",
        "photo.webp": "image/jpeg",
        "p.bmp": "image/png",
        "p.tiff": "image/png",
        "cmyk.jpg": "image/jpeg",
    }
    for name, mime in expect.items():
        r = await view(workspace, name)
        assert r["outcome"] == "ok", (name, r["text"])
        assert r["metadata"]["image"]["mime"] == mime, name
        decoded(r)


async def test_exif_orientation_is_applied(workspace: Path) -> None:
    im = Image.new("RGB", (40, 20), (9, 9, 9))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90
    im.save(workspace / "rot.jpg", exif=exif.tobytes())
    r = await view(workspace, "rot.jpg")
    assert (r["metadata"]["image"]["width"], r["metadata"]["image"]["height"]) == (20, 40)


@pytest.mark.parametrize(
    ("name", "data", "label"),
    [
        ("pic.heic", b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", "HEIC"),
        ("renamed.png", b"\x00\x00\x00\x18ftypmif1\x00\x00\x00\x00mif1heic", "HEIF"),
        ("logo.svg", b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>', "SVG"),
        ("hidden.png", b"  <svg xmlns='http://www.w3.org/2000/svg'></svg>", "SVG"),
    ],
)
async def test_heic_heif_avif_svg_are_refused(workspace: Path, name: str, data: bytes, label: str) -> None:
    (workspace / name).write_bytes(data)
    r = await view(workspace, name)
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments")
    assert label in r["text"]


async def test_real_avif_is_refused(workspace: Path) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buf, "AVIF")
    (workspace / "x.bin").write_bytes(buf.getvalue())
    r = await view(workspace, "x.bin")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments") and "AVIF" in r["text"]


async def test_other_files_are_refused_or_fail_clearly(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("not an image")
    Image.new("RGB", (8, 8)).save(workspace / "icon.ico")
    (workspace / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    for name in ("notes.txt", "icon.ico", "broken.png"):
        r = await view(workspace, name)
        assert (r["outcome"], r["block_kind"]) == ("blocked", "invalid_arguments"), (name, r["text"])
    r = await view(workspace, "missing.png")
    assert r["outcome"] == "error" and "no such file" in r["text"]
    r = await view(workspace, "../outside.png")
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")


async def test_read_permission_rules_apply_to_the_path(workspace: Path) -> None:
    (workspace / "secret").mkdir()
    Image.new("RGB", (4, 4)).save(workspace / "secret/a.png")
    r = await view(
        workspace, "secret/a.png", permission={"rules": [{"tool": "read", "pattern": "secret/*", "action": "deny"}]}
    )
    assert (r["outcome"], r["block_kind"]) == ("blocked", "denied")
    assert "read" in r["text"]


async def test_read_permission_rules_apply_to_where_the_path_resolves(workspace: Path) -> None:
    (workspace / "secret").mkdir()
    Image.new("RGB", (4, 4)).save(workspace / "secret/a.png")
    os.symlink("secret", workspace / "alias")
    rules = {"rules": [{"tool": "read", "pattern": "secret/*", "action": "deny"}]}
    for spelt in ("./secret/a.png", "alias/a.png", f"{workspace}/secret/a.png"):
        r = await view(workspace, spelt, permission=rules)
        assert (r["outcome"], r["block_kind"]) == ("blocked", "denied"), (spelt, r["text"])


class Approves:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[Any] = []

    async def approve(self, request: Any) -> bool:
        self.asked.append(request)
        return self.answer


@pytest.mark.parametrize("pattern", [None, "secret/*"])
async def test_a_read_ask_rule_asks_before_view_image_and_an_approval_lets_it_load(
    workspace: Path, pattern: str | None
) -> None:
    """A read ask rule (with or without a pattern) asks before view_image opens its path, as before
    read: approved, the image loads; refused or with nobody to ask, nothing is read. (view_image once
    applied read's rules itself and refused every such call, saying it "cannot ask".)"""
    (workspace / "secret").mkdir()
    Image.new("RGB", (4, 4)).save(workspace / "secret/a.png")
    rule = {"tool": "read", "action": "ask", **({"pattern": pattern} if pattern else {})}
    cfg = {"permission": {"rules": [rule]}}
    call = [{"name": "view_image", "arguments": {"path": "secret/a.png"}}]
    yes = Approves(True)
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=cfg, approver=yes) as rt:
        async with rt.session() as s:
            assert "view_image" in {t.name for t in s.visible_tools()}
            r = (await s.step(call)).results[0]
    assert r.outcome == "ok", r.text
    assert r.metadata["image"]["width"] == 4 and len(yes.asked) == 1
    no = Approves(False)
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=cfg, approver=no) as rt:
        async with rt.session() as s:
            r = (await s.step(call)).results[0]
    assert r.outcome == "blocked" and "image" not in r.metadata and len(no.asked) == 1
    r2 = await view(workspace, "secret/a.png", **cfg)  # nobody to ask
    assert r2["outcome"] == "blocked" and "cannot ask" not in r2["text"], r2["text"]
