"""Petrel's own API on a translation model: text in and out, every option reaching the
engine, streaming, cancellation, the GIL released, and the same outputs as petrel-run."""

import json
import subprocess

import pytest

import petrel
from conftest import times_seen_busy


def test_model_info_and_vocabulary(en_de):
    info = en_de.info
    assert info.architecture == "encoder-decoder"
    assert info["d_model"] == info.d_model == 256
    assert info.tokenizer.kind == "marian"
    assert len(en_de.vocab) == info.vocab_size
    assert len(en_de.target_vocab) == info.target_vocab_size
    assert en_de.vocab[info.eos_id] == "</s>"
    tokens = en_de.tokenize("Open the file.")
    assert tokens.pieces[-1] == "</s>"
    assert tokens.ids == en_de.encode("Open the file.")
    assert [en_de.vocab[i] for i in tokens.ids] == tokens.pieces
    assert en_de.tokens(tokens.ids) == tokens.pieces


def test_translate_matches_petrel_run(en_de, en_de_path, petrel_run, sentences):
    """The package and the command-line tool are the same engine: same ids, scores and text."""
    texts = sentences[:8]
    args = [petrel_run, en_de_path, "--json", "--beam", "2"]
    for text in texts:
        args += ["--text", text]
    expected = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)["results"]
    results = en_de.translate(texts, beam_size=2)
    assert len(results) == len(texts)
    for result, cli in zip(results, expected):
        best = cli["hypotheses"][0]
        assert result.hypotheses[0].ids == best["ids"]
        assert result.hypotheses[0].score == pytest.approx(best["score"], rel=1e-12, abs=1e-12)
        assert result.text == best["text"]
        assert result.input.ids == cli["input"]


def test_single_text_and_list(en_de):
    one = en_de.translate("The file could not be opened.", beam_size=1)
    many = en_de.translate(["The file could not be opened."], beam_size=1)
    assert isinstance(one, petrel.Record) and isinstance(many, list)
    assert one == many[0]
    assert one.text == one["text"] == one.hypotheses[0].text
    assert en_de.decode(one.hypotheses[0].ids) == one.text


def test_options_reach_the_engine(en_de):
    text = "The file could not be opened because the disk is full."
    result = en_de.translate(text, beam_size=4, n_best=3, alignment=True, token_scores=True)
    hyps = result.hypotheses
    assert len(hyps) == 3
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    for h in hyps:
        rows = len(h.ids) + (1 if h.ended_on_eos else 0)
        assert len(h.alignment) == rows and len(h.token_scores) == rows
        for row in h.alignment:
            assert len(row) == len(result.input.ids)
            assert sum(row) == pytest.approx(1.0, abs=1e-4)
    # max_new_tokens counts the final EOS, which this model forces at the last position.
    short = en_de.translate(text, beam_size=1, max_new_tokens=3)
    assert len(short.hypotheses[0].ids) == 2
    resolved = en_de.resolve_translate_options(beam_size=3, length_penalty=0.5, beam_stop="first-k")
    assert (resolved.beam_size, resolved.length_penalty, resolved.beam_stop) == (3, 0.5, "first-k")
    assert en_de.resolve_translate_options().beam_size == en_de.info.generation.num_beams


def test_target_prefix_as_ids_or_tokens(en_de):
    prefix = ["▁Die", "▁Datei"]
    ids = [en_de.target_vocab.index(p) for p in prefix]
    by_tokens = en_de.translate("The file could not be opened.", beam_size=1, target_prefix=prefix)
    by_ids = en_de.translate("The file could not be opened.", beam_size=1, target_prefix=ids)
    assert by_tokens == by_ids
    assert by_tokens.hypotheses[0].ids[:2] == ids


def test_batch_options_cache_and_split(en_de, sentences):
    cache = petrel.TranslationCache(1 << 20)
    first = en_de.translate(sentences[:6], beam_size=1, cache=cache, max_batch_size=2, window=4)
    again = en_de.translate(sentences[:6], beam_size=1, cache=cache)
    assert first == again
    stats = cache.stats()
    assert stats.hits == 6 and stats.entries == 6
    joined = " ".join(sentences[:3])
    split = en_de.translate(joined, beam_size=1, split_sentences=True, split_mode="text")
    assert split.text
    totals = en_de.last_batch_totals()
    assert totals.inputs == 1 and totals.sentences >= 1


