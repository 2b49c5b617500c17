"""Petrel's own Python API: a model file loaded once, translated or generated with.

Options are the C++ API's fields by their names (engine/include/petrel/translator.h:
TranslateOptions; batch_translator.h: BatchOptions; generator.h: GenerateOptions); an
option left out (or None) takes the model's own default, as the C++ API does. An option
the engine does not have is refused by name (TypeError), a bad value by the engine's
message (petrel.InvalidArgumentError, a ValueError).
"""

import json
import os

from . import _petrel
from ._errors import IoError, NotFoundError
from ._stream import stream as _stream

__all__ = [
    "Model", "Conversation", "TranslationCache", "CancelFlag", "QualityModel", "load_quality_model",
    "translate_via_pivot", "hard_alignment", "library_version", "runnable_isas",
]

TranslationCache = _petrel.TranslationCache
CancelFlag = _petrel.CancelFlag
QualityModel = _petrel.QualityModel
hard_alignment = _petrel.hard_alignment
runnable_isas = _petrel.runnable_isas


def library_version():
    """The engine's version (the newest model-file format it reads)."""
    return _petrel.library_version()


def load_quality_model(path):
    """Reads a bergamot `.quality.lr` file (for ``translate(..., quality_model=...)``)."""
    return _petrel.load_quality_model(os.fspath(path))


def _load(loader, path):
    try:
        return loader()
    except IoError as error:
        if path is not None and not os.path.exists(path):
            raise NotFoundError(error.message) from None
        raise


def _generate_options(options, kv_cache):
    """GenerateOptions from keyword arguments: `kv_cache` ("f32", "f16", "int8") sets the
    kv_cache_f16 / kv_cache_int8 fields; a json_schema may be a dict."""
    if kv_cache is not None:
        if kv_cache not in ("f32", "f16", "int8"):
            raise ValueError(f"kv_cache must be 'f32', 'f16' or 'int8', not {kv_cache!r}")
        for field in ("kv_cache_f16", "kv_cache_int8"):
            if options.get(field) is not None:
                raise ValueError(f"kv_cache or {field}, not both")
        options["kv_cache_f16"] = kv_cache == "f16"
        options["kv_cache_int8"] = kv_cache == "int8"
    schema = options.get("json_schema")
    if schema is not None and not isinstance(schema, str):
        options["json_schema"] = json.dumps(schema)
    return options


def _check_stream(stream, on_token):
    if stream and on_token is not None:
        raise ValueError("stream=True or on_token, not both")


def _batch_call(call, single, stream, on_token, events_as=None):
    """The results of ``call(on_token)``, an engine call over a batch (the first one when
    the caller gave one input: `single`). stream=True: a generator of the call's events
    (passed through `events_as` when given) whose return value is those results."""
    def finish(results):
        return results[0] if single else results

    if stream:
        def events():
            streamed = _stream(call)
            return finish((yield from (events_as(streamed) if events_as is not None else streamed)))

        return events()
    return finish(call(on_token))


def _text_deltas(options, call):
    """A generator of the text deltas ``call(on_token)`` streams (its `options` asking for
    text in its events), whose return value is call's result."""
    options["stream_text"] = True
    return _deltas(_stream(call))


def _id_batch(inputs):
    """A list of ids (one input: single) or of lists of ids, as a list of lists; single."""
    single = len(inputs) > 0 and not isinstance(inputs[0], (list, tuple))
    return ([inputs] if single else [list(i) for i in inputs]), single


