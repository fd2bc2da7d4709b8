"""Atomic output: nothing half-written.

Every output folder is written into a temporary sibling and renamed into place once complete; a refusal or a
crash leaves no output and no temporary folder behind. A destination must be absent or an empty folder (rule
``OUT-1``, aefgate's own). Files written in place (``seal.json``) go through :func:`atomic_write`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from aefgate.errors import Refusal


def check_destination(dest: Path, inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Refuse a destination that exists and is not an empty folder, or whose nearest existing parent is not a
    folder (OUT-1); one inside an input folder of ``inputs`` (OUT-2: writing there would change the input)."""
    dest = Path(dest)
    if dest.is_symlink():
        raise Refusal("OUT-1", "the destination is a symbolic link", str(dest))
    if dest.exists():
        if not dest.is_dir():
            raise Refusal("OUT-1", "the destination exists and is not a folder", str(dest))
        if any(dest.iterdir()):
            raise Refusal("OUT-1", "the destination folder is not empty", str(dest))
    else:
        _existing_parent(dest)
    check_outside(dest, inputs)


def check_outside(dest: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> None:
    """OUT-2: ``dest`` is not an input folder of ``inputs`` nor inside one (symbolic links resolved)."""
    where = Path(os.path.realpath(dest))
    for src in inputs:
        if not os.path.isdir(src):
            continue
        root = Path(os.path.realpath(src))
        if where == root or root in where.parents:
            raise Refusal("OUT-2", f"the destination lies inside the input folder {str(src)!r}: writing there "
                          "would change the input", str(dest))


def _existing_parent(dest: Path) -> tuple[Path, list[Path]]:
    """The nearest existing folder above ``dest`` and the missing folders between them (deepest first); OUT-1
    when the nearest existing path is not a folder (a file, or a dangling symbolic link)."""
    missing: list[Path] = []
    p = dest.parent if str(dest.parent) else Path(".")
    while not p.exists():
        if p.is_symlink():
            raise Refusal("OUT-1", "a parent of the destination is a dangling symbolic link", str(p))
        missing.append(p)
        if p.parent == p:  # pragma: no cover - the root always exists
            break
        p = p.parent
    if not p.is_dir():
        raise Refusal("OUT-1", "a parent of the destination exists and is not a folder", str(p))
    return p, missing


def check_file_destination(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """A file output: absent (OUT-1, an empty folder too), its nearest existing parent a folder (OUT-1), not inside
    an input folder of ``inputs`` (OUT-2)."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        raise Refusal("OUT-1", "the destination exists", str(path))
    check_destination(path, inputs)


MISSING = "no such file"


def input_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read as an input file, or None: :data:`MISSING` (nothing there), a folder, a symbolic
    link that leads nowhere or loops, not a regular file (a pipe or a device, whose reading may block forever or
    never end). Only ``stat`` is used: nothing is opened."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a symbolic link that leads nowhere" if os.path.islink(path) else MISSING
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link that loops (it leads back to itself)"
        return f"cannot be read: {e.strerror or e}"
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        return "a folder, not a file"
    return "not a regular file (a pipe, a device?)"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading (binary), only if it is a regular file: opened without blocking (``O_NONBLOCK``: a
    pipe put there after a check does not hang the open) and checked with ``fstat`` before a byte is read. Raises
    ``OSError`` (``ENOENT`` when absent, ``ELOOP`` for a link loop, ``EINVAL`` with :func:`input_file_problem`'s
    words for anything but a regular file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder, not a file" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe, a device?)"
            raise OSError(errno.EINVAL, kind, str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def parents_for(dest: Path) -> Iterator[None]:
    """Create the missing folders above ``dest`` (OUT-1 as :func:`check_destination`) for the block's writing;
    when the block raises, remove again those it made that are still empty, deepest first."""
    _, missing = _existing_parent(dest)
    for q in reversed(missing):
        q.mkdir(exist_ok=True)
    try:
        yield
    except BaseException:
        for q in missing:
            try:
                q.rmdir()
            except OSError:
                break
        raise


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


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (before a rename that makes them durable)."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


_writing: list[Path] = []  # the outputs being written (atomic_dir, atomic_file), innermost last


def output_being_written() -> str | None:
    """The output an :func:`atomic_dir` or :func:`atomic_file` block is writing now (the innermost), or None: what
    an ``OSError`` that names no file was writing, when it escapes without passing through the block's exit (a
    file closed in a cleanup)."""
    return str(_writing[-1]) if _writing else None


def _name_output(e: BaseException, dest: Path) -> None:
    """An ``OSError`` that names no file (a write to an open file: a full disk, a file too large) names the output
    being written, so that its refusal (IO-1) says where: the destination, not its temporary sibling."""
    if isinstance(e, OSError) and not e.filename:
        e.filename = str(dest)


@contextlib.contextmanager
def atomic_dir(dest: str | Path, *, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder of ``dest``; on success rename it to ``dest``, else remove it.

    ``dest`` must be absent or an empty folder (OUT-1). With ``durable``, every file is fsynced before the
    rename and the parent folder after it (for services that acknowledge only what is on disk).
    """
    dest = Path(dest)
    check_destination(dest)
    parent = dest.parent if str(dest.parent) else Path(".")
    with parents_for(dest):
        tmp = parent / f".{dest.name}.tmp-{secrets.token_hex(4)}"
        tmp.mkdir()
        _writing.append(dest)
        try:
            yield tmp
            if durable:
                fsync_tree(tmp)
            check_destination(dest)
            if dest.exists():
                dest.rmdir()
            os.rename(tmp, dest)
            if durable:
                fsync_dir(parent)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            _name_output(e, dest)
            raise
        finally:
            with contextlib.suppress(ValueError):
                _writing.remove(dest)


def atomic_write(path: str | Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary sibling file and a rename (an existing file is replaced)."""
    atomic_lines(path, (data,), durable=durable, replace=True)


_FLUSH = 1 << 20  # bytes gathered before a write


def atomic_lines(path: str | Path, lines: Iterable[bytes | Path], *, durable: bool = True,
                 replace: bool = False) -> int:
    """Stream ``lines`` into a temporary sibling of ``path``, then move it into place; return how many bytes items
    were written. The one way aefgate writes a file of lines (JSONL exports, event files, file destinations).

    Each item is bytes (one or more whole lines, gathered into 1 MiB writes), or a :class:`Path`: a file whose
    bytes are appended (in the kernel where it can) and which is then removed (the part files worker processes
    write). ``lines`` may raise half-way (a refusal): nothing is left, and a generator is closed before this
    returns, so its own cleanup runs now. With ``durable`` the file is fsynced before the move and the folder
    after it. With ``replace`` an existing file is replaced; without, a destination that exists is refused
    (OUT-1), also when it appears while the file is written (the move is a hard link, which never overwrites).
    """
    n = 0
    try:
        with atomic_file(path, durable=durable, replace=replace) as f:
            n = write_lines(f, lines)
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    return n


@contextlib.contextmanager
def atomic_file(path: str | Path, *, durable: bool = True, replace: bool = False) -> Iterator[BinaryIO]:
    """Yield a binary file open on a temporary sibling of ``path``; when the block ends without an exception, move
    it into place (as :func:`atomic_lines` does: fsynced with ``durable``, OUT-1 for a destination that exists
    without ``replace``), else remove it: nothing is left of a refused or crashed write."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not replace and (path.exists() or path.is_symlink()):
        raise Refusal("OUT-1", "the destination exists", str(path))
    tmp = parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
    with parents_for(path):
        _writing.append(path)
        try:
            with open(tmp, "xb") as f:
                yield f
                f.flush()
                if durable:
                    os.fsync(f.fileno())
            if replace:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    raise Refusal("OUT-1", "the destination exists", str(path)) from None
            if durable:
                fsync_dir(parent)
        except OSError as e:
            _name_output(e, path)
            raise
        finally:
            with contextlib.suppress(ValueError):
                _writing.remove(path)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def write_lines(f: BinaryIO, lines: Iterable[bytes | Path], chunk: int = _FLUSH) -> int:
    """Write ``lines`` to the open binary file ``f``, gathered into writes of about ``chunk`` bytes, and flush it;
    return how many bytes items were written. A :class:`Path` item is a file appended whole, then removed
    (see :func:`atomic_lines`)."""
    n = 0
    buf: list[bytes] = []
    size = 0
    for item in lines:
        if isinstance(item, Path):
            f.write(b"".join(buf))
            buf, size = [], 0
            f.flush()
            append_file(f, item)
            continue
        buf.append(item)
        size += len(item)
        n += 1
        if size >= chunk:
            f.write(b"".join(buf))
            buf, size = [], 0
    f.write(b"".join(buf))
    f.flush()
    return n


def append_file(f: BinaryIO, part: Path) -> None:
    """Append the file ``part`` to the open, flushed file ``f`` (copy_file_range where it can), then remove it."""
    try:
        with open(part, "rb") as src:
            left = os.fstat(src.fileno()).st_size
            try:
                while left > 0:
                    k = os.copy_file_range(src.fileno(), f.fileno(), left)
                    if k <= 0:
                        break
                    left -= k
            except (AttributeError, OSError):
                pass
            if left > 0:  # no copy_file_range here: through this process
                while chunk := src.read(_FLUSH):
                    f.write(chunk)
                f.flush()
    finally:
        part.unlink(missing_ok=True)


def count_lines(path: str | Path) -> int:
    """The LF-terminated lines of a file (0 when it is absent), counted in 1 MiB chunks."""
    n = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_FLUSH):
                n += chunk.count(b"\n")
    except FileNotFoundError:
        return 0
    return n
