"""The rule ids the Inspect format layer refuses with (see ``docs/mappings/inspect-format.md``).

Two are the specification's (``../shared/spec/aef/interop/inspect.md``, "Inspect -> AEF", Refused):

- ``IN-6``: a log that is not I-JSON: ``Infinity``/``-Infinity``, a literal beyond binary64 (``1e400``), a member
  name twice in one object; aefgate also gives it to JSON text that cannot be read at all (a syntax error,
  invalid UTF-8, a byte-order mark, nesting beyond the interpreter's limit);
- ``IN-8``: members of a type Inspect does not write, here ``samples`` that is not a list and a sample that is
  not an object (inspect-aef-edges/refusals/type-samples-string.json says ``IN-8``).

The others are aefgate's own, for the container and for writing:

- ``IN-FMT-1``: not an Inspect log (neither a ZIP archive nor a JSON object);
- ``IN-FMT-2``: a damaged or inconsistent ZIP archive (structure, sizes, CRC, overlapping members, a corrupt
  compressed stream, a file changed since it was opened);
- ``IN-FMT-3``: an unsafe member (an absolute name, a ``..`` segment, a backslash, a NUL; a link or device);
- ``IN-FMT-4``: a bound of the reader exceeded (members, directory size, member size, compression ratio, the
  size of one JSON value);
- ``IN-FMT-5``: an unsupported member (a compression method other than stored, DEFLATE and zstd; encryption);
- ``IN-FMT-6``: the layout of a ``.eval`` (no ``header.json`` nor ``_journal/start.json``; a member that does not
  hold the JSON type Inspect writes there; a sample member not named ``samples/<id>_epoch_<n>.json``;
  ``events_data`` references that do not resolve);
- ``IN-FMT-7``: a header or sample :func:`write_log` cannot write;
- ``OUT-1`` (aefgate's, README): an output that exists.
"""

JSON = "IN-6"
SAMPLES = "IN-8"
NOT_A_LOG = "IN-FMT-1"
DAMAGED = "IN-FMT-2"
UNSAFE = "IN-FMT-3"
BOUND = "IN-FMT-4"
UNSUPPORTED = "IN-FMT-5"
LAYOUT = "IN-FMT-6"
WRITE = "IN-FMT-7"
OUT_EXISTS = "OUT-1"
