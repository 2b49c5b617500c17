#!/usr/bin/env python3
"""Text <-> model ids for an opus-mt style checkpoint directory (source.spm, target.spm,
vocab.json, optional tokenizer_config.json), by the rules of Hugging Face's MarianTokenizer
in transformers 4.22-4.33 (models/marian/tokenization_marian.py with the base class
PreTrainedTokenizer of those releases; read, not copied). Petrel's own text path must agree
with this file.

    tok = MarianTokenizer("tools/en-de-model")
    tok.encode("Open file")  -> [ids..., 0]      (what tokenizer("Open file").input_ids gives)
    tok.decode(ids)          -> "Datei öffnen"    (tokenizer.decode(ids, skip_special_tokens=True))

    echo "Open file" | marian_tokenizer.py DIR encode     one line of ids per line of text
    echo "123 45 0"  | marian_tokenizer.py DIR decode     one line of text per line of ids

Encoding (tokenizer(text)):
 1. the special tokens' texts ("</s>", "<unk>", "<pad>") are cut out of the text first,
    leftmost-longest, and the text either side of one loses its adjacent whitespace
    (the base class's no-split tokens); each becomes its own id;
 2. in every other non-empty chunk, a ">>xx<<" language code at the very start becomes a
    token of its own, and every match of the greedy pattern ">>.+<<" is removed;
 3. the chunk is split into pieces by the *source* SentencePiece model (encode,
    out_type=str, no sampling) - SentencePiece applies its own normalization; no Moses
    punctuation normalization (MarianTokenizer.normalize is not called on this path);
 4. each piece (and language code) maps to its vocab.json id; a piece vocab.json lacks is
    "<unk>";
 5. "</s>" is appended.

Decoding (tokenizer.decode(ids, skip_special_tokens=True)):
 1. ids -> pieces through vocab.json inverted; an id it lacks is "<unk>";
 2. with skip_special_tokens the ids of "</s>", "<unk>" and "<pad>" are dropped; otherwise a
    special token's text is kept followed by a space and the pieces around it are decoded
    separately;
 3. pieces -> text by the *target* SentencePiece model's DecodePieces ("▁" -> space,
    leading space dropped), ends stripped. SentencePiece 0.1.97 returns a piece the target
    model lacks (a source-only piece the decoder may emit) verbatim, "▁" included; 4.22-4.33
    leave that "▁" in the text, later releases (and Petrel's engine) turn it into a space.
    This file does the latter unless keep_unknown_underline=True; the difference shows only
    when the model emits a source-only piece (its training targets never hold one);
 4. clean_up_tokenization_spaces (the base class default True, unless tokenizer_config.json
    says otherwise; this project's checkpoint says false, so the text is SentencePiece's):
    " ." -> ".", " ?" -> "?", " !" -> "!", " ," -> ",", " ' " -> "'", " n't" -> "n't",
    " 'm" -> "'m", " 's" -> "'s", " 've" -> "'ve", " 're" -> "'re".
Later releases changed more (transformers' main branch, read for comparison: decode uses
the source model unless separate_vocabs, and a piece vocab.json lacks falls back to its
SentencePiece id).
"""
import json
import os
import re
import sys
from typing import List

import sentencepiece as spm

EOS, UNK, PAD = "</s>", "<unk>", "<pad>"
LANGUAGE_CODE = re.compile(">>.+<<")
CLEANUP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
           (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]


def split_on_specials(text: str, specials) -> List[str]:
    """[text, special, text, ..., text]: `text` cut at each special token's text, leftmost
    first, the longest at a position (the slow tokenizers' rule; the text chunks, at even
    indices, may be empty). family_tokenizers.py uses it too."""
    ordered = sorted(specials, key=len, reverse=True)
    chunks, start, i = [], 0, 0
    while i < len(text):
        match = next((t for t in ordered if text.startswith(t, i)), None)
        if match:
            chunks += [text[start:i], match]
            i += len(match)
            start = i
        else:
            i += 1
    chunks.append(text[start:])
    return chunks


class MarianTokenizer:
    def __init__(self, model_dir: str):
        self.source = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "source.spm"))
        self.target = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "target.spm"))
        with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        for token in (EOS, UNK, PAD):
            if token not in self.vocab:
                raise ValueError(f"{model_dir}/vocab.json: no {token!r}")
        self.pieces = {i: p for p, i in self.vocab.items()}
        self.cleanup = True
        config_path = os.path.join(model_dir, "tokenizer_config.json")
        if os.path.exists(config_path):
            with open(config_path, encoding="utf-8") as f:
                self.cleanup = json.load(f).get("clean_up_tokenization_spaces", True)
        self.special_ids = {self.vocab[t] for t in (EOS, UNK, PAD)}
        self.eos_id, self.unk_id, self.pad_id = self.vocab[EOS], self.vocab[UNK], self.vocab[PAD]

    # --- text -> ids ---------------------------------------------------------------
    @staticmethod
    def _split_specials(text: str) -> List[str]:
        """Chunks of text and special tokens; whitespace next to a special token is dropped."""
        chunks = split_on_specials(text, (EOS, UNK, PAD))
        for k, chunk in enumerate(chunks):
            if chunk in (EOS, UNK, PAD):
                if k > 0 and chunks[k - 1] not in (EOS, UNK, PAD):
                    chunks[k - 1] = chunks[k - 1].rstrip()
                if k + 1 < len(chunks) and chunks[k + 1] not in (EOS, UNK, PAD):
                    chunks[k + 1] = chunks[k + 1].lstrip()
        return [c for c in chunks if c]

    def tokenize(self, text: str) -> List[str]:
        tokens = []
        for chunk in self._split_specials(text):
            if chunk in (EOS, UNK, PAD):
                tokens.append(chunk)
                continue
            code = LANGUAGE_CODE.match(chunk)
            if code:
                tokens.append(code.group(0))
            tokens += self.source.encode(LANGUAGE_CODE.sub("", chunk), out_type=str)
        return tokens

    def encode(self, text: str) -> List[int]:
        return [self.vocab.get(t, self.unk_id) for t in self.tokenize(text)] + [self.eos_id]

    # --- ids -> text ---------------------------------------------------------------
    def decode(self, ids: List[int], skip_special_tokens: bool = True, keep_unknown_underline: bool = False) -> str:
        tokens = [self.pieces.get(i, UNK) for i in ids if not (skip_special_tokens and i in self.special_ids)]
        out, run = "", []
        for token in tokens:
            if token in (EOS, UNK, PAD):
                out += self.target.decode_pieces(run) + token + " "
                run = []
            else:
                run.append(token)
        out = out + self.target.decode_pieces(run)
        if not keep_unknown_underline:
            out = out.replace("\u2581", " ")
        out = out.strip()
        if self.cleanup:
            for before, after in CLEANUP:
                out = out.replace(before, after)
        return out


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("encode", "decode"):
        sys.exit(__doc__)
    tok = MarianTokenizer(sys.argv[1])
    for line in sys.stdin:
        line = line.rstrip("\n")
        if sys.argv[2] == "encode":
            print(" ".join(map(str, tok.encode(line))))
        else:
            print(tok.decode([int(x) for x in line.split()]))


if __name__ == "__main__":
    main()
