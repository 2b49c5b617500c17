#!/usr/bin/env python3
"""Writes Petrel's oracle fixtures for the M2M100 / NLLB-200 and mBART-50 families: small
random checkpoints in each family's Hugging Face layout (config.json, generation_config.json,
model.safetensors or generated_weights.json, the family's tokenizer files) and what the
PyTorch reference computes for them, with the forced target-language token generate()
puts after decoder_start.

    /usr/bin/python3 tools/reference/make_family_fixtures.py tests/fixtures/oracle [NAME ...]
    /usr/bin/python3 tools/reference/make_family_fixtures.py --padded-only tests/fixtures/oracle NAME ...

--padded-only rewrites only the `padded` section of existing fixtures, computed from their
committed model.safetensors, config.json and tokenizer files (padded_only): m2m100_tiny's
weights, regenerated here, differ by one float32 step in one bias from the committed ones
(BLAS/torch environment), so its other results keep their bytes.

Fixtures (tools/reference/FAMILIES.md lists what each exercises):
  m2m100_tiny   M2M100 (model_type m2m_100): vocab.json + SentencePiece BPE, __xx__ codes,
                a fairseq-era export (tied copies, lm_head.weight, the position table).
  nllb_d1024    NLLB-200's shape (d_model 1024, 16 heads) at 1+1 layers, SentencePiece
                unigram with the fairseq offset and 202 language codes; weights regenerated
                by the test (generated_weights.json); the target language is chosen per call.
  mbart50_tiny  mBART-50 (model_type mbart): learned positions, layernorm_embedding,
                final_logits_bias, forced EOS, xx_XX codes.

expected.json has the Marian fixtures' fields (make_fixtures.py; tests/test_oracle.cpp reads
them) with every search forced to start with `forced_bos_id`, plus: family, decoder_prefix,
forced_bos_id and where it comes from, forced_eos_id, target_languages (the same searches
for another target language), generation (the checkpoint's own defaults) and text (the
tokenizer's encodings of real lines and a few text-to-text translations) and padded (the
searches for inputs holding pad ids, which generate() masks: make_fixtures.padded_outputs).

The SentencePiece models are trained here (Debian's sentencepiece 0.1.97, one thread,
deterministic) on the Latin-script lines of tests/fixtures/sentencepiece/corpus.txt.xz, with
identity normalization: the real models' nmt_nfkc rules would add ~240 KB to each fixture,
and the engine's normalizer is tested on its own (tests/fixtures/sentencepiece).
"""
import io
import json
import lzma
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import family_tokenizers as ft  # noqa: E402
import make_fixtures as mf  # noqa: E402
import marian_reference as ref  # noqa: E402

MAX_NEW = 12
CORPUS = os.path.join(mf.SPM_MODELS, "..", "corpus.txt.xz")
TEXTS = ["Open the file", "Quit", "", "Cannot open %s: permission denied", "Save changes? Datei öffnen",
         "  spaces   around  ", "数据 and eng_Latn __fr__ fr_XX inside", "Line one </s> line two <unk> <mask> end",
         "Don't stop . Really , it 's fine !"]