class Model:
    """A Petrel model file, loaded and verified; translates (encoder-decoder models) or
    generates (language models). Safe to share between Python threads: each kind of call
    runs on its own session, one call at a time, without the GIL.

    Load with :meth:`Model.load` or :meth:`Model.from_bytes`.
    """

    def __init__(self, handle):
        if not isinstance(handle, _petrel._Model):
            raise TypeError("use petrel.Model.load(path) or petrel.Model.from_bytes(data)")
        self._handle = handle
        self._info = None
        self._vocab = None
        self._target_vocab = None
        self._target_index = None

    @classmethod
    def load(cls, path, *, threads=1, isa=None, activation_scales="dynamic", workers=1):
        """Maps `path` read-only and verifies it.

        threads: intra-op threads per session (0: one per core of this machine).
        isa: the kernel path ("scalar", "avx2", "avxvnni", "avx512", "neon", "dotprod",
          "i8mm"); None: the PETREL_ISA environment variable, else the best this CPU runs.
        activation_scales: "dynamic" or "file" (a Marian int8 model's static scales).
        workers: translation sessions (inter-op, each with `threads` threads) for
          :meth:`translate` of many inputs.
        """
        path = os.fspath(path)
        handle = _load(lambda: _petrel._Model.load(path, isa or "", threads, activation_scales, workers), path)
        return cls(handle)

    @classmethod
    def from_bytes(cls, data, *, name="<memory>", threads=1, isa=None, activation_scales="dynamic", workers=1):
        """Loads a model file's bytes (any bytes-like object; they are copied)."""
        return cls(_petrel._Model.load_bytes(data, name, isa or "", threads, activation_scales, workers))

    def share(self):
        """A Model on the same loaded file (no copy) with sessions of its own: for calls
        from several threads at once (each Model runs one call of a kind at a time)."""
        return Model(self._handle.share())

    def __repr__(self):
        info = self.info
        return f"petrel.Model({self.name!r}, {info.architecture}, {info.model_type or info.tokenizer.kind})"

    # --- What the model is -----------------------------------------------------------

    @property
    def name(self):
        """The path the model was loaded from (or the name given to from_bytes)."""
        return self._handle.name

    @property
    def info(self):
        """The file's ModelInfo (a Record: attributes and dict keys, as in types.h)."""
        if self._info is None:
            self._info = self._handle.info()
        return self._info

    @property
    def threads(self):
        return self._handle.threads

    @property
    def workers(self):
        return self._handle.workers

    @property
    def isa(self):
        """The kernel path the model's sessions run."""
        return self._handle.isa()

    @property
    def activation_scales(self):
        return self._handle.activation_scales

    @property
    def active_calls(self):
        """Calls of this model running in the engine now (without the GIL)."""
        return self._handle.active_calls

    @property
    def vocab(self):
        """The (source) vocabulary: id -> token, as the model file stores it."""
        if self._vocab is None:
            self._vocab = self._handle.vocab()
        return self._vocab

    @property
    def target_vocab(self):
        """The output vocabulary: id -> token (the same as vocab unless the model has its own)."""
        if self._target_vocab is None:
            self._target_vocab = self._handle.target_vocab()
        return self._target_vocab

    def verify(self):
        """Reads the whole data section and checks the converter's CRC-32 (petrel.FormatError
        when they differ; petrel.UnsupportedError for a file that records none)."""
        self._handle.verify_data()

    # --- Text ------------------------------------------------------------------------

    def tokenize(self, text, source_language=None):
        """The tokens the model reads for `text` (Record: pieces, ids, ranges as str offsets)."""
        return self._handle.tokenize(text, source_language or "")

    def encode(self, text):
        """The ids the encoder reads for `text`, EOS appended."""
        return self._handle.encode_text(text)

    def decode(self, ids):
        """Output ids as text (special tokens skipped)."""
        return self._handle.decode_text(list(ids))

    def tokens(self, ids):
        """The output token of each id."""
        return self._handle.output_tokens(list(ids))

    def _target_ids(self, pieces):
        if self._target_index is None:
            index = {}
            for i, token in enumerate(self.target_vocab):
                index.setdefault(token, i)
            self._target_index = index
        ids = []
        for piece in pieces:
            if piece not in self._target_index:
                raise ValueError(f"target_prefix: {piece!r} is not a token of the model's target vocabulary")
            ids.append(self._target_index[piece])
        return ids

    def _translate_options(self, options):
        prefix = options.get("target_prefix")
        if prefix is not None and not isinstance(prefix, str) and any(isinstance(t, str) for t in prefix):
            options["target_prefix"] = self._target_ids(prefix)
        quality = options.get("quality_model")
        if quality is not None and isinstance(quality, os.PathLike):
            options["quality_model"] = os.fspath(quality)
        return options

    # --- Translation -------------------------------------------------------------------

    def translate(self, texts, *, stream=False, on_token=None, **options):
        """Translates a text (str: one result) or a list of texts (a list of results).

        Options (TranslateOptions): beam_size, n_best, max_new_tokens, max_length_factor,
        min_new_tokens, length_penalty, beam_stop ("default", "heuristic", "first-k"),
        use_shortlist, kv_cache_f16, target_prefix (ids, or the target vocabulary's tokens),
        target_language, source_language, alignment, alignment_layer, alignment_head,
        token_scores, quality_scores, quality_model (a path or petrel.QualityModel), html,
        lookup_ngram and max_draft_tokens (speculative decoding for greedy search: see
        set_draft_model; the same translations, faster where the drafts are right).
        BatchOptions: max_batch_tokens, max_batch_size, window, split_sentences, split_mode
        ("text", "sentence", "paragraph", "wrapped_text"), limit_by_longest_sentence,
        shortlist_of_input, priority_inputs, cancel (petrel.CancelFlag), cache
        (petrel.TranslationCache).

        Each result is a Record: text (the best translation), hypotheses (text, score, ids,
        pieces, ended_on_eos, alignment, token_scores), input (pieces, ids, ranges),
        sentences, source_html. Ranges are offsets into the Python str.

        stream=True: a generator of token events (Records: input, text, text_delta,
        text_restarted, final, provisional, ids, piece) as the translation grows; its
        return value is the list of results. Closing it stops the engine. on_token: a
        callable given each event (return False to stop that input). Streaming runs on
        one session, without BatchOptions.
        """
        _check_stream(stream, on_token)
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        options = self._translate_options(options)
        return _batch_call(lambda callback: self._handle.translate_text(batch, options, callback), single, stream,
                           on_token)

    def translate_ids(self, inputs, *, stream=False, on_token=None, **options):
        """Translates token ids (a list of ids: one result; a list of lists: a list), used
        verbatim (give the EOS). Results are Records of hypotheses (ids, score,
        ended_on_eos, alignment, token_scores). Options and streaming as translate()."""
        _check_stream(stream, on_token)
        batch, single = _id_batch(inputs)
        options = self._translate_options(options)
        return _batch_call(lambda callback: self._handle.translate_ids(batch, options, callback), single, stream,
                           on_token)

    def resolve_translate_options(self, **options):
        """The options translate() would use: unset ones filled from the model's defaults."""
        return self._handle.resolve_translate_options(self._translate_options(options))

    def last_translate_timings(self):
        """The last streamed translation's timings (None before one)."""
        return self._handle.last_translate_timings()

    def last_batch_totals(self):
        """The last translate() call's totals (None before one)."""
        return self._handle.last_batch_totals()

    def set_draft_model(self, draft):
        """Speculative decoding's draft model for this model's calls (None: none).

        A language model drafts for a language model, a translation model (attention
        decoder layers) for a translation model; both need this model's vocabulary, id for
        id (another is refused with petrel.InvalidArgumentError naming both). Its greedy
        tokens are drafts, checked by one pass of this model, so outputs do not change.
        Used where lookup_ngram's prompt lookup finds nothing; the timings and totals count
        verifications, drafted_tokens, accepted_tokens (and draft_model_tokens).
        """
        if draft is not None and not isinstance(draft, Model):
            raise TypeError(f"draft must be a petrel.Model or None, not {type(draft).__name__}")
        self._handle.set_draft_model(None if draft is None else draft._handle)

    # --- Generation ----------------------------------------------------------------------

    def generate(self, prompt, *, stream=False, on_token=None, kv_cache=None, **options):
        """Continues a prompt with a language model.

        prompt: text (encoded with the model's tokenizer; the result is a Record with
        text, ids, ended_on_eos, ended_on_stop, prompt_tokens, reused_tokens), a list of
        ids (used verbatim; a Record with ids, ended_on_eos, reused_tokens) or a list of
        such lists (a list of Records).

        Options (GenerateOptions): max_new_tokens, do_sample, temperature, top_k, top_p,
        min_p, repetition_penalty, seed, ignore_eos, kv_cache_f16, kv_cache_int8 (or
        kv_cache="f32"/"f16"/"int8"), stop (a str or a list), grammar (GBNF), json_schema
        (a str or a dict), lookup_ngram and max_draft_tokens (speculative decoding: drafts
        from prompt lookup over the prompt and output, or the draft model of
        set_draft_model, checked by one forward; the same ids, faster where they are right).

        stream=True: a generator of text deltas (a text prompt) or of token ids (an ids
        prompt), whose return value is the result. Closing it stops the engine.
        """
        _check_stream(stream, on_token)
        options = _generate_options(options, kv_cache)
        if isinstance(prompt, str):
            if stream:
                return _text_deltas(options, lambda callback: self._handle.generate_text(prompt, options, callback))
            return self._handle.generate_text(prompt, options, on_token)
        prompts, single = _id_batch(prompt)
        return _batch_call(lambda callback: self._handle.generate_ids(prompts, options, callback), single, stream,
                           on_token, events_as=_new_ids)

    def resolve_generate_options(self, kv_cache=None, **options):
        """The options generate() would use: unset ones filled from the model's defaults."""
        return self._handle.resolve_generate_options(_generate_options(options, kv_cache))

    def last_generate_timings(self):
        """The last generation's timings (None before one)."""
        return self._handle.last_generate_timings()

    def apply_chat_template(self, messages, add_generation_prompt=True, template_flags=None):
        """The model's chat template applied to messages ({"role", "content"} dicts), as
        transformers' apply_chat_template(tokenize=False) renders it."""
        return self._handle.apply_chat_template(messages, add_generation_prompt, template_flags)

    @property
    def max_prompt_bytes(self):
        """The longest prompt text this model takes."""
        return self._handle.max_prompt_bytes()

    def set_prompt_cache_bytes(self, budget):
        """Keeps the KV state after each prompt, up to `budget` bytes (0: off), so a later
        prompt sharing its beginning runs only the rest."""
        self._handle.set_prompt_cache_bytes(budget)

    def prompt_cache_stats(self):
        return self._handle.prompt_cache_stats()

    def save_prompt_cache(self, path):
        """Writes the state after the last prompt (kept by the prompt cache) to `path`."""
        self._handle.save_prompt_cache(os.fspath(path))

    def load_prompt_cache(self, path):
        """Reads a file save_prompt_cache wrote (verified) into the prompt cache."""
        path = os.fspath(path)
        _load(lambda: self._handle.load_prompt_cache(path), path)

    def conversation(self, system=None, template_flags=None):
        """A new :class:`Conversation` with this model."""
        return Conversation(self, system=system, template_flags=template_flags)


