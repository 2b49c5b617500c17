"""CTranslate2's Python API over Petrel, so code written for ``ctranslate2.Translator`` and
``ctranslate2.Generator`` runs by changing the import.

Every argument of CTranslate2's Translator(), Generator(), translate_batch,
generate_batch, translate_iterable, generate_iterable and generate_tokens is taken: each
is supported with CTranslate2's meaning, supported with a different meaning the README
states (bindings/python/README.md, "CTranslate2's arguments"), or refused by name
(petrel.UnsupportedError) when given a value Petrel cannot honour. None is ignored.

Tokens are the model's own (its vocabulary's strings: opus-mt's SentencePiece pieces and
"</s>", a language model's tokenizer.json tokens); an unknown one becomes <unk>, as in
CTranslate2.
"""

import collections
import concurrent.futures
import itertools
import os
import random
import threading
import warnings

from . import _petrel
from ._api import Model
from ._errors import InvalidArgumentError, NotFoundError, UnsupportedError
from ._stream import stream as _stream

__all__ = [
    "Translator", "Generator", "TranslationResult", "GenerationResult", "GenerationStepResult",
    "AsyncTranslationResult", "AsyncGenerationResult", "set_random_seed", "get_cuda_device_count",
    "get_supported_compute_types", "contains_model",
]

# --- Module functions ---------------------------------------------------------------------

_seed_lock = threading.Lock()
_seed_source = None


def set_random_seed(seed):
    """Seeds sampling: each later sampled generation draws its seed from a generator seeded
    with `seed`, so a program's calls repeat run to run (CTranslate2 seeds its random
    generator; without it, each sampled generation has a random seed)."""
    global _seed_source
    with _seed_lock:
        _seed_source = random.Random(seed)


def _next_seed():
    with _seed_lock:
        if _seed_source is None:
            return int.from_bytes(os.urandom(8), "little")
        return _seed_source.getrandbits(64)


def get_cuda_device_count():
    """Petrel runs on CPUs: 0."""
    return 0


def get_supported_compute_types(device, device_index=0):
    """The compute_type names a CPU model file can be opened with (each must name the
    type its weights were converted to: Petrel does not convert at load)."""
    _check_device("get_supported_compute_types", device, device_index)
    return {"float32", "float16", "int8", "int8_float32", "int8_float16", "int8_bfloat16"}


def contains_model(path):
    """Whether `path` is a Petrel model file, or a directory holding one."""
    try:
        _model_file(path)
        return True
    except (NotFoundError, ValueError):
        return False


# --- Results --------------------------------------------------------------------------------

class TranslationResult:
    """A translation result: hypotheses (lists of tokens), scores, attention (empty unless asked)."""

    __slots__ = ("hypotheses", "scores", "attention", "logits")

    def __init__(self, hypotheses, scores=None, attention=None, logits=None):
        self.hypotheses = hypotheses
        self.scores = scores if scores is not None else []
        self.attention = attention if attention is not None else []
        self.logits = logits if logits is not None else []

    def __repr__(self):
        return (f"TranslationResult(hypotheses={self.hypotheses!r}, scores={self.scores!r}, "
                f"attention={self.attention!r}, logits={self.logits!r})")

    def __len__(self):
        return len(self.hypotheses)

    def __getitem__(self, i):
        # CTranslate2's backward compatibility with translate_batch's old list of dicts.
        warnings.warn("Reading the TranslationResult object as a list of dictionaries is deprecated and will be "
                      "removed in a future version. Please use the object attributes as described in the "
                      "documentation: https://opennmt.net/CTranslate2/python/ctranslate2.TranslationResult.html",
                      DeprecationWarning, stacklevel=2)
        if not isinstance(i, int) or i < 0 or i >= len(self.hypotheses):
            raise IndexError(i)
        hypothesis = {"tokens": self.hypotheses[i]}
        if self.scores:
            hypothesis["score"] = self.scores[i]
        if self.attention:
            hypothesis["attention"] = self.attention[i]
        return hypothesis


class GenerationResult:
    """A generation result: sequences (tokens), sequences_ids, scores (empty)."""

    __slots__ = ("sequences", "sequences_ids", "scores", "logits")

    def __init__(self, sequences, sequences_ids, scores=None, logits=None):
        self.sequences = sequences
        self.sequences_ids = sequences_ids
        self.scores = scores if scores is not None else []
        self.logits = logits if logits is not None else []

    def __repr__(self):
        return (f"GenerationResult(sequences={self.sequences!r}, sequences_ids={self.sequences_ids!r}, "
                f"scores={self.scores!r}, logits={self.logits!r})")


class GenerationStepResult:
    """One generated token: step, batch_id, token_id, hypothesis_id, token, log_prob (None:
    Petrel's token events carry no scores), logits (None), is_last."""

    __slots__ = ("step", "batch_id", "token_id", "hypothesis_id", "token", "log_prob", "logits", "is_last")

    def __init__(self, step, batch_id, token_id, hypothesis_id, token, is_last, log_prob=None):
        self.step = step
        self.batch_id = batch_id
        self.token_id = token_id
        self.hypothesis_id = hypothesis_id
        self.token = token
        self.log_prob = log_prob
        self.logits = None
        self.is_last = is_last

    def __repr__(self):
        return (f"GenerationStepResult(step={self.step!r}, batch_id={self.batch_id!r}, "
                f"token_id={self.token_id!r}, hypothesis_id={self.hypothesis_id!r}, token={self.token!r}, "
                f"log_prob={self.log_prob!r}, logits={self.logits!r}, is_last={self.is_last!r})")


