"""Language models: Petrel's generate / Conversation / prompt caches, and CTranslate2's
Generator surface, on a tiny Gemma 3 model (random weights: outputs are arbitrary, so the
tests compare paths through the engine with each other, never with fixed text)."""

import pytest

import petrel
from conftest import times_seen_busy


def test_generate_text_and_ids(chat):
    text = chat.generate("hello", max_new_tokens=12)
    assert text.prompt_tokens > 0 and len(text.ids) <= 12
    prompt_ids = chat.encode("hello")
    by_ids = chat.generate(prompt_ids, max_new_tokens=12)
    assert by_ids.ids == text.ids
    assert chat.decode(text.ids) == text.text or text.ended_on_stop
    assert chat.last_generate_timings().generated_tokens == len(text.ids)


def test_streaming_equals_generation(chat):
    expected = chat.generate("hello", max_new_tokens=20)
    stream = chat.generate("hello", max_new_tokens=20, stream=True)
    deltas = []
    while True:
        try:
            deltas.append(next(stream))
        except StopIteration as stop:
            result = stop.value
            break
    assert "".join(deltas) == expected.text
    assert result == expected
    ids = list(chat.generate([chat.encode("hello")], max_new_tokens=20, stream=True))
    assert ids == expected.ids


def test_closing_the_stream_stops_generation(chat):
    stream = chat.generate([2, 10, 11], max_new_tokens=400, ignore_eos=True, stream=True)
    first = [next(stream) for _ in range(2)]
    stream.close()
    assert len(first) == 2
    assert chat.active_calls == 0  # the engine stopped before close() returned
    generated = chat.last_generate_timings().generated_tokens
    assert generated <= 400
    # A stop asked by a callback is exact: the engine's count says where it stopped.
    stopped = chat.generate([2, 10, 11], max_new_tokens=400, ignore_eos=True, on_token=lambda e: len(e.ids) < 5)
    assert len(stopped.ids) == 5 and not stopped.ended_on_eos
    assert chat.last_generate_timings().generated_tokens == 5


def test_seeds_reproduce(chat):
    draws = [chat.generate("hello", max_new_tokens=16, do_sample=True, temperature=1.5, seed=seed).ids
             for seed in (1, 2, 3, 1)]
    assert draws[0] == draws[3]
    assert len({tuple(d) for d in draws[:3]}) > 1
    resolved = chat.resolve_generate_options(do_sample=True, seed=7, kv_cache="int8")
    assert resolved.do_sample and resolved.seed == 7 and resolved.kv_cache_int8


def test_options_reach_the_engine(chat):
    grammar = 'root ::= "ab" | "ba"'
    constrained = chat.generate("hello", grammar=grammar, max_new_tokens=8)
    assert constrained.text in ("ab", "ba")
    for kv_cache in ("f32", "f16", "int8"):
        assert chat.generate("hello", max_new_tokens=4, kv_cache=kv_cache).ids
    free = chat.generate("hello", max_new_tokens=30)
    if len(free.text) > 2:
        stop = free.text[1:3]
        stopped = chat.generate("hello", max_new_tokens=30, stop=[stop])
        assert stopped.ended_on_stop and stop not in stopped.text
    with pytest.raises(ValueError, match="kv_cache"):
        chat.generate("hello", kv_cache="int4")
    with pytest.raises(TypeError, match="max_tokens"):
        chat.generate("hello", max_tokens=3)
    with pytest.raises(petrel.InvalidArgumentError):
        chat.generate("hello", grammar="root ::= (")


