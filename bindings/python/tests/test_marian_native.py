"""A Marian C++ model as Firefox ships it (a tiny one, tests/fixtures/marian-native): what
needs its tokenizer's byte ranges (sentences, HTML, quality scores, pivoting), its
shortlist and its int8 activation scales, through the Python API."""

import pytest

import petrel


@pytest.fixture(scope="module")
def native(native_path):
    return petrel.Model.load(native_path)


def test_sentences_point_into_the_str(native):
    text = "Die Datei wurde nicht gefunden. Öffne die Datei »ä«!"
    result = native.translate(text, beam_size=1, split_sentences=True, alignment=True, token_scores=True)
    assert len(result.sentences) >= 1
    for sentence in result.sentences:
        begin, end = sentence.source
        assert 0 <= begin < end <= len(text)
        for token_begin, token_end in sentence.source_tokens:
            assert begin <= token_begin <= token_end <= end
        t_begin, t_end = sentence.target
        assert 0 <= t_begin <= t_end <= len(result.text)
        assert len(sentence.alignment) == len(sentence.target_tokens)
    assert result.input.ranges and all(0 <= b <= e <= len(text) for b, e in result.input.ranges)


def test_html_and_quality_scores(native):
    result = native.translate("<p>The <b>file</b> was not found.</p>", html=True, quality_scores=True, beam_size=1)
    assert "<b>" in result.text and "</b>" in result.text and result.text.startswith("<p>")
    assert result.source_html.startswith("<p>")
    quality = result.sentences[0].quality
    assert quality is not None and len(quality.words) == len(quality.word_scores)
    plain = native.translate("The file was not found.", quality_scores=True, beam_size=1)
    assert plain.sentences[0].quality.word_scores


def test_pivot(native):
    text = "The file was not found."
    twice = petrel.translate_via_pivot(native, native, text, beam_size=1)
    once = native.translate(text, beam_size=1).text
    assert twice.text == native.translate(once, beam_size=1).text
    assert twice.sentences and twice.input.ranges


def test_shortlist_through_both_apis(native, native_path):
    assert native.info.shortlist.present
    text = "The file was not found."
    with_list = native.translate(text, beam_size=1, use_shortlist=True)
    translator = petrel.Translator(native_path)
    tokens = native.tokenize(text).pieces
    result = translator.translate_batch([tokens], beam_size=1, use_vmap=True)
    assert result[0].hypotheses[0] == with_list.hypotheses[0].pieces


def test_static_activation_scales(native_int8_path):
    model = petrel.Model.load(native_int8_path, activation_scales="file")
    assert model.info.static_activation_scales and model.activation_scales == "file"
    assert model.translate("The file was not found.", beam_size=1).text
