"""Writing Inspect AI eval logs, ``.json`` or ``.eval``, one sample at a time.

:func:`write_log` writes into a temporary sibling of the destination and renames it into place once complete,
so a refusal or a crash leaves nothing behind (the destination must not exist, ``OUT-1``, unless ``overwrite``).
Samples are taken from an iterable and written as they come; nothing holds them all.

``.json``: one JSON object, the header's members in their order with ``samples`` placed before ``reductions``
(or last), each member and each sample written compact on a line of its own, ``NaN`` as the bare token
(as Inspect writes it). Samples are written in the order given (Inspect's own writer sorts them first).

``.eval``: a ZIP archive in the member layout Inspect writes, every member compressed with zstd (method 93;
a new frame every 200 MiB of input, as Inspect does for its viewer), with ZIP64 local headers:

1. ``_journal/start.json``: ``{"version", "eval", "plan"}`` of the header;
2. ``samples/<id>_epoch_<epoch>.json``: each sample, as it comes;
3. ``_journal/summaries/1.json`` (when there is a sample) and ``summaries.json``: a summary of each sample (the
   fields of Inspect's ``EvalSampleSummary``, without its thinning: Inspect thins them as it reads them),
   spooled to a temporary file while the samples are written;
4. ``reductions.json``: the header's ``reductions``, when it has some;
5. ``header.json``: the header without ``reductions``.

A sample needs an ``id`` (an integer or a string) and an ``epoch`` (an integer), unique together, whose member
name is safe (:func:`.zipsafe.unsafe_name`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import struct
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Literal, Mapping

import zstandard

from aefgate.errors import Refusal
from aefgate.formats.inspect import rules
from aefgate.formats.inspect.jsontext import dumps
from aefgate.formats.inspect.zipsafe import (
    CENTRAL_SIG,
    EOCD64_SIG,
    EOCD_SIG,
    LOCAL_SIG,
    LOCATOR64_SIG,
    ZSTD,
    unsafe_name,
)
from aefgate.fsutil import fsync_dir, parents_for

ZSTD_LEVEL = 3  # Inspect's level
FRAME_INPUT = 200 * 1024 * 1024  # Inspect's _MAX_INPUT_PER_FRAME
_WRITE_CHUNK = 1024 * 1024

_SUMMARY_FIELDS = (
    "id", "epoch", "input", "choices", "target", "description", "metadata", "scores", "model_usage",
    "role_usage", "model_fallbacks", "started_at", "completed_at", "total_time", "working_time", "uuid",
)
_SUMMARY_LIMITS = ("turn_count", "token_limit", "token_limit_type", "token_limit_usage", "message_limit",
                   "time_limit")


def _dos_time(t: float) -> tuple[int, int]:
    lt = time.localtime(t)
    year = max(lt.tm_year, 1980)
    return ((lt.tm_hour << 11) | (lt.tm_min << 5) | (lt.tm_sec // 2),
            ((year - 1980) << 9) | (lt.tm_mon << 5) | lt.tm_mday)


class ZipWriter:
    """A ZIP archive of zstd members written to a seekable file, one member at a time, streamed."""

    def __init__(self, f: BinaryIO):
        self.f = f
        self.entries: list[tuple[bytes, int, int, int, int, int]] = []  # name, flags, crc, csize, usize, offset
        self.dos_time, self.dos_date = _dos_time(time.time())
        self._cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)

    def add(self, name: str, chunks: Iterable[bytes]) -> None:
        f = self.f
        name_b = name.encode("utf-8")
        flags = 0 if name.isascii() else 0x0800
        offset = f.tell()
        extra = struct.pack("<HHQQ", 0x0001, 16, 0, 0)
        f.write(struct.pack("<4s5H3L2H", LOCAL_SIG, 45, flags, ZSTD, self.dos_time, self.dos_date, 0,
                            0xFFFFFFFF, 0xFFFFFFFF, len(name_b), len(extra)))
        f.write(name_b)
        f.write(extra)
        start = f.tell()
        crc = 0
        usize = 0
        frame_in = 0
        comp = self._cctx.compressobj()
        for chunk in chunks:
            view = memoryview(chunk)
            while len(view):
                take = min(len(view), FRAME_INPUT - frame_in)
                part = view[:take]
                view = view[take:]
                crc = zlib.crc32(part, crc)
                usize += take
                frame_in += take
                f.write(comp.compress(part))
                if frame_in >= FRAME_INPUT:
                    f.write(comp.flush())
                    comp = self._cctx.compressobj()
                    frame_in = 0
        if frame_in or usize == 0:
            f.write(comp.flush())
        end = f.tell()
        csize = end - start
        f.seek(offset + 14)
        f.write(struct.pack("<L", crc))
        f.seek(offset + 30 + len(name_b) + 4)
        f.write(struct.pack("<QQ", usize, csize))
        f.seek(end)
        self.entries.append((name_b, flags, crc, csize, usize, offset))

    def close(self) -> None:
        f = self.f
        cd_offset = f.tell()
        for name_b, flags, crc, csize, usize, offset in self.entries:
            extra_fields = []
            if usize >= 0xFFFFFFFF:
                extra_fields.append(usize)
            if csize >= 0xFFFFFFFF:
                extra_fields.append(csize)
            if offset >= 0xFFFFFFFF:
                extra_fields.append(offset)
            extra = b""
            if extra_fields:
                extra = struct.pack(f"<HH{len(extra_fields)}Q", 0x0001, 8 * len(extra_fields), *extra_fields)
            f.write(struct.pack(
                "<4s2B5H3L5H2L", CENTRAL_SIG, 45, 3, 45, flags, ZSTD, self.dos_time, self.dos_date, crc,
                min(csize, 0xFFFFFFFF), min(usize, 0xFFFFFFFF), len(name_b), len(extra), 0, 0, 0, 0o600 << 16,
                min(offset, 0xFFFFFFFF)))
            f.write(name_b)
            f.write(extra)
        cd_end = f.tell()
        cd_size = cd_end - cd_offset
        n = len(self.entries)
        if n >= 0xFFFF or cd_size >= 0xFFFFFFFF or cd_offset >= 0xFFFFFFFF:
            f.write(struct.pack("<4sQ2H2L4Q", EOCD64_SIG, 44, 45, 45, 0, 0, n, n, cd_size, cd_offset))
            f.write(struct.pack("<4sLQL", LOCATOR64_SIG, 0, cd_end, 1))
        f.write(struct.pack("<4s4H2LH", EOCD_SIG, 0, 0, min(n, 0xFFFF), min(n, 0xFFFF),
                            min(cd_size, 0xFFFFFFFF), min(cd_offset, 0xFFFFFFFF), 0))


def _summary(sample: Mapping) -> dict:
    """The fields of Inspect's ``EvalSample.summary()`` (not thinned)."""
    out: dict[str, Any] = {}
    for key in _SUMMARY_FIELDS:
        if sample.get(key) is not None:
            out[key] = sample[key]
    scores = out.get("scores")
    if isinstance(scores, dict):
        out["scores"] = {k: ({f: v for f, v in s.items() if f != "history"} if isinstance(s, dict) else s)
                         for k, s in scores.items()}
    error = sample.get("error")
    if isinstance(error, dict) and error.get("message") is not None:
        out["error"] = error["message"]
    limit = sample.get("limit")
    if isinstance(limit, dict):
        if limit.get("type") is not None:
            out["limit"] = str(limit["type"])
        if limit.get("reason") is not None:
            out["limit_reason"] = limit["reason"]
    retries = sample.get("error_retries")
    if isinstance(retries, list):
        out["retries"] = len(retries)
    out["completed"] = True
    messages = sample.get("messages")
    out["message_count"] = len(messages) if isinstance(messages, list) else 0
    for key in _SUMMARY_LIMITS:
        if sample.get(key) is not None:
            out[key] = sample[key]
    return out


