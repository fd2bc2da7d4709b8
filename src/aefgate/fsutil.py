"""Atomic output: nothing half-written.

Every output folder is written into a temporary sibling and renamed into place once complete; a refusal or a
crash leaves no output and no temporary folder behind. A destination must be absent or an empty folder (rule
``OUT-1``, aefgate's own). Files written in place (``seal.json``) go through :func:`atomic_write`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterator

from aefgate.errors import Refusal


def check_destination(dest: Path) -> None:
    """Refuse a destination that exists and is not an empty folder (OUT-1)."""
    if dest.is_symlink():
        raise Refusal("OUT-1", "the destination is a symbolic link", str(dest))
    if dest.exists():
        if not dest.is_dir():
            raise Refusal("OUT-1", "the destination exists and is not a folder", str(dest))
        if any(dest.iterdir()):
            raise Refusal("OUT-1", "the destination folder is not empty", str(dest))


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


@contextlib.contextmanager
def atomic_dir(dest: str | Path, *, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder of ``dest``; on success rename it to ``dest``, else remove it.

    ``dest`` must be absent or an empty folder (OUT-1). With ``durable``, every file is fsynced before the
    rename and the parent folder after it (for services that acknowledge only what is on disk).
    """
    dest = Path(dest)
    check_destination(dest)
    parent = dest.parent if str(dest.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{dest.name}.tmp-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        yield tmp
        if durable:
            _fsync_tree(tmp)
        check_destination(dest)
        if dest.exists():
            dest.rmdir()
        os.rename(tmp, dest)
        if durable:
            fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write(path: str | Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary sibling file and a rename."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