FIXTURES = {
    "m2m100_tiny": dict(
        family="m2m100", tokenizer="M2M100Tokenizer", spm=dict(model_type="bpe", vocab_size=256),
        cfg=dict(d_model=16, heads=2, ffn=32, encoder_layers=2, decoder_layers=2, max_positions=64,
                 store_positions=True),
        older_export=True, src_lang="en", tgt_lang="fr", other_lang="de", beam=3, alpha=1.0,
        inputs=["Open the file", "Quit", ""], eos_boost=2.7,
        tokenizer_config=dict(language_codes="m2m100", num_madeup_words=8, clean_up_tokenization_spaces=True),
        # m2m100_418M's config.json carries generation keys; generation_config.json wins.
        config_extra=dict(early_stopping=True, num_beams=5, max_length=200),
        generation_config=dict(num_beams=3, max_length=10, early_stopping=True, length_penalty=1.0,
                               forced_bos_lang="fr")),
    "nllb_d1024": dict(
        family="m2m100", tokenizer="NllbTokenizer", spm=dict(model_type="unigram", vocab_size=200),
        cfg=dict(d_model=1024, heads=16, ffn=256, encoder_layers=1, decoder_layers=1, max_positions=1024),
        # A smaller table and stronger layers than make_fixtures' defaults: at d_model 1024
        # those saturate the softmax and the output repeats the forced language token.
        generated_weights=dict(embedding=0.1, linear=6.0), src_lang="eng_Latn", tgt_lang="fra_Latn",
        other_lang="deu_Latn", beam=3, alpha=1.0, inputs=["file", "no", ""],
        seed=3110,  # 3100 and 3120 make a beam feed <pad> to the decoder (the build checks)
        tokenizer_config=dict(legacy_behaviour=False, clean_up_tokenization_spaces=True),
        config_extra=dict(max_length=200, tokenizer_class="NllbTokenizer"),
        # NLLB's generation_config.json names no language: the caller picks the target.
        generation_config=dict(max_length=20)),
    "mbart50_tiny": dict(
        family="mbart", tokenizer="MBart50Tokenizer", spm=dict(model_type="unigram", vocab_size=256),
        cfg=dict(d_model=16, heads=2, ffn=48, encoder_layers=2, decoder_layers=1, max_positions=64),
        src_lang="en_XX", tgt_lang="fr_XX", other_lang="de_DE", beam=4, alpha=1.0, forced_eos=2,
        inputs=["Open the file", "Quit", ""], eos_boost=1.8,
        tokenizer_config=dict(),
        config_extra=dict(early_stopping=True, num_beams=5, max_length=200, forced_eos_token_id=2,
                          tokenizer_class="MBart50Tokenizer"),
        generation_config=dict(num_beams=4, max_length=12, early_stopping=False, length_penalty=0.8,
                               forced_eos_token_id=2, forced_bos_lang="fr_XX")),
}


# --- tokenizer files -------------------------------------------------------------------
def latin_lines():
    with lzma.open(CORPUS, "rt", encoding="utf-8") as f:
        return [line for line in f.read().split("\n") if line and all(ord(c) < 0x250 for c in line)]


def train_spm(model_type, vocab_size, lines):
    """fairseq's layout: <unk> 0, <s> 1, </s> 2, no <pad> (spm_train's defaults)."""
    import sentencepiece as spm
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, model_type=model_type,
                                   vocab_size=vocab_size, normalization_rule_name="identity",
                                   character_coverage=0.99, num_threads=1, shuffle_input_sentence=False,
                                   input_sentence_size=0, minloglevel=2)
    return out.getvalue()


def write_tokenizer_files(d, spec, lines):
    with open(os.path.join(d, ft.SPM_FILE), "wb") as f:
        f.write(train_spm(spec["spm"]["model_type"], spec["spm"]["vocab_size"], lines))
    config = {"tokenizer_class": spec["tokenizer"], "src_lang": spec["src_lang"], "tgt_lang": spec["tgt_lang"],
              "bos_token": ft.BOS, "eos_token": ft.EOS, "pad_token": ft.PAD, "unk_token": ft.UNK,
              "sep_token": ft.EOS, "model_max_length": spec["cfg"]["max_positions"], **spec["tokenizer_config"]}
    if spec["tokenizer"] == "M2M100Tokenizer":
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=os.path.join(d, ft.SPM_FILE))
        # fairseq's dictionary: its own order (here: by length, then text), and missing some
        # of the SentencePiece model's pieces (every 9th), which then encode as <unk>.
        pieces = sorted((sp.id_to_piece(i) for i in range(3, sp.get_piece_size())), key=lambda p: (len(p), p))
        vocab = {ft.BOS: 0, ft.PAD: 1, ft.EOS: 2, ft.UNK: 3}
        for k, p in enumerate(pieces):
            if k % 9 != 4:
                vocab[p] = len(vocab)
        with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False, indent=1)
    else:
        config.update({"cls_token": ft.BOS, "mask_token": ft.MASK})
    if spec["tokenizer"] == "NllbTokenizer":
        # As the hub's NLLB tokenizer_config.json: the codes and every added token's id.
        import sentencepiece as spm
        sp_size = spm.SentencePieceProcessor(model_file=os.path.join(d, ft.SPM_FILE)).get_piece_size()
        config["additional_special_tokens"] = ft.NLLB_LANGUAGES
        added = {0: ft.BOS, 1: ft.PAD, 2: ft.EOS, 3: ft.UNK}
        added.update({sp_size + 1 + k: code for k, code in enumerate(ft.NLLB_LANGUAGES)})
        added[sp_size + 1 + len(ft.NLLB_LANGUAGES)] = ft.MASK
        config["added_tokens_decoder"] = {
            str(i): {"content": t, "lstrip": t == ft.MASK, "normalized": t == ft.MASK, "rstrip": False,
                     "single_word": False, "special": True} for i, t in sorted(added.items())}
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
    return ft.load_tokenizer(d)


