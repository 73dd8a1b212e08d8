"""``zuno version [--json]``: Zuno's version, and the versions of what it runs on — Python, the
SQLite library of the store, and ripgrep as the search tools would find it (config search.rg_path,
the ripgrep wheel, PATH). Creates nothing."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from zuno.cli_support import EXIT_OK, print_json


def zuno_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("zuno")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def versions(root: Path, config_file: str | None) -> dict[str, Any]:
    import asyncio
    import platform
    import sqlite3

    from zuno.config import load_config
    from zuno.tools.search.rg_discovery import Rg, RgLocator

    config = load_config(root.resolve(), config_file)
    found = asyncio.run(RgLocator().get(config.search.rg_path))  # found lazily: only this command looks
    ripgrep: dict[str, Any]
    if isinstance(found, Rg):
        ripgrep = {"found": True, **found.facts()}
    else:
        ripgrep = {"found": False, "version": None, "tried": found.candidates, "fix": found.fix}
    return {
        "zuno": zuno_version(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "ripgrep": ripgrep,
    }


def cmd_version(args: argparse.Namespace) -> int:
    v = versions(Path(args.root), args.config)
    if args.json:
        print_json(v)
        return EXIT_OK
    rg = v["ripgrep"]
    rg_text = f"{rg['version']} ({rg['source']}: {rg['path']})" if rg["found"] else f"not found ({rg['fix']})"
    print(f"zuno {v['zuno']}")
    print(f"python {v['python']}")
    print(f"sqlite {v['sqlite']}")
    print(f"ripgrep {rg_text}")
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("version", help="show the versions of Zuno, Python, SQLite and ripgrep")
    p.add_argument("--json", action="store_true", help="print them as one JSON object")
    p.add_argument("--root", default=".", help="workspace root whose config names rg (default: .)")
    p.add_argument("--config", default=None, help="a config file, read after the root's zuno.json")
    p.set_defaults(func=cmd_version)
