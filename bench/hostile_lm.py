#!/usr/bin/python3
"""Hostile language-model files, end to end: each case is a small checkpoint (the
decoder-only test fixture gemma3_f32 with a crafted chat template or tokenizer.json, and
the most positions a file may declare, 2^20, so that no limit derived from positions
helps; the tokenizer cases 32,768, which lets a prompt have the most bytes, 1 MiB, and
then have more tokens than positions, so that what is measured is the tokenizer, not a
prefill of a million tokens), converted by petrel-convert and run by
`petrel-run MODEL --chat` with one message.
Prints a Markdown table: wall time, peak RSS, exit status and the first line of the
error, per case. Every case must end in a clear error or a correct result, never a signal.

  bench/hostile_lm.py [--tools build/release/tools] [--run-tools DIR] [--emulator "qemu-arm -L /usr/arm-linux-gnueabihf"]
                      [--as-limit BYTES] [--only NAME ...]

--run-tools/--emulator run another build's petrel-run (armv7 under qemu-user); the
checkpoints are always converted by --tools' petrel-convert. --as-limit runs petrel-run
under `prlimit --as=BYTES` (a device without overcommit: an allocation past it fails).
Uses Debian's python3 only.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests/fixtures/decoder_only/gemma3_f32")
POSITIONS = 1 << 20
TOKENIZER_POSITIONS = 1 << 15


def tiny_tokenizer():
    """tests/support/lm_fixture.h's tiny_lm_tokenizer_json: 88 of the fixture's 128 ids."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\u2581", "\n"]
    tokens += [chr(c) for c in range(ord("a"), ord("z") + 1)] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    tokens += [chr(c) for c in range(ord("0"), ord("9") + 1)] + list(".,!?':[]()-")
    merges = [("u", "s"), ("e", "r"), ("us", "er"), ("t", "h"), ("th", "e"), ("\u2581", "the"), ("i", "n")]
    tokens += [a + b for a, b in merges]
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(6)]
    return {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [[a, b] for a, b in merges]},
    }


GEMMA_TURNS = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] | trim }}"
               "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def globals_template(count, outer, inner):
    sets = "".join("{%% set g%d = %d %%}" % (i, i) for i in range(count))
    return sets + ("{%% for i in range(%d) %%}{%% for j in range(%d) %%}{%% set x = g%d %%}{%% endfor %%}{%% endfor %%}"
                   % (outer, inner, count - 1)) + GEMMA_TURNS


def dict_template(keys, turns):
    literal = "{" + ",".join("'%d':0" % i for i in range(keys)) + "}"
    return "{%% for t in range(%d) %%}{%% set d = %s %%}{%% endfor %%}{{ d | length }}" % (turns, literal) + GEMMA_TURNS