def model_vocab_size(tok):
    if isinstance(tok, ft.M2M100Tokenizer):
        return tok.model_vocab_size
    return max(tok.special_ids.values()) + 1


# --- an independent check of the layer math ----------------------------------------------
def torch_layers_check(model, ids, lengths, tokens):
    """The reference's pre-LN layers against torch.nn.TransformerEncoderLayer /
    TransformerDecoderLayer (norm_first) holding the same weights: encoder states and a
    full decoder pass agree to float rounding."""
    cfg = model.cfg
    act = ref.activation(cfg.activation)

    def load(layer, hf, decoder):
        def attn(dst, src):
            dst.in_proj_weight.copy_(torch.cat([src.q_proj.weight, src.k_proj.weight, src.v_proj.weight]))
            dst.in_proj_bias.copy_(torch.cat([src.q_proj.bias, src.k_proj.bias, src.v_proj.bias]))
            dst.out_proj.weight.copy_(src.out_proj.weight)
            dst.out_proj.bias.copy_(src.out_proj.bias)
        attn(layer.self_attn, hf.self_attn)
        norms = [hf.self_attn_layer_norm] + ([hf.encoder_attn_layer_norm] if decoder else []) + [hf.final_layer_norm]
        for dst, src in zip([layer.norm1, layer.norm2] + ([layer.norm3] if decoder else []), norms):
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
        if decoder:
            attn(layer.multihead_attn, hf.encoder_attn)
        layer.linear1.weight.copy_(hf.fc1.weight)
        layer.linear1.bias.copy_(hf.fc1.bias)
        layer.linear2.weight.copy_(hf.fc2.weight)
        layer.linear2.bias.copy_(hf.fc2.bias)
        return layer.eval()

    kw = dict(d_model=cfg.d_model, nhead=cfg.heads, dim_feedforward=cfg.ffn, dropout=0.0, activation=act,
              batch_first=True, norm_first=True)
    with torch.no_grad():
        enc = model.model.encoder
        x = model.embed(enc, ids)
        pad_mask = torch.arange(ids.shape[1])[None, :] >= torch.tensor(lengths)[:, None]
        for hf in enc.layers:
            x = load(nn.TransformerEncoderLayer(**kw), hf, False)(x, src_key_padding_mask=pad_mask)
        memory_t = enc.layer_norm(x)
        memory, mask = model.encode(ids, lengths)
        worst = max(float((memory_t[b, :n] - memory[b, :n]).abs().max()) for b, n in enumerate(lengths))
        dec = model.model.decoder
        for b, toks in enumerate(tokens):
            t = torch.tensor([toks])
            y = model.embed(dec, t)
            causal = torch.full((len(toks), len(toks)), float("-inf")).triu(1)
            for hf in dec.layers:
                y = load(nn.TransformerDecoderLayer(**kw), hf, True)(
                    y, memory[b:b + 1, :lengths[b]], tgt_mask=causal)
            logits_t = model.logits_from_hidden(dec.layer_norm(y))
            logits = model.decode_full(t, memory[b:b + 1], mask[b:b + 1])
            worst = max(worst, float((logits_t - logits).abs().max()))
    assert worst < 1e-4, f"reference layers differ from torch.nn's by {worst}"
    return worst


