"""view_image (chord): load a local image for the model.

PNG, JPEG, WebP, GIF, BMP and TIFF are accepted; HEIC/HEIF/AVIF/SVG are refused (recognised by
their bytes, not only their name). The image is normalised to PNG (lossless sources, or anything
with transparency) or JPEG (JPEG sources and opaque lossy WebP), turned upright by its EXIF
orientation, scaled down so its long edge is at most 2000 px, and an animation contributes its
first frame. An unchanged small PNG or JPEG goes through byte for byte. The image reaches the
model as ``metadata.image`` ({mime, width, height, base64, ...}) with a one-line text. Path
permissions are those of ``read`` (``permissions.READS_UNDER_READ_RULES``): a rule for ``read``
applies to the path too, at admission (a deny refuses, an ask asks) and where the path resolves as
the tool opens it (``ToolContext.locate``).
"""

from __future__ import annotations

import base64
import io
import warnings
from typing import Any

from pydantic import Field

from zuno import limits, safefs
from zuno.declarations import READ_ONLY_PARALLEL, BlockKind
from zuno.surface import Registry
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput
from zuno.tools.file_scan import in_thread

ACCEPTED = {"PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF", "MPO"}
_FTYP_REFUSED = {
    b"heic": "HEIC",
    b"heix": "HEIC",
    b"heim": "HEIC",
    b"heis": "HEIC",
    b"hevc": "HEIC",
    b"hevx": "HEIC",
    b"mif1": "HEIF",
    b"msf1": "HEIF",
    b"heif": "HEIF",
    b"avif": "AVIF",
    b"avis": "AVIF",
}


def refused_format(data: bytes, name: str) -> str | None:
    """HEIC/HEIF/AVIF/SVG, recognised by content (and SVG also by its extension)."""
    if len(data) >= 12 and data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in _FTYP_REFUSED:
            return _FTYP_REFUSED[brand]
        compat = data[16:64]
        for b, label in _FTYP_REFUSED.items():
            if b in compat:
                return label
    lower = name.lower()
    if lower.endswith((".svg", ".svgz")):
        return "SVG"
    if lower.endswith((".heic", ".heif", ".avif")):
        return lower.rsplit(".", 1)[1].upper()
    head = data[:1024].lstrip().lower()
    if head.startswith(b"<svg") or (head.startswith(b"<?xml") and b"<svg" in head):
        return "SVG"
    if data[:2] == b"\x1f\x8b" and lower.endswith(".svgz"):
        return "SVG"
    return None


class ViewImageArgs(ToolArgs):
    path: str = Field(description="A local PNG, JPEG, WebP, GIF, BMP or TIFF file.")


class ViewImageTool(Tool):
    name = "view_image"
    description = (
        "Load a local PNG/JPEG/WebP/GIF/BMP/TIFF image into context, normalised to PNG or JPEG; the long edge is "
        "scaled down to 2000 px; animations show their first frame. HEIC/HEIF/AVIF/SVG are refused."
    )
    Args = ViewImageArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: ViewImageArgs) -> ToolOutput:
        path, where = ctx.locate(args.path)
        shown = ctx.workspace.display(path)
        try:
            # Bounded, without following a link or waiting on a FIFO, off the event loop.
            data = await in_thread(lambda _stop: safefs.read_bytes(where, limits.IMAGE_MAX_SOURCE_BYTES))
        except (FileNotFoundError, NotADirectoryError):
            return ToolOutput.failure(f"{shown}: no such file.")
        except IsADirectoryError:
            return ToolOutput.failure(f"{shown} is a directory, not an image file.")
        except safefs.NotRegular as e:
            return ToolOutput.failure(f"{shown} is {e.what}, not a regular file; view_image loads image files only.")
        except OSError as e:
            return ToolOutput.failure(f"{shown}: cannot be read ({e.strerror}).")
        if len(data) > limits.IMAGE_MAX_SOURCE_BYTES:
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'path': {shown} is larger than {limits.IMAGE_MAX_SOURCE_BYTES} bytes, more than view_image "
                "decodes; scale it down first (for example with an image tool through shell).",
            )
        bad = refused_format(data, path.name)
        if bad is not None:
            raise Refused(
                BlockKind.invalid_arguments,
                f"argument 'path': {shown} is {bad}, which view_image does not load (HEIC/HEIF/AVIF/SVG are refused). "
                "Convert it to PNG or JPEG first.",
            )
        try:
            image = await in_thread(lambda _stop: normalise(data))
        except UnsupportedImage as e:
            raise Refused(BlockKind.invalid_arguments, f"argument 'path': {shown}: {e}") from None
        image["sourcePath"] = shown
        note = []
        if image["downscaled"]:
            note.append(f"scaled down from {image['sourceWidth']}x{image['sourceHeight']}")
        if image["frames"] > 1:
            note.append(f"first frame of {image['frames']}")
        text = (
            f"Image {shown}: {image['sourceFormat']} -> {image['mime']} {image['width']}x{image['height']}, "
            f"{image['bytes']} bytes" + (f" ({'; '.join(note)})" if note else "") + "."
        )
        return ToolOutput(text=text, metadata={"image": image})