class _AsyncResult:
    """A result being computed (asynchronous=True): result() waits for it, done() asks."""

    __slots__ = ("_future", "_index")

    def __init__(self, future, index):
        self._future = future
        self._index = index

    def result(self):
        return self._future.result()[self._index]

    def done(self):
        return self._future.done()


class AsyncTranslationResult(_AsyncResult):
    __slots__ = ()


class AsyncGenerationResult(_AsyncResult):
    __slots__ = ()


# --- Arguments --------------------------------------------------------------------------------

def _unsupported(method, name, value, why):
    raise UnsupportedError(f"{method}(): {name}={value!r} is not supported by Petrel: {why}")


def _check_device(method, device, device_index):
    if device not in ("cpu", "auto"):
        _unsupported(method, "device", device, "Petrel runs on CPUs (device='cpu')")
    if device_index not in (0, [0], (0,)):
        _unsupported(method, "device_index", device_index, "one CPU device, index 0")


def _model_file(model_path):
    path = os.fspath(model_path)
    if os.path.isdir(path):
        inside = os.path.join(path, "model.petrel")
        if os.path.isfile(inside):
            return inside
        files = sorted(f for f in os.listdir(path) if f.endswith(".petrel"))
        if len(files) == 1:
            return os.path.join(path, files[0])
        raise ValueError(f"{path} is a directory without a Petrel model file (model.petrel, or one *.petrel file): "
                         "convert the checkpoint with petrel-convert")
    if not os.path.exists(path):
        raise NotFoundError(f"{path}: no such file or directory")
    return path


def _default_threads():
    # CTranslate2's default for intra_threads=0: OMP_NUM_THREADS, else min(4, cores).
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return min(4, os.cpu_count() or 1)


def _count(method, name, value, low):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{method}(): {name} must be an int, not {type(value).__name__}")
    if value < low:
        raise ValueError(f"{method}(): {name} must be >= {low}, got {value}")
    return value


_DTYPE_NAMES = {"f32": "float32", "f16": "float16", "int8": "int8_float32", "int4": "int4"}
_COMPUTE_TYPE_DTYPES = {"float32": "f32", "float16": "f16", "int8": "int8", "int8_float32": "int8",
                        "int8_float16": "int8", "int8_bfloat16": "int8"}


def _weights_dtype(info):
    by_dtype = collections.Counter()
    for tensor in info.tensors:
        by_dtype[tensor.dtype] += tensor.bytes
    return by_dtype.most_common(1)[0][0] if by_dtype else "f32"


def _check_compute_type(method, compute_type, device, model):
    if isinstance(compute_type, dict):
        compute_type = compute_type.get("cpu", compute_type.get(device, "default"))
    dtype = _weights_dtype(model.info)
    if compute_type in ("default", "auto"):
        return _DTYPE_NAMES.get(dtype, dtype)
    if compute_type in ("int16", "bfloat16"):
        _unsupported(method, "compute_type", compute_type, "Petrel has no int16 or bfloat16 kernels")
    wanted = _COMPUTE_TYPE_DTYPES.get(compute_type)
    if wanted is None:
        raise ValueError(f"{method}(): invalid compute type {compute_type!r}")
    if wanted != dtype:
        _unsupported(method, "compute_type", compute_type,
                     f"this model file's weights are {dtype}, and Petrel runs a file as it was converted "
                     f"(convert with petrel-convert --quantize {wanted}, or pass compute_type='default')")
    return compute_type


def _refuse_changed(method, o, refused):
    """Refuses each option of `refused` (name: (default, why)) given another value than its default."""
    for name, (default, why) in refused.items():
        if name in o and o[name] != default:
            _unsupported(method, name, o[name], why)


def _check_batching(method, o):
    if "max_batch_size" in o:
        _count(method, "max_batch_size", o["max_batch_size"], 0)
    if o.get("batch_type", "examples") not in ("examples", "tokens"):
        raise ValueError(f"Invalid batch type {o['batch_type']}")


def _token_lists(method, name, batch):
    if isinstance(batch, str) or not hasattr(batch, "__len__"):
        raise TypeError(f"{method}(): {name} must be a list of lists of tokens")
    for i, tokens in enumerate(batch):
        if tokens is None:
            continue
        if isinstance(tokens, str) or any(not isinstance(t, str) for t in tokens):
            raise TypeError(f"{method}(): {name}[{i}] must be a list of str tokens")
    return batch


