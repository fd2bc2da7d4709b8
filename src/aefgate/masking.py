"""No secret in any output, log or file (issue 28): the one place where credentials are masked.

- :func:`mask` is applied to every message aefgate's network code writes (refusals, report reasons, log lines): it
  masks a URL's userinfo (``nats://user:pass@host`` -> ``nats://***@host``), the values of credential query
  parameters (``?token=...``), ``Authorization``-style header lines and ``K=V`` / ``K: V`` pairs whose name is a
  credential header, and ``Bearer``/``Basic`` credentials.
- :func:`mask_url` masks one URL; :func:`strip_userinfo` removes the userinfo altogether (what a file keeps:
  ``nats://***@host`` would read back as the user ``***``).
- :func:`sensitive_header` says whether a header carries a credential; :func:`mask_headers` masks their values.
- :func:`kept_headers` is what a dead letter keeps of a message's headers: the content type and the CloudEvents
  attributes, nothing else.

Masking is a second line: credentials are not put in messages in the first place where aefgate knows them
(a URL's userinfo is dropped before it is shown); :func:`mask` catches what a library or a server echoes.
"""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

__all__ = ["MASK", "has_userinfo", "kept_headers", "mask", "mask_headers", "mask_url", "sensitive_header",
           "strip_userinfo"]

MASK = "***"

# header names that carry credentials, exactly, and the parts of a name that say it does
_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
                      "apikey", "x-auth-token", "x-access-token", "x-csrf-token", "x-xsrf-token",
                      "x-amz-security-token", "x-goog-api-key", "ocp-apim-subscription-key"})
_PARTS = re.compile(r"auth|token|secret|passw|pwd|cookie|api[-_]?key|credential|signature|session[-_]?id|jwt|"
                    r"private[-_]?key|access[-_]?key|nkey|seed", re.I)
_QUERY = _PARTS  # a query parameter named like a credential has its value masked

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/@?#'\"<>]+)@")
_AUTH_SCHEME = re.compile(r"\b(?P<scheme>Bearer|Basic|Digest|Token|Negotiate)(?P<sp>\s+)(?P<cred>[^\s,;'\"]+)",
                          re.I)
# NAME: value / NAME=value, where NAME looks like a credential header (a header line, a --header K=V echo)
_PAIR = re.compile(r"(?<![A-Za-z0-9_\-])(?P<name>[A-Za-z0-9_\-]*(?:token|secret|passw(?:or)?d|pwd|api[-_]?key|apikey|"
                   r"cookie|authorization|credentials?|nkey|seed))(?![A-Za-z0-9_\-])(?P<sep>\s*[:=]\s*)"
                   r"(?P<q>['\"]?)(?P<value>[^\s,;'\"&]+)", re.I)
_QUERY_PAIR = re.compile(r"(?P<lead>[?&])(?P<name>[^=&\s#]+)=(?P<value>[^&\s#'\"]*)")


def sensitive_header(name: Any) -> bool:
    """Whether a header (or a ``K=V`` key) carries a credential: ``Authorization``, ``Cookie``, an API key, any
    name with ``auth``, ``token``, ``secret``, ``password``, ``cookie``, ``api-key``, ... in it."""
    n = str(name).strip().lower()
    return n in _HEADERS or bool(_PARTS.search(n))


def mask_headers(headers: Mapping[Any, Any] | None) -> dict[str, str]:
    """The headers with every credential's value written ``***``."""
    return {str(k): (MASK if sensitive_header(k) else str(v)) for k, v in (headers or {}).items()}


def kept_headers(headers: Mapping[Any, Any] | None) -> dict[str, str]:
    """What a dead letter keeps of a message's headers: ``content-type`` and the CloudEvents attributes
    (``ce-*``), as they came; nothing else (``Authorization``, ``Cookie``, a proxy's headers, ``Nats-Msg-Id``, ...).
    A ``ce-*`` header named like a credential is masked too."""
    out = {}
    for k, v in (headers or {}).items():
        low = str(k).strip().lower()
        if low == "content-type":
            out[str(k)] = str(v)
        elif low.startswith("ce-") or low.startswith("ce_"):
            out[str(k)] = MASK if sensitive_header(low[3:]) else str(v)
    return out


def _netloc(parts: Any) -> str:
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return host + (f":{port}" if port is not None else "")


def _mask_query(query: str) -> str:
    if not query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(_QUERY.search(k) for k, _ in pairs):
        return query
    return urlencode([(k, MASK if _QUERY.search(k) else v) for k, v in pairs], safe="*")


def mask_url(url: Any) -> str:
    """``url`` with its userinfo written ``***`` and the values of credential query parameters masked; a text
    that is not a URL goes through :func:`mask`."""
    text = str(url)
    try:
        parts = urlsplit(text)
        if not parts.scheme or not parts.netloc:
            return mask(text)
        netloc = (f"{MASK}@" if "@" in parts.netloc else "") + _netloc(parts)
        return mask(parts._replace(netloc=netloc, query=_mask_query(parts.query)).geturl())
    except ValueError:
        return mask(text)


def strip_userinfo(url: str) -> str:
    """``url`` without its userinfo (``nats://user:pass@host:4222/s`` -> ``nats://host:4222/s``), credential query
    parameters masked: what a file may keep of a destination."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=_netloc(parts)).geturl()


def has_userinfo(url: str) -> bool:
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def mask(text: Any, secrets: Any = ()) -> str:
    """Any message with the credentials in it masked (see the module's docstring); ``secrets`` are values the
    caller knows to be credentials (a header's value it sent, a token), masked wherever they appear (an echo)."""
    s = str(text)
    for value in sorted({str(v) for v in secrets if v is not None and len(str(v)) >= 4}, key=len, reverse=True):
        s = s.replace(value, MASK)
    s = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", s)
    s = _QUERY_PAIR.sub(lambda m: f"{m['lead']}{m['name']}={MASK}" if _QUERY.search(m["name"]) else m[0], s)
    s = _AUTH_SCHEME.sub(lambda m: f"{m['scheme']}{m['sp']}{MASK}", s)
    s = _PAIR.sub(lambda m: m[0] if m["value"] == MASK or m["value"].lower() in _SCHEMES
                  else f"{m['name']}{m['sep']}{m['q']}{MASK}", s)
    return s


_SCHEMES = {"bearer", "basic", "digest", "token", "negotiate"}