def _check_header(header: Any) -> dict:
    if not isinstance(header, Mapping):
        raise Refusal(rules.WRITE, "the header is not a mapping", "header")
    if "samples" in header:
        raise Refusal(rules.WRITE, "the header holds samples: give them as the samples argument", "header/samples")
    for key in header:
        if not isinstance(key, str):
            raise Refusal(rules.WRITE, f"a header member name that is not a string: {key!r}", "header")
    return dict(header)


def _sample_key(sample: Any, index: int) -> tuple[int | str, int]:
    where = f"samples/{index}"
    if not isinstance(sample, Mapping):
        raise Refusal(rules.WRITE, "a sample that is not a mapping", where)
    sid = sample.get("id")
    epoch = sample.get("epoch")
    if isinstance(sid, bool) or not isinstance(sid, (int, str)):
        raise Refusal(rules.WRITE, "a sample whose id is not an integer or a string", where)
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        raise Refusal(rules.WRITE, "a sample whose epoch is not an integer", where)
    return sid, epoch


def _chunks(data: bytes) -> Iterator[bytes]:
    view = memoryview(data)
    for i in range(0, len(view), _WRITE_CHUNK):
        yield view[i:i + _WRITE_CHUNK]


def _write_eval(f: BinaryIO, header: dict, samples: Iterable[Mapping]) -> int:
    z = ZipWriter(f)
    start = {"version": header.get("version", 2), "eval": header.get("eval"), "plan": header.get("plan", {})}
    z.add("_journal/start.json", _chunks(dumps({k: v for k, v in start.items() if v is not None}, "header")))
    seen: set[tuple[str, int]] = set()
    count = 0
    with tempfile.TemporaryFile() as spool:
        for index, sample in enumerate(samples):
            sid, epoch = _sample_key(sample, index)
            name = f"samples/{sid}_epoch_{epoch}.json"
            why = unsafe_name(name)
            if why:
                raise Refusal(rules.WRITE, f"the sample's id gives {why} ({name!r})", f"samples/{index}")
            if (str(sid), epoch) in seen:
                raise Refusal(rules.WRITE, f"two samples with id {sid!r} and epoch {epoch}", f"samples/{index}")
            seen.add((str(sid), epoch))
            z.add(name, _chunks(dumps(sample, f"samples/{index}")))
            spool.write(dumps(_summary(sample), f"samples/{index}"))
            spool.write(b"\n")
            count += 1

        def summaries() -> Iterator[bytes]:
            spool.seek(0)
            yield b"["
            first = True
            for line in spool:
                if not first:
                    yield b","
                first = False
                yield line.rstrip(b"\n")
            yield b"]"

        if count:
            z.add("_journal/summaries/1.json", summaries())
        z.add("summaries.json", summaries())
    if header.get("reductions") is not None:
        z.add("reductions.json", _chunks(dumps(header["reductions"], "header/reductions")))
    z.add("header.json", _chunks(dumps({k: v for k, v in header.items() if k != "reductions"}, "header")))
    z.close()
    return count


