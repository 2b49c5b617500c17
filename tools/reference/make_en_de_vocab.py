#!/usr/bin/env python3
"""SentencePiece vocabularies for the English -> German model, in opus-mt's layout:

    /usr/bin/python3 tools/reference/make_en_de_vocab.py build/en-de/data build/en-de/vocab

reads DATA/train.en and DATA/train.de (make_en_de_data.py) and writes OUT/source.spm
(English), OUT/target.spm (German) and OUT/vocab.json.

* source.spm / target.spm: unigram models trained by Debian's `spm_train` (package
  `sentencepiece`) on the training split only, default normalization (nmt_nfkc, as
  opus-mt's models), character coverage 1.0 (the catalogs hold few rare characters and a
  message's symbols should survive translation). Sizes: SOURCE_PIECES English and
  TARGET_PIECES German pieces - 41k short messages are little text, and a bigger vocabulary
  leaves more pieces too rare to learn; German gets more for its compounds and inflections.
* vocab.json: the model's ids, in Marian's order: "</s>" 0, "<unk>" 1, then the union of
  both models' pieces (their own <unk>/<s>/</s> excluded) by descending frequency in the
  encoded training split (English pieces counted on train.en, German on train.de), ties by
  the piece's text, and "<pad>" last (also the decoder start). A piece of one model that
  the other lacks keeps its id; the model learns it either side.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm

SOURCE_PIECES, TARGET_PIECES = 4000, 5000
EOS, UNK, PAD = "</s>", "<unk>", "<pad>"


def train_spm(text_path, pieces, out_path):
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "m")
        subprocess.run(["spm_train", f"--input={text_path}", f"--model_prefix={prefix}", f"--vocab_size={pieces}",
                        "--model_type=unigram", "--character_coverage=1.0", "--num_threads=2"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.copyfile(prefix + ".model", out_path)


def piece_counts(model_path, text_path):
    processor = spm.SentencePieceProcessor(model_file=model_path)
    counts = collections.Counter({processor.id_to_piece(i): 0 for i in range(processor.get_piece_size())
                                  if not (processor.is_control(i) or processor.is_unknown(i))})
    with open(text_path, encoding="utf-8") as f:
        for line in f:
            counts.update(processor.encode(line.rstrip("\n"), out_type=str))
    return counts


def joint_vocab(source_counts, target_counts):
    counts = source_counts + target_counts  # Counter addition drops zero counts: re-add them
    for piece in list(source_counts) + list(target_counts):
        counts.setdefault(piece, 0)
    for special in (EOS, UNK, PAD):
        counts.pop(special, None)
    ordered = sorted(counts, key=lambda p: (-counts[p], p))
    return {piece: i for i, piece in enumerate([EOS, UNK] + ordered + [PAD])}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data_dir, out_dir = sys.argv[1:]
    os.makedirs(out_dir, exist_ok=True)
    sides = {"source": (os.path.join(data_dir, "train.en"), SOURCE_PIECES),
             "target": (os.path.join(data_dir, "train.de"), TARGET_PIECES)}
    counts = {}
    for side, (text, pieces) in sides.items():
        model = os.path.join(out_dir, side + ".spm")
        train_spm(text, pieces, model)
        counts[side] = piece_counts(model, text)
    vocab = joint_vocab(counts["source"], counts["target"])
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=1)
    shared = len(set(counts["source"]) & set(counts["target"]))
    print(json.dumps({"source_pieces": SOURCE_PIECES, "target_pieces": TARGET_PIECES,
                      "shared_pieces": shared, "vocab_size": len(vocab)}))


if __name__ == "__main__":
    main()
