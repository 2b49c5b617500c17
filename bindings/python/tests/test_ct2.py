"""CTranslate2's Translator surface on Petrel: token strings in and out as CTranslate2's
opus-mt guide passes them, the same translations as Petrel's text API, every argument
handled (supported or refused by name)."""

import os
import warnings

import pytest

import petrel
from conftest import SOURCE_DIR, times_seen_busy


@pytest.fixture(scope="module")
def translator(en_de_path):
    return petrel.Translator(en_de_path, device="cpu", inter_threads=1, intra_threads=1)


def pieces(model, text):
    """The source tokens as CTranslate2's opus-mt guide makes them: the model's
    SentencePiece pieces and "</s>"."""
    return model.tokenize(text).pieces


def test_pieces_are_sentencepiece_pieces(en_de, sentences):
    spm = pytest.importorskip("sentencepiece")
    checkpoint = os.environ.get("PETREL_EN_DE_CHECKPOINT", str(SOURCE_DIR / "tools" / "en-de-model"))
    processor = spm.SentencePieceProcessor(model_file=os.path.join(checkpoint, "source.spm"))
    for text in sentences[:8]:
        assert processor.encode(text, out_type=str) + ["</s>"] == pieces(en_de, text)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_greedy_equals_text_api(translator, en_de, sentences):
    batch = [pieces(en_de, text) for text in sentences]
    results = translator.translate_batch(batch, beam_size=1, return_scores=True)
    expected = en_de.translate(sentences, beam_size=1, max_new_tokens=257)
    assert len(results) == len(sentences)
    for result, text_result in zip(results, expected):
        best = text_result.hypotheses[0]
        assert result.hypotheses[0] == best.pieces
        assert result.scores[0] == pytest.approx(best.score, rel=1e-9)
        assert result[0]["tokens"] == best.pieces  # CTranslate2's old dict access (deprecated)


def test_beam_search_follows_ctranslate2s_stop_rule(translator, en_de, sentences):
    batch = [pieces(en_de, text) for text in sentences[:6]]
    results = translator.translate_batch(batch, beam_size=4, num_hypotheses=4, length_penalty=0.2,
                                         return_scores=True, replace_unknowns=True)
    expected = en_de.translate(sentences[:6], beam_size=4, n_best=4, length_penalty=0.2, beam_stop="first_k",
                               max_new_tokens=257)
    for result, text_result in zip(results, expected):
        assert len(result.hypotheses) == len(result.scores) == len(text_result.hypotheses)
        assert result.scores == sorted(result.scores, reverse=True)
        assert result.hypotheses == [h.pieces for h in text_result.hypotheses]


def test_batching_and_asynchronous_give_the_same(translator, en_de, sentences):
    batch = [pieces(en_de, text) for text in sentences[:10]]
    whole = translator.translate_batch(batch, beam_size=2)
    by_examples = translator.translate_batch(batch, beam_size=2, max_batch_size=3)
    by_tokens = translator.translate_batch(batch, beam_size=2, max_batch_size=40, batch_type="tokens")
    pending = translator.translate_batch(batch, beam_size=2, asynchronous=True)
    assert [r.hypotheses for r in by_examples] == [r.hypotheses for r in whole]
    assert [r.hypotheses for r in by_tokens] == [r.hypotheses for r in whole]
    assert [p.result().hypotheses for p in pending] == [r.hypotheses for r in whole]
    assert all(p.done() for p in pending)
    iterated = list(translator.translate_iterable(iter(batch), max_batch_size=2, beam_size=2))
    assert [r.hypotheses for r in iterated] == [r.hypotheses for r in whole]


def test_target_prefix_per_example(translator, en_de):
    source = [pieces(en_de, "The file could not be opened."), pieces(en_de, "Open the file.")]
    results = translator.translate_batch(source, [["▁Die", "▁Datei"], None], beam_size=1)
    assert results[0].hypotheses[0][:2] == ["▁Die", "▁Datei"]
    alone = translator.translate_batch([source[1]], beam_size=1)
    assert results[1].hypotheses == alone[0].hypotheses


def test_attention_end_token_and_unknowns(translator, en_de):
    source = pieces(en_de, "The file could not be opened.")
    result = translator.translate_batch([source], beam_size=1, return_attention=True, return_end_token=True)[0]
    hypothesis = result.hypotheses[0]
    assert hypothesis[-1] == "</s>"
    assert len(result.attention[0]) == len(hypothesis)
    assert all(len(row) == len(source) for row in result.attention[0])
    # An unknown source token is read as <unk>, as CTranslate2 reads it.
    unknown = translator.translate_batch([["▁zzqqxx-not-a-piece", "</s>"]], beam_size=1)
    as_unk = translator.translate_batch([["<unk>", "</s>"]], beam_size=1)
    assert unknown[0].hypotheses == as_unk[0].hypotheses


def test_empty_input_and_empty_batch(translator):
    assert translator.translate_batch([]) == []
    result = translator.translate_batch([[]], [["▁Die"]], return_scores=True)[0]
    assert result.hypotheses == [["▁Die"]] and result.scores == [0.0]