class _Vocabulary:
    """A vocabulary's tokens and their ids (the first id of a token listed twice)."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.index = {}
        for i, token in enumerate(tokens):
            self.index.setdefault(token, i)
        self.unk = self.index.get("<unk>")

    def ids(self, tokens, what):
        out = []
        for token in tokens:
            i = self.index.get(token)
            if i is None:
                if self.unk is None:
                    raise InvalidArgumentError(f"{what}: {token!r} is not in the model's vocabulary, which has "
                                               "no <unk> to stand for it")
                i = self.unk
            out.append(i)
        return out


def _batches(iterable, batch_size, batch_type):
    """CTranslate2's batch iterator: tuples of lists, `batch_size` examples or padded tokens each."""
    streams = None
    max_length = 0
    for example in iterable:
        if not isinstance(example, tuple):
            example = (example,)
        if batch_type == "examples":
            if streams and len(streams[0]) == batch_size:
                yield streams
                streams = None
        elif batch_type == "tokens":
            max_length = max(max_length, len(example[0]))
            if streams and (len(streams[0]) + 1) * max_length > batch_size:
                yield streams
                streams = None
                max_length = len(example[0])
        else:
            raise ValueError(f"Invalid batch type {batch_type}")
        if streams is None:
            streams = tuple([] for _ in example)
        for batch, element in zip(streams, example):
            if element is None and len(streams) > 1:
                raise ValueError("Input iterables do not have the same length")
            batch.append(element)
    if streams is not None:
        yield streams


# --- Shared by Translator and Generator -------------------------------------------------------

class _Session:
    _kind = ""

    def __init__(self, model_path, device="cpu", *, device_index=0, compute_type="default", inter_threads=1,
                 intra_threads=0, max_queued_batches=0, flash_attention=False, tensor_parallel=False, files=None):
        method = self._kind
        _check_device(method, device, device_index)
        if flash_attention:
            _unsupported(method, "flash_attention", flash_attention, "a GPU feature (Petrel's attention is its own)")
        if tensor_parallel:
            _unsupported(method, "tensor_parallel", tensor_parallel, "Petrel runs a model in one process")
        self._inter_threads = _count(method, "inter_threads", inter_threads, 1)
        threads = _count(method, "intra_threads", intra_threads, 0) or _default_threads()
        if isinstance(max_queued_batches, bool) or not isinstance(max_queued_batches, int) or max_queued_batches < -1:
            raise ValueError(f"{method}(): max_queued_batches must be an int >= -1")
        if files is not None:
            data = self._file_bytes(files)
            self._open = lambda: Model.from_bytes(data, name=os.fspath(model_path), threads=threads,
                                                  workers=self._workers())
        else:
            path = _model_file(model_path)
            self._open = lambda: Model.load(path, threads=threads, workers=self._workers())
        self._model = self._open()
        self._check_architecture()
        self._compute_type = _check_compute_type(method, compute_type, device, self._model)
        self._queue_slots = threading.BoundedSemaphore(max_queued_batches) if max_queued_batches > 0 else None
        self._executor = None
        self._executor_lock = threading.Lock()
        self._pending = 0
        self._setup()

    def _workers(self):
        return 1

    @staticmethod
    def _file_bytes(files):
        if not isinstance(files, dict) or not files:
            raise TypeError("files must be a dict mapping file names to their contents (bytes or file objects)")
        names = [name for name in files if str(name).endswith(".petrel")]
        if len(names) != 1 and len(files) != 1:
            raise ValueError("files must hold one Petrel model file (a name ending in .petrel)")
        content = files[names[0] if names else next(iter(files))]
        return content.read() if hasattr(content, "read") else content

    def _loaded(self):
        if self._model is None:
            raise RuntimeError(f"The model for this {self._kind.lower()} was unloaded")
        return self._model

    # CTranslate2's properties
    @property
    def device(self):
        return "cpu"

    @property
    def device_index(self):
        return [0]

    @property
    def compute_type(self):
        return self._compute_type

    @property
    def tensor_parallel(self):
        return False

    @property
    def num_queued_batches(self):
        return self._pending

    @property
    def num_active_batches(self):
        """Calls waiting or running (the running ones counted while the engine works without the GIL)."""
        model = self._model
        return self._pending + (model.active_calls if model is not None else 0)

    @property
    def model_is_loaded(self):
        return self._model is not None

    @property
    def model(self):
        """The petrel.Model underneath (Petrel's own API)."""
        return self._loaded()

    def unload_model(self, to_cpu=False):
        """Releases the model (to_cpu=True: keeps it, as it already is in CPU memory)."""
        if not to_cpu:
            self._model = None
            self._release()

    def _release(self):
        pass

    def load_model(self, keep_cache=False):
        """Loads the model again after unload_model (keep_cache: nothing is cached to keep)."""
        if self._model is None:
            self._model = self._open()
            self._setup()

    def _submit(self, function, *args):
        if self._queue_slots is not None:
            self._queue_slots.acquire()
        with self._executor_lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                                       thread_name_prefix=f"petrel-{self._kind}")
            self._pending += 1

        def run():
            try:
                return function(*args)
            finally:
                with self._executor_lock:
                    self._pending -= 1
                if self._queue_slots is not None:
                    self._queue_slots.release()

        return self._executor.submit(run)

    def _read_ahead(self, call_batch, iterable, max_batch_size, batch_type, kwargs):
        """CTranslate2's *_iterable: `max_batch_size` x 16 examples read at a time, each read
        batch run asynchronously by call_batch while the previous one's results are
        consumed, the results yielded in order."""
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        kwargs.pop("asynchronous", None)
        read_batch_size = max_batch_size * 16 if max_batch_size > 1 else max_batch_size
        pending = collections.deque()
        for streams in _batches(iterable, read_batch_size, batch_type):
            pending.append(call_batch(*streams, max_batch_size=max_batch_size, batch_type=batch_type,
                                      asynchronous=True, **kwargs))
            while len(pending) > 1 or (pending and pending[0] and pending[0][0].done()):
                for result in pending.popleft():
                    yield result.result()
        while pending:
            for result in pending.popleft():
                yield result.result()

    def _refuse_method(self, name):
        raise UnsupportedError(f"{self._kind}.{name}() is not supported by Petrel (README: CTranslate2's arguments)")

    # Not part of Petrel's surface: refused by name.
    def score_batch(self, *args, **kwargs):
        self._refuse_method("score_batch")

    def score_iterable(self, *args, **kwargs):
        self._refuse_method("score_iterable")


