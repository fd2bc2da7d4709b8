"""What both directions of the Inspect converter share: the page's constants, ref names ([ENC-13]), times and small
value checks (interop/inspect.md)."""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from aefgate.errors import Refusal
from aefgate.aef.refs import decode_name, encode_name  # noqa: F401  (re-exported)
from aefgate.aef import jsonio
from aefgate.aef.builder import _SECRET_NAME  # [RUN-10]'s credential names, reused

#: the version of inspect_ai the page was written against
PAGE_VERSION = "0.3.277"
LETTERS: dict[str, tuple[float | int, str]] = {
    "C": (1, "passed"), "I": (0, "failed"), "P": (0.5, "warn"), "N": (0, "failed"),
}
MODEL_BLAME = frozenset({"refusal", "no_response", "invalid_response_format"})  # the line is failed
INSTRUMENT_BLAME = frozenset({"grader_failed", "scoring_failed"})  # NaN: the line is error
NO_VALUE = "Inspect recorded no value (NaN) and no reason"
NO_MESSAGE = "Inspect recorded an error without a message"
MAX_REASON = 4096  # result `reason` (schema) and R7I-12's cut
MAX_ABORT = 2048  # run.json `abortReason` (schema)
MAX_DEPTH = jsonio.MAX_DEPTH  # [ENC-17]
SAFE_INT = 2**53 - 1
TYPED_ABSENCES = frozenset({"not_measured", "not_applicable", "skipped", "error", "pending"})
CONTENT_FIELDS = ("input", "target", "output", "messages")
CONTENT_KIND = {"input": "input", "target": "expected", "output": "output", "messages": "transcript"}
TOKENS = (  # Inspect ModelUsage member -> AEF usage member (RES-10)
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
    ("input_tokens_cache_read", "gen_ai.usage.cache_read.input_tokens"),
    ("input_tokens_cache_write", "gen_ai.usage.cache_write.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)
AEF_ROLES = ("agent", "judge", "attacker")
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")
_VERSION = re.compile(r"[!-~]{1,128}\Z")
_METHOD = re.compile(r"[a-z][a-z0-9@._-]{0,63}\Z")
_TEXT_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(Z|z|[+-][0-9]{2}:[0-9]{2})?\Z"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_REDUCERS_IMPORT = {
    "majority": "MajorityVote", "mode": "MajorityVote", "mean": "Mean", "median": "Median", "max": "Max",
}
_REDUCERS_EXPORT = {"MajorityVote": "majority", "Mean": "mean", "Median": "median", "Max": "max"}
MEAN_METRICS = ("accuracy", "mean")
_KIND_BYTE = {kind: bytes([i]) for i, kind in enumerate(("input", "expected", "output", "transcript"))}
RECOMPUTED = {"accuracy": None, "mean": None, "median": "median", "min": "min", "max": "max"}


#: a member named like a credential, as a member name in JSON text (a quick test before a walk): the builder's list
#: of such names ([RUN-10]: nothing in ext is a key, token or password), reused
_CREDENTIAL_KEY_TEXT = re.compile(r'"(?:' + _SECRET_NAME.pattern + r')"\s*:', re.IGNORECASE)


def is_credential_name(name: Any) -> bool:
    """Whether a member name says it holds a credential (the builder's [RUN-10] list: api_key, password, token,
    secret, authorization, ...)."""
    return isinstance(name, str) and _SECRET_NAME.fullmatch(name) is not None


# Every name _SECRET_NAME matches ends with one of these words (ASCII, lower case); in ASCII text, IGNORECASE matches
# ASCII letters only, and str's \s matches \x1c-\x1f besides bytes' \s: an ASCII text whose lower case has none of
# these words just before '"' (blanks) ':' has no match of _CREDENTIAL_KEY_TEXT. (Kept in step with _SECRET_NAME.)
_CREDENTIAL_KEY_END = re.compile(rb'(?:key|pass(?:word|wd)|pwd|secret|token|authorization|credentials?|string)'
                                 rb'"[\s\x1c-\x1f]*:')


def _maybe_credential_key(text: bytes) -> bool:
    """Whether ``text`` (JSON, UTF-8) may hold a member named like a credential (:data:`_CREDENTIAL_KEY_TEXT`):
    an ASCII text is first searched, lower-cased, for the names' last words, a cheaper search."""
    if text.isascii() and _CREDENTIAL_KEY_END.search(text.lower()) is None:
        return False
    return _CREDENTIAL_KEY_TEXT.search(text.decode("utf-8", "replace")) is not None


def _holds_something(v: Any) -> bool:
    return (isinstance(v, (str, dict, list)) and bool(v))


def without_credentials(value: Any, where: str, dropped: list[str], text: bytes | None = None) -> Any:
    """``value`` without its members named like a credential ([RUN-10]) that hold something (a non-empty string,
    object or list), and an object member left empty by that (it held credentials only); each dropped credential's
    pointer (below ``where``) is appended to ``dropped``. ``text``, the value as JSON, lets a value without any such
    name through without a walk. The value is copied only where a member is dropped."""
    if text is not None and not _maybe_credential_key(text):
        return value

    def walk(v: Any, w: str) -> Any:
        if isinstance(v, dict):
            out = None
            for k, x in v.items():
                kw = f"{w}/{k}"
                if is_credential_name(k) and _holds_something(x):
                    dropped.append(kw)
                    if out is None:
                        out = dict(v)
                    del out[k]
                    continue
                y = walk(x, kw)
                if y is not x:
                    if out is None:
                        out = dict(v)
                    if isinstance(y, dict) and not y:  # it held credentials only: it goes with them
                        del out[k]
                    else:
                        out[k] = y
            return v if out is None else out
        if isinstance(v, list):
            items = [walk(x, f"{w}/{i}") for i, x in enumerate(v)]
            return v if all(a is b for a, b in zip(items, v)) else items
        return v

    return walk(value, where)




def _utc(text: Any, rule: str, where: str) -> str:
    """An Inspect time (RFC 3339 with an offset) as an [ENC-8] UTC time: the same instant, its fraction digits kept
    exactly (trailing zeros dropped). A time without an offset, or one that does not exist, is refused (IN-6)."""
    if not isinstance(text, str):
        raise Refusal(rule, f"a time is a string, not {_kind(text)}", where)
    m = _RFC3339.match(text)
    if m is None:
        raise Refusal(rule, f"{text!r} is not an RFC 3339 time", where)
    y, mo, d, h, mi, s, frac, off = m.groups()
    if off is None:
        raise Refusal(rule, f"{text!r} has no offset: the instant it names is unknown", where)
    frac = (frac or "").rstrip("0")
    if len(frac) > 9:
        raise Refusal(rule, f"{text!r} has more than nine fraction digits (ENC-8)", where)
    try:
        t = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s))
    except ValueError:
        raise Refusal(rule, f"{text!r} is not a time that exists", where) from None
    if off not in ("Z", "z"):
        sign = 1 if off[0] == "+" else -1
        oh, om = int(off[1:3]), int(off[4:6])
        if oh > 23 or om > 59:
            raise Refusal(rule, f"{text!r} has no valid offset", where)
        t = t - sign * dt.timedelta(hours=oh, minutes=om)
    if not 1 <= t.year <= 9999:
        raise Refusal(rule, f"{text!r} is outside the years 0001-9999", where)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ("." + frac if frac else "") + "Z"


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and v != v


