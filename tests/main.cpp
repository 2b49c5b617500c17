// The one Catch2 main (Catch2WithMain is x86-only: PLATFORM-NOTES).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