def _write_json(f: BinaryIO, header: dict, samples: Iterable[Mapping]) -> int:
    keys = list(header)
    at = keys.index("reductions") if "reductions" in keys else len(keys)
    members: list[str | None] = keys[:at] + [None] + keys[at:]  # None: where samples go
    count = 0
    f.write(b"{")
    for i, key in enumerate(members):
        f.write(b"\n" if i == 0 else b",\n")
        if key is None:
            f.write(b'"samples":[')
            seen: set[tuple[str, int]] = set()
            for index, sample in enumerate(samples):
                sid, epoch = _sample_key(sample, index)
                if (str(sid), epoch) in seen:
                    raise Refusal(rules.WRITE, f"two samples with id {sid!r} and epoch {epoch}", f"samples/{index}")
                seen.add((str(sid), epoch))
                f.write(b"\n" if index == 0 else b",\n")
                f.write(dumps(sample, f"samples/{index}"))
                count += 1
            f.write(b"\n]" if count else b"]")
        else:
            f.write(dumps(key, "header"))
            f.write(b":")
            f.write(dumps(header[key], f"header/{key}"))
    f.write(b"\n}\n")
    return count


def write_log(path: str | os.PathLike, header: Mapping, samples: Iterable[Mapping], *,
              fmt: Literal["json", "eval"] = "json", overwrite: bool = False) -> int:
    """Write an Inspect eval log: ``header`` (the ``EvalLog`` without samples) and ``samples`` (taken one at a
    time), as ``.json`` or ``.eval``. Returns the number of samples written.

    Atomic: written to a temporary sibling file, fsynced and renamed into place. Refuses an existing destination
    (``OUT-1``) unless ``overwrite``; a header or sample that cannot be written (``IN-FMT-7``: an infinity, a
    value JSON cannot hold, a sample without an integer or string ``id`` and an integer ``epoch``, two samples
    with one id and epoch, an id that makes an unsafe member name).
    """
    if fmt not in ("json", "eval"):
        raise Refusal(rules.WRITE, f"unknown format {fmt!r}: json or eval", "fmt")
    dest = Path(path)
    if dest.is_symlink() or dest.is_dir():
        raise Refusal(rules.OUT_EXISTS, "the destination is a folder or a symbolic link", str(dest))
    if dest.exists() and not overwrite:
        raise Refusal(rules.OUT_EXISTS, "the destination exists", str(dest))
    head = _check_header(header)
    parent = dest.parent if str(dest.parent) else Path(".")
    tmp = parent / f".{dest.name}.tmp-{secrets.token_hex(4)}"
    with parents_for(dest):  # OUT-1 when a parent is no folder
        try:
            with open(tmp, "xb") as f:
                count = _write_eval(f, head, samples) if fmt == "eval" else _write_json(f, head, samples)
                f.flush()
                os.fsync(f.fileno())
            if dest.exists() and not overwrite:
                raise Refusal(rules.OUT_EXISTS, "the destination appeared while the log was written", str(dest))
            os.replace(tmp, dest)
            fsync_dir(parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
    return count
