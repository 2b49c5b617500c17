"""Petrel: a CPU inference engine for translation models and small language models.

Two APIs over one engine (bindings/python/README.md):

* Petrel's own: ``petrel.Model.load(path)``, then ``model.translate(texts, ...)`` on text,
  ``model.generate(prompt, ...)``, ``petrel.Conversation(model)``, with every option of the
  C++ API by its name.
* CTranslate2's: ``petrel.Translator(model_path).translate_batch(tokens, ...)`` and
  ``petrel.Generator(model_path).generate_batch(tokens, ...)``, so code written for
  ``ctranslate2`` runs by changing the import.

Engine errors are :class:`petrel.Error` subclasses carrying the engine's ``status`` and
``message``. Calls release the GIL while the engine works.
"""

from ._errors import (CancelledError, Error, FormatError, InternalError, InvalidArgumentError, IoError,
                      NotFoundError, OutOfMemoryError, UnsupportedError)
from ._record import Record
from ._api import (CancelFlag, Conversation, Model, QualityModel, TranslationCache, hard_alignment,
                   library_version, load_quality_model, runnable_isas, translate_via_pivot)
from ._ct2 import (AsyncGenerationResult, AsyncTranslationResult, GenerationResult, GenerationStepResult,
                   Generator, TranslationResult, Translator, contains_model, get_cuda_device_count,
                   get_supported_compute_types, set_random_seed)

__version__ = library_version()

__all__ = [
    "Error", "InvalidArgumentError", "IoError", "NotFoundError", "FormatError", "UnsupportedError",
    "InternalError", "OutOfMemoryError", "CancelledError", "Record",
    "Model", "Conversation", "TranslationCache", "CancelFlag", "QualityModel", "load_quality_model",
    "translate_via_pivot", "hard_alignment", "library_version", "runnable_isas",
    "Translator", "Generator", "TranslationResult", "GenerationResult", "GenerationStepResult",
    "AsyncTranslationResult", "AsyncGenerationResult", "set_random_seed", "get_cuda_device_count",
    "get_supported_compute_types", "contains_model",
]
