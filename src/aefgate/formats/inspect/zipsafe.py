"""Reading a ZIP archive that is not trusted (an Inspect ``.eval``), one member at a time, as a stream.

The standard library's :mod:`zipfile` does not know zstd (method 93) before Python 3.14 and trusts what the
archive declares, so this module reads the format itself:

- the central directory is read (ZIP64 included) and checked whole before any member is: every member's name,
  type, method and flags, and that no two members' data overlap (the "overlapping files" bomb);
- a member's declared sizes are checked when it is read (a member never read, such as a ``summaries.json`` the
  caller does not ask for, does not refuse the log), before anything is decompressed;
- a member is decompressed as a stream, from the raw bytes after its local header, in chunks of
  :data:`CHUNK` bytes (stored and DEFLATE with the standard library, zstd with ``zstandard``'s
  ``ZstdDecompressor().stream_reader``, across frames as Inspect writes them), and the bytes that come out are
  counted as they come: a member that gives more than it declared, more than :data:`MAX_MEMBER_SIZE`, or more than
  :data:`MAX_RATIO` times its compressed size (past :data:`RATIO_FLOOR`) is refused there, whatever its header
  says. Its CRC-32 and exact size are checked at its end.

Bounds (refused ``IN-FMT-4``):

- :data:`MAX_MEMBERS` members (500,000) and a central directory of :data:`MAX_DIRECTORY` bytes (128 MiB);
- :data:`MAX_MEMBER_SIZE` (512 MiB) uncompressed per member, declared or streamed;
- :data:`MAX_RATIO` (200:1) uncompressed to compressed, for members larger than :data:`RATIO_FLOOR` (1 MiB),
  declared or streamed.

Refused as unsafe (``IN-FMT-3``): an empty name, an absolute name (``/x``, ``C:x``), a ``..`` segment, a
backslash, a NUL; a member whose mode bits (``external_attr``) make it a symbolic link, a device, a pipe or a
socket (or a Windows reparse point). Refused as unsupported (``IN-FMT-5``): a method other than 0 (stored),
8 (DEFLATE) and 93 (zstd); an encrypted member. Anything else malformed is ``IN-FMT-2``.

Memory: the directory is read in chunks of :data:`CD_CHUNK` bytes and checked whole when the archive is opened;
then only two integers per member are kept (where its entry is in the directory, and the first byte its data may
not reach), in arrays: 16 bytes a member. A member's record (:class:`Member`) is read again from
the directory when it is asked for (:meth:`Archive.member`, :meth:`Archive.entries`; :attr:`Archive.members` builds
the whole list, for small archives). Reading a member keeps one chunk of compressed and one of decompressed bytes
(plus the zstd window, which ``zstandard`` bounds to :data:`MAX_WINDOW`).
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from array import array
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator

import zstandard

from aefgate.errors import Refusal
from aefgate.formats.inspect import rules

MIB = 1024 * 1024
MAX_MEMBERS = 500_000
MAX_DIRECTORY = 128 * MIB
MAX_MEMBER_SIZE = 512 * MIB
MAX_RATIO = 200
RATIO_FLOOR = 1 * MIB
MAX_WINDOW = 1 << 27  # zstd's own default limit for a decoder (128 MiB)
CHUNK = 64 * 1024
CD_CHUNK = 1 * MIB  # the central directory is read in chunks of this size

STORED, DEFLATED, ZSTD = 0, 8, 93
METHODS = {STORED: "stored", DEFLATED: "DEFLATE", ZSTD: "zstd"}

LOCAL_SIG = b"PK\x03\x04"
CENTRAL_SIG = b"PK\x01\x02"
EOCD_SIG = b"PK\x05\x06"
EOCD64_SIG = b"PK\x06\x06"
LOCATOR64_SIG = b"PK\x06\x07"

_EOCD = struct.Struct("<4s4H2LH")  # 22 bytes
_LOCATOR64 = struct.Struct("<4sLQL")  # 20 bytes
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # 56 bytes
_CENTRAL = struct.Struct("<4s2B5H3L5H2L")  # 46 bytes
_LOCAL = struct.Struct("<4s5H3L2H")  # 30 bytes

_FLAG_ENCRYPTED = 0x0001
_FLAG_STRONG_ENCRYPTION = 0x0040
_FLAG_MASKED_HEADERS = 0x2000
_FLAG_UTF8 = 0x0800

_UNIX = 3
_S_IFMT = 0o170000
_S_IFREG = 0o100000
_S_IFDIR = 0o040000
_S_IFLNK = 0o120000
_WINDOWS_REPARSE_POINT = 0x400

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(slots=True)
class Member:
    """One entry of the central directory, checked."""

    name: str
    offset: int  # of the local header
    csize: int
    usize: int
    method: int
    crc: int
    flags: int
    limit: int = 0  # the first byte this member's data may not reach (the next member's header, or the directory)


def unsafe_name(name: str) -> str | None:
    """Why ``name`` is not a safe member name, or None."""
    if not name:
        return "an empty member name"
    if "\x00" in name:
        return "a member name holding a NUL"
    if "\\" in name:
        return "a member name holding a backslash"
    if name.startswith("/") or _DRIVE.match(name):
        return "an absolute member name"
    if ".." in name.split("/"):
        return "a member name with a '..' segment"
    return None


def _unsafe_type(create_system: int, external_attr: int) -> str | None:
    if create_system == _UNIX:
        kind = (external_attr >> 16) & _S_IFMT
        if kind == _S_IFLNK:
            return "a symbolic link"
        if kind not in (0, _S_IFREG, _S_IFDIR):
            return "a device, pipe or socket"
    if external_attr & _WINDOWS_REPARSE_POINT and create_system in (0, 10, 11, 14):
        return "a link (a Windows reparse point)"
    return None


class Archive:
    """A checked ZIP archive: its :attr:`count` members in central-directory order, each read again from the
    directory when asked for (:meth:`member`, :meth:`entries`, :attr:`members`); :meth:`stream` reads one."""

    def __init__(self, path: str | os.PathLike, where: str | None = None, *,
                 on_member: Callable[[int, str], None] | None = None):
        """``on_member(index, name)``, when given, is called for each member as the directory is read and checked
        (a refusal raised by it stops the reading), so a caller needing every name reads the directory once."""
        self.path = os.fspath(path)
        self.where = where if where is not None else self.path
        with open(self.path, "rb") as f:
            st = os.fstat(f.fileno())
            self.identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            self._read_directory(f, st.st_size, on_member)

    @property
    def count(self) -> int:
        return len(self._entry_at)

    @property
    def members(self) -> list[Member]:
        """Every member, in directory order (a list: for small archives and tests; see :meth:`entries`)."""
        with self.open() as f:
            return [m for _, m in self.entries(f)]

    def member(self, f: BinaryIO, index: int) -> Member:
        """The ``index``-th member of the directory, read again from it (``f``: :meth:`open`'s file)."""
        at = self.directory_offset + self._entry_at[index]
        f.seek(at)
        head = f.read(_CENTRAL.size)
        if len(head) != _CENTRAL.size:
            raise self.refuse(rules.DAMAGED, "the central directory is cut short")
        lens = _CENTRAL.unpack(head)
        rest = f.read(lens[11] + lens[12] + lens[13])
        (m, _), _ = self._entry(head + rest, 0, len(head) + len(rest))
        m.limit = self._limit[index]
        return m

    def entries(self, f: BinaryIO) -> Iterator[tuple[int, Member]]:
        """``(index, member)`` for every member in directory order, the directory read in chunks (``f``:
        :meth:`open`'s file; not used for anything else until the iteration ends)."""
        for i, (m, _, _) in enumerate(self._scan(f)):
            m.limit = self._limit[i]
            yield i, m

    def refuse(self, rule: str, message: str, member: str | None = None) -> Refusal:
        return Refusal(rule, message, f"{self.where}!{member}" if member else self.where)

    # -- the directory ------------------------------------------------------------------------------------------

    def _read_directory(self, f: BinaryIO, size: int, on_member: Callable[[int, str], None] | None = None) -> None:
        """Read and check the end records and the central directory: where each entry is, each member's limit."""
        cd_size, cd_offset = self._read_end_records(f, size)
        entry_at = array("Q")  # where each entry is in the directory
        starts = array("Q")  # where each member's local header is
        ends = array("Q")  # the least end of each member's data
        for m, at, min_end in self._scan(f):
            if on_member is not None:
                on_member(len(starts), m.name)
            entry_at.append(at)
            starts.append(m.offset)
            ends.append(min_end)
        limit = self._member_limits(f, starts, ends, cd_offset)
        # kept per member for the archive's life: 4 bytes each when the positions fit (a directory and an archive
        # below 4 GiB), not 8
        self._entry_at = entry_at if cd_size >> 32 else array("I", entry_at)
        self._limit = limit if cd_offset >> 32 else array("I", limit)

    def _read_end_records(self, f: BinaryIO, size: int) -> tuple[int, int]:
        """Read and check the end of central directory record (and its ZIP64 one): the directory's size and
        offset (also kept, with the number of members)."""
        damaged = rules.DAMAGED
        rec, eocd_pos = self._end_record(f, size)
        _, disk, disk_cd, n_disk, n_total, cd_size, cd_offset, _ = rec
        end = eocd_pos
        zip64 = False
        if eocd_pos >= _LOCATOR64.size:
            f.seek(eocd_pos - _LOCATOR64.size)
            loc = f.read(_LOCATOR64.size)
            if loc[:4] == LOCATOR64_SIG:
                zip64 = True
                _, loc_disk, eocd64_pos, disks = _LOCATOR64.unpack(loc)
                if loc_disk != 0 or disks != 1:
                    raise self.refuse(damaged, "a ZIP archive spanning several disks")
                if eocd64_pos + _EOCD64.size > eocd_pos - _LOCATOR64.size:
                    raise self.refuse(damaged, "the ZIP64 end of central directory is out of place")
                f.seek(eocd64_pos)
                rec64 = f.read(_EOCD64.size)
                if len(rec64) != _EOCD64.size or rec64[:4] != EOCD64_SIG:
                    raise self.refuse(damaged, "no ZIP64 end of central directory record where its locator says")
                (_, _, _, _, disk, disk_cd, n_disk, n_total, cd_size, cd_offset) = _EOCD64.unpack(rec64)
                end = eocd64_pos
        if not zip64 and (n_total == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF):
            raise self.refuse(damaged, "a ZIP64 archive without its ZIP64 end of central directory")
        if disk != 0 or disk_cd != 0 or n_disk != n_total:
            raise self.refuse(damaged, "a ZIP archive spanning several disks")
        if n_total > MAX_MEMBERS:
            raise self.refuse(rules.BOUND, f"{n_total} members, more than the reader's bound of {MAX_MEMBERS}")
        if cd_size > MAX_DIRECTORY:
            raise self.refuse(rules.BOUND, f"a central directory of {cd_size} bytes, more than the reader's bound "
                                           f"of {MAX_DIRECTORY // MIB} MiB")
        if cd_offset + cd_size > end:
            raise self.refuse(damaged, "the central directory runs past its end record")
        self.directory_offset = cd_offset
        self._cd_size = cd_size
        self._n_total = n_total
        return cd_size, cd_offset

    def _end_record(self, f: BinaryIO, size: int) -> tuple[tuple[Any, ...], int]:
        """The end of central directory record (unpacked) and where it is: the last one whose comment ends the file."""
        if size < _EOCD.size:
            raise self.refuse(rules.DAMAGED, "too short to be a ZIP archive")
        tail_len = min(size, _EOCD.size + 0xFFFF)
        f.seek(size - tail_len)
        tail = f.read(tail_len)
        idx = len(tail)
        while True:
            idx = tail.rfind(EOCD_SIG, 0, idx)
            if idx < 0:
                raise self.refuse(rules.DAMAGED, "no end of central directory record: not a whole ZIP archive")
            if idx + _EOCD.size <= len(tail):
                rec = _EOCD.unpack_from(tail, idx)
                if idx + _EOCD.size + rec[7] == len(tail):
                    return rec, size - tail_len + idx

    def _member_limits(self, f: BinaryIO, starts: array, ends: array, cd_offset: int) -> array:
        """Each member's limit: where the next member (by offset), or the directory, starts; refused where members'
        data overlap."""
        n = len(starts)
        limit = array("Q", bytes(8 * n))
        # no two members' data overlap: each member's data end before the next member (by offset) starts
        in_order = all(starts[i] <= starts[i + 1] for i in range(n - 1))
        order: Any = range(n) if in_order else sorted(range(n), key=starts.__getitem__)
        prev = -1
        for k in order:
            if prev >= 0:
                if ends[prev] > starts[k]:
                    raise self.refuse(rules.DAMAGED, "members whose data overlap (or run into the directory)",
                                      self._name_at(f, prev))
                limit[prev] = starts[k]
            prev = k
        if prev >= 0:
            if ends[prev] > cd_offset:
                raise self.refuse(rules.DAMAGED, "members whose data overlap (or run into the directory)",
                                  self._name_at(f, prev))
            limit[prev] = cd_offset
        return limit

    def _name_at(self, f: BinaryIO, index: int) -> str:
        for i, (m, _, _) in enumerate(self._scan(f)):
            if i == index:
                return m.name
        return ""  # pragma: no cover - the index is one of the directory's

    def _scan(self, f: BinaryIO) -> Iterator[tuple[Member, int, int]]:
        """Every entry of the central directory, checked, read in chunks of :data:`CD_CHUNK` bytes: ``(member
        (without its limit), where its entry is in the directory, the least end of its data)``."""
        damaged = rules.DAMAGED
        cd_size = self._cd_size
        buf = b""
        base = 0  # the directory position of buf[0]
        pos = 0  # in buf
        taken = 0  # bytes of the directory read so far

        for _ in range(self._n_total):
            # at least the fixed part, then the whole entry, in the buffer
            for need in (_CENTRAL.size, None):
                if need is None:
                    if buf[pos:pos + 4] != CENTRAL_SIG:
                        raise self.refuse(damaged, "a central directory entry is malformed")
                    lens = _CENTRAL.unpack_from(buf, pos)
                    need = _CENTRAL.size + lens[11] + lens[12] + lens[13]
                    if base + pos + need > cd_size:
                        raise self.refuse(damaged, "a central directory entry runs past the directory")
                if base + pos + need > cd_size:
                    raise self.refuse(damaged, "a central directory entry is malformed")
                while len(buf) - pos < need:
                    want = min(max(CD_CHUNK, need), cd_size - taken)
                    f.seek(self.directory_offset + taken)
                    chunk = f.read(want)
                    if len(chunk) != want or want == 0:
                        raise self.refuse(damaged, "the central directory is cut short")
                    taken += len(chunk)
                    buf = buf[pos:] + chunk
                    base += pos
                    pos = 0
            m, end = self._entry(buf, pos, len(buf))
            yield m[0], base + pos, m[1]
            pos = end
        if base + pos != cd_size:
            raise self.refuse(damaged, "the central directory holds more than its entries")

    def _entry(self, cd: bytes, pos: int, cd_size: int) -> tuple[Any, int]:
        """The entry at ``cd[pos:]``, checked: ``((member, least end of its data), position after it)``."""
        damaged = rules.DAMAGED
        if pos + _CENTRAL.size > cd_size or cd[pos:pos + 4] != CENTRAL_SIG:
            raise self.refuse(damaged, "a central directory entry is malformed")
        (_, _create_version, create_system, _extract, flags, method, _time, _date, crc, csize, usize, name_len,
         extra_len, comment_len, disk_start, _int_attr, ext_attr, offset) = _CENTRAL.unpack_from(cd, pos)
        pos += _CENTRAL.size
        if pos + name_len + extra_len + comment_len > cd_size:
            raise self.refuse(damaged, "a central directory entry runs past the directory")
        raw_name = cd[pos:pos + name_len]
        extra = cd[pos + name_len:pos + name_len + extra_len]
        pos += name_len + extra_len + comment_len
        try:
            name = raw_name.decode("utf-8") if flags & _FLAG_UTF8 else raw_name.decode("cp437")
        except UnicodeDecodeError:
            raise self.refuse(damaged, "a member name that is not UTF-8 though its flag says so") from None
        if usize == 0xFFFFFFFF or csize == 0xFFFFFFFF or offset == 0xFFFFFFFF or disk_start == 0xFFFF:
            usize, csize, offset, disk_start = self._zip64_extra(extra, usize, csize, offset, disk_start, name)
        if disk_start != 0:
            raise self.refuse(damaged, "a member on another disk", name)
        why = unsafe_name(name)
        if why:
            raise self.refuse(rules.UNSAFE, why, name)
        why = _unsafe_type(create_system, ext_attr)
        if why:
            raise self.refuse(rules.UNSAFE, f"a member that is {why}", name)
        if flags & (_FLAG_ENCRYPTED | _FLAG_STRONG_ENCRYPTION | _FLAG_MASKED_HEADERS):
            raise self.refuse(rules.UNSUPPORTED, "an encrypted member", name)
        if method not in METHODS:
            raise self.refuse(rules.UNSUPPORTED, f"compression method {method}: the reader knows 0 (stored), "
                                                 "8 (DEFLATE) and 93 (zstd)", name)
        if method == STORED and usize != csize:
            raise self.refuse(damaged, "a stored member whose sizes differ", name)
        return (Member(name, offset, csize, usize, method, crc, flags), offset + _LOCAL.size + name_len + csize), pos

    def _zip64_extra(self, extra: bytes, usize: int, csize: int, offset: int, disk: int,
                     name: str) -> tuple[int, int, int, int]:
        pos = 0
        while pos + 4 <= len(extra):
            tag, length = struct.unpack_from("<HH", extra, pos)
            body = extra[pos + 4:pos + 4 + length]
            pos += 4 + length
            if tag != 0x0001:
                continue
            fields = []
            need = [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, offset == 0xFFFFFFFF]
            k = 0
            for wanted in need:
                if wanted:
                    if k + 8 > len(body):
                        raise self.refuse(rules.DAMAGED, "a ZIP64 extra field that is cut short", name)
                    fields.append(struct.unpack_from("<Q", body, k)[0])
                    k += 8
                else:
                    fields.append(None)
            if disk == 0xFFFF:
                if k + 4 > len(body):
                    raise self.refuse(rules.DAMAGED, "a ZIP64 extra field that is cut short", name)
                disk = struct.unpack_from("<L", body, k)[0]
            usize = fields[0] if fields[0] is not None else usize
            csize = fields[1] if fields[1] is not None else csize
            offset = fields[2] if fields[2] is not None else offset
            return usize, csize, offset, disk
        raise self.refuse(rules.DAMAGED, "a member with ZIP64 sizes but no ZIP64 extra field", name)

    # -- members ------------------------------------------------------------------------------------------------

    def open(self) -> BinaryIO:
        """Open the archive's file again, refusing it when it changed since the directory was read."""
        f = open(self.path, "rb")
        st = os.fstat(f.fileno())
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self.identity:
            f.close()
            raise self.refuse(rules.DAMAGED, "the file changed since it was opened")
        return f

    def stream(self, f: BinaryIO, member: Member) -> Iterator[bytes]:
        """The decompressed bytes of ``member``, in chunks of at most :data:`CHUNK` bytes, checked as they come."""
        name = member.name
        if member.usize > MAX_MEMBER_SIZE:
            raise self.refuse(rules.BOUND, f"a member of {member.usize} bytes uncompressed, more than the reader's "
                                           f"bound of {MAX_MEMBER_SIZE // MIB} MiB", name)
        if member.usize > RATIO_FLOOR and member.usize > MAX_RATIO * member.csize:
            raise self.refuse(rules.BOUND, f"a member that declares {member.usize} bytes from {member.csize} "
                                           f"compressed, a ratio beyond the reader's bound of {MAX_RATIO}:1", name)
        f.seek(member.offset)
        header = f.read(_LOCAL.size)
        if len(header) != _LOCAL.size or header[:4] != LOCAL_SIG:
            raise self.refuse(rules.DAMAGED, "no local header where the directory says", name)
        (_, _version, flags, method, _time, _date, _crc, _csize, _usize, name_len,
         extra_len) = _LOCAL.unpack(header)
        raw_name = f.read(name_len)
        try:
            local_name = raw_name.decode("utf-8") if member.flags & _FLAG_UTF8 else raw_name.decode("cp437")
        except UnicodeDecodeError:
            local_name = None
        if local_name != name:
            raise self.refuse(rules.DAMAGED, "the local header names another member", name)
        if flags & (_FLAG_ENCRYPTED | _FLAG_STRONG_ENCRYPTION | _FLAG_MASKED_HEADERS):
            raise self.refuse(rules.UNSUPPORTED, "an encrypted member", name)
        if method != member.method:
            raise self.refuse(rules.DAMAGED, "the local header and the directory give different methods", name)
        start = member.offset + _LOCAL.size + name_len + extra_len
        if start + member.csize > member.limit:
            raise self.refuse(rules.DAMAGED, "a member whose data overlap the next member", name)
        f.seek(start)
        raw = _Bounded(f, member.csize)
        if member.method == STORED:
            chunks = _stored(raw)
        elif member.method == DEFLATED:
            chunks = _inflate(raw)
        else:
            chunks = _unzstd(raw)
        return self._checked(chunks, member)

    def _checked(self, chunks: Iterator[bytes], member: Member) -> Iterator[bytes]:
        name = member.name
        total = 0
        crc = 0
        ratio_cap = max(RATIO_FLOOR, MAX_RATIO * member.csize)
        try:
            for chunk in chunks:
                total += len(chunk)
                if total > member.usize:
                    raise self.refuse(rules.BOUND, f"the member gives more than the {member.usize} bytes it "
                                                   "declares: refused as it is read", name)
                if total > MAX_MEMBER_SIZE:  # pragma: no cover - usize is bounded already
                    raise self.refuse(rules.BOUND, f"the member gives more than {MAX_MEMBER_SIZE // MIB} MiB", name)
                if total > ratio_cap:  # pragma: no cover - usize is bounded already
                    raise self.refuse(rules.BOUND, f"the member expands beyond {MAX_RATIO}:1", name)
                crc = zlib.crc32(chunk, crc)
                yield chunk
        except (zlib.error, zstandard.ZstdError) as e:
            raise self.refuse(rules.DAMAGED, f"the compressed data are corrupt ({e})", name) from None
        except _Truncated:
            raise self.refuse(rules.DAMAGED, "the compressed data end before the member does", name) from None
        if total != member.usize:
            raise self.refuse(rules.DAMAGED, f"the member gives {total} bytes, not the {member.usize} it declares",
                              name)
        if crc != member.crc:
            raise self.refuse(rules.DAMAGED, "the member's CRC-32 does not match its data", name)

    def read(self, f: BinaryIO, member: Member) -> bytes:
        """The whole decompressed member (bounded by :data:`MAX_MEMBER_SIZE`), read as a stream."""
        out = bytearray()
        for chunk in self.stream(f, member):
            out += chunk
        return bytes(out)


class _Truncated(Exception):
    pass


class _Bounded:
    """The ``size`` raw bytes at the current position of ``f``, as a file-like object with ``read``."""

    def __init__(self, f: BinaryIO, size: int):
        self.f = f
        self.left = size

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        if n is None or n < 0 or n > self.left:
            n = self.left
        n = min(n, CHUNK)
        data = self.f.read(n)
        if len(data) != n:
            raise _Truncated()
        self.left -= n
        return data


def _stored(raw: _Bounded) -> Iterator[bytes]:
    while True:
        data = raw.read(CHUNK)
        if not data:
            return
        yield data


def _inflate(raw: _Bounded) -> Iterator[bytes]:
    d = zlib.decompressobj(-15)
    while True:
        data = raw.read(CHUNK)
        if not data:
            break
        out = d.decompress(data, CHUNK)
        if out:
            yield out
        while d.unconsumed_tail:
            out = d.decompress(d.unconsumed_tail, CHUNK)
            if out:
                yield out
        if d.eof:
            break
    while not d.eof:  # output still pending inside the decompressor
        out = d.decompress(b"", CHUNK)
        if not out:
            break
        yield out
    if not d.eof:
        raise _Truncated()


def _unzstd(raw: _Bounded) -> Iterator[bytes]:
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    with dctx.stream_reader(raw, read_size=CHUNK, read_across_frames=True, closefd=False) as reader:
        while True:
            out = reader.read(CHUNK)
            if not out:
                return
            yield out