def test_max_decoding_length_ends_without_eos(translator, en_de):
    source = pieces(en_de, "The file could not be opened because the disk is full.")
    result = translator.translate_batch([source], beam_size=1, max_decoding_length=3, return_end_token=True)[0]
    assert len(result.hypotheses[0]) == 3 and "</s>" not in result.hypotheses[0]


def test_generate_tokens_and_callback(translator, en_de):
    source = pieces(en_de, "The file could not be opened.")
    expected = translator.translate_batch([source], beam_size=1)[0].hypotheses[0]
    steps = list(translator.generate_tokens(source))
    assert [s.token for s in steps[:-1]] == expected
    assert steps[-1].token == "</s>" and steps[-1].is_last
    assert [s.step for s in steps] == list(range(len(steps)))
    seen = []
    translator.translate_batch([source], beam_size=1, callback=lambda step: seen.append(step) or False)
    assert [s.token_id for s in seen] == [s.token_id for s in steps]
    stopped = translator.translate_batch([source], beam_size=1, callback=lambda step: step.step == 1)
    assert stopped[0].hypotheses[0] == expected[:2]
    with pytest.raises(ValueError, match="callback"):
        translator.translate_batch([source], beam_size=2, callback=lambda step: False)


def test_generate_tokens_close_stops(translator, en_de):
    source = pieces(en_de, "The file could not be opened.")
    steps = translator.generate_tokens(source, max_decoding_length=400, min_decoding_length=400)
    first = [next(steps) for _ in range(2)]
    steps.close()
    assert first[0].step == 0 and not first[1].is_last
    assert translator.model.active_calls == 0
    assert translator.model.last_translate_timings().decode_steps < 400


@pytest.mark.parametrize("argument, value", [
    ("patience", 2), ("coverage_penalty", 0.2), ("repetition_penalty", 1.2), ("no_repeat_ngram_size", 3),
    ("disable_unk", True), ("suppress_sequences", [["▁Datei"]]), ("end_token", "▁Datei"), ("prefix_bias_beta", 0.5),
    ("return_logits_vocab", True), ("return_alternatives", True), ("min_alternative_expansion_prob", 0.1),
    ("sampling_topk", 10),
])
def test_refused_arguments_are_named(translator, en_de, argument, value):
    with pytest.raises(petrel.UnsupportedError, match=argument) as raised:
        translator.translate_batch([pieces(en_de, "Open the file.")], **{argument: value})
    assert raised.value.status == "Unsupported"


def test_accepted_defaults_and_checks(translator, en_de):
    source = [pieces(en_de, "Open the file.")]
    # CTranslate2's defaults, given explicitly, are accepted.
    translator.translate_batch(source, patience=1, coverage_penalty=0, repetition_penalty=1, end_token="</s>",
                               sampling_topk=1, sampling_temperature=0.5, use_vmap=False, max_input_length=0)
    with pytest.raises(ValueError, match="hypotheses"):
        translator.translate_batch(source, beam_size=2, num_hypotheses=3)
    with pytest.raises(TypeError):
        translator.translate_batch(source, bogus_argument=1)
    with pytest.raises(petrel.InvalidArgumentError):  # the engine's: no shortlist in this file
        translator.translate_batch(source, use_vmap=True)


def test_translator_arguments(en_de_path, translator):
    assert translator.device == "cpu" and translator.num_translators == 1
    assert translator.compute_type == "int8_float32"  # petrel-convert's default weights
    with pytest.raises(petrel.UnsupportedError, match="device"):
        petrel.Translator(en_de_path, device="cuda")
    with pytest.raises(petrel.UnsupportedError, match="compute_type"):
        petrel.Translator(en_de_path, compute_type="float32")
    with pytest.raises(petrel.UnsupportedError, match="tensor_parallel"):
        petrel.Translator(en_de_path, tensor_parallel=True)
    with pytest.raises(petrel.NotFoundError):
        petrel.Translator(en_de_path + ".missing")
    with open(en_de_path, "rb") as f:
        from_files = petrel.Translator("in-memory", files={"model.petrel": f.read()}, inter_threads=2)
    source = [["▁Open", "▁file", "</s>"]]
    assert from_files.translate_batch(source)[0].hypotheses == translator.translate_batch(source)[0].hypotheses
    from_files.unload_model()
    assert not from_files.model_is_loaded
    with pytest.raises(RuntimeError, match="unloaded"):
        from_files.translate_batch(source)
    from_files.load_model()
    assert from_files.translate_batch(source)[0].hypotheses == translator.translate_batch(source)[0].hypotheses
    with pytest.raises(petrel.UnsupportedError, match="score_batch"):
        translator.score_batch(source, source)


def test_gil_released_in_translate_batch(translator, en_de, sentences):
    batch = [pieces(en_de, text) for text in sentences] * 2
    assert times_seen_busy(lambda: translator.num_active_batches > 0,
                           lambda: translator.translate_batch(batch, beam_size=4)) > 0


def test_deprecated_index_access_warns(translator):
    result = translator.translate_batch([["▁Open", "</s>"]], return_scores=True)[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert set(result[0]) == {"tokens", "score"}
    assert caught and issubclass(caught[0].category, DeprecationWarning)
    with pytest.raises(IndexError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result[5]
