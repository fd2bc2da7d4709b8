"""What both directions of the ASSERT converter share: the names the page fixes, and small helpers."""

from __future__ import annotations

from aefgate.aef.refs import decode_name, encode_name

__all__ = [
    "EVALUATOR",
    "EXT_FOLDER",
    "EXT_NAME",
    "FROM",
    "HARM",
    "HARM_PATH",
    "OVER_REFUSAL",
    "OVER_REFUSAL_PATH",
    "ROOT",
    "encode_name",
    "decode_name",
]

#: imported.from: ASSERT writes no version into its files, so every run is read as 0.3 (the page)
FROM = "assert-ai 0.3"
#: a case's root line, and its two children: ASSERT's two headline kinds (the page)
ROOT = "assert_ai_verdict"
HARM_PATH = ROOT + "/harm"
OVER_REFUSAL_PATH = ROOT + "/over_refusal"
HARM = "harm"
OVER_REFUSAL = "over_refusal"
#: every line's evaluator (the page's worked example)
EVALUATOR = {"id": ROOT, "version": "assert-ai-0.3"}
#: the ext member of a line ([ENC-19]: prefixed by the producer's name) and the folder of ASSERT's files under ext/
EXT_NAME = "aefgate.assert-ai"
EXT_FOLDER = "assert-ai"