def _int_value(v: Any, rule: str, where: str, *, minimum: int = 0) -> int:
    """An integer field read by its value: ``7`` and ``7.0`` are 7 (settled 10-10); a fraction, a boolean, a value
    outside ``minimum``..2^53-1, or another type is refused."""
    if _is_num(v) and (isinstance(v, int) or (math.isfinite(v) and v == int(v))):
        i = int(v)
        if minimum <= i <= SAFE_INT:
            return i
        shown = str(i) if len(str(i)) <= 24 else f"{str(i)[:12]}... ({len(str(abs(i)))} digits)"
        raise Refusal(rule, f"{shown} is outside {minimum}..2^53-1", where)
    raise Refusal(rule, f"an integer is expected, not {_kind(v)} ({v!r})", where)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n]


def _close(a: float, b: float) -> bool:
    """§3.6's tolerance: 1e-9 x max(1, |recomputed|), ``b`` recomputed."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))




# -- what a lossless import keeps (aefgate's extension, docs/mappings/inspect.md, "Lossless round trips") ----------

#: the log versions inspect-ai 0.3.285 reads: a .json up to its LOG_SCHEMA_VERSION, 2 (``_validate_version``); a
#: .eval also 3 (its recorder does not check the version; ``log_message_deduplication.eval`` is one)
READ_VERSIONS = {"json": (1, 2), "eval": (1, 2, 3)}
#: ext/ files of a run imported with ``lossless`` ([RUN-2]: producer files, sealed with the run)
KEPT_HEADER = "inspect_ai/header.json"  # the log's header as written (no samples, no reductions)
KEPT_SAMPLES = "inspect_ai/samples.ndjson"  # per sample, what its lines and blobs do not hold
KEPT_REDUCTIONS = "inspect_ai/reductions.json"  # the reductions as written
#: sample members that hold what the model saw or said: not kept with contentCapture off ([RUN-11])
CONTENT_MEMBERS = frozenset({"input", "choices", "target", "messages", "output", "events", "attachments", "store",
                             "transcript", "message_pool", "files", "setup"})
#: Score members that are content ([RUN-11], IN-7): not kept with contentCapture off
SCORE_CONTENT = frozenset({"explanation", "answer"})
