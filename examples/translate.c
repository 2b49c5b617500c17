/* Translates stdin line by line with a Petrel model:  translate MODEL < lines.txt
 * Built against an installed Petrel (see CMakeLists.txt here, or pkg-config). */
#include <petrel/petrel.h>
#include <stdio.h>
#include <string.h>

static int fail(const char* what) {
  fprintf(stderr, "translate: %s: %s\n", what, petrel_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.petrel < input.txt\n", argv[0]);
    return 2;
  }
  petrel_model* model = NULL;
  if (petrel_model_load(argv[1], &model) != PETREL_OK) return fail("load");

  petrel_session* session = NULL; /* one per thread; the model can be shared */
  if (petrel_session_create(model, NULL, 1, &session) != PETREL_OK) {
    petrel_model_free(model);
    return fail("session");
  }

  petrel_options options;
  petrel_options_init(&options); /* the model's decoding defaults; set fields to override */

  char line[4096];
  int status = 0;
  while (fgets(line, sizeof line, stdin) != NULL) {
    line[strcspn(line, "\r\n")] = '\0';
    char* translation = NULL;
    if (petrel_translate_text(session, line, &options, &translation) != PETREL_OK) {
      status = fail(line); /* e.g. a word the vocabulary cannot spell */
      puts("");            /* one output line per input line, always */
      continue;
    }
    puts(translation);
    petrel_string_free(translation);
  }
  petrel_session_free(session);
  petrel_model_free(model);
  return status;
}