def with_added_token(content, token_id=100):
    t = tiny_tokenizer()
    t["added_tokens"].append({"id": token_id, "content": content, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": False})
    return t


def with_regex(pattern):
    t = with_added_token("<" + "x" * 30 + ">")  # 32 bytes: a prompt may then have 1 MiB
    t["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    return t


def wordpiece(longest):
    vocab = {"[UNK]": 0, "[PAD]": 1, "a": 2, "b": 3, "##a": 4, "##b": 5, "a" * longest: 6, "##" + "a" * (longest - 1): 7}
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 1 << 30, "vocab": vocab}}


# A template that writes `text` (a prompt at the model's limit, 1 MiB) whatever the messages.
def writes(expression):
    return "{{ " + expression + " }}"


# (name, what the review found, chat template, tokenizer.json or None for tiny_tokenizer())
CASES = [
    ("globals-10k", "10,000 set globals, a loop of lookups: 52.7 s", globals_template(10000, 300, 5000), None),
    ("dict-90k", "a 90,000-key dict literal: 19.7 s", dict_template(90000, 1), None),
    ("dict-90k-x20", "the same literal in a 20-turn loop: > 60 s", dict_template(90000, 20), None),
    ("dict-16k-x20", "(a 16,000-key literal, within the token limit, 20 times)", dict_template(16000, 20), None),
    ("in-2m", "`p in s` on 2 MB: 50 s",
     "{% set s = 'a' * 2097152 %}{% set p = 'a' * 1000 + 'b' %}{{ p in s }}" + GEMMA_TURNS, None),
    ("replace-1m", "`.replace` on 1 MB: 11-15 s",
     "{% set s = 'a' * 1048576 %}{{ s.replace('a' * 1000 + 'b', 'c') | length }}" + GEMMA_TURNS, None),
    ("split-1m", "`.split` on 1 MB: 11-15 s",
     "{% set s = 'a' * 1048576 %}{{ s.split('a' * 1000 + 'b') | length }}" + GEMMA_TURNS, None),
    ("list-16m", "`[0] * 16777216`: 1.2 GB", "{{ [0] * 16777216 }}" + GEMMA_TURNS, None),
    ("split-16m", "`('a' * 16777216).split('a')`: 3.4 GB",
     "{{ ('a' * 16777216).split('a') | length }}" + GEMMA_TURNS, None),
    ("output-16m", "`{{ 'a ' * 8388608 }}`: 22-34 s, 0.9 GB", "{{ 'a ' * 8388608 }}", None),
    ("added-4095", "a 4,095-byte added token: 9 us/B", writes("('a' * 4094 + 'b') * 256"),
     with_added_token("a" * 4095)),
    ("regex-1024", "a 980-instruction regex: 7.4 us/B", writes("'y' * 1048000"), with_regex("(?:.?){511}x")),
    ("wordpiece-4096", "a 4,096-byte WordPiece token: 19-26 us/B", writes("('a' * 4095 + 'b') * 256"),
     wordpiece(4096)),
]


def make_checkpoint(directory, chat_template, tokenizer):
    positions = POSITIONS if tokenizer is None else TOKENIZER_POSITIONS
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(FIXTURE, name), directory)
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    config["max_position_embeddings"] = positions
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(tokenizer or tiny_tokenizer(), f)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": chat_template, "bos_token": "<bos>", "eos_token": "<end_of_turn>",
                   "clean_up_tokenization_spaces": False}, f)


def run_case(args, work, name, chat_template, tokenizer):
    checkpoint = os.path.join(work, name)
    os.makedirs(checkpoint)
    make_checkpoint(checkpoint, chat_template, tokenizer)
    model = os.path.join(work, name + ".petrel")
    converted = subprocess.run([os.path.join(args.tools, "petrel-convert"), checkpoint, "-o", model, "--quantize", "f32",
                                "--embeddings", "f32"], capture_output=True, text=True)
    if converted.returncode != 0:
        return None, None, "convert %d" % converted.returncode, converted.stderr.strip().splitlines()[-1][:160]
    command = []
    if args.as_limit:
        command += ["prlimit", "--as=%d" % args.as_limit]
    command += ["/usr/bin/time", "-f", "@@ %e %M"]
    command += args.emulator.split() if args.emulator else []
    command += [os.path.join(args.run_tools or args.tools, "petrel-run"), model, "--chat", "--max-new-tokens", "1"]
    started = time.monotonic()
    done = subprocess.run(command, input="hello\n", capture_output=True, text=True, errors="replace")
    wall = time.monotonic() - started
    rss_kb = None
    lines = []
    for line in done.stderr.splitlines():
        if line.startswith("@@ "):
            rss_kb = int(line.split()[2])
        elif line.startswith("Command terminated by signal"):
            lines.append(line)
        elif line.strip():
            lines.append(line)
    status = "exit %d" % done.returncode if done.returncode >= 0 else "SIGNAL %d" % -done.returncode
    if any(l.startswith("Command terminated by signal") for l in lines):
        status = "SIGNAL"
    return wall, rss_kb, status, (lines[0] if lines else done.stdout.strip()[:80])[:160]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", default=os.path.join(ROOT, "build/release/tools"))
    parser.add_argument("--run-tools")
    parser.add_argument("--emulator", default="")
    parser.add_argument("--as-limit", type=int, default=0)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c[0] in args.only]
    print("| case | what the review found | s | peak RSS MB | status | message |")
    print("|---|---|---:|---:|---|---|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as work:
        for name, found, chat_template, tokenizer in cases:
            wall, rss_kb, status, message = run_case(args, work, name, chat_template, tokenizer)
            print("| %s | %s | %s | %s | %s | %s |" % (
                name, found, "%.2f" % wall if wall is not None else "-",
                "%.0f" % (rss_kb / 1024) if rss_kb else "-", status, message.replace("|", "\\|")))
            sys.stdout.flush()
            if status.startswith("SIGNAL"):
                worst = float("inf")
    return 1 if worst == float("inf") else 0


if __name__ == "__main__":
    sys.exit(main())
