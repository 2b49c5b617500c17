/* Petrel's C API: a stable ABI for apps in C, Swift, Kotlin/JNI, Rust or Python ctypes.
 *
 *   petrel_model* model;
 *   if (petrel_model_load("model.petrel", &model) != PETREL_OK) puts(petrel_last_error());
 *   petrel_session* session;
 *   petrel_session_create(model, NULL, 1, &session);       // NULL: best kernel path
 *   petrel_result* result;
 *   const int32_t ids[] = {12, 7, 99, 0};
 *   const int32_t* inputs[] = {ids};
 *   size_t lengths[] = {4};
 *   petrel_options options;
 *   petrel_options_init(&options);                          // sets struct_size and defaults
 *   options.beam_size = 4;
 *   petrel_translate_ids(session, inputs, lengths, 1, &options, &result);   // NULL options: greedy
 *   size_t n; const int32_t* out = petrel_result_ids(result, 0, 0, &n);
 *   petrel_result_free(result); petrel_session_free(session); petrel_model_free(model);
 *
 * Every function returns a status; on failure petrel_last_error() holds a message for
 * the calling thread. A model may be shared by threads; a session belongs to one thread
 * at a time, and a token callback must not call back into its own session (such a call
 * fails with PETREL_INVALID_ARGUMENT). Nothing here prints, exits or aborts. The header
 * compiles as C99. */
#ifndef PETREL_PETREL_H
#define PETREL_PETREL_H

#include <stddef.h>
#include <stdint.h>

#include "petrel/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum petrel_status {
  PETREL_OK = 0,
  PETREL_INVALID_ARGUMENT = 1, /* a caller's input: ids, options, NULL pointers */
  PETREL_IO = 2,               /* a file could not be opened or mapped */
  PETREL_FORMAT = 3,           /* a corrupt, hostile or inconsistent model file */
  PETREL_UNSUPPORTED = 4,      /* valid, but not runnable by this build or CPU */
  PETREL_INTERNAL = 5,
  PETREL_OUT_OF_MEMORY = 6,    /* an allocation failed, or a request is over the memory limit */
  PETREL_CANCELLED = 7         /* the caller cancelled the work */
} petrel_status;

/* When beam search stops for a sentence (petrel_options.beam_stop). */
enum {
  PETREL_BEAM_STOP_DEFAULT = 0,   /* the model's own (its generation config), else HEURISTIC */
  PETREL_BEAM_STOP_HEURISTIC = 1, /* Hugging Face's default: while the best live hypothesis could
                                     beat the worst finished one */
  PETREL_BEAM_STOP_FIRST_K = 2    /* as soon as beam_size hypotheses have finished */
};

typedef struct petrel_model petrel_model;
typedef struct petrel_session petrel_session;
typedef struct petrel_result petrel_result;

/* One step of a translation as it is produced (streaming; petrel_options.on_token). */
typedef struct petrel_token_event {
  size_t input;           /* which input of the call */
  const int32_t* ids;     /* its best live hypothesis so far, without the start token */
  size_t length;
  const char* piece;      /* the newest token's text as the tokenizer stores it ("\u2581Datei");
                             "" without a tokenizer */
  int provisional;        /* beam search: a later step may prefer another hypothesis */
  int final;              /* the input's translation is done: `ids` is its best hypothesis */
  const char* text;       /* text translations with stream_text: the hypothesis so far ("" while
                             it is empty), else NULL */
  const char* text_delta; /* what `text` adds to this input's previous event (NULL with `text`) */
  int text_restarted;     /* `text` does not extend the previous text: show it afresh */
} petrel_token_event;
/* Return 0 to stop translating that input now (its hypotheses finish as they are). */
typedef int (*petrel_token_fn)(void* user_data, const petrel_token_event* event);

/* Options of a translation. Always fill one with petrel_options_init: it sets
 * struct_size, so a library built from a newer header (with more fields appended)
 * knows which fields this caller has and gives the others their defaults. */
