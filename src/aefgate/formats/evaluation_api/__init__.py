"""The Evaluation API's EvaluationStatusResponse: typed models, a strict reader and a writer
(the package's face: :mod:`.status` holds them)."""

from aefgate.formats.evaluation_api.status import *  # noqa: F403 - the package's face is the module's __all__
from aefgate.formats.evaluation_api.status import __all__  # noqa: F401