# --- weights ------------------------------------------------------------------------------
def init_family_weights(model, gen, spec):
    mf.init_weights(model, gen, spec.get("eos_boost", 1.0))
    cfg = model.cfg
    with torch.no_grad():
        # fairseq's embedding keeps the padding row at zero (padding_idx): so do real checkpoints.
        model.model.shared.weight[cfg.pad].zero_()
        if not cfg.final_logits_bias:
            # No logits bias to favour EOS (M2M100): shift the decoder's last LayerNorm along
            # the EOS row instead, which raises the EOS logit by eos_boost.
            e = model.model.shared.weight[cfg.eos]
            model.model.decoder.layer_norm.bias += spec.get("eos_boost", 1.0) * e / float(e @ e)


# --- the fixture ----------------------------------------------------------------------------
f32_list = mf.f32_list


def searches(model, cfg, memory, mask, b, beam, alpha, max_new, forced_bos, forced_eos):
    mem, msk = memory[b:b + 1], mask[b:b + 1]
    out, score = ref.greedy(model, mem, msk, max_new, forced_eos=forced_eos, forced_bos=forced_bos)
    greedy = {"ids": out, "score": score}
    results = {}
    for key, stop in (("results", "first-k"), ("results_heuristic", "heuristic")):
        hyps = ref.beam_search(model, mem, msk, beam, max_new, alpha, stop=stop, forced_eos=forced_eos,
                               forced_bos=forced_bos)
        results[key] = [{"ids": h, "score": sc} for h, sc in hyps]
    return greedy, results