typedef struct petrel_options {
  size_t struct_size;    /* sizeof(petrel_options) as the caller compiled it */
  size_t beam_size;      /* 1 = greedy (at most 64); 0: the model's num_beams */
  size_t n_best;         /* hypotheses per input, <= beam size */
  size_t max_new_tokens; /* 0: the model's max_length - 1, else 256 (within its max positions) */
  size_t min_new_tokens; /* EOS is not allowed before this many tokens */
  double length_penalty; /* score = log-probability / length^length_penalty; NaN: the model's */
  int use_shortlist;     /* > 0: decode over the model file's lexical shortlist; < 0: not; 0: the
                            model's choice (a Marian model's shortlist is on, others off) */
  int kv_cache_f16;      /* nonzero: keep attention keys/values in half precision */
  int beam_stop;         /* PETREL_BEAM_STOP_*: when beam search stops for a sentence */
  petrel_token_fn on_token; /* streaming: called after every step (NULL: none) */
  void* on_token_data;      /* passed to on_token */
  int stream_text;          /* nonzero: events of text translations carry the text so far */
  /* Multilingual models (NLLB-200, M2M100, mBART-50): language codes as the model's
   * tokenizer spells them ("eng_Latn", "__en__", "en_XX"; NULL: the model's default —
   * for the target, only when target_prefix is empty too). The target language's token
   * is forced first and is part of the output ids. */
  const char* source_language;
  const char* target_language;
  /* Tokens every output starts with (after the target language's, if one is given; a
   * prefix without a target language replaces the model's forced first token), forced;
   * part of the output ids. NULL / 0: none. */
  const int32_t* target_prefix;
  size_t target_prefix_length;
  /* With max_new_tokens 0: each input generates at most ceil(factor x its tokens) (Marian's
   * max-length-factor). 0: the model's (Marian models 2; others none). */
  double max_length_factor;
  /* Word alignments (petrel_result_alignment): nonzero computes them, for decoder layer
   * alignment_layer (0-based; -1: the one the model was trained to align, a Marian model's
   * guided-alignment layer, else the last) and head alignment_head (0: Marian's). */
  int alignment;
  int alignment_layer;
  size_t alignment_head;
  /* petrel_translate_responses: nonzero reads each text as an HTML fragment (the markup
   * put back around the words it wrapped, as Firefox's engine bergamot does), and adds
   * bergamot's quality scores per sentence and word (in html mode written into the
   * markup too). Both need a model whose tokenizer gives its tokens' bytes (a Marian one). */
  int html;
  int quality_scores;
  /* Speculative decoding (greedy translation only: beam_size 1, n_best 1, no alignment;
   * TranslateOptions::lookup_ngram in C++): drafts of the next tokens, from prompt lookup
   * over the input and the output so far (lookup_ngram: the longest n-gram matched, at
   * most 8; 0: off) and from the session's draft model (petrel_translator_set_draft_model),
   * are checked by one pass of the decoder. The translations are the same, ids and scores;
   * it is faster where the drafts are right. max_draft_tokens: the most tokens one draft
   * proposes (0: 16; at most 64). Counts: petrel_session_speculation_stats. */
  size_t lookup_ngram;
  size_t max_draft_tokens;
} petrel_options;

/* How a session's int8 layers quantize their input (petrel_session_create_with). */
enum {
  PETREL_ACTIVATION_SCALES_DYNAMIC = 0, /* each row by its own max |x|, at run time (any int8 model) */
  PETREL_ACTIVATION_SCALES_FILE = 1     /* the model file's static scales (a Marian model's alphas,
                                           as bergamot's int8shiftAlphaAll); an error if it has none */
};

/* Library version ("0.1.0") and the newest model-file format it reads. */
PETREL_API const char* petrel_version(void);
PETREL_API uint32_t petrel_format_major(void);
PETREL_API uint32_t petrel_format_minor(void);

