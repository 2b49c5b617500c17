// PETREL_API marks what libpetrel.so exports; the rest of the engine is hidden.
#pragma once

#if defined(_WIN32)
#define PETREL_API
#else
#define PETREL_API __attribute__((visibility("default")))
#endif