def _event_values(events, field, value):
    """Yields value(event[field]) of each event but the final one whose `field` is not
    empty; returns what `events` returns. Closing it closes `events`."""
    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            return stop.value
        if not event["final"] and event[field]:
            try:
                yield value(event[field])
            except GeneratorExit:
                events.close()
                raise


def _deltas(events):
    return _event_values(events, "text_delta", lambda delta: delta)


def _new_ids(events):
    return _event_values(events, "ids", lambda ids: ids[-1])


class Conversation:
    """A multi-turn chat with a language model: each reply renders the whole conversation
    with the model's chat template but runs only the tokens its KV cache does not hold."""

    def __init__(self, model, system=None, template_flags=None):
        if not isinstance(model, Model):
            raise TypeError("Conversation(model): model must be a petrel.Model")
        self.model = model
        self._conversation = _petrel._Conversation(model._handle, system or "", template_flags)

    def reply(self, message, *, stream=False, on_token=None, kv_cache=None, **options):
        """Adds the user's message and generates the reply (a Record: text, ids,
        ended_on_eos, ended_on_stop, prompt_tokens, reused_tokens). Options as
        Model.generate; stream=True yields text deltas and returns the Record."""
        _check_stream(stream, on_token)
        options = _generate_options(options, kv_cache)
        if stream:
            return _text_deltas(options, lambda callback: self._conversation.reply(message, options, callback))
        return self._conversation.reply(message, options, on_token)

    def make_room(self, message, new_tokens):
        """Drops the oldest exchanges when `message` and `new_tokens` would not fit; how many."""
        return self._conversation.make_room(message, new_tokens)

    @property
    def messages(self):
        """The conversation so far: {"role", "content"} dicts."""
        return self._conversation.messages()


def translate_via_pivot(first, second, texts, **options):
    """Source -> pivot -> target through two models (bergamot's translateViaPivoting).
    Options as Model.translate (without streaming); results as Model.translate's."""
    single = isinstance(texts, str)
    results = _petrel.translate_via_pivot(first._handle, second._handle, [texts] if single else list(texts),
                                          first._translate_options(options))
    return results[0] if single else results