/* The calling thread's message for its last failed call ("" if none). */
PETREL_API const char* petrel_last_error(void);

/* struct_size, and every option unset: the model's generation defaults apply */
PETREL_API void petrel_options_init(petrel_options* options);
/* The same for a struct of `size` bytes: only those are written and struct_size is set to
 * them. petrel_options_init is a macro that passes the caller's sizeof, so a library newer
 * than the header an app was built with never writes past the app's struct (the function
 * of that name serves apps built before the macro: it writes the fields they had). */
PETREL_API void petrel_options_init_sized(petrel_options* options, size_t size);
#define petrel_options_init(options) petrel_options_init_sized((options), sizeof *(options))

PETREL_API petrel_status petrel_model_load(const char* path, petrel_model** model);
/* Copies `size` bytes (a model shipped inside app assets). */
PETREL_API petrel_status petrel_model_load_memory(const void* data, size_t size, petrel_model** model);
/* Without a copy: a buffer from petrel_buffer_alloc (64-byte aligned) filled with `size`
 * bytes of a model file, which petrel_model_load_buffer takes over, whether it succeeds or
 * fails (a web page writes a download straight into one). petrel_buffer_free releases a
 * buffer never handed over. petrel_buffer_alloc returns NULL when out of memory. */
PETREL_API void* petrel_buffer_alloc(size_t size);
PETREL_API void petrel_buffer_free(void* buffer);
PETREL_API petrel_status petrel_model_load_buffer(void* buffer, size_t size, petrel_model** model);
PETREL_API void petrel_model_free(petrel_model* model); /* NULL is allowed */
/* Reads the whole data section and compares its CRC-32 with the one the converter
 * recorded (loading checks structure only and cannot see a flipped weight):
 * PETREL_FORMAT when they differ, PETREL_UNSUPPORTED when the file records none. */
PETREL_API petrel_status petrel_model_verify(const petrel_model* model);

/* isa: NULL or "" for $PETREL_ISA or the best path; threads >= 1. */
PETREL_API petrel_status petrel_session_create(const petrel_model* model, const char* isa, size_t threads,
                                    petrel_session** session);
/* The same with the int8 activation scales to use (PETREL_ACTIVATION_SCALES_*). */
PETREL_API petrel_status petrel_session_create_with(const petrel_model* model, const char* isa, size_t threads,
                                                    int activation_scales, petrel_session** session);
PETREL_API void petrel_session_free(petrel_session* session);
PETREL_API const char* petrel_session_isa(const petrel_session* session);

/* Translates a batch: inputs[i] holds lengths[i] token ids (used verbatim, but for the
 * model's pad id, masked as transformers' generate() masks it: see Translator::translate).
 * options NULL = greedy defaults. */
PETREL_API petrel_status petrel_translate_ids(petrel_session* session, const int32_t* const* inputs, const size_t* lengths,
                                   size_t batch, const petrel_options* options, petrel_result** result);
/* Language models (decoder-only: Gemma 3, Llama, Qwen; petrel_model_info_decoder_only): a
 * session of such a model generates instead of translating. Fill the options with
 * petrel_generate_options_init (it sets struct_size, as petrel_options_init does). Unset
 * fields (NaN, -1) take the model's generation_config.json values. */
