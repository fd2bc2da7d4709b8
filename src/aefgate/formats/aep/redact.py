"""The AEP-0003 §9.4 redaction pipeline, for ``redacted``-gated free text at a ``redacted`` ceiling.

Normative minimum, applied in this order (AEP-0003 §9 rule 4):

a. secrets and credentials -> ``[REDACTED:secret]``: PEM blocks; ``AKIA[0-9A-Z]{16}``; ``Bearer`` tokens;
   ``(password|passwd|secret|api[_-]?key|token)\\s*[=:]\\s*\\S+`` values; JWT-shaped strings;
b. configured names: the values the operator lists as secret -> ``[REDACTED:secret]``;
c. home paths: the user's home directory prefix -> ``~``;
d. PII (emails, phone numbers) -> ``[REDACTED:pii]``, on by default, operator-disableable.

"The pipeline is a floor, not a ceiling: adapters MAY redact more." This implementation redacts more, as the
conformance corpus (``conformance/fixtures/redaction/cases.json``) pins: the bearer scheme in any letter case
(RFC 6750 schemes are case-insensitive) but only before a token-shaped word (prose "the bearer of" is left
alone); credential assignments whose key merely ends in a credential word (``API_KEY=``, ``DB_PASSWORD:``),
with the key quoted (``"token": "..."``) and the value on the next line; ``Authorization:`` header values
whatever their scheme; well-known bare token shapes (GitHub ``ghp_``/``github_pat_``, GitLab ``glpat-``, Slack
``xox?-``, ``sk-``/``sk_live_`` keys, Google ``AIza`` keys); any ``/home/<user>`` or ``/Users/<user>`` prefix (not
only the operator's own home). For JSON values (:meth:`Redactor.value`), a member whose NAME is a credential
name (``token``, ``API_KEY``, ``Password``, ``authorization`` ...) has its value replaced whatever it looks
like, and every string inside is redacted as text.

Out of scope (as the corpus documents): base64/hex-encoded secrets, homoglyph key names, secrets in object
member names, prose-obfuscated PII.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

__all__ = ["PII", "SECRET", "Redactor", "redact", "redact_value"]

SECRET = "[REDACTED:secret]"
PII = "[REDACTED:pii]"

# (a) secrets. Each pattern replaces the whole match, except _ASSIGN and _AUTH which keep their key.
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*-----[\s\S]*?-----END [A-Z0-9 ]*-----|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*")
_TOKENS = re.compile(
    r"AKIA[0-9A-Z]{16}"
    r"|\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"  # JWT: header.payload.signature
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bglpat-[A-Za-z0-9_-]{16,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"
    r"|\b[rsp]k_(?:live|test)_[A-Za-z0-9]{8,}"
    r"|\bAIza[0-9A-Za-z_-]{30,}"
)
# Authorization header values, whatever the scheme ("Authorization: Basic dXNl...")
_AUTH = re.compile(r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:[A-Za-z]+\s+)?[A-Za-z0-9._~+/=-]+")
# Bearer tokens: the token68 shape, and token-like (a digit or a token punctuation, or long)
_BEARER = re.compile(
    r"(?i)\bbearer\s+(?=[A-Za-z0-9._~+/-]*[0-9._~+/-]|[A-Za-z]{20})[A-Za-z0-9._~+/-]{6,}=*"
)
# key = value: the spec's key words, also as the end of a longer key (API_KEY, DB_PASSWORD, client_secret),
# with the key optionally quoted, the value quoted or bare, possibly on the next line
_ASSIGN = re.compile(
    r"(?i)((?:\b|_)(?:password|passwd|pwd|secret|api[_-]?key|token|access[_-]?key|private[_-]?key)[\"']?\s*[=:]\s*)"
    r"(\"(?:[^\"\\]|\\.)*\"|'[^']*'|(?!\[REDACTED:)[^\s,;\"'}\]]+)"
)
# (c) home paths of any user (the operator's own home is handled separately, first)
_HOMES = re.compile(r"(?<![\w.~/-])/(?:home|Users)/[^/\s\"'<>:;,|]+")
# (d) PII
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(
    r"(?<![\w.+/-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{3,4}(?![\w.-]*\d)"
)

# JSON member names whose value is a credential (compared lower-case, without - and _)
_CRED_KEYS = ("password", "passwd", "pwd", "secret", "token", "apikey", "authorization", "privatekey",
              "accesskey", "secretkey", "credential", "credentials", "cookie", "setcookie", "passphrase")


def _assign(m: re.Match) -> str:
    q = m.group(2)[0]
    return m.group(1) + (q + SECRET + q if q in "\"'" else SECRET)


def _cred_key(name: str) -> bool:
    k = name.lower().replace("-", "").replace("_", "")
    return k.endswith(_CRED_KEYS)


class Redactor:
    """One configuration of the §9.4 pipeline.

    ``secret_values``: values the operator lists as secret (rule b), replaced wherever they occur;
    ``home``: the user's home directory (rule c), by default this process's (``~``); ``pii``: rule d, on by
    default. :meth:`text` redacts a string, :meth:`value` a JSON value (every string inside; credential-named
    members wholesale).
    """

    def __init__(self, secret_values: Iterable[str] = (), home: str | None = None, pii: bool = True):
        vals = sorted({v for v in secret_values if isinstance(v, str) and v}, key=len, reverse=True)
        self._secrets = re.compile("|".join(re.escape(v) for v in vals)) if vals else None
        if home is None:
            home = os.path.expanduser("~")
        home = home.rstrip("/")
        self._home = (
            re.compile(r"(?<![\w.~/-])" + re.escape(home) + r"(?![^/\s\"'<>:;,|])") if home and home != "~" and home.startswith("/")
            else None
        )
        self.pii = pii

    def text(self, s: str) -> str:
        """``s`` through rules (a) to (d), in order."""
        if "-----BEGIN " in s:
            s = _PEM.sub(SECRET, s)
        s = _TOKENS.sub(SECRET, s)
        s = _AUTH.sub(lambda m: m.group(1) + SECRET, s)
        s = _BEARER.sub(SECRET, s)
        s = _ASSIGN.sub(_assign, s)
        if self._secrets is not None:
            s = self._secrets.sub(SECRET, s)
        if self._home is not None:
            s = self._home.sub("~", s)
        if "/home/" in s or "/Users/" in s:
            s = _HOMES.sub("~", s)
        if self.pii:
            if "@" in s:
                s = _EMAIL.sub(PII, s)
            s = _PHONE.sub(PII, s)
        return s

    def value(self, v: Any) -> Any:
        """A JSON value with every string redacted as text and every credential-named member's value replaced
        by ``[REDACTED:secret]``; numbers, booleans and null unchanged. Returns new containers."""
        t = type(v)
        if t is str:
            return self.text(v)
        if t is dict:
            return {k: (SECRET if _cred_key(k) and x is not None else self.value(x)) for k, x in v.items()}
        if t is list:
            return [self.value(x) for x in v]
        return v


_DEFAULT: Redactor | None = None


def _default() -> Redactor:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Redactor()
    return _DEFAULT


def redact(text: str, *, secret_values: Iterable[str] = (), home: str | None = None, pii: bool = True) -> str:
    """``text`` through the §9.4 pipeline (see :class:`Redactor` for the options)."""
    if not secret_values and home is None and pii:
        return _default().text(text)
    return Redactor(secret_values, home, pii).text(text)


def redact_value(value: Any, *, secret_values: Iterable[str] = (), home: str | None = None,
                 pii: bool = True) -> Any:
    """A JSON value through the §9.4 pipeline (:meth:`Redactor.value`)."""
    if not secret_values and home is None and pii:
        return _default().value(value)
    return Redactor(secret_values, home, pii).value(value)
