"""The one refusal type.

Every input aefgate refuses is refused by raising :class:`Refusal`, carrying the rule id of the
specification that refuses it (``ENC-2``, ``RES-4``, ``IN-7`` ...), the offending place (a path,
``file:line``, or a JSON pointer inside a document) and a message for people.

Exit codes (the CLI maps them): 2 for an input the user can correct (a refusal), 1 for an integrity
failure (a run that does not verify), 0 otherwise.
"""

from __future__ import annotations

import re

# Control characters (C0, DEL, C1) and the Unicode line/paragraph separators: a refusal is printed as
# one line, so whatever an input put in a name or message is shown escaped, never as a line break.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x00`` ...)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)

EXIT_OK = 0
EXIT_INTEGRITY = 1
EXIT_INPUT = 2


class Refusal(Exception):
    """An input aefgate will not accept, with the rule that refuses it.

    ``rule``: the rule id (``ENC-2``); ``where``: the path, ``file:line`` or pointer that offends
    (may be empty); ``message``: what is wrong, for people. ``exit_code`` is 2 unless the refusal
    is about integrity (a run that does not verify), which is 1.
    """

    def __init__(self, rule: str, message: str, where: str = "", *, exit_code: int = EXIT_INPUT):
        self.rule = rule
        self.where = where
        self.message = message
        self.exit_code = exit_code
        super().__init__(str(self))

    def __str__(self) -> str:
        loc = f" at {one_line(self.where)}" if self.where else ""
        return f"[{self.rule}]{loc}: {one_line(self.message)}"

    def to_json(self) -> dict:
        return {"error": {"rule": self.rule, "where": self.where, "message": self.message}}