typedef struct petrel_generate_options {
  size_t struct_size;        /* sizeof(petrel_generate_options) as the caller compiled it */
  size_t max_new_tokens;     /* 0: the model's, else 256 (within its positions) */
  int do_sample;             /* 1: sample; 0: greedy; -1: the model's */
  float temperature;         /* in [1e-6, 1e6]; NaN: the model's */
  int32_t top_k;             /* 0: off; -1: the model's */
  float top_p;               /* (0, 1]; NaN: the model's */
  float min_p;               /* [0, 1]; NaN: the model's */
  float repetition_penalty;  /* in [1e-6, 1e6]; NaN: the model's */
  uint64_t seed;             /* the same seed gives the same tokens on every CPU */
  int ignore_eos;            /* nonzero: go on past EOS */
  int kv_cache_f16;          /* nonzero: keys/values in half precision */
  petrel_token_fn on_token;  /* called after every generated token (input = 0) and once with final set */
  void* on_token_data;
  /* Since format 1.8's library (petrel_generate_text, petrel_conversation_reply only): */
  int stream_text;           /* nonzero: on_token's events carry text and text_delta */
  const char* const* stop;   /* stop_count strings: generation ends at the first in the output text */
  size_t stop_count;
  /* A GBNF grammar (llama.cpp's syntax, `root` the start) the output follows; NULL: none
   * (GenerateOptions::grammar: the text functions; the ids ones need the tokenizer too). */
  const char* grammar;
  const char* json_schema;  /* a JSON Schema the output is an instance of (GenerateOptions::json_schema); NULL: none */
  int kv_cache_int8;        /* nonzero: keys/values as int8 with a scale per position and head (not with kv_cache_f16) */
  /* Speculative decoding (GenerateOptions::lookup_ngram in C++; petrel_generate,
   * petrel_generate_text, petrel_conversation_reply): drafts from prompt lookup over the
   * prompt and the output so far (lookup_ngram: the longest n-gram matched, at most 8; 0:
   * off) and from the session's draft model (petrel_generator_set_draft_model) are
   * checked by one forward over all of them. The same ids as without, greedy and seeded
   * sampling alike; faster where the drafts are right. max_draft_tokens: the most tokens
   * one draft proposes (0: 16; at most 64). Counts: petrel_session_speculation_stats. */
  size_t lookup_ngram;
  size_t max_draft_tokens;
} petrel_generate_options;
PETREL_API void petrel_generate_options_init_sized(petrel_generate_options* options, size_t size);
#define petrel_generate_options_init(options) petrel_generate_options_init_sized((options), sizeof *(options))
/* Nonzero when the model is a decoder-only language model. */
PETREL_API int petrel_model_is_decoder_only(const petrel_model* model);
/* Prompt caches of a language model's session (Generator::set_prompt_cache_bytes,
 * save_prompt_cache, load_prompt_cache in C++). With a budget of `bytes` (0, the default:
 * off) the KV state after each prompt is kept (least recently used dropped first, the
 * total within the budget) and a later prompt beginning with the same tokens runs only
 * the tokens after them, with the same output. save writes the state after the last
 * call's prompt (kept within the budget) to `path` atomically; load verifies such a file
 * (made with this model file and the same KV cache type to be used) and keeps it for the
 * next prompts, past the budget until the next state is kept. */
PETREL_API petrel_status petrel_generator_set_prompt_cache_bytes(petrel_session* session, size_t bytes);
PETREL_API petrel_status petrel_generator_save_prompt_cache(petrel_session* session, const char* path);
PETREL_API petrel_status petrel_generator_load_prompt_cache(petrel_session* session, const char* path);
/* Speculative decoding's draft model for a language model's session: a decoder-only model
 * with the session's vocabulary (the same tokens, id for id; another is refused with a
 * message naming both), run on the session's kernel path and threads; its greedy tokens
 * draft. The session keeps the model's weights alive: `draft` may be freed after this
 * call. NULL clears it. Generator::set_draft_model in C++. */
PETREL_API petrel_status petrel_generator_set_draft_model(petrel_session* session, const petrel_model* draft);
/* The same for a translation model's session: a translation model with the same source and
 * target vocabulary and attention decoder layers (Translator::set_draft_model). */
PETREL_API petrel_status petrel_translator_set_draft_model(petrel_session* session, const petrel_model* draft);
/* What speculative decoding did in the session's last call (translation or generation):
 * passes that checked a draft, tokens drafted, those accepted, the draft model's steps
 * (tokens it ran), and the tokens generated. All 0 before a call, and without drafts. */
