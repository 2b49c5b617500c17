#!/usr/bin/env python3
"""Trains the English->German draft model for speculative decoding: the teacher's shape
(tools/en-de-model) with a deep encoder and a shallow decoder, the teacher's vocabulary (same
vocab.json / source.spm / target.spm, same ids), initialized from the teacher and trained by
sequence-level distillation on the teacher's greedy outputs, so that its greedy next token
equals the teacher's as often as possible. Written as a Hugging Face MarianMT directory.

    /usr/bin/python3 tools/reference/train_en_de_draft.py STAGE [options]

Stages (files in --work, default build/en-de-draft):
  distil   the en-de splits (make_en_de_data.py -> WORK/data); the teacher converted by
           petrel-convert (int8, the default) and run greedy with Petrel (--beam 1, --no-split,
           batches of 32, --json-lines: its ids) on train.en and dev.en
           -> WORK/{train,dev}.teacher.jsonl (source ids, teacher's greedy ids)
  probe    dev agreement (teacher-forced: the draft's argmax at every prefix of the teacher's
           greedy output equals the teacher's next token) of each initialization, untrained
  train    draft = teacher's config with --decoder-layers (1); embeddings, final_logits_bias
           and encoder copied from the teacher, decoder layer(s) from --init-decoder (teacher
           layer indices, or "avg" = the average of all teacher layers); with --train decoder
           (the default) the embeddings and the encoder stay frozen at the teacher's (the
           draft's encoder output IS the teacher's), --train all trains them too; cross-entropy on the
           teacher's ids (label smoothing --label-smoothing, default 0: only the argmax
           matters), dropout 0.1, Adam (0.9, 0.98), warm-up to --lr then inverse square root,
           batches of at most --max-tokens padded tokens a side (train_en_de.make_batches).
           Every --eval-steps: dev agreement, weights kept as WORK/train/eval-STEP.pt.
           WORK/train/checkpoint.pt every --save-minutes; a later run resumes from it.
           Stops after --max-minutes of training wall time (per run: a resumed run trains
           --max-minutes more) or when WORK/train/STOP exists.
  export   the best on dev agreement of: the best evaluation, the last step, the average of
           the last --average evaluations -> --out (default tools/en-de-draft): config.json,
           generation_config.json, tokenizer_config.json, model.safetensors (f16) and the
           teacher's vocabulary files, copied.
  measure  on the first --sentences (300) of tests/fixtures/en-de/test.en: the teacher's
           greedy ids (Petrel, the int8 file of `distil`); for every prefix of them the
           draft's greedy next token, in PyTorch (f32, teacher-forced) and in Petrel (the
           exported draft converted int8, int8 with an int4 output projection, int4, and the
           teacher's own int4 file; each prefix forced by petrel-run --target-prefix) ->
           per-token acceptance rate and expected tokens per verification for k drafted
           tokens: sum_{i=0..k} a^i (k accepted draft tokens at most plus the verifier's own)
           under the independence approximation; chrF2 (greedy, Petrel) of each on the whole
           test split; per-step cost beside the teacher's int8 (petrel-bench, one thread,
           runs interleaved) -> WORK/measure.json

Run training under nohup, pinned and niced, with OpenBLAS (see train_firefox_student.py):
    OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread \\
        nohup taskset -c 1 nice -n 19 /usr/bin/python3 tools/reference/train_en_de_draft.py train \\
        --max-minutes 60 > build/en-de-draft/train.log 2>&1 &
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import marian_reference as ref  # noqa: E402
import train_en_de as base  # noqa: E402  (make_batches, pad, learning_rate, save_atomic, hf_config, ...)
from eval_en_de import load_model  # noqa: E402
import metrics  # noqa: E402

TEACHER = os.path.join(ROOT, "tools", "en-de-model")
TEST_EN = os.path.join(ROOT, "tests", "fixtures", "en-de", "test.en")
SEED = 7


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, flush=True)


def run(cmd, **kwargs):
    log("$", " ".join(cmd))
    return subprocess.run(cmd, check=True, **kwargs)


# --- teacher outputs ---------------------------------------------------------------------
def teacher_file(args):
    return os.path.join(args.work, f"teacher.{args.teacher_dtype}.petrel")


def convert_teacher(args):
    path = teacher_file(args)
    if not os.path.exists(path):
        dtype = args.teacher_dtype
        run([os.path.join(args.build, "tools", "petrel-convert"), TEACHER, "-o", path, "--quantize", dtype,
             "--embeddings", dtype, "--quiet"])
    return path


def teacher_greedy(args, input_path, output_path, workers=2):
    """Petrel greedy over the lines of input_path -> one JSON line per input (ids)."""
    with open(output_path, "w") as f:
        run([os.path.join(args.build, "tools", "petrel-run"), convert_teacher(args), "--input", input_path,
             "--no-split", "--json-lines", "--beam", "1", "--max-batch", "32", "--threads", "1",
             "--workers", str(workers), "--quiet"], stdout=f)


def read_pairs(path):
    """(source ids, teacher ids + EOS) of every input whose greedy output ended (EOS) within
    base.MAX_TOKENS and is not empty."""
    pairs = []
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "summary" in record or "error" in record:
                continue
            source, ids = record["input"], record["hypotheses"][0]["ids"]
            if ids and len(ids) < base.MAX_TOKENS - 1 and len(source) <= base.MAX_TOKENS:
                pairs.append((source, ids + [0]))
    return pairs


def stage_distil(args):
    data = os.path.join(args.work, "data")
    if not os.path.exists(os.path.join(data, "train.en")):
        run([sys.executable, os.path.join(HERE, "make_en_de_data.py"), data])
    for split in ("train", "dev"):
        out = os.path.join(args.work, f"{split}.teacher.jsonl")
        teacher_greedy(args, os.path.join(data, f"{split}.en"), out)
        log(f"{split}: {len(read_pairs(out))} distilled pairs")


# --- models ------------------------------------------------------------------------------
def draft_config(teacher_cfg, decoder_layers):
    kw = dict(base.MODEL, decoder_layers=decoder_layers)
    return ref.Config(vocab=teacher_cfg.vocab, pad=teacher_cfg.pad, eos=teacher_cfg.eos,
                      decoder_start=teacher_cfg.decoder_start, bad_words=teacher_cfg.bad_words, **kw)


def build_draft(teacher, decoder_layers):
    model = ref.Model(draft_config(teacher.cfg, decoder_layers))
    model.final_logits_bias = torch.nn.Parameter(torch.zeros(1, model.cfg.vocab))  # trained, as the teacher's
    return model


def init_from_teacher(draft, teacher, init_decoder):
    """Everything but the decoder layers copied; draft decoder layer i from teacher layer
    init_decoder[i] (an index, or "avg": the mean of all the teacher's decoder layers)."""
    source = teacher.state_dict()
    target = draft.state_dict()
    prefix = "model.decoder.layers."
    teacher_layers = teacher.cfg.decoder_layers
    for name in target:
        if name.startswith(prefix):
            i, rest = name[len(prefix):].split(".", 1)
            choice = init_decoder[int(i)]
            if choice == "avg":
                value = sum(source[f"{prefix}{j}.{rest}"] for j in range(teacher_layers)) / teacher_layers
            else:
                value = source[f"{prefix}{int(choice)}.{rest}"]
        else:
            value = source[name]
        target[name] = value.clone()
    draft.load_state_dict(target)


def parse_init(text, layers):
    choices = text.split(",")
    if len(choices) == 1:
        choices = choices * layers
    if len(choices) != layers:
        raise SystemExit(f"--init-decoder {text!r}: {layers} layer choices needed")
    return choices


# --- agreement ---------------------------------------------------------------------------
def batch_logits(model, pairs):
    cfg = model.cfg
    src = [p[0] for p in pairs]
    tgt = [p[1] for p in pairs]
    memory, mask = model.encode(base.pad(src, cfg.pad), [len(s) for s in src])
    logits = model.decode_full(base.pad([[cfg.decoder_start] + t[:-1] for t in tgt], cfg.pad), memory, mask)
    return logits, base.pad(tgt, -100)


@torch.no_grad()
def agreement(model, pairs, batch_size=64):
    """(tokens where the draft's argmax, the pad token masked as the bad word it is, equals
    the teacher's, tokens, summed cross-entropy), teacher-forced on the teacher's ids (EOS
    included)."""
    was_training = model.training
    model.eval()
    bad = [w[0] for w in model.cfg.bad_words]
    hits, tokens, loss = 0, 0, 0.0
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
    for start in range(0, len(order), batch_size):
        batch = [pairs[i] for i in order[start:start + batch_size]]
        logits, labels = batch_logits(model, batch)
        logits[..., bad] = float("-inf")
        valid = labels != -100
        hits += int(((logits.argmax(-1) == labels) & valid).sum())
        tokens += int(valid.sum())
        loss += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100,
                                      reduction="sum"))
    model.train(was_training)
    return hits, tokens, loss