def test_conversation_reuses_its_cache(chat):
    conversation = petrel.Conversation(chat, system="Be brief.")
    first = conversation.reply("hi there", max_new_tokens=6)
    second = conversation.reply("and again", max_new_tokens=6)
    assert second.reused_tokens > 0 and second.prompt_tokens > first.prompt_tokens
    roles = [m["role"] for m in conversation.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    streamed = petrel.Conversation(chat, system="Be brief.")
    deltas = list(streamed.reply("hi there", max_new_tokens=6, stream=True))
    assert "".join(deltas) == first.text
    rendered = chat.apply_chat_template([{"role": "user", "content": "hi"}])
    assert rendered.endswith("<start_of_turn>model\n")


def test_prompt_cache_save_and_load(chat_path, tmp_path):
    model = petrel.Model.load(chat_path)
    model.set_prompt_cache_bytes(8 << 20)
    prompt = "the same long prompt, again and again"
    first = model.generate(prompt, max_new_tokens=4)
    again = model.generate(prompt, max_new_tokens=4)
    assert first.reused_tokens == 0 and again.reused_tokens > 0 and again.ids == first.ids
    assert model.prompt_cache_stats().entries >= 1
    saved = tmp_path / "prompt.cache"
    model.save_prompt_cache(saved)
    fresh = petrel.Model.load(chat_path)
    fresh.load_prompt_cache(saved)
    reused = fresh.generate(prompt, max_new_tokens=4)
    assert reused.reused_tokens > 0 and reused.ids == first.ids
    with pytest.raises(petrel.NotFoundError):
        fresh.load_prompt_cache(tmp_path / "missing.cache")


def test_gil_released_while_generating(chat):
    model = chat.share()

    def generate():
        for _ in range(20):
            model.generate([2, 10, 11], max_new_tokens=400, ignore_eos=True)

    assert times_seen_busy(lambda: model.active_calls > 0, generate) > 0


def test_wrong_kind_of_model(chat, en_de, chat_path, en_de_path):
    with pytest.raises(petrel.Error):
        en_de.generate("hello")
    with pytest.raises(petrel.Error):
        chat.translate("hello")
    with pytest.raises(petrel.InvalidArgumentError, match="Generator"):
        petrel.Translator(chat_path)
    with pytest.raises(petrel.InvalidArgumentError, match="Translator"):
        petrel.Generator(en_de_path)


# --- CTranslate2's Generator -------------------------------------------------------------------

@pytest.fixture(scope="module")
def generator(chat_path):
    return petrel.Generator(chat_path, intra_threads=1)


def test_generate_batch_greedy_equals_generate(generator, chat):
    tokens = ["<bos>", "h", "e", "l", "l", "o"]
    ids = [chat.vocab.index(t) for t in tokens]
    expected = chat.generate(ids, max_new_tokens=10, do_sample=False)
    result = generator.generate_batch([tokens], max_length=10, include_prompt_in_result=False)[0]
    eos = set(chat.info.lm.eos_ids)
    expected_ids = [i for i in expected.ids]
    while expected_ids and expected_ids[-1] in eos:
        expected_ids.pop()
    assert result.sequences_ids[0] == expected_ids
    assert result.sequences[0] == [chat.vocab[i] for i in expected_ids]
    # With the prompt: the prompt after the BOS, then the continuation, within max_length.
    with_prompt = generator.generate_batch([tokens], max_length=10 + len(tokens) - 1)[0]
    assert with_prompt.sequences[0] == tokens[1:] + result.sequences[0]


def test_generate_tokens_equals_generate_batch(generator):
    tokens = ["<bos>", "a", "b"]
    batch = generator.generate_batch([tokens], max_length=8, include_prompt_in_result=False,
                                     return_end_token=True)[0]
    steps = list(generator.generate_tokens(tokens, max_length=8))
    assert [s.token_id for s in steps] == batch.sequences_ids[0]
    assert steps[-1].is_last and not any(s.is_last for s in steps[:-1])


def test_end_token_and_callback(generator):
    tokens = ["<bos>", "a", "b"]
    free = generator.generate_batch([tokens], max_length=12, include_prompt_in_result=False)[0].sequences_ids[0]
    if len(free) >= 3:
        end = free[2]
        ended = generator.generate_batch([tokens], max_length=12, include_prompt_in_result=False, end_token=[end],
                                         return_end_token=True)[0].sequences_ids[0]
        assert ended == free[:free.index(end) + 1]
    seen = []
    generator.generate_batch([tokens], max_length=5, include_prompt_in_result=False,
                             callback=lambda step: seen.append(step.token_id) or len(seen) == 3)
    assert len(seen) == 3


def test_sampling_and_seeds(generator):
    tokens = ["<bos>", "a", "b"]
    petrel.set_random_seed(42)
    first = generator.generate_batch([tokens], max_length=10, sampling_topk=20, sampling_temperature=1.5,
                                     num_hypotheses=3)[0]
    petrel.set_random_seed(42)
    second = generator.generate_batch([tokens], max_length=10, sampling_topk=20, sampling_temperature=1.5,
                                      num_hypotheses=3)[0]
    assert first.sequences_ids == second.sequences_ids and len(first.sequences_ids) == 3


def test_static_prompt_uses_the_prompt_cache(chat_path):
    generator = petrel.Generator(chat_path)
    static = ["<bos>", "<start_of_turn>", "u", "s", "e", "r", "\n"]
    a = generator.generate_batch([["h", "i"]], static_prompt=static, max_length=6)
    b = generator.generate_batch([["h", "i"]], static_prompt=static, max_length=6)
    assert a[0].sequences == b[0].sequences
    assert generator.model.prompt_cache_stats().entries >= 1
    assert generator.model.last_generate_timings().reused_tokens > 0


def test_parallel_sessions_give_the_same(chat_path, generator):
    parallel = petrel.Generator(chat_path, inter_threads=3, intra_threads=1)
    prompts = [["<bos>", c] for c in "abcdef"]
    assert ([r.sequences for r in parallel.generate_batch(prompts, max_length=6)] ==
            [r.sequences for r in generator.generate_batch(prompts, max_length=6)])


@pytest.mark.parametrize("argument, value", [
    ("beam_size", 2), ("patience", 2), ("no_repeat_ngram_size", 2), ("disable_unk", True), ("min_length", 2),
    ("return_scores", True), ("return_logits_vocab", True), ("return_alternatives", True),
    ("suppress_sequences", [["a"]]), ("min_alternative_expansion_prob", 0.5),
])
def test_generator_refuses_by_name(generator, argument, value):
    with pytest.raises(petrel.UnsupportedError, match=argument):
        generator.generate_batch([["<bos>", "a"]], **{argument: value})