typedef struct petrel_speculation_stats {
  size_t struct_size; /* sizeof(petrel_speculation_stats) as the caller compiled it */
  size_t verifications;
  size_t drafted_tokens;
  size_t accepted_tokens;
  size_t draft_model_tokens;
  size_t generated_tokens;
} petrel_speculation_stats;
/* Fills `size` bytes of *stats (the macro passes the caller's sizeof, so a newer library
 * never writes past an older app's struct) and sets struct_size to them. */
PETREL_API petrel_status petrel_session_speculation_stats_sized(const petrel_session* session,
                                                                petrel_speculation_stats* stats, size_t size);
#define petrel_session_speculation_stats(session, stats) \
  petrel_session_speculation_stats_sized((session), (stats), sizeof *(stats))
/* Continues `prompt` (length ids, used verbatim: no BOS is added). The result holds one
 * input with one hypothesis: the generated ids (a final EOS included). NULL options: the
 * model's defaults. */
PETREL_API petrel_status petrel_generate(petrel_session* session, const int32_t* prompt, size_t length,
                                         const petrel_generate_options* options, petrel_result** result);
/* Text in, text out (a model converted with its tokenizer.json): `prompt` (UTF-8) is
 * encoded with the tokenizer's special tokens and continued. The result holds one input
 * with one hypothesis: petrel_result_text gives the generated text (special tokens left
 * out, cut before a stop string), petrel_result_ids the generated ids. */
PETREL_API petrel_status petrel_generate_text(petrel_session* session, const char* prompt,
                                              const petrel_generate_options* options, petrel_result** result);
/* The model's chat template applied to `count` messages (roles[i]: "system", "user",
 * "assistant"; contents[i]: UTF-8), the assistant's turn opened when
 * add_generation_prompt: a string the caller frees with petrel_string_free. */
PETREL_API petrel_status petrel_apply_chat_template(petrel_session* session, const char* const* roles,
                                                    const char* const* contents, size_t count,
                                                    int add_generation_prompt, char** text);
/* A multi-turn chat (Conversation in C++): each reply continues the KV cache of the
 * conversation so far. The session must outlive it, and is not to be used by anything
 * else while a reply runs. `system`: a system message, or NULL. */
typedef struct petrel_conversation petrel_conversation;
PETREL_API petrel_status petrel_conversation_new(petrel_session* session, const char* system,
                                                 petrel_conversation** conversation);
/* Adds the user's message, generates the reply (a result as petrel_generate_text's) and
 * adds it to the conversation. */
PETREL_API petrel_status petrel_conversation_reply(petrel_conversation* conversation, const char* message,
                                                   const petrel_generate_options* options, petrel_result** result);
/* For a conversation grown to the model's positions: when it does not leave room, with
 * `message`, for `new_tokens` generated tokens, drops its oldest exchanges (a user message
 * and its reply; the system message stays) until it leaves half the model's positions
 * free, or where it cannot, that room (all of them when the message alone leaves less);
 * *dropped: how many (0 when it already fits, or when the message alone leaves no room).
 * A petrel_conversation_reply with the same message next takes the prompt it rendered.
 * Conversation::make_room in C++. */
PETREL_API petrel_status petrel_conversation_make_room(petrel_conversation* conversation, const char* message,
                                                       size_t new_tokens, size_t* dropped);
PETREL_API void petrel_conversation_free(petrel_conversation* conversation);

PETREL_API size_t petrel_result_inputs(const petrel_result* result);
PETREL_API size_t petrel_result_hypotheses(const petrel_result* result, size_t input);
/* Ids of hypothesis k of input i (without start token and EOS); NULL when out of range. */
PETREL_API const int32_t* petrel_result_ids(const petrel_result* result, size_t input, size_t k, size_t* length);
PETREL_API double petrel_result_score(const petrel_result* result, size_t input, size_t k);
/* Text of hypothesis k of input i (a result of petrel_translate_texts); NULL when out of
 * range or when the result holds ids only. Valid until petrel_result_free. */