def stage_probe(args):
    torch.set_num_threads(args.threads)
    teacher = load_model(TEACHER)
    dev = read_pairs(os.path.join(args.work, "dev.teacher.jsonl"))
    h, n, loss = agreement(teacher, dev)
    log(f"teacher itself: agreement {h / n:.4f} ({n} tokens; < 1 only where Petrel int8 and PyTorch f32 differ)")
    choices = ["avg"] + [str(i) for i in range(teacher.cfg.decoder_layers)]
    for choice in choices:
        draft = build_draft(teacher, args.decoder_layers)
        init_from_teacher(draft, teacher, parse_init(choice, args.decoder_layers))
        h, n, loss = agreement(draft, dev)
        log(f"init {choice}: dev agreement {h / n:.4f}, loss {loss / n:.3f}")


# --- training ----------------------------------------------------------------------------
def freeze_teacher_parts(model):
    """--train decoder: the embeddings (tied to the output projection) and the encoder stay the
    teacher's, so the draft's encoder output is the teacher's (an engine may share it) and a
    step costs about half: no encoder backward, no output-projection weight gradient."""
    for p in list(model.model.shared.parameters()) + list(model.model.encoder.parameters()):
        p.requires_grad_(False)
    return [p for p in model.parameters() if p.requires_grad]