def build(name, spec, out_dir, seed, lines):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    tok = write_tokenizer_files(d, spec, lines)
    vocab = model_vocab_size(tok)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = ref.Config(family=spec["family"], vocab=vocab, **spec["cfg"])
    model = ref.Model(cfg).eval()
    init_family_weights(model, gen, spec)
    manifest = None
    if spec.get("generated_weights"):
        manifest = mf.generated_weights(model, first_seed=seed, scales=spec["generated_weights"])

    forced_bos = tok.lang_id(spec["tgt_lang"])
    forced_eos = spec.get("forced_eos")
    g = dict(spec["generation_config"])
    generation_bos = tok.lang_id(g.pop("forced_bos_lang")) if "forced_bos_lang" in g else None
    generation = {"bos_token_id": 0, "decoder_start_token_id": cfg.decoder_start, "eos_token_id": cfg.eos,
                  "pad_token_id": cfg.pad, **g, "transformers_version": "4.57.1"}
    if generation_bos is not None:
        generation["forced_bos_token_id"] = generation_bos
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({**cfg.hf_config(), **spec.get("config_extra", {})}, f, indent=2)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(generation, f, indent=2)
    if manifest is not None:
        with open(os.path.join(d, "generated_weights.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        if os.path.exists(os.path.join(d, "model.safetensors")):
            os.remove(os.path.join(d, "model.safetensors"))
    else:
        ref.write_safetensors(os.path.join(d, "model.safetensors"),
                              ref.state_dict_for_export(model, spec.get("older_export", False)))

    src = spec["src_lang"]
    inputs = [tok.encode(t, src) for t in spec["inputs"]]
    longest = max(map(len, inputs))
    ids = torch.tensor([s + [cfg.pad] * (longest - len(s)) for s in inputs])
    lengths = [len(s) for s in inputs]
    beam, alpha = spec["beam"], spec["alpha"]
    expected = {
        "name": name, "family": {"M2M100Tokenizer": "m2m100", "NllbTokenizer": "nllb",
                                 "MBart50Tokenizer": "mbart50"}[spec["tokenizer"]],
        "model_type": cfg.hf_config()["model_type"],
        "convert_positions": "auto", "convert_norm": "auto",
        "inputs": inputs, "max_new_tokens": MAX_NEW,
        # generate()'s decoder input before the first generated token, and the token forced
        # as the first generated one (part of every output below, counted in its length).
        "decoder_start_id": cfg.decoder_start,
        "forced_bos_id": forced_bos,
        "forced_bos_from": "generation_config" if generation_bos == forced_bos else "call",
        "decoder_prefix": [cfg.decoder_start, forced_bos],
        "forced_eos_id": forced_eos,
        "first_step_logits": [], "greedy": [], "teacher_forced": [],
        "beam": {"width": beam, "alpha": alpha, "results": [], "results_heuristic": []},
    }
    with torch.no_grad():
        memory, mask = model.encode(ids, lengths)
        expected["encoder_states"] = [f32_list(memory[b, :n]) for b, n in enumerate(lengths)]
        worst_cache = 0.0
        for b in range(len(inputs)):
            mem, msk = memory[b:b + 1], mask[b:b + 1]
            start = torch.tensor([[cfg.decoder_start]])
            expected["first_step_logits"].append(f32_list(model.decode_full(start, mem, msk)[0, 0]))
            greedy, results = searches(model, cfg, memory, mask, b, beam, alpha, MAX_NEW, forced_bos, forced_eos)
            expected["greedy"].append(greedy)
            for key in results:
                expected["beam"][key].append(results[key])
            tokens = [cfg.decoder_start] + greedy["ids"]
            bad = [w[0] for w in cfg.bad_words]
            lp = ref.step_log_probs(model.decode_full(torch.tensor([tokens]), mem, msk)[0], bad)
            expected["teacher_forced"].append({"tokens": tokens, "argmax": lp.argmax(-1).tolist()})
            worst_cache = max(worst_cache, mf.check_kv_cache(model, mem, msk, tokens))
        expected["kv_cache_max_diff"] = worst_cache
        expected["torch_layers_max_diff"] = torch_layers_check(
            model, ids, lengths, [t["tokens"] for t in expected["teacher_forced"]])

        # The same searches for another target language (a per-call choice).
        other = tok.lang_id(spec["other_lang"])
        alt = {"lang": spec["other_lang"], "forced_bos_id": other, "greedy": [], "beam": [],
               "beam_heuristic": []}
        for b in range(len(inputs)):
            greedy, results = searches(model, cfg, memory, mask, b, beam, alpha, MAX_NEW, other, forced_eos)
            alt["greedy"].append(greedy)
            alt["beam"].append(results["results"])
            alt["beam_heuristic"].append(results["results_heuristic"])
        expected["target_languages"] = [alt]
        expected["padded"] = mf.padded_outputs(model, mf.padded_inputs(inputs, cfg.pad, cfg.eos), beam, alpha,
                                               MAX_NEW, forced_eos=forced_eos, forced_bos=forced_bos)

        # Decoding with the checkpoint's own defaults (generation_config.json; no language
        # given by the caller, so only the checkpoint's forced_bos_token_id, if any).
        num_beams = generation.get("num_beams", 1)
        penalty = generation.get("length_penalty", 1.0)
        stop = "first-k" if generation.get("early_stopping") else "heuristic"
        max_new = generation["max_length"] - 1
        gen_eos = generation.get("forced_eos_token_id")
        expected["generation"] = {"num_beams": num_beams, "max_new_tokens": max_new, "length_penalty": penalty,
                                  "beam_stop": stop, "forced_bos_id": generation_bos, "forced_eos_id": gen_eos,
                                  "outputs": []}
        for b in range(len(inputs)):
            mem, msk = memory[b:b + 1], mask[b:b + 1]
            if num_beams == 1:
                out, score = ref.greedy(model, mem, msk, max_new, penalty, forced_eos=gen_eos,
                                        forced_bos=generation_bos)
                expected["generation"]["outputs"].append([{"ids": out, "score": score}])
            else:
                hyps = ref.beam_search(model, mem, msk, num_beams, max_new, penalty, stop=stop,
                                       forced_eos=gen_eos, forced_bos=generation_bos)
                expected["generation"]["outputs"].append([{"ids": h, "score": sc} for h, sc in hyps])

        # Text: the tokenizer on real lines, and text -> text through the forced language.
        cases = []
        for text in TEXTS + short_lines(lines, 40):
            case = {"text": text, "pieces": tok.tokenize(text), "ids": tok.encode(text, src)}
            case["decoded"] = tok.decode(case["ids"])
            if isinstance(tok, ft.NllbTokenizer):
                case["ids_legacy"] = case["ids"][1:-1] + [cfg.eos, case["ids"][0]]
            cases.append(case)
        translations = []
        for text in spec["inputs"]:
            src_ids = tok.encode(text, src)
            m, k = model.encode(torch.tensor([src_ids]), [len(src_ids)])
            out, score = ref.greedy(model, m, k, MAX_NEW, forced_eos=forced_eos, forced_bos=forced_bos)
            translations.append({"text": text, "ids": src_ids, "output_ids": out, "score": score,
                                 "output_text": tok.decode(out)})
        expected["text"] = {"tokenizer_class": spec["tokenizer"], "src_lang": src, "tgt_lang": spec["tgt_lang"],
                            "src_lang_id": tok.lang_id(src), "tgt_lang_id": forced_bos,
                            "rules": "tools/reference/family_tokenizers.py", "cases": cases,
                            "translations": translations}
    assert model.decoder_pad_inputs == 0, f"{name}: a search fed <pad> to the decoder; pick another seed"
    with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False)
    print(f"{name}: vocab {vocab}, inputs {inputs}, greedy {[g['ids'] for g in expected['greedy']]}, "
          f"kv-cache diff {worst_cache:.2e}, torch.nn layers diff {expected['torch_layers_max_diff']:.2e}")


def padded_only(name, spec, out_dir):
    """Recomputes the `padded` section of the fixture `name` from its committed files: the
    model from config.json and model.safetensors (checked to be exactly what this model
    exports), the forced language token and the inputs from its tokenizer files (checked
    against expected.json's). The rest of expected.json keeps its bytes."""
    d = os.path.join(out_dir, name)
    weights = os.path.join(d, "model.safetensors")
    if not os.path.exists(weights):
        raise SystemExit(f"{name}: no committed model.safetensors (weights regenerated by the test): "
                         f"regenerate the whole fixture")
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    cfg = ref.Config(family=spec["family"], vocab=config["vocab_size"], **spec["cfg"])
    if {**cfg.hf_config(), **spec.get("config_extra", {})} != config:
        raise SystemExit(f"{d}/config.json is not what FIXTURES[{name!r}] gives")
    model = ref.Model(cfg).eval()
    committed = ref.read_safetensors(weights)
    own = model.state_dict()
    missing = sorted(set(own) - set(committed))
    if missing:
        raise SystemExit(f"{weights}: no tensor {missing}")
    model.load_state_dict({k: committed[k] for k in own})
    exported = ref.state_dict_for_export(model, spec.get("older_export", False))
    if sorted(exported) != sorted(committed) or any(not torch.equal(exported[k], committed[k]) for k in committed):
        raise SystemExit(f"{weights}: its tensors are not what the model loaded from it exports")
    tok = ft.load_tokenizer(d)
    with open(os.path.join(d, "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    inputs = [tok.encode(t, spec["src_lang"]) for t in spec["inputs"]]
    forced_bos = tok.lang_id(spec["tgt_lang"])
    if inputs != expected["inputs"] or forced_bos != expected["forced_bos_id"]:
        raise SystemExit(f"{d}: the tokenizer's inputs or forced_bos_id differ from expected.json's")
    with torch.no_grad():
        expected["padded"] = mf.padded_outputs(model, mf.padded_inputs(inputs, cfg.pad, cfg.eos), spec["beam"],
                                               spec["alpha"], MAX_NEW, forced_eos=spec.get("forced_eos"),
                                               forced_bos=forced_bos)
    with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False)
    print(f"{name}: padded greedy {[g['ids'] for g in expected['padded']['greedy']]}")


def short_lines(lines, count):
    """Every n-th Latin line, short ones (the fixtures stay small)."""
    short = [line for line in lines if len(line) <= 60]
    step = max(1, len(short) // count)
    return short[::step][:count]


def main():
    args = sys.argv[1:]
    torch.set_num_threads(1)
    if args[:1] == ["--padded-only"]:
        if len(args) < 3 or any(name not in FIXTURES for name in args[2:]):
            raise SystemExit(f"usage: --padded-only FIXTURES_DIR NAME ... (NAME one of {sorted(FIXTURES)})")
        for name in args[2:]:
            padded_only(name, FIXTURES[name], args[1])
        return
    out_dir = args[0] if args else "tests/fixtures/oracle"
    only = set(args[1:])
    lines = latin_lines()
    for k, (name, spec) in enumerate(FIXTURES.items()):
        if not only or name in only:
            build(name, spec, out_dir, spec.get("seed", 3000 + 100 * k), lines)


if __name__ == "__main__":
    main()