PETREL_API const char* petrel_result_text(const petrel_result* result, size_t input, size_t k);
/* Hypothesis k's word alignment (options.alignment): rows x columns floats, row-major; a
 * row per output token (the final EOS included when it ended on one) of attention
 * probabilities over the input's tokens. NULL (rows = columns = 0) when there is none. */
PETREL_API const float* petrel_result_alignment(const petrel_result* result, size_t input, size_t k, size_t* rows,
                                                size_t* columns);
PETREL_API void petrel_result_free(petrel_result* result);

/* Text in and out, for models that carry a vocabulary with a text tokenizer:
 * the best hypothesis as a string the caller frees with petrel_string_free. When no
 * token could be generated (min_new_tokens with a shortlist allowing only EOS) it
 * fails with PETREL_INVALID_ARGUMENT and says so. */
PETREL_API petrel_status petrel_translate_text(petrel_session* session, const char* text, const petrel_options* options,
                                    char** translation);
PETREL_API void petrel_string_free(char* text);
/* Many texts at once (a file, a stream of messages): sorted by length, packed into batches,
 * translated on `workers` sessions sharing the model, and handed to `sink` one by one in
 * input order as soon as each is ready. Fill with petrel_batch_options_init. */
typedef struct petrel_batch_options {
  size_t struct_size;       /* sizeof(petrel_batch_options) as the caller compiled it */
  size_t max_batch_tokens;  /* source tokens per batch (default 1024) */
  size_t max_batch_size;    /* inputs per batch (default 8) */
  size_t workers;           /* sessions on their own threads (default 1) */
  size_t threads;           /* intra-op threads per session (default 1) */
  int split_sentences;      /* nonzero: translate sentence by sentence and reassemble */
  /* With split_sentences, bergamot's ssplit-mode: PETREL_SPLIT_TEXT (0: sentences anywhere),
   * _SENTENCE_PER_LINE, _PARAGRAPH_PER_LINE (Firefox's), _WRAPPED_TEXT. */
  int split_mode;
  /* nonzero: each sentence may generate as many tokens as max_length_factor gives its
   * input's longest sentence (bergamot batches a request's sentences and limits them so). */
  int limit_by_longest_sentence;
  /* nonzero, with split_sentences and a shortlist: each sentence decodes over the union of its
   * input's sentences' shortlists, as bergamot's batch of a request does (BatchOptions::shortlist_of_input). */
  int shortlist_of_input;
} petrel_batch_options;
enum { PETREL_SPLIT_TEXT = 0, PETREL_SPLIT_SENTENCE_PER_LINE = 1, PETREL_SPLIT_PARAGRAPH_PER_LINE = 2,
       PETREL_SPLIT_WRAPPED_TEXT = 3 };
/* Defaults for a struct of `size` bytes, as petrel_options_init_sized: the macro passes the
 * caller's sizeof, so a newer library never writes past an older app's struct. */
PETREL_API void petrel_batch_options_init(petrel_batch_options* options);
PETREL_API void petrel_batch_options_init_sized(petrel_batch_options* options, size_t size);
#define petrel_batch_options_init(options) petrel_batch_options_init_sized((options), sizeof *(options))
/* One input's result: status PETREL_OK and its best translation, or the status and message
 * of its own error (e.g. too long for the model). Strings live until the sink returns. */
typedef void (*petrel_text_sink)(void* user_data, size_t index, petrel_status status, const char* text_or_error,
                                 double score);
/* isa: NULL or "" for $PETREL_ISA or the best path. Fails only for bad arguments or options. */
PETREL_API petrel_status petrel_translate_many(const petrel_model* model, const char* isa, const char* const* texts,
                                               size_t count, const petrel_options* options,
                                               const petrel_batch_options* batching, petrel_text_sink sink,
                                               void* user_data);