def frozen_encoder_loss(model, pairs, smoothing):
    """train_en_de.batch_loss with the frozen encoder run without dropout and gradients
    (exactly the teacher's encoder output)."""
    cfg = model.cfg
    src = [p[0] for p in pairs]
    tgt = [p[1] for p in pairs]
    model.eval()
    with torch.no_grad():
        memory, mask = model.encode(base.pad(src, cfg.pad), [len(s) for s in src])
    model.train()
    logits = model.decode_full(base.pad([[cfg.decoder_start] + t[:-1] for t in tgt], cfg.pad), memory, mask)
    labels = base.pad(tgt, -100)
    loss_sum = F.cross_entropy(logits.reshape(-1, cfg.vocab), labels.reshape(-1), ignore_index=-100,
                               label_smoothing=smoothing, reduction="sum")
    return loss_sum, int((labels != -100).sum())


def stage_train(args):
    torch.set_num_threads(args.threads)
    work = os.path.join(args.work, "train")
    os.makedirs(work, exist_ok=True)
    train_pairs = read_pairs(os.path.join(args.work, "train.teacher.jsonl"))
    dev_pairs = read_pairs(os.path.join(args.work, "dev.teacher.jsonl"))
    teacher = load_model(TEACHER)
    model = build_draft(teacher, args.decoder_layers)
    trainable = freeze_teacher_parts(model) if args.train == "decoder" else list(model.parameters())
    batch_loss = frozen_encoder_loss if args.train == "decoder" else base.batch_loss
    opt = torch.optim.Adam(trainable, lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    ckpt_path = os.path.join(work, "checkpoint.pt")
    state = {"step": 0, "epoch": 0, "batch": 0, "elapsed": 0.0, "history": [], "args": vars(args)}
    if os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["torch_rng"])
        state = ckpt["state"]
        log(f"resumed at step {state['step']} (epoch {state['epoch']}, batch {state['batch']}, "
            f"{state['elapsed'] / 60:.1f} min trained)")
    else:
        init_from_teacher(model, teacher, parse_init(args.init_decoder, args.decoder_layers))
        torch.manual_seed(SEED)
        h, n, loss = agreement(model, dev_pairs)
        state["history"].append({"step": 0, "minutes": 0.0, "dev_agreement": round(h / n, 4),
                                 "dev_loss": round(loss / n, 4)})
        log(f"initial dev {json.dumps(state['history'][-1])}")
    del teacher
    model.train()
    log(f"{len(train_pairs)} training pairs, {len(dev_pairs)} dev pairs, "
        f"{sum(p.numel() for p in model.parameters())} parameters ({sum(p.numel() for p in trainable)} trained), "
        f"decoder layers {args.decoder_layers}")

    def checkpoint():
        base.save_atomic({"model": model.state_dict(), "optimizer": opt.state_dict(),
                          "torch_rng": torch.get_rng_state(), "state": state}, ckpt_path)

    run_start, elapsed_at_start = time.time(), state["elapsed"]
    last_save = time.time()
    window = [0.0, 0, 0, time.time()]  # loss, tokens, steps, start
    stop = None
    while stop is None:
        batches = base.make_batches(train_pairs, args.max_tokens, random.Random(SEED * 1000 + state["epoch"]))
        while state["batch"] < len(batches):
            batch = [train_pairs[i] for i in batches[state["batch"]]]
            state["step"] += 1
            state["batch"] += 1
            for group in opt.param_groups:
                group["lr"] = base.learning_rate(state["step"], args.lr, args.warmup)
            loss_sum, tokens = batch_loss(model, batch, args.label_smoothing)
            opt.zero_grad()
            (loss_sum / tokens).backward()
            if model.model.shared.weight.grad is not None:
                model.model.shared.weight.grad[model.cfg.pad] = 0  # the start token's embedding stays zero
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            opt.step()
            window[0] += float(loss_sum)
            window[1] += tokens
            window[2] += 1
            state["elapsed"] = elapsed_at_start + time.time() - run_start
            if state["step"] % 50 == 0:
                rate = window[2] / (time.time() - window[3]) * 60
                log(f"step {state['step']:5d}  epoch {state['epoch']}  loss {window[0] / window[1]:.3f}  "
                    f"{rate:.1f} steps/min  {state['elapsed'] / 60:.1f} min")
                window = [0.0, 0, 0, time.time()]
            if state["step"] % args.eval_steps == 0:
                h, n, loss = agreement(model, dev_pairs)
                state["history"].append({"step": state["step"], "epoch": state["epoch"],
                                         "minutes": round(state["elapsed"] / 60, 1),
                                         "dev_agreement": round(h / n, 4), "dev_loss": round(loss / n, 4)})
                base.save_atomic(model.state_dict(), os.path.join(work, f"eval-{state['step']}.pt"))
                log(f"dev {json.dumps(state['history'][-1])}")
                with open(os.path.join(work, "history.json"), "w") as f:
                    json.dump(state["history"], f, indent=1)
                checkpoint()
                last_save = time.time()
            if state["elapsed"] - elapsed_at_start >= args.max_minutes * 60:
                stop = f"this run's {args.max_minutes} minutes"
            elif os.path.exists(os.path.join(work, "STOP")):
                stop = "STOP file"
            if stop:
                break
            if time.time() - last_save >= args.save_minutes * 60:
                checkpoint()
                last_save = time.time()
        if state["batch"] >= len(batches):
            state["epoch"] += 1
            state["batch"] = 0
    checkpoint()
    log(f"stopped: {stop}; step {state['step']}, {state['elapsed'] / 60:.1f} min trained in all")


