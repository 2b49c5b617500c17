"""The language-model pair's tokenizer: a SentencePiece BPE model trained with Debian's
spm_train in Gemma's conventions, and its Hugging Face tokenizer.json (the layout of Gemma 3's
own file: BPE over the whole text with '▁' for spaces, byte fallback, <bos> prepended).

Gemma's SentencePiece settings, kept here: BPE, identity normalization, no dummy prefix, spaces
kept as they are (runs of spaces become whitespace-only pieces: Python's indentation), digits
split one by one, byte fallback for characters outside the vocabulary, and "\\n" and "\\t" as
pieces of their own. Ids: <pad> 0, <eos> 1, <bos> 2, <unk> 3, <start_of_turn> 4,
<end_of_turn> 5, "\\n" 6, "\\t" 7, then the 256 byte pieces <0x00>..<0xFF>, then the learned
pieces.

The merges of tokenizer.json are derived from the vocabulary as transformers'
SentencePieceExtractor does: every split of a piece into two pieces of the vocabulary is a
merge, merges ordered by the merged piece's score (SentencePiece's BPE merge order), then by the
ids of the left and right parts.
"""
import json
import subprocess

import sentencepiece as spm

SPACE = "\u2581"
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]


def train(text_path, model_prefix, vocab_size, sentences=2_000_000, seed_sentencepiece_size=1_000_000):
    """Runs spm_train on text_path (one sentence a line) -> model_prefix.model/.vocab."""
    subprocess.run([
        "spm_train", f"--input={text_path}", f"--model_prefix={model_prefix}", "--model_type=bpe",
        f"--vocab_size={vocab_size}", "--character_coverage=0.9995",
        "--normalization_rule_name=identity", "--add_dummy_prefix=false",
        "--remove_extra_whitespaces=false", "--allow_whitespace_only_pieces=true",
        "--split_digits=true", "--byte_fallback=true",
        "--pad_id=0", "--eos_id=1", "--bos_id=2", "--unk_id=3", "--eos_piece=<eos>", "--bos_piece=<bos>",
        "--control_symbols=<start_of_turn>,<end_of_turn>",
        "--user_defined_symbols=\n,\t",
        "--max_sentence_length=8192", f"--input_sentence_size={sentences}",
        "--shuffle_input_sentence=true", f"--seed_sentencepiece_size={seed_sentencepiece_size}",
        "--num_threads=1", "--minloglevel=1",
    ], check=True)


def processor(model_path):
    return spm.SentencePieceProcessor(model_file=model_path)


def merges_of(sp):
    """[(left, right)] in rank order (see the module docstring)."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    learned = [i for i in range(sp.get_piece_size())
               if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))]
    ranked = []
    for i in learned:
        piece = sp.id_to_piece(i)
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                ranked.append((-sp.get_score(i), i, vocab[left], vocab[right], left, right))
    ranked.sort()
    return [[left, right] for *_, left, right in ranked]


def added_token(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def tokenizer_json(sp):
    """The tokenizer.json dict (Gemma 3's layout) of a model trained by train()."""
    assert [sp.id_to_piece(i) for i in range(len(SPECIALS))] == SPECIALS, "special ids moved"
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    assert len(vocab) == sp.get_piece_size(), "duplicate pieces"
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token(i, p) for i, p in enumerate(SPECIALS)],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges_of(sp)},
    }


def tokenizer_config():
    # A chat template in Gemma's turn format, so --chat works; the pair is a base model.
    return {
        "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
        "add_bos_token": True, "add_eos_token": False, "clean_up_tokenization_spaces": False,
        "chat_template": "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
                         "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
                         "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
    }


def write(sp, directory):
    with open(f"{directory}/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(sp), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(f"{directory}/tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(), f, ensure_ascii=False, indent=1)
        f.write("\n")