/* A text's translation as bergamot's Response holds it (petrel_translate_responses); valid
 * until the sink returns. Byte ranges are [begin, end) pairs: a sentence's source range is
 * in petrel_response_source, its target range in petrel_response_text. */
typedef struct petrel_response petrel_response;
PETREL_API const char* petrel_response_text(const petrel_response* response);   /* html: with the markup */
PETREL_API const char* petrel_response_source(const petrel_response* response); /* html: the markup as written back */
PETREL_API size_t petrel_response_sentences(const petrel_response* response);
/* ranges[0..3]: source begin, end; target begin, end. Returns 0 when k is out of range. */
PETREL_API int petrel_response_sentence(const petrel_response* response, size_t k, size_t ranges[4]);
/* Sentence k's quality score (NaN when the sentence has no words; 0 without quality_scores),
 * its words' count, and word w's bytes of the text and score. */
PETREL_API float petrel_response_sentence_quality(const petrel_response* response, size_t k);
PETREL_API size_t petrel_response_words(const petrel_response* response, size_t k);
PETREL_API int petrel_response_word(const petrel_response* response, size_t k, size_t w, size_t range[2], float* score);
/* Sentence k's soft alignment (options.alignment): rows (target tokens, EOS included) x
 * columns (source tokens, EOS included) floats, row-major; NULL when there is none. */
PETREL_API const float* petrel_response_alignment(const petrel_response* response, size_t k, size_t* rows,
                                                  size_t* columns);
typedef void (*petrel_response_sink)(void* user_data, size_t index, petrel_status status,
                                     const petrel_response* response, const char* error);
/* petrel_translate_many with bergamot's Response per text (response NULL and error set when
 * that text failed). */
PETREL_API petrel_status petrel_translate_responses(const petrel_model* model, const char* isa,
                                                    const char* const* texts, size_t count,
                                                    const petrel_options* options,
                                                    const petrel_batch_options* batching, petrel_response_sink sink,
                                                    void* user_data);
/* petrel_translate_responses through a pivot language, as bergamot's translateViaPivoting
 * (Mozilla's models all go to or from English): first_model translates each text (split
 * into sentences as batching says), second_model translates that translation sentence by
 * sentence. Each response is shaped as petrel_translate_responses' is: the source and the
 * sentences' source ranges are the text's; the translation, the target ranges and the
 * quality scores (the second model's) are the target's; alignments (options.alignment)
 * are composed through the pivot text, [target token][source token]; html takes the markup
 * out before the first model and puts it back once, at the end. isa and batching (threads,
 * workers included) apply to both models. Both must be translation models whose tokenizers
 * give their tokens' bytes (Marian ones; PETREL_UNSUPPORTED otherwise), and options.n_best
 * at most 1 (PETREL_INVALID_ARGUMENT). */
PETREL_API petrel_status petrel_translate_responses_via_pivot(const petrel_model* first_model,
                                                              const petrel_model* second_model, const char* isa,
                                                              const char* const* texts, size_t count,
                                                              const petrel_options* options,
                                                              const petrel_batch_options* batching,
                                                              petrel_response_sink sink, void* user_data);

/* petrel_translate_text with the translation streamed to `on_token` as it is produced
 * (with the text so far); the whole translation is returned as well. */
PETREL_API petrel_status petrel_translate_stream(petrel_session* session, const char* text, const petrel_options* options,
                                                 petrel_token_fn on_token, void* user_data, char** translation);
/* A batch of texts (UTF-8, NUL-terminated): hypotheses as text (petrel_result_text) and
 * ids (petrel_result_ids). Errors name the input (e.g. one longer than the model allows). */
PETREL_API petrel_status petrel_translate_texts(petrel_session* session, const char* const* texts, size_t count,
                                                const petrel_options* options, petrel_result** result);

#ifdef __cplusplus
}
#endif

#endif /* PETREL_PETREL_H */