# --- Translator --------------------------------------------------------------------------------

class Translator(_Session):
    """CTranslate2's Translator over a Petrel encoder-decoder model file.

    model_path: a Petrel model file (or a directory holding model.petrel). Sessions:
    inter_threads translation workers, each with intra_threads threads (0: OMP_NUM_THREADS,
    else min(4, cores), as CTranslate2).
    """

    _kind = "Translator"

    def _workers(self):
        return self._inter_threads

    def _check_architecture(self):
        if self._model.info.decoder_only:
            raise InvalidArgumentError(f"{self._model.name} is a language model: open it with petrel.Generator")

    def _setup(self):
        model = self._model
        info = model.info
        self._target = _Vocabulary(model.target_vocab)
        vocab = model.vocab
        self._source = _Vocabulary(vocab) if vocab else self._target
        self._eos_id = info.eos_id
        self._eos_token = self._target.tokens[info.eos_id] if 0 <= info.eos_id < len(self._target.tokens) else "</s>"
        self._unk_token = self._target.tokens[self._target.unk] if self._target.unk is not None else None
        self._pad_id = info.pad_id
        self._max_positions = info.max_positions
        self._forced_eos = info.generation.forced_eos_id >= 0

    @property
    def num_translators(self):
        return self._inter_threads

    def translate_batch(self, source, target_prefix=None, *, max_batch_size=0, batch_type="examples",
                        asynchronous=False, beam_size=2, patience=1, num_hypotheses=1, length_penalty=1,
                        coverage_penalty=0, repetition_penalty=1, no_repeat_ngram_size=0, disable_unk=False,
                        suppress_sequences=None, end_token=None, return_end_token=False, prefix_bias_beta=0,
                        max_input_length=1024, max_decoding_length=256, min_decoding_length=1, use_vmap=False,
                        return_scores=False, return_logits_vocab=False, return_attention=False,
                        return_alternatives=False, min_alternative_expansion_prob=0, sampling_topk=1,
                        sampling_topp=1, sampling_temperature=1, replace_unknowns=False, callback=None):
        """Translates a batch of token lists (CTranslate2's translate_batch); a list of
        TranslationResult, or of AsyncTranslationResult with asynchronous=True."""
        o = dict(locals())
        for key in ("self", "source", "target_prefix", "asynchronous"):
            del o[key]
        o = self._check_translate_options("translate_batch", o)
        _token_lists("translate_batch", "source", source)
        if target_prefix is not None:
            _token_lists("translate_batch", "target_prefix", target_prefix)
            if len(target_prefix) != len(source):
                raise ValueError("translate_batch(): source and target_prefix must have as many examples "
                                 f"({len(source)} and {len(target_prefix)})")
        if not source:
            return []
        on_token = self._with_callback(callback) if callback is not None else None
        if asynchronous:
            future = self._submit(self._translate, source, target_prefix, o, on_token)
            return [AsyncTranslationResult(future, i) for i in range(len(source))]
        return self._translate(source, target_prefix, o, on_token)

    def _check_translate_options(self, method, o):
        # Refused: what Petrel's translation search does not do.
        why_default = {
            "patience": (1, "the beam stops when beam_size hypotheses have finished (patience 1)"),
            "coverage_penalty": (0, "the search has no coverage penalty"),
            "repetition_penalty": (1, "translation has no repetition penalty (a language model's generation has)"),
            "no_repeat_ngram_size": (0, "the search does not block repeated n-grams"),
            "disable_unk": (False, "the search cannot suppress a token"),
            "prefix_bias_beta": (0, "a target prefix is forced, not biased"),
            "return_logits_vocab": (False, "the engine returns no logit vectors"),
            "return_alternatives": (False, "the search has no alternatives mode"),
            "min_alternative_expansion_prob": (0, "the search has no alternatives mode"),
        }
        _refuse_changed(method, o, why_default)
        if o.get("suppress_sequences"):
            _unsupported(method, "suppress_sequences", o["suppress_sequences"], "the search cannot suppress tokens")
        if o.get("sampling_topk", 1) != 1 and o.get("sampling_temperature", 1) != 0:
            _unsupported(method, "sampling_topk", o["sampling_topk"],
                         "translation is greedy or beam search, it does not sample (sampling_topk=1)")
        end_token = o.get("end_token")
        if end_token is not None:
            ends = [end_token] if isinstance(end_token, (str, int)) else list(end_token)
            ids = {self._target.index.get(t, -1) if isinstance(t, str) else t for t in ends}
            if ids != {self._eos_id}:
                _unsupported(method, "end_token", end_token, f"translation ends on the model's EOS ({self._eos_token!r})")
        # Checked as CTranslate2 checks them.
        beam_size = _count(method, "beam_size", o.get("beam_size", 1), 1)
        num_hypotheses = _count(method, "num_hypotheses", o.get("num_hypotheses", 1), 1)
        if num_hypotheses > beam_size:
            raise ValueError("The number of hypotheses cannot be greater than beam_size * patience")
        max_length = _count(method, "max_decoding_length", o["max_decoding_length"], 1)
        if _count(method, "min_decoding_length", o["min_decoding_length"], 0) > max_length:
            raise ValueError("The minimum decoding length is greater than the maximum decoding length")
        _count(method, "max_input_length", o["max_input_length"], 0)
        if not 0 < o["sampling_topp"] <= 1:
            raise ValueError("The sampling_topp parameter must be between 0 and 1")
        if o.get("callback") is not None and beam_size != 1:
            raise ValueError("The callback function is not compatible with beam_size > 1 or prefix_bias_beta > 0")
        _check_batching(method, o)
        return o

    def _engine_options(self, o, prefix):
        limit = min(o["max_decoding_length"], self._max_positions)
        # A model that forces EOS at its last position (Hugging Face's forced_eos_token_id)
        # gets one step more, past CTranslate2's limit: the hypotheses reaching the limit
        # end there, as CTranslate2's do, and the forced EOS is dropped (_hypotheses).
        extended = self._forced_eos and limit + 1 <= self._max_positions
        return {
            "beam_size": o.get("beam_size", 1),
            "n_best": o.get("num_hypotheses", 1),
            "max_new_tokens": limit + (1 if extended else 0),
            "min_new_tokens": min(o["min_decoding_length"], limit),
            "length_penalty": float(o.get("length_penalty", 1)),
            # CTranslate2's rule: a sentence's beam ends once beam_size hypotheses have finished.
            "beam_stop": "first-k",
            "use_shortlist": bool(o["use_vmap"]),
            "alignment": bool(o.get("return_attention") or o.get("replace_unknowns")),
            "target_prefix": list(prefix),
        }, limit, extended

    def _translate(self, source, target_prefix, o, on_token=None):
        model = self._loaded()
        max_input = o["max_input_length"]
        inputs = []
        for i, tokens in enumerate(source):
            ids = self._source.ids(tokens, f"source[{i}]")
            inputs.append(ids[:max_input] if max_input > 0 else ids)
        prefixes = [tuple(self._target.ids(p, f"target_prefix[{i}]")) if p else ()
                    for i, p in enumerate(target_prefix or [None] * len(source))]
        results = [None] * len(source)
        groups = collections.defaultdict(list)  # one engine call per distinct prefix
        for i, ids in enumerate(inputs):
            if ids:
                groups[prefixes[i]].append(i)
            else:
                results[i] = self._empty_result(prefixes[i], source[i], o)
        for prefix, indices in groups.items():
            options, limit, extended = self._engine_options(o, prefix)
            batch = [inputs[i] for i in indices]
            if on_token is not None:
                translations = model._handle.translate_ids(batch, options, on_token(indices, limit))
            else:
                options.update(self._batching(o, batch))
                translations = model._handle.translate_ids(batch, options)
            for i, translation in zip(indices, translations):
                results[i] = self._result(translation, source[i], inputs[i], o, limit, extended)
        return results

    @staticmethod
    def _batching(o, batch):
        total = max(sum(len(ids) for ids in batch), 1)
        count = len(batch)
        size = o.get("max_batch_size", 0)
        if size == 0:
            per_batch, tokens = count, total
        elif o.get("batch_type", "examples") == "examples":
            per_batch, tokens = size, total
        else:  # tokens: Petrel packs a batch's inputs, so its tokens are counted without padding
            per_batch, tokens = count, size
        return {"max_batch_size": min(per_batch, _petrel.MAX_BATCH_SIZE), "max_batch_tokens": tokens,
                "window": count}

    def _empty_result(self, prefix, source_tokens, o):
        # CTranslate2 translates an empty input to its target prefix (or nothing), score 0.
        hypothesis = [self._target.tokens[i] for i in prefix][:o["max_decoding_length"]]
        n = o.get("num_hypotheses", 1)
        attention = [[[0.0] * len(source_tokens) for _ in hypothesis] for _ in range(n)]
        return TranslationResult([list(hypothesis) for _ in range(n)], [0.0] * n if o["return_scores"] else [],
                                 attention if o.get("return_attention") else [])

    def _result(self, translation, source_tokens, input_ids, o, limit, extended):
        hypotheses, scores, attention = [], [], []
        columns = None
        for h in translation.hypotheses:
            ids, ended_on_eos, score = h.ids, h.ended_on_eos, h.score
            n = len(ids)
            if extended and ended_on_eos and n == limit:
                # The EOS forced one step past the limit: CTranslate2 ends at the limit
                # without it, its length n (not n + 1) dividing the score.
                ended_on_eos = False
                penalty = float(o.get("length_penalty", 1))
                if penalty != 0 and n > 0:
                    score *= ((n + 1) / n) ** penalty
            tokens = [self._target.tokens[i] for i in ids]
            rows = []
            if h.alignment:
                if columns is None:
                    columns = self._source_columns(input_ids)
                kept = h.alignment[:n + (1 if ended_on_eos and o["return_end_token"] else 0)]
                for row in kept:
                    vector = [0.0] * len(source_tokens)
                    for column, position in enumerate(columns):
                        if column < len(row) and position < len(vector):
                            vector[position] = row[column]
                    rows.append(vector)
                if o.get("replace_unknowns") and self._unk_token is not None:
                    for k, token in enumerate(tokens):
                        if token == self._unk_token and k < len(rows) and rows[k]:
                            tokens[k] = source_tokens[max(range(len(rows[k])), key=rows[k].__getitem__)]
            if o["return_end_token"] and ended_on_eos:
                tokens.append(self._eos_token)
            hypotheses.append(tokens)
            scores.append(score)
            attention.append(rows)
        return TranslationResult(hypotheses, scores if o["return_scores"] else [],
                                 attention if o.get("return_attention") else [])

    def _source_columns(self, ids):
        # Alignment columns are the tokens the encoder read: a pad id is masked (left out)
        # unless it is also EOS. Each column's position in the input.
        masked = self._pad_id if self._pad_id != self._eos_id else None
        return [k for k, token in enumerate(ids) if token != masked]

    def _step_tracker(self, batch_ids, limit):
        return _StepTracker(batch_ids, self._target.tokens, self._eos_id, limit)

    def _with_callback(self, callback):
        """on_token for _translate from CTranslate2's callback (True stops that example)."""
        def make(indices, limit):
            tracker = self._step_tracker(indices, limit)

            def on_token(event):
                stop = False
                for step in tracker.steps(event):
                    if callback(step):
                        stop = True
                if stop and not event["final"]:
                    tracker.stopped.add(event["input"])
                    return False
                return True
            return on_token
        return make

    def translate_iterable(self, source, target_prefix=None, max_batch_size=32, batch_type="examples", **kwargs):
        """Translates an iterable of token lists, `max_batch_size` x 16 examples read at a
        time, yielding TranslationResult in order (the next read batch is translated while
        the previous one's results are consumed)."""
        iterable = source if target_prefix is None else itertools.zip_longest(source, target_prefix)
        yield from self._read_ahead(self.translate_batch, iterable, max_batch_size, batch_type, kwargs)

    def generate_tokens(self, source, target_prefix=None, *, max_decoding_length=256, min_decoding_length=1,
                        sampling_topk=1, sampling_topp=1, sampling_temperature=1, return_log_prob=False,
                        repetition_penalty=1, no_repeat_ngram_size=0, disable_unk=False, suppress_sequences=None,
                        end_token=None, max_input_length=1024, use_vmap=False):
        """Yields GenerationStepResult as the (greedy) translation of one example grows;
        the last has is_last (the EOS, or the token at the length limit). Closing the
        generator stops the translation."""
        o = dict(locals())
        for key in ("self", "source", "target_prefix"):
            del o[key]
        if return_log_prob:
            _unsupported("generate_tokens", "return_log_prob", return_log_prob,
                         "Petrel's token events carry no scores (translate_batch(return_scores=True) has them)")
        o.update(beam_size=1, num_hypotheses=1, return_scores=False, return_end_token=False)
        o = self._check_translate_options("generate_tokens", o)
        _token_lists("generate_tokens", "source", [source])
        prefixes = None if target_prefix is None else [target_prefix]
        tracker = self._step_tracker([0], min(max_decoding_length, self._max_positions))

        def run(stream_callback):
            return self._translate([source], prefixes, o, on_token=lambda indices, limit: stream_callback)

        events = _stream(run)
        try:
            for event in events:
                yield from tracker.steps(event)
        finally:
            events.close()

    # Not part of Petrel's surface: refused by name.
    def translate_file(self, *args, **kwargs):
        self._refuse_method("translate_file")

    def score_file(self, *args, **kwargs):
        self._refuse_method("score_file")


