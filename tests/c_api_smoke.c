/* Compiled as C99: the C API used from C, on a committed model file. */
#include <petrel/petrel.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: failed: %s (%s)\n", __FILE__, __LINE__, \
              #cond, petrel_last_error());                            \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int main(int argc, char** argv) {
  petrel_model* model = NULL;
  petrel_session* session = NULL;
  petrel_result* result = NULL;
  petrel_options options;
  const int32_t ids[] = {19, 20, 37, 19, 34, 4, 0};
  const int32_t bad[] = {19, 4000, 0};
  const int32_t* inputs[] = {ids, bad};
  size_t lengths[] = {7, 3};
  size_t n = 0;
  const int32_t* out;

  CHECK(argc == 2);
  CHECK(strcmp(petrel_version(), "0.1.0") == 0 && petrel_format_major() == 1);
  CHECK(petrel_model_load("/nonexistent.petrel", &model) == PETREL_IO && model == NULL);
  CHECK(strstr(petrel_last_error(), "/nonexistent.petrel") != NULL);
  CHECK(petrel_model_load(argv[1], &model) == PETREL_OK);
  CHECK(petrel_session_create(model, "no-such-isa", 1, &session) == PETREL_INVALID_ARGUMENT);
  CHECK(petrel_session_create(model, NULL, 1, &session) == PETREL_OK);
  CHECK(strlen(petrel_session_isa(session)) > 0);

  petrel_options_init(&options);
  options.beam_size = options.n_best = 2;
  options.max_new_tokens = 12;
  CHECK(petrel_translate_ids(session, inputs, lengths, 1, &options, &result) == PETREL_OK);
  CHECK(petrel_result_inputs(result) == 1 && petrel_result_hypotheses(result, 0) == 2);
  out = petrel_result_ids(result, 0, 0, &n);
  CHECK(out != NULL && n <= 12);
  CHECK(petrel_result_score(result, 0, 0) >= petrel_result_score(result, 0, 1));
  CHECK(petrel_result_ids(result, 0, 5, &n) == NULL && n == 0);
  petrel_result_free(result);
  result = NULL;

  CHECK(petrel_translate_ids(session, inputs, lengths, 2, NULL, &result) == PETREL_INVALID_ARGUMENT);
  CHECK(result == NULL && strstr(petrel_last_error(), "token id 4000") != NULL);
  CHECK(petrel_translate_ids(NULL, inputs, lengths, 1, NULL, &result) == PETREL_INVALID_ARGUMENT);

  petrel_session_free(session);
  petrel_model_free(model);
  petrel_model_free(NULL);
  printf("C API: ok\n");
  return 0;
}