class UnsupportedImage(Exception):
    pass


def normalise(data: bytes) -> dict[str, Any]:
    from PIL import Image, ImageOps

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data))
            fmt = (im.format or "").upper()
            if fmt not in ACCEPTED:
                raise UnsupportedImage(
                    f"it is {fmt or 'not an image Pillow recognises'}; view_image loads PNG, JPEG, WebP, GIF, BMP "
                    "and TIFF."
                )
            frames = int(getattr(im, "n_frames", 1) or 1)
            if frames > 1:
                im.seek(0)
            im.load()
    except UnsupportedImage:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise UnsupportedImage(f"the image is too large to decode safely ({e}).") from None
    except Exception as e:  # a truncated or corrupt file
        raise UnsupportedImage(f"the image cannot be decoded ({type(e).__name__}: {e}).") from None
    src_w, src_h = im.size
    orientation = 1
    try:
        orientation = int(im.getexif().get(0x0112, 1) or 1)
    except Exception:
        orientation = 1
    long_edge = max(src_w, src_h)
    passthrough = fmt in ("PNG", "JPEG") and frames == 1 and long_edge <= limits.IMAGE_MAX_EDGE_PX and orientation == 1
    if passthrough:
        out, mime, out_w, out_h = data, ("image/png" if fmt == "PNG" else "image/jpeg"), src_w, src_h
    else:
        frame = im.copy() if frames == 1 else im.convert("RGBA" if _has_alpha(im) else "RGB")
        if orientation != 1:
            frame = ImageOps.exif_transpose(frame)
        has_alpha = _has_alpha(frame)
        lossy = fmt in ("JPEG", "MPO") or (fmt == "WEBP" and not _webp_lossless(data))
        use_jpeg = lossy and not has_alpha
        w, h = frame.size
        if max(w, h) > limits.IMAGE_MAX_EDGE_PX:
            scale = limits.IMAGE_MAX_EDGE_PX / max(w, h)
            size = (max(1, round(w * scale)), max(1, round(h * scale)))
            frame = _to_mode(frame, use_jpeg, has_alpha).resize(size, Image.Resampling.LANCZOS)
        frame = _to_mode(frame, use_jpeg, has_alpha)
        buf = io.BytesIO()
        if use_jpeg:
            frame.save(buf, "JPEG", quality=90, optimize=True)
            mime = "image/jpeg"
        else:
            frame.save(buf, "PNG", optimize=False)
            mime = "image/png"
        out = buf.getvalue()
        out_w, out_h = frame.size
    return {
        "mime": mime,
        "width": out_w,
        "height": out_h,
        "bytes": len(out),
        "base64": base64.b64encode(out).decode("ascii"),
        "sourceFormat": fmt,
        "sourceWidth": src_w,
        "sourceHeight": src_h,
        "sourceBytes": len(data),
        "frames": frames,
        "downscaled": max(out_w, out_h) < long_edge and long_edge > limits.IMAGE_MAX_EDGE_PX,
        "passthrough": passthrough,
    }


def _has_alpha(im: Any) -> bool:
    return im.mode in ("RGBA", "LA", "PA", "La", "RGBa") or (im.mode == "P" and "transparency" in im.info)


def _webp_lossless(data: bytes) -> bool:
    """A lossless WebP stores its image in a VP8L chunk (first, or after VP8X/ALPH/ANIM headers)."""
    return b"VP8L" in data[12:4096] and b"VP8 " not in data[12:4096]


def _to_mode(frame: Any, jpeg: bool, alpha: bool) -> Any:
    if jpeg:
        return frame if frame.mode in ("RGB", "L") else frame.convert("RGB")
    if alpha:
        return frame if frame.mode in ("RGBA", "LA") else frame.convert("RGBA")
    if frame.mode in ("RGB", "L", "1", "P"):
        return frame
    if frame.mode.startswith("I;16") or frame.mode in ("I", "F"):
        return frame.convert("I;16") if frame.mode.startswith("I;16") else frame.convert("L")
    return frame.convert("RGB")


def register(registry: Registry) -> None:
    registry.add("view_image", ViewImageTool, profiles=("chord",))