class _StepTracker:
    """Petrel's token events of one greedy call as CTranslate2's step results: one result
    per new token; the EOS (or the token at the length limit) has is_last."""

    def __init__(self, batch_ids, tokens, eos_id, limit):
        self.batch_ids = batch_ids
        self.tokens = tokens
        self.eos_id = eos_id
        self.limit = limit
        self.emitted = collections.defaultdict(int)
        self.stopped = set()

    def _step(self, index, k, token_id, is_last):
        return GenerationStepResult(k, self.batch_ids[index], token_id, 0, self.tokens[token_id], is_last)

    def steps(self, event):
        index, ids = event["input"], event["ids"]
        done = self.emitted[index]
        if not event["final"]:
            self.emitted[index] = max(done, len(ids))
            return [self._step(index, k, ids[k], k + 1 == self.limit) for k in range(done, len(ids))]
        if len(ids) > done:  # the last step's token (the length limit) comes with the final event
            self.emitted[index] = len(ids)
            return [self._step(index, k, ids[k], k + 1 == len(ids)) for k in range(done, len(ids))]
        if index in self.stopped or done >= self.limit:
            return []
        return [self._step(index, done, self.eos_id, True)]


# --- Generator ---------------------------------------------------------------------------------

class Generator(_Session):
    """CTranslate2's Generator over a Petrel language model file (greedy or sampled
    generation; inter_threads sessions generate a batch's prompts side by side)."""

    _kind = "Generator"

    def _check_architecture(self):
        if not self._model.info.decoder_only:
            raise InvalidArgumentError(f"{self._model.name} is a translation model: open it with petrel.Translator")

    def _setup(self):
        model = self._model
        info = model.info
        self._vocab = _Vocabulary(model.vocab)
        self._bos_id = info.lm.bos_id
        self._eos_ids = set(info.lm.eos_ids)
        self._sessions = [model] + [model.share() for _ in range(self._inter_threads - 1)]
        self._cache_enabled = False

    def _release(self):
        self._sessions = []

    @property
    def num_generators(self):
        return self._inter_threads

    def generate_batch(self, start_tokens, *, max_batch_size=0, batch_type="examples", asynchronous=False,
                       beam_size=1, patience=1, num_hypotheses=1, length_penalty=1, repetition_penalty=1,
                       no_repeat_ngram_size=0, disable_unk=False, suppress_sequences=None, end_token=None,
                       return_end_token=False, max_length=512, min_length=0, static_prompt=None,
                       cache_static_prompt=True, include_prompt_in_result=True, return_scores=False,
                       return_logits_vocab=False, return_alternatives=False, min_alternative_expansion_prob=0,
                       sampling_topk=1, sampling_topp=1, sampling_temperature=1, callback=None):
        """Generates from a batch of start token lists (CTranslate2's generate_batch); a
        list of GenerationResult, or of AsyncGenerationResult with asynchronous=True."""
        o = dict(locals())
        for key in ("self", "start_tokens", "asynchronous"):
            del o[key]
        o = self._check_generate_options("generate_batch", o)
        _token_lists("generate_batch", "start_tokens", start_tokens)
        if not start_tokens:
            return []
        user_callback = o.pop("callback")
        on_step = None
        if user_callback is not None:
            def on_step(step):
                return not user_callback(step)
        if asynchronous:
            future = self._submit(self._generate, start_tokens, o, on_step)
            return [AsyncGenerationResult(future, i) for i in range(len(start_tokens))]
        return self._generate(start_tokens, o, on_step)

    def _check_generate_options(self, method, o):
        refused = {
            "patience": (1, "no beam search for language models (greedy or sampled generation)"),
            "no_repeat_ngram_size": (0, "generation does not block repeated n-grams"),
            "disable_unk": (False, "generation cannot suppress a token"),
            "min_length": (0, "generation has no minimum length"),
            "return_scores": (False, "generation returns no scores"),
            "return_logits_vocab": (False, "the engine returns no logit vectors"),
            "return_alternatives": (False, "generation has no alternatives mode"),
            "min_alternative_expansion_prob": (0, "generation has no alternatives mode"),
        }
        if _count(method, "beam_size", o.get("beam_size", 1), 1) != 1:
            _unsupported(method, "beam_size", o["beam_size"], "no beam search for language models (beam_size=1)")
        _refuse_changed(method, o, refused)
        if o.get("suppress_sequences"):
            _unsupported(method, "suppress_sequences", o["suppress_sequences"], "generation cannot suppress tokens")
        sampling = o["sampling_topk"] != 1 and o["sampling_temperature"] != 0
        num_hypotheses = _count(method, "num_hypotheses", o.get("num_hypotheses", 1), 1)
        if num_hypotheses > 1 and not sampling:
            raise ValueError("The number of hypotheses cannot be greater than beam_size * patience")
        _count(method, "max_length", o["max_length"], 1)
        _count(method, "sampling_topk", o["sampling_topk"], 0)
        if not 0 < o["sampling_topp"] <= 1:
            raise ValueError("The sampling_topp parameter must be between 0 and 1")
        if o["repetition_penalty"] <= 0:
            raise ValueError("The repetition penalty must be > 0")
        _check_batching(method, o)
        end_token = o.get("end_token")
        if end_token is None:
            o["end_ids"] = None
        else:
            ends = [end_token] if isinstance(end_token, (str, int)) else list(end_token)
            o["end_ids"] = {self._vocab.ids([t], "end_token")[0] if isinstance(t, str) else int(t) for t in ends}
        if o.get("static_prompt") is not None:
            _token_lists(method, "static_prompt", [o["static_prompt"]])
        o["sampling"] = sampling
        return o

    def _generate(self, start_tokens, o, on_step=None):
        self._loaded()
        static = self._vocab.ids(o["static_prompt"], "static_prompt") if o.get("static_prompt") else []
        if static and o["cache_static_prompt"] and not self._cache_enabled:
            # The static prompt's KV state is kept (Petrel's prompt cache) and reused by
            # every prompt that starts with it.
            for session in self._sessions:
                if session.prompt_cache_stats().budget == 0:
                    session.set_prompt_cache_bytes(64 << 20)
            self._cache_enabled = True
        prompts = [self._vocab.ids(tokens, f"start_tokens[{i}]") for i, tokens in enumerate(start_tokens)]
        for i, prompt in enumerate(prompts):
            if not prompt and not static:
                raise ValueError(f"start_tokens[{i}] is empty: a prompt needs at least its start token")
        jobs = [(b, h) for b in range(len(prompts)) for h in range(o["num_hypotheses"])]
        sequences = {}

        def run(job, session):
            b, h = job
            sequences[job] = self._generate_one(session, b, h, static, prompts[b], o, on_step)

        if len(self._sessions) > 1 and len(jobs) > 1:
            # Side by side on the sessions, each taking the next prompt when it is free.
            work = collections.deque(jobs)
            lock = threading.Lock()
            errors = []

            def worker(session):
                while True:
                    with lock:
                        if not work or errors:
                            return
                        job = work.popleft()
                    try:
                        run(job, session)
                    except BaseException as error:
                        with lock:
                            errors.append(error)
                        return

            threads = [threading.Thread(target=worker, args=(s,)) for s in self._sessions]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
        else:
            for job in jobs:
                run(job, self._sessions[0])
        results = []
        for b in range(len(prompts)):
            ids = [sequences[(b, h)] for h in range(o["num_hypotheses"])]
            results.append(GenerationResult([[self._vocab.tokens[i] for i in s] for s in ids], ids))
        return results

    def _generate_one(self, session, b, h, static, prompt, o, on_step):
        if o["include_prompt_in_result"]:
            # CTranslate2 counts the prompt after its first token within max_length, and
            # returns it (its first token too, unless that is the BOS).
            new_tokens = o["max_length"] - max(len(prompt) - 1, 0)
            shown = prompt[1:] if prompt and prompt[0] == self._bos_id else list(prompt)
        else:
            new_tokens = o["max_length"]
            shown = []
        if new_tokens <= 0:
            return shown[:o["max_length"]]
        end_ids = o["end_ids"] if o["end_ids"] is not None else self._eos_ids
        options = {
            "max_new_tokens": new_tokens,
            "do_sample": o["sampling"],
            "repetition_penalty": float(o["repetition_penalty"]),
            "top_p": 1.0,
            "min_p": 0.0,
            "top_k": 0,
            "temperature": 1.0,
        }
        if o["sampling"]:
            options.update(temperature=float(o["sampling_temperature"]), top_k=o["sampling_topk"],
                           top_p=float(o["sampling_topp"]), seed=_next_seed())
        if o["end_ids"] is not None:
            options["ignore_eos"] = True  # only the given end tokens end it (stopped below)

        def on_token(event):
            if event["final"] or not event["ids"]:
                return True
            k = len(event["ids"]) - 1
            token = event["ids"][-1]
            is_end = token in end_ids
            go_on = True
            if on_step is not None:
                go_on = on_step(GenerationStepResult(k, b, token, h, self._vocab.tokens[token],
                                                     is_end or k + 1 == new_tokens))
            return go_on and not (o["end_ids"] is not None and is_end)

        needs_events = on_step is not None or o["end_ids"] is not None
        generation = session._handle.generate_ids([static + prompt], options, on_token if needs_events else None)[0]
        ids = list(generation.ids)
        if not o["return_end_token"]:
            while ids and ids[-1] in end_ids:
                ids.pop()
        return shown + ids

    def generate_iterable(self, start_tokens, max_batch_size=32, batch_type="examples", **kwargs):
        """Generates from an iterable of start token lists, yielding GenerationResult in order."""
        yield from self._read_ahead(self.generate_batch, start_tokens, max_batch_size, batch_type, kwargs)

    def generate_tokens(self, prompt, max_batch_size=0, batch_type="examples", *, max_length=512, min_length=0,
                        sampling_topk=1, sampling_topp=1, sampling_temperature=1, return_log_prob=False,
                        repetition_penalty=1, no_repeat_ngram_size=0, disable_unk=False, suppress_sequences=None,
                        end_token=None, static_prompt=None, cache_static_prompt=True, callback=None):
        """Yields GenerationStepResult as each prompt's continuation grows (the prompt not
        included); closing the generator stops the generation."""
        o = dict(locals())
        for key in ("self", "prompt"):
            del o[key]
        if return_log_prob:
            _unsupported("generate_tokens", "return_log_prob", return_log_prob, "Petrel's token events carry no scores")
        del o["return_log_prob"]
        o.update(include_prompt_in_result=False, num_hypotheses=1, return_end_token=False)
        o = self._check_generate_options("generate_tokens", o)
        if len(prompt) > 0 and isinstance(prompt[0], str):
            prompt = [prompt]
        _token_lists("generate_tokens", "prompt", prompt)
        user_callback = o.pop("callback")

        def run(on_step):
            def step(result):
                stop = user_callback(result) if user_callback is not None else False
                return on_step(result) and not stop
            return self._generate(prompt, o, step)

        yield from _stream(run)

    # Not part of Petrel's surface: refused by name.
    def forward_batch(self, *args, **kwargs):
        self._refuse_method("forward_batch")

    def async_generate_tokens(self, *args, **kwargs):
        self._refuse_method("async_generate_tokens")
