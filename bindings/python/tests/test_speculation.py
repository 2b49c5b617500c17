"""Speculative decoding through Petrel's API: lookup_ngram / max_draft_tokens on generate
and translate, Model.set_draft_model, and the counts in the timings and totals. Drafts
never change an output, so each test compares a call with drafts with the same call
without them (the engine's own tests compare those with plain decoding in depth)."""

import pytest

import petrel
from conftest import SOURCE_DIR, _convert


@pytest.fixture(scope="session")
def chat_f32(models_dir):
    """The tiny chat model with f32 weights: the same tokens as `chat`, other numbers (drafts
    both right and wrong)."""
    checkpoint = SOURCE_DIR / "tests" / "fixtures" / "decoder_only" / "gemma3_chat"
    return petrel.Model.load(_convert(models_dir, checkpoint, "chat-f32.petrel", "--quantize", "f32",
                                      "--embeddings", "f32"))


@pytest.fixture(scope="session")
def en_de_f32(models_dir):
    return petrel.Model.load(_convert(models_dir, SOURCE_DIR / "tools" / "en-de-model", "en-de-f32.petrel",
                                      "--quantize", "f32", "--embeddings", "f32"))


PROMPT = [3 + (i * 7) % 11 for i in range(40)]


def test_generate_with_lookup_equals_without(chat_f32):
    chat = chat_f32  # f32 weights: lookup's drafts for this prompt are accepted in part
    plain = chat.generate(PROMPT, max_new_tokens=100, do_sample=False, ignore_eos=True)
    counts = chat.last_generate_timings()
    assert counts.verifications == 0 and counts.drafted_tokens == 0
    drafted = chat.generate(PROMPT, max_new_tokens=100, do_sample=False, ignore_eos=True, lookup_ngram=4,
                            max_draft_tokens=8)
    assert drafted.ids == plain.ids
    counts = chat.last_generate_timings()
    assert counts.verifications > 0
    assert 0 < counts.accepted_tokens <= counts.drafted_tokens
    assert counts.draft_model_tokens == 0
    assert counts.generated_tokens == 100
    # Text and seeded sampling, streamed: the same deltas.
    options = dict(max_new_tokens=40, do_sample=True, temperature=0.7, seed=5, ignore_eos=True)
    want = chat.generate("a b a b a b a b", **options)
    got = "".join(chat.generate("a b a b a b a b", stream=True, lookup_ngram=2, **options))
    assert got == want.text
    assert chat.resolve_generate_options(lookup_ngram=3).lookup_ngram == 3


def test_generate_with_a_draft_model_equals_without(chat, chat_f32):
    plain = chat.generate(PROMPT, max_new_tokens=50, do_sample=False, ignore_eos=True)
    chat.set_draft_model(chat_f32)
    try:
        drafted = chat.generate(PROMPT, max_new_tokens=50, do_sample=False, ignore_eos=True)
        counts = chat.last_generate_timings()
        conversation = petrel.Conversation(chat)
        reply = conversation.reply("hello", max_new_tokens=20, do_sample=False)
    finally:
        chat.set_draft_model(None)
    assert drafted.ids == plain.ids
    assert counts.verifications > 0 and counts.draft_model_tokens > 0
    assert reply.text == petrel.Conversation(chat).reply("hello", max_new_tokens=20, do_sample=False).text
    chat.generate(PROMPT, max_new_tokens=10)
    assert chat.last_generate_timings().draft_model_tokens == 0


def test_translate_with_lookup_or_a_draft_model_equals_without(en_de, en_de_f32, sentences):
    texts = sentences[:6]
    plain = en_de.translate(texts, beam_size=1)
    assert en_de.last_batch_totals().verifications == 0
    drafted = en_de.translate(texts, beam_size=1, lookup_ngram=2)
    assert [r.hypotheses[0].ids for r in drafted] == [r.hypotheses[0].ids for r in plain]
    assert [r.hypotheses[0].score for r in drafted] == [r.hypotheses[0].score for r in plain]
    totals = en_de.last_batch_totals()
    assert totals.verifications > 0 and 0 < totals.accepted_tokens <= totals.drafted_tokens
    en_de.set_draft_model(en_de_f32)
    try:
        drafted = en_de.translate(texts, beam_size=1, max_draft_tokens=4)
        totals = en_de.last_batch_totals()
        # A streamed translation (the model's Translator) drafts too.
        streamed = list(en_de.translate(texts[0], beam_size=1, stream=True))
        timings = en_de.last_translate_timings()
    finally:
        en_de.set_draft_model(None)
    assert [r.text for r in drafted] == [r.text for r in plain]
    assert totals.verifications > 0 and totals.accepted_tokens > 0
    assert streamed[-1].final
    assert timings.draft_model_tokens > 0 and timings.verifications > 0
    en_de.translate(texts[0], beam_size=1, on_token=lambda event: True)
    assert en_de.last_translate_timings().draft_model_tokens == 0


@pytest.fixture(scope="session")
def llama(models_dir):
    """A tiny Llama: a language model with another vocabulary than `chat`'s."""
    checkpoint = SOURCE_DIR / "tests" / "fixtures" / "decoder_only" / "llama3"
    return petrel.Model.load(_convert(models_dir, checkpoint, "llama3.petrel"))


def test_speculation_errors_by_name(chat, en_de, llama):
    with pytest.raises(petrel.InvalidArgumentError, match="lookup_ngram"):
        chat.generate("hi", lookup_ngram=1000)
    with pytest.raises(petrel.InvalidArgumentError, match="max_draft_tokens"):
        chat.generate("hi", lookup_ngram=2, max_draft_tokens=1000)
    with pytest.raises(petrel.InvalidArgumentError, match="lookup_ngram"):
        en_de.translate("Hello.", beam_size=4, lookup_ngram=2)
    # A model of another kind or vocabulary cannot draft; a refused one changes nothing.
    with pytest.raises(petrel.InvalidArgumentError, match="cannot draft for"):
        chat.set_draft_model(llama)
    with pytest.raises(petrel.InvalidArgumentError, match="not a decoder-only model"):
        chat.set_draft_model(en_de)
    with pytest.raises(petrel.InvalidArgumentError, match="not a translation"):
        en_de.set_draft_model(chat)
    with pytest.raises(TypeError, match="petrel.Model"):
        chat.set_draft_model("model.petrel")
    chat.generate(PROMPT, max_new_tokens=8)
    assert chat.last_generate_timings().draft_model_tokens == 0