def test_cancel_flag(en_de, sentences):
    cancel = petrel.CancelFlag()
    cancel.set()
    with pytest.raises(petrel.CancelledError) as raised:
        en_de.translate(sentences[:4], cancel=cancel)
    assert raised.value.status == "Cancelled"


def test_streaming_equals_translation(en_de, sentences):
    texts = sentences[:3]
    expected = en_de.translate(texts, beam_size=1)
    stream = en_de.translate(texts, beam_size=1, stream=True)
    deltas = {i: "" for i in range(len(texts))}
    finals = {}
    while True:
        try:
            event = next(stream)
        except StopIteration as stop:
            results = stop.value
            break
        if event.final:
            finals[event.input] = event.text
        elif event.text_restarted:
            deltas[event.input] = event.text
        else:
            deltas[event.input] += event.text_delta
    assert results == expected
    for i, result in enumerate(expected):
        assert finals[i] == result.text
        assert deltas[i] == result.text


def test_on_token_can_stop_an_input(en_de):
    seen = []

    def on_token(event):
        seen.append(event)
        return len(event.ids) < 2  # stop each input once it has two tokens

    result = en_de.translate("The file could not be opened because the disk is full.", beam_size=1,
                             on_token=on_token)
    assert len(result.hypotheses[0].ids) == 2 and not result.hypotheses[0].ended_on_eos
    assert seen[-1].final


def test_callback_exception_propagates(en_de):
    def on_token(event):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        en_de.translate("Open the file.", on_token=on_token)
    assert en_de.translate("Open the file.", beam_size=1).text  # the session still works


def test_closing_the_stream_stops_the_engine(en_de):
    # min_new_tokens keeps the translation going for 500 steps unless it is stopped.
    text = "The file could not be opened."
    stream = en_de.translate(text, beam_size=1, min_new_tokens=500, max_new_tokens=500, stream=True)
    for count, _ in enumerate(stream, 1):
        if count == 3:
            break
    stream.close()
    assert en_de.active_calls == 0  # close() returned after the engine did
    steps = en_de.last_translate_timings().decode_steps
    assert steps < 500
    full = en_de.translate(text, beam_size=1, min_new_tokens=500, max_new_tokens=500, on_token=lambda e: True)
    assert len(full.hypotheses[0].ids) == 499  # and the EOS this model forces at its last position


def test_stream_refuses_batch_options(en_de):
    with pytest.raises(ValueError, match="split_sentences"):
        next(en_de.translate("Open the file.", stream=True, split_sentences=True))


def test_gil_is_released_while_translating(en_de, sentences):
    """Another Python thread runs while the engine translates: it sees the call in progress,
    which it could not if the call held the GIL (active_calls is raised and lowered with the
    GIL held, around the part that runs without it)."""
    model = en_de.share()
    assert times_seen_busy(lambda: model.active_calls > 0, lambda: model.translate(sentences * 2, beam_size=4)) > 0


def test_translate_ids(en_de):
    ids = en_de.encode("Open the file.")
    by_ids = en_de.translate_ids(ids, beam_size=1)
    by_text = en_de.translate("Open the file.", beam_size=1)
    assert by_ids.hypotheses[0].ids == by_text.hypotheses[0].ids
    streamed = list(en_de.translate_ids([ids], beam_size=1, stream=True))
    assert streamed[-1].final and streamed[-1].ids == by_ids.hypotheses[0].ids


def test_pivot_needs_token_ranges(en_de):
    # Pivoting composes alignments through the pivot text's bytes: a Hugging Face Marian
    # model's tokenizer does not give them, and the engine says so.
    with pytest.raises(petrel.UnsupportedError, match="byte ranges"):
        petrel.translate_via_pivot(en_de, en_de, "Open the file.", beam_size=1)


def test_hard_alignment():
    assert petrel.hard_alignment([[0.1, 0.9], [0.8, 0.2]]) == [(1, 0), (0, 1)]