# --- export ------------------------------------------------------------------------------
def stage_export(args):
    torch.set_num_threads(args.threads)
    work = os.path.join(args.work, "train")
    dev_pairs = read_pairs(os.path.join(args.work, "dev.teacher.jsonl"))
    teacher = load_model(TEACHER)
    ckpt = torch.load(os.path.join(work, "checkpoint.pt"))
    decoder_layers = sum(1 for k in ckpt["model"] if k.startswith("model.decoder.layers.") and k.endswith(".fc1.weight"))
    model = build_draft(teacher, decoder_layers)
    history = [p for p in ckpt["state"]["history"] if os.path.exists(os.path.join(work, f"eval-{p['step']}.pt"))]
    final_step = ckpt["state"]["step"]

    def weights(step):
        return ckpt["model"] if step == final_step else torch.load(os.path.join(work, f"eval-{step}.pt"))

    candidates = {f"last step ({final_step})": [final_step]}
    if history:
        best = max(history, key=lambda p: p["dev_agreement"])
        candidates[f"best evaluation (step {best['step']})"] = [best["step"]]
        steps = [p["step"] for p in history]
        if steps[-1] != final_step:
            steps.append(final_step)
        last = steps[-args.average:]
        if len(last) > 1:
            candidates["average of steps " + ", ".join(map(str, last))] = last
    results = {}
    for label, steps in candidates.items():
        states = [weights(s) for s in steps]
        averaged = {k: sum(s[k] for s in states) / len(states) for k in states[0]}
        model.load_state_dict(averaged)
        h, n, _ = agreement(model, dev_pairs)
        results[label] = (h / n, averaged)
        log(f"{label}: dev agreement {h / n:.4f}")
    chosen = max(results, key=lambda k: results[k][0])
    model.load_state_dict(results[chosen][1])
    model.eval()
    os.makedirs(args.out, exist_ok=True)
    cfg = model.cfg
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(base.hf_config(cfg, "float16"), f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(base.generation_config(cfg), f, indent=2)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(base.tokenizer_config(), f, indent=2)
    for name in ("source.spm", "target.spm", "vocab.json"):
        shutil.copyfile(os.path.join(TEACHER, name), os.path.join(args.out, name))
    ref.write_safetensors(os.path.join(args.out, "model.safetensors"), ref.state_dict_for_export(model), "F16")
    summary = {"chosen": chosen, "dev_agreement": round(results[chosen][0], 4), "step": final_step,
               "minutes": round(ckpt["state"]["elapsed"] / 60, 1),
               "candidates": {k: round(v[0], 4) for k, v in results.items()}}
    with open(os.path.join(args.work, "export.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log(f"wrote {args.out}: {json.dumps(summary)}")


# --- measurement -------------------------------------------------------------------------
# Petrel files measured as drafts: (name, the checkpoint it converts, petrel-convert options).
# The teacher's own int4 file is the "lower-precision self-draft", for comparison.
DRAFT_FILES = [
    ("draft.int8", "draft", ["--quantize", "int8", "--embeddings", "int8"]),
    ("draft.int4-output", "draft", ["--quantize", "int8", "--embeddings", "int8", "--output-proj", "int4"]),
    ("draft.int4", "draft", ["--quantize", "int4", "--embeddings", "int4"]),
    ("teacher.int4", "teacher", ["--quantize", "int4", "--embeddings", "int4"]),
]
K_VALUES = (2, 3, 4, 6)


def tokens_per_verification(rate, k):
    """Expected tokens a verification yields with k drafted tokens, each accepted with
    probability `rate` independently: the accepted prefix plus the verifier's own token,
    sum_{i=0..k} rate^i."""
    return sum(rate ** i for i in range(k + 1))


def petrel_next_tokens(args, model_file, pairs, sources):
    """The model's greedy next token (Petrel) after every prefix of each teacher output:
    petrel-run with the prefix forced (--target-prefix) and room for one free step before the
    forced EOS of the last allowed step. Returns (hits, tokens)."""
    hits, tokens = 0, 0
    for (source_ids, teacher_ids), text in zip(pairs, sources):
        for t in range(len(teacher_ids)):
            prefix = teacher_ids[:t]
            cmd = [os.path.join(args.build, "tools", "petrel-run"), model_file, "--text", text, "--beam", "1",
                   "--max-new-tokens", str(t + 2), "--json", "--quiet"]
            if prefix:
                cmd += ["--target-prefix", " ".join(map(str, prefix))]
            result = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            entry = result["results"][0]
            if entry["input"] != source_ids:
                raise SystemExit(f"{model_file}: source ids differ from the teacher run's for {text!r}")
            ids = entry["hypotheses"][0]["ids"]
            predicted = ids[t] if len(ids) > t else 0  # output ends: EOS (left out of the ids)
            hits += predicted == teacher_ids[t]
            tokens += 1
    return hits, tokens


def bench_steps(args, files):
    """petrel-bench side by side (one thread, batch 1, 32 + 32 tokens, runs interleaved):
    {file: per-step time "steps alone" in ms and the encoder's time}."""
    cmd = [os.path.join(args.build, "tools", "petrel-bench"), "--runs", "21", "--json", "--threads", "1"]
    for f in files:
        cmd += ["--model", f]
    report = json.loads(run(cmd, capture_output=True, text=True).stdout)
    return report


def stage_measure(args):
    torch.set_num_threads(args.threads)
    with open(TEST_EN, encoding="utf-8") as f:
        test_lines = [line.rstrip("\n") for line in f]
    lines = test_lines[:args.sentences]
    sample = os.path.join(args.work, f"test{args.sentences}.en")
    with open(sample, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    out = os.path.join(args.work, f"test{args.sentences}.teacher.jsonl")
    teacher_greedy(args, sample, out, workers=1)
    records = [json.loads(line) for line in open(out)]
    kept = [(r["input"], r["hypotheses"][0]["ids"] + [0], r["input_text"]) for r in records
            if "hypotheses" in r and len(r["hypotheses"][0]["ids"]) < base.MAX_TOKENS - 1]
    pairs, sources = [(s, t) for s, t, _ in kept], [x for _, _, x in kept]
    result = {"sentences": len(pairs), "teacher": f"Petrel {args.teacher_dtype} greedy ids (EOS included)",
              "acceptance": {}, "expected_tokens_per_verification": {}}

    def record(name, hits, tokens):
        rate = hits / tokens
        result["acceptance"][name] = {"accepted": hits, "tokens": tokens, "rate": round(rate, 4)}
        result["expected_tokens_per_verification"][name] = {k: round(tokens_per_verification(rate, k), 3)
                                                            for k in K_VALUES}
        log(f"{name}: acceptance {rate:.4f} ({hits}/{tokens})")

    draft = load_model(args.out)
    hits, tokens, _ = agreement(draft, pairs)
    record("draft, PyTorch f32 (exported f16 weights)", hits, tokens)

    files = {}
    for name, which, options in DRAFT_FILES:
        path = os.path.join(args.work, name + ".petrel")
        run([os.path.join(args.build, "tools", "petrel-convert"), args.out if which == "draft" else TEACHER,
             "-o", path, "--quiet"] + options)
        files[name] = path
    for name, path in files.items():
        record(f"{name}, Petrel", *petrel_next_tokens(args, path, pairs, sources))

    # chrF2 alone on the whole test split, greedy, Petrel
    references = os.path.join(ROOT, "tests", "fixtures", "en-de", "test.de")
    result["chrf2_test_greedy"] = {}
    for name, path in [("teacher.int8", convert_teacher(args))] + list(files.items()):
        hyp = os.path.join(args.work, f"test.{name}.de")
        with open(hyp, "w") as f:
            run([os.path.join(args.build, "tools", "petrel-run"), path, "--input", TEST_EN, "--no-split", "--beam",
                 "1", "--max-batch", "32", "--quiet"], stdout=f)
        with open(hyp, encoding="utf-8") as f:
            hypotheses = [line.rstrip("\n") for line in f]
        with open(references, encoding="utf-8") as f:
            refs = [line.rstrip("\n") for line in f]
        result["chrf2_test_greedy"][name] = round(metrics.corpus_chrf(hypotheses, refs), 2)
        log(f"{name}: test chrF2 {result['chrf2_test_greedy'][name]}")

    bench = bench_steps(args, [convert_teacher(args)] + list(files.values()))
    models = bench["models"]
    teacher_step = models[0]["lone_step_ms"]
    result["cost"] = {"teacher.int8": {k: round(models[0][k], 4) for k in ("lone_step_ms", "encoder_ms", "step_weight_mb")}}
    result["speedup_bound"] = {}
    for (name, path), m in zip(files.items(), models[1:]):
        ratio = m["lone_step_ms"] / teacher_step
        result["cost"][name] = {k: round(m[k], 4) for k in ("lone_step_ms", "encoder_ms", "step_weight_mb")}
        result["cost"][name]["step_vs_teacher"] = round(ratio, 3)
        # Tokens per verification over its cost in teacher steps (k draft steps + one
        # verification, counted as one teacher step: optimistic, a k+1-row step costs more).
        rate = result["acceptance"][f"{name}, Petrel"]["rate"]
        result["speedup_bound"][name] = {k: round(tokens_per_verification(rate, k) / (k * ratio + 1), 3)
                                         for k in K_VALUES}
    result["bench"] = bench
    with open(os.path.join(args.work, "measure.json"), "w") as f:
        json.dump(result, f, indent=1)
    log(f"wrote {os.path.join(args.work, 'measure.json')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stage", choices=["distil", "probe", "train", "export", "measure"])
    parser.add_argument("--work", default=os.path.join(ROOT, "build", "en-de-draft"))
    parser.add_argument("--out", default=os.path.join(ROOT, "tools", "en-de-draft"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"),
                        help="CMake build holding tools/petrel-convert and tools/petrel-run")
    parser.add_argument("--teacher-dtype", default="int8", choices=["int8", "f32"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--decoder-layers", type=int, default=1)
    parser.add_argument("--train", default="decoder", choices=["decoder", "all"],
                        help="decoder: embeddings and encoder frozen at the teacher's; all: everything trained")
    parser.add_argument("--init-decoder", default="0", help="teacher decoder layer per draft layer, or avg")
    parser.add_argument("--max-minutes", type=float, default=60)
    parser.add_argument("--save-minutes", type=float, default=4)
    parser.add_argument("--eval-steps", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--average", type=int, default=4, help="export: also try the average of the last N evaluations")
    parser.add_argument("--sentences", type=int, default=300, help="measure: the first N test sentences")
    args = parser.parse_args()
    {"distil": stage_distil, "probe": stage_probe, "train": stage_train, "export": stage_export,
     "measure": stage_measure}[args.stage](args)


if __name__ == "__main__":
    main()
